import { readConfig } from "../../../config/read-config.ts";
import type { Context } from "../../../context.ts";
import { stderrReporter } from "../../../output/reporter.ts";
import type { HttpAddress } from "../../../serve/address.ts";
import type { HttpLimits } from "../../../serve/http.ts";
import { agentSessionFactory } from "../../../serve/agent-session.ts";

export type AgentServeOptions = {
  agent: string;
  config?: string;
  /** Per connection, to list its tools at the start of a session. */
  timeoutSeconds: number;
  /** How long an upstream request may go unanswered (progress restarts the wait). */
  requestTimeoutSeconds: number;
  /** `--http [HOST:]PORT`: Streamable HTTP on loopback instead of stdio; every client session gets its own snapshot. */
  http?: HttpAddress;
  /** `--token-file PATH` (with --http): the bearer token written there, not printed. */
  tokenFile?: string;
  /** `--max-sessions`, `--idle-timeout`, `--max-calls`, `--max-connections` (with --http). */
  limits?: Partial<HttpLimits>;
};

/** Serves until the client closes stdin (stdio) or the process is told to stop (docs/serve.md). */
export async function agentServeCommand(ctx: Context, options: AgentServeOptions): Promise<void> {
  const config = await readConfig({ configPath: options.config, env: ctx.env, cwd: ctx.cwd });
  const factory = agentSessionFactory(ctx, config, options.agent, {
    reporter: stderrReporter(ctx),
    timeoutMs: options.timeoutSeconds * 1000,
    requestTimeoutMs: options.requestTimeoutSeconds * 1000,
    // Loaded with the session's server, past the initialize answer (docs/speed.md).
    lock: async () => (await import("../../../config/tool-lock-read.ts")).readToolLock(config.path, ctx.cwd),
  });
  try {
    if (options.http) {
      const { serveHttp } = await import("../../../serve/http.ts");
      await serveHttp(ctx, { ...options.http, ...(options.tokenFile !== undefined ? { tokenFile: options.tokenFile } : {}), ...(options.limits ? { limits: options.limits } : {}), newSession: factory });
      return;
    }
    const { serveStdio } = await import("../../../serve/stdio.ts");
    await serveStdio(ctx, factory);
  } finally {
    // The local servers every session shared end with the serve (src/mcp/local-client.ts).
    if (config.connections.some((c) => c.process)) await (await import("../../../mcp/local-client.ts")).closeSharedServers(ctx.processGroups);
  }
}
