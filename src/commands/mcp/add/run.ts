// `subs mcp add <id> <url>`: declares a connection by appending its section to the
// file, every other byte kept; checked as every command checks the file, then written atomically.
import { appendConnections, editConfig, type NewConnection } from "../../../config/edit.ts";
import { ENV_NAME_PATTERN, idProblem, newUrlProblem } from "../../../config/schema.ts";
import type { Context } from "../../../context.ts";
import { refused, usage } from "../../../errors.ts";
import { stderrReporter } from "../../../output/reporter.ts";
import type { Reporter } from "../../../report.ts";
import { shellWord } from "../../../output/shell-word.ts";
import { MARK, styleFor } from "../../../output/style.ts";

export type McpAddOptions = NewConnection & { url: string; config?: string };

export async function mcpAddCommand(ctx: Context, options: McpAddOptions): Promise<void> {
  const { config: configPath, ...connection } = options;
  const added = await addConnection(ctx, connection, configPath, stderrReporter(ctx));
  const style = styleFor(ctx.stderrColor);
  ctx.stderr.write(`${style.green(MARK.success)} Added [mcp.${connection.id}] to ${added.displayPath}.\n`);
  const configArg = configPath !== undefined ? ` --config ${shellWord(configPath)}` : "";
  ctx.stderr.write(
    connection.tokenEnv !== undefined
      ? `Next: export ${connection.tokenEnv}, then \`subs mcp tools ${connection.id}${configArg}\`.\n`
      : `Next: \`subs mcp login ${connection.id}${configArg}\`.\n`,
  );
}

/**
 * Appends the section of `c` to the file, holding its lock from the read to the write (another
 * edit at the same time waits, src/config/lock.ts); a mistake throws before anything is written.
 */
export async function addConnection(
  ctx: Pick<Context, "env" | "cwd" | "signal">,
  c: NewConnection & { url: string },
  configPath: string | undefined,
  reporter?: Pick<Reporter, "info">,
): Promise<{ displayPath: string }> {
  const badId = idProblem(c.id);
  if (badId) throw usage(badId);
  // The url is never echoed: it may carry a secret in its query (src/config/schema.ts).
  const problem = newUrlProblem(c.url);
  if (problem) throw usage(`the url of ${c.id} ${problem}`);
  for (const [flag, name] of [["--token-env", c.tokenEnv], ["--client-secret-env", c.clientSecretEnv]] as const) {
    if (name !== undefined && !ENV_NAME_PATTERN.test(name)) {
      throw usage(`${flag} takes the name of an environment variable (letters, digits and '_'), not its value`, { hint: `e.g. ${flag} MY_TOKEN` });
    }
  }
  if (c.tokenEnv !== undefined && (c.clientId !== undefined || c.clientSecretEnv !== undefined || (c.scopes?.length ?? 0) > 0)) {
    throw usage("--token-env declares a static token; --client-id, --client-secret-env and --scopes are for OAuth", { hint: "give one or the other" });
  }
  return editConfig(ctx, configPath, reporter, ({ text, config }) => {
    if (config.connections.some((existing) => existing.id === c.id)) {
      throw refused(`\`${c.id}\` is already declared in ${config.displayPath}; nothing was written`, {
        hint: `edit its section, or choose another id (one server under two ids connects two accounts)`,
        code: "already_declared",
      });
    }
    appendConnections(config, text, [c], { cwd: ctx.cwd, env: ctx.env }).write();
    return { displayPath: config.displayPath };
  });
}
