// `subs mcp remove <id>`: the two steps of disconnecting at once (product.md, "The
// file"): the section is cut from the file (every other byte kept, checked, written atomically),
// then, locally, what the db holds for it is deleted and the credential revoked where the
// authorization server offers revocation (RFC 7009). With [remote], the deployment holds the
// credential: `subs apply` removes it there, as for a section deleted by hand.
import { backendFor } from "../../../backend/choose.ts";
import { checkedEdit, editConfig, removeSection, writeConfigAtomically } from "../../../config/edit.ts";
import { findConnection } from "../../../config/lookup.ts";
import type { Config } from "../../../config/types.ts";
import type { Context } from "../../../context.ts";
import { refused } from "../../../errors.ts";
import { stderrReporter } from "../../../output/reporter.ts";
import { shellWord } from "../../../output/shell-word.ts";
import { MARK, styleFor } from "../../../output/style.ts";
import type { Reporter } from "../../../report.ts";

export type McpRemoveOptions = { config?: string; id: string };

export async function mcpRemoveCommand(ctx: Context, options: McpRemoveOptions): Promise<void> {
  const reporter = stderrReporter(ctx);
  const style = styleFor(ctx.stderrColor);
  const { config } = await removeFromFile(ctx, options.id, options.config, reporter);
  ctx.stderr.write(`${style.green(MARK.success)} Removed [mcp.${options.id}] from ${config.displayPath}.\n`);
  const backend = await backendFor({ ctx, config, reporter });
  try {
    if ((await backend.forget(options.id)) === "done") return;
  } finally {
    backend.close();
  }
  const configArg = options.config !== undefined ? ` --config ${shellWord(options.config)}` : "";
  ctx.stderr.write(`Next: \`subs apply${configArg}\` removes ${options.id} and its credential from the deployment.\n`);
}

/**
 * Cuts the section of `id` from the file, holding its lock from the read to the write (another
 * edit at the same time waits, src/config/lock.ts); a mistake throws before anything is written.
 */
export function removeFromFile(
  ctx: Pick<Context, "env" | "cwd" | "signal">,
  id: string,
  configPath: string | undefined,
  reporter?: Pick<Reporter, "info">,
): Promise<{ config: Config }> {
  return editConfig(ctx, configPath, reporter, ({ text, config }) => cut(ctx, config, text, id));
}

function cut(ctx: Pick<Context, "env" | "cwd">, config: Config, text: string, id: string): { config: Config } {
  findConnection(config, id, { removing: true });
  const users = config.agents.filter((agent) => agent.mcp.some((entry) => entry.id === id)).map((agent) => agent.name);
  if (users.length > 0) {
    throw refused(`${users.map((name) => `agent \`${name}\``).join(", ")} still use${users.length === 1 ? "s" : ""} \`${id}\`; nothing was written`, {
      hint: `remove "${id}" from the mcp list of [agent.${users[0]}]${users.length > 1 ? " and the others" : ""} first, then run this again`,
      code: "connection_in_use",
    });
  }
  const edited = removeSection(text, id);
  const after = edited === undefined ? undefined : checkedEdit(config, edited, ctx);
  if (edited === undefined || after === undefined || after.connections.some((c) => c.id === id)) {
    throw refused(`\`${id}\` is not declared under its own [mcp.${id}] header in ${config.displayPath}; nothing was written`, {
      hint: "delete its declaration by hand",
      code: "not_editable",
    });
  }
  writeConfigAtomically(config.path, text, edited, config.displayPath);
  return { config: after };
}
