// `subs mcp tools <id>` with [remote]: the tools as the deployment sees them, through its tools
// endpoint; the credential never leaves the deployment (issue 4).
import type { Config } from "../config/types.ts";
import type { Context } from "../context.ts";
import { writeJson } from "../output/json.ts";
import { stderrReporter } from "../output/reporter.ts";
import { styleFor } from "../output/style.ts";
import { renderTable } from "../output/table.ts";
import { DeploymentClient } from "../remote/client.ts";
import { annotationWords, declaredConnection, fetchingProgress } from "./mcp-tools.ts";

// wt-agents' wiring of `subs agent tools` under [remote] (docs/agent-tools-remote-wiring.patch)
// imports this name; DeploymentClient.listTools already applies it, so applying it again is a no-op.
export { toolsError as explain } from "../remote/client.ts";

export type McpToolsRemoteOptions = { id: string; json: boolean };

export async function mcpToolsRemote(ctx: Context, config: Config, options: McpToolsRemoteOptions): Promise<void> {
  const connection = declaredConnection(config, options.id);
  const reporter = stderrReporter(ctx);
  const client = new DeploymentClient({ remote: config.remote!, ctx, reporter });
  const fetching = fetchingProgress(ctx, reporter, `Fetching ${connection.id}'s tools from the deployment at ${client.base.origin}`);
  let tools: Awaited<ReturnType<DeploymentClient["listTools"]>>;
  try {
    tools = await client.listTools(connection.id);
  } catch (error) {
    fetching.fail(`Could not list ${connection.id}'s tools`);
    throw error;
  }
  fetching.succeed(`${tools.length} tool${tools.length === 1 ? "" : "s"} on ${connection.id}, as the deployment sees them`);
  if (options.json) {
    writeJson(ctx.stdout, { id: connection.id, tools });
    return;
  }
  if (tools.length === 0) {
    ctx.stderr.write(`${connection.id} offers no tools.\n`);
    return;
  }
  const style = styleFor(ctx.color);
  const rows = tools.map((t) => [t.name, annotationWords((t.annotations ?? undefined) as Record<string, unknown> | undefined).join(", ") || "-", firstLine(t.description ?? t.title ?? "")]);
  ctx.stdout.write(renderTable(["NAME", "ANNOTATIONS", "DESCRIPTION"], rows, { tty: ctx.stdoutIsTTY, style: style.bold }));
  if (ctx.stdoutIsTTY && !ctx.stderrIsTTY) ctx.stderr.write(`${tools.length} tool${tools.length === 1 ? "" : "s"} on ${connection.id}, as the deployment sees them.\n`);
}

function firstLine(text: string): string {
  const line = text.split("\n")[0]?.trim() ?? "";
  return line.length > 100 ? `${line.slice(0, 99)}…` : line;
}
