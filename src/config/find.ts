import { existsSync, lstatSync } from "node:fs";
import path from "node:path";
import { usage } from "../errors.ts";
import { shellWord } from "../output/shell-word.ts";

export const CONFIG_FILE_NAME = "substructure.toml";

/** `--config PATH`, else `$SUBS_CONFIG`, else the nearest substructure.toml upward (product.md). */
export function findConfigPath(options: { explicit?: string | undefined; env: Readonly<Record<string, string | undefined>>; cwd: string }): string {
  const named = options.explicit ?? (options.env.SUBS_CONFIG || undefined);
  if (named !== undefined) {
    const resolved = path.resolve(options.cwd, named);
    if (!existsSync(resolved)) {
      const source = options.explicit !== undefined ? "--config" : "$SUBS_CONFIG";
      throw usage(`${named}: no such file (from ${source})`, { hint: `check the path, or create the file with \`subs init --config ${shellWord(named)}\`` });
    }
    return resolved;
  }
  for (let dir = path.resolve(options.cwd); ; dir = path.dirname(dir)) {
    const candidate = path.join(dir, CONFIG_FILE_NAME);
    // Whatever is there, even a dangling symlink or a FIFO, is the file: reading it then says what
    // is wrong with it, rather than a parent's file being used in its place.
    if (entryExists(candidate)) return candidate;
    if (path.dirname(dir) === dir) break;
  }
  throw usage(`no ${CONFIG_FILE_NAME} in ${options.cwd} or any parent directory`, {
    hint: "run `subs init` to create one here, or pass --config PATH",
  });
}

function entryExists(file: string): boolean {
  try {
    return lstatSync(file, { throwIfNoEntry: false }) !== undefined;
  } catch {
    return false;
  }
}
