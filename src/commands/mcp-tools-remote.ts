// `subs mcp tools <id>` with [remote]: the tools as the deployment sees them, through its tools
// endpoint; the credential never leaves the deployment (issue 4).
import { warnLocalOnlyAuth } from "../config/remote-rules.ts";
import type { Config } from "../config/types.ts";
import type { Context } from "../context.ts";
import { stderrReporter } from "../output/reporter.ts";
import { DeploymentClient } from "../remote/client.ts";
import { findConnection } from "../config/lookup.ts";
import { fetchingProgress, writeToolList } from "./mcp-tools.ts";
import { possessive } from "../output/possessive.ts";

export type McpToolsRemoteOptions = { id: string; json: boolean };

export async function mcpToolsRemote(ctx: Context, config: Config, options: McpToolsRemoteOptions): Promise<void> {
  const connection = findConnection(config, options.id);
  const reporter = stderrReporter(ctx);
  warnLocalOnlyAuth(config, reporter, [connection.id]);
  const client = new DeploymentClient({ remote: config.remote!, ctx, reporter });
  const fetching = fetchingProgress(ctx, reporter, `Fetching ${possessive(connection.id)} tools from the deployment at ${client.base.origin}`);
  let tools: Awaited<ReturnType<DeploymentClient["listTools"]>>;
  try {
    tools = await client.listTools(connection.id);
  } catch (error) {
    fetching.fail(`Could not list ${possessive(connection.id)} tools`);
    throw error;
  }
  fetching.succeed(`${tools.length} tool${tools.length === 1 ? "" : "s"} on ${connection.id}, as the deployment sees them`);
  writeToolList(ctx, { id: connection.id, tools, json: options.json, seenBy: ", as the deployment sees them" });
}
