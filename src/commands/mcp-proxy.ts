import { loadConfig } from "../config/load.ts";
import { findConnection } from "../config/lookup.ts";
import type { Context } from "../context.ts";
import { exitCodeFor, refused, type SubsError } from "../errors.ts";
import { stderrReporter } from "../output/reporter.ts";

export type McpProxyOptions = {
  config?: string;
  id: string;
};

/**
 * Serves one connection as an MCP server on stdin/stdout until the client closes stdin (issue 16).
 * Returns the exit code: 0, or the code of the failure that kept the upstream from opening (4 when
 * it needs a login), already reported on stderr and to the client as the `initialize` error.
 */
export async function mcpProxyCommand(ctx: Context, options: McpProxyOptions): Promise<number> {
  const config = loadConfig({ configPath: options.config, env: ctx.env, cwd: ctx.cwd });
  if (config.remote) {
    // The deployment holds the credential and runs the calls; its protocol has no call endpoint
    // (product.md, "The deployment protocol"), so there is nothing here to forward to.
    throw refused(`subs mcp proxy works only without [remote]: with [remote] in ${config.displayPath} the deployment holds ${options.id}'s credential and runs the calls`, {
      hint: "run the proxy with a substructure.toml without [remote] (e.g. --config pointing at a local one)",
      code: "remote_unsupported",
    });
  }
  const connection = findConnection(config, options.id);
  const [{ proxySessionFactory }, { serveStdio }] = await Promise.all([import("../serve/proxy-session.ts"), import("../serve/stdio-proxy-runner.ts")]);
  let unavailable: SubsError | undefined;
  const factory = proxySessionFactory(ctx, config, connection, { reporter: stderrReporter(ctx), onUnavailable: (error) => (unavailable ??= error) });
  await serveStdio(ctx, factory);
  return unavailable ? exitCodeFor(unavailable) : 0;
}
