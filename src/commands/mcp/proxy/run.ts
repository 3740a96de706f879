import { readConfig } from "../../../config/read-config.ts";
import { findConnection } from "../../../config/lookup.ts";
import type { Context } from "../../../context.ts";
import { exitCodeFor, refused, type SubsError } from "../../../errors.ts";
import { possessive } from "../../../text/possessive.ts";
import { stderrReporter } from "../../../output/reporter.ts";
import type { HttpAddress } from "../../../serve/address.ts";
import type { HttpLimits } from "../../../serve/http.ts";

export type McpProxyOptions = {
  config?: string;
  id: string;
  /** `--http [HOST:]PORT`: Streamable HTTP on loopback instead of stdio. */
  http?: HttpAddress;
  /** `--token-file PATH` (with --http): the bearer token written there, not printed. */
  tokenFile?: string;
  /** `--max-sessions`, `--idle-timeout`, `--max-calls`, `--max-connections` (with --http). */
  limits?: Partial<HttpLimits>;
  /** --debug: every HTTP exchange is shown, the upstream's initialize too. */
  debug?: boolean;
};

/**
 * Serves one connection as an MCP server on stdin/stdout until the client closes stdin,
 * or with `--http` on loopback until Ctrl-C/SIGTERM, one upstream session per client session.
 * Returns the exit code: 0, or over stdio the code of the failure that kept the upstream from
 * opening (4 when it needs a login), already reported on stderr and to the client as the
 * `initialize` error. Over HTTP such a failure ends that client's session only.
 */
export async function mcpProxyCommand(ctx: Context, options: McpProxyOptions): Promise<number> {
  const config = await readConfig({ configPath: options.config, env: ctx.env, cwd: ctx.cwd });
  if (config.remote) {
    // The deployment holds the credential and runs the calls; its protocol has no call endpoint
    // (product.md, "The deployment protocol"), so there is nothing here to forward to.
    throw refused(`subs mcp proxy works only without [remote]: with [remote] in ${config.displayPath} the deployment holds ${possessive(options.id)} credential and runs the calls`, {
      hint: "run the proxy with a substructure.toml without [remote] (e.g. --config pointing at a local one)",
      code: "remote_unsupported",
    });
  }
  const connection = findConnection(config, options.id);
  const { proxySessionFactory } = await import("../../../serve/proxy-session.ts");
  let unavailable: SubsError | undefined;
  const factory = proxySessionFactory(ctx, config, connection, {
    reporter: stderrReporter(ctx),
    onUnavailable: (error) => (unavailable ??= error),
    // Loaded with the session's server, past the initialize answer (docs/speed.md).
    lock: async () => (await import("../../../config/tool-lock-read.ts")).readToolLock(config.path, ctx.cwd),
    ...(options.debug ? { debug: true } : {}),
  });
  if (options.http) {
    const { serveHttp } = await import("../../../serve/http.ts");
    await serveHttp(ctx, { ...options.http, ...(options.tokenFile !== undefined ? { tokenFile: options.tokenFile } : {}), ...(options.limits ? { limits: options.limits } : {}), newSession: factory });
    return 0;
  }
  const { serveStdio } = await import("../../../serve/stdio.ts");
  await serveStdio(ctx, factory);
  return unavailable ? exitCodeFor(unavailable) : 0;
}
