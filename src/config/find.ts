import { existsSync, lstatSync, statSync } from "node:fs";
import path from "node:path";
import { MissingPath, usage } from "../errors.ts";

export const CONFIG_FILE_NAME = "substructure.toml";

/** `--config PATH`, else `$SUBS_CONFIG`, else the nearest substructure.toml upward (product.md). */
export function findConfigPath(options: { explicit?: string | undefined; env: Readonly<Record<string, string | undefined>>; cwd: string }): string {
  const named = options.explicit ?? (options.env.SUBS_CONFIG || undefined);
  if (named !== undefined) {
    const resolved = path.resolve(options.cwd, named);
    if (!existsSync(resolved)) {
      const source = options.explicit !== undefined ? "--config" : "$SUBS_CONFIG";
      throw new MissingPath(`${named}: no such file (from ${source})`, { kind: "config_file", path: named });
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

/**
 * Refuses a file to be created in a directory that is not there (a usage error naming it), rather
 * than failing on ENOENT: a mistyped `--config` path would otherwise become a directory tree
 * nobody asked for, so the directory is never created for the person, as `mkdir` is theirs to run.
 * `given` is the path as the person wrote it.
 */
export function assertDirectoryFor(file: string, given: string): void {
  const dir = path.dirname(file);
  const shownDir = path.dirname(given) === "." ? dir : path.dirname(given);
  let kind: "missing" | "not_a_directory" | undefined;
  try {
    const stats = statSync(dir, { throwIfNoEntry: false });
    kind = stats === undefined ? "missing" : stats.isDirectory() ? undefined : "not_a_directory";
  } catch (error) {
    // A file on the way is said as such; anything else (EACCES, ELOOP), the write says.
    if ((error as NodeJS.ErrnoException).code === "ENOTDIR") kind = "not_a_directory";
  }
  if (kind === "missing") {
    throw new MissingPath(`cannot create ${given}: the directory ${shownDir} does not exist; nothing was written`, { kind: "directory", path: shownDir });
  }
  if (kind === "not_a_directory") throw usage(`cannot create ${given}: ${shownDir} is not a directory; nothing was written`, { hint: "give a path in an existing directory" });
}
