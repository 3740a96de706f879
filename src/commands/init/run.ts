import path from "node:path";
import { assertDirectoryFor, CONFIG_FILE_NAME, findConfigPath } from "../../config/find.ts";
import { parseConnectionArgument, starterFile } from "../../config/init.ts";
import { withConfigLock } from "../../config/lock.ts";
import type { Context } from "../../context.ts";
import { stderrReporter } from "../../output/reporter.ts";
import { shellWord } from "../../output/shell-word.ts";
import { MARK, styleFor } from "../../output/style.ts";

export type InitOptions = {
  /** --config, else $SUBS_CONFIG, else ./substructure.toml: where every other command would look first. */
  config?: string;
  /** `id=url` arguments. */
  connections: readonly string[];
};

export async function initCommand(ctx: Context, options: InitOptions): Promise<void> {
  const connections = options.connections.map(parseConnectionArgument);
  const named = options.config ?? (ctx.env.SUBS_CONFIG || undefined);
  const file = path.resolve(ctx.cwd, named ?? CONFIG_FILE_NAME);
  // The file commands here used until now: one in a parent directory is shadowed from now on.
  const shadowed = named === undefined ? nearestConfig(ctx.cwd) : undefined;
  const shown = path.relative(ctx.cwd, file) || file;
  assertDirectoryFor(file, named ?? CONFIG_FILE_NAME);
  // Under the file's lock, as every edit of it: an import or another init at the same moment
  // creating it is waited for, then this one finds the file there and writes nothing.
  await withConfigLock(file, { shown, signal: ctx.signal, reporter: stderrReporter(ctx) }, () =>
    starterFile({ path: file, cwd: ctx.cwd, env: ctx.env, connections }).write(),
  );
  const style = styleFor(ctx.stderrColor);
  const what = connections.length === 0 ? "" : ` with ${connections.map((c) => c.id).join(", ")}`;
  ctx.stderr.write(`${style.green(MARK.success)} Wrote ${shown}${what}.\n`);
  if (shadowed !== undefined && shadowed !== file) {
    ctx.stderr.write(`note: commands run in this directory now read ${shown}, no longer ${path.relative(ctx.cwd, shadowed)}\n`);
  }
  const { dbUnignoredByGit } = await import("../../store/gitignore.ts");
  if (dbUnignoredByGit(path.join(path.dirname(file), "substructure.db"))) {
    ctx.stderr.write(`${style.yellow("warning:")} git does not ignore substructure.db, which will hold credentials: add \`*.db*\` to .gitignore\n`);
  }
  const configArg = options.config !== undefined ? ` --config ${shellWord(shown)}` : "";
  ctx.stderr.write(
    connections.length === 0
      ? `Next: declare a server under [mcp.<id>] (the file shows how), then run \`subs mcp login <id>${configArg}\`.\n`
      : `Next: \`subs mcp login ${connections.map((c) => c.id).join(" ")}${configArg}\`, then \`subs mcp list${configArg}\`.\n`,
  );
}

function nearestConfig(cwd: string): string | undefined {
  try {
    return findConfigPath({ env: {}, cwd });
  } catch {
    return undefined;
  }
}
