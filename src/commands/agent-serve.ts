import { loadConfig } from "../config/load.ts";
import type { Context } from "../context.ts";
import { stderrReporter } from "../output/reporter.ts";
import { agentSessionFactory } from "../serve/agent-session.ts";
import { serveStdio } from "../serve/stdio.ts";

export type AgentServeOptions = {
  agent: string;
  config?: string;
  /** Per connection, to list its tools at the start of a session. */
  timeoutSeconds: number;
  /** How long an upstream request may go unanswered (progress restarts the wait). */
  requestTimeoutSeconds: number;
};

/** Serves until the client closes stdin or the process is told to stop (README, "subs agent serve"). */
export async function agentServeCommand(ctx: Context, options: AgentServeOptions): Promise<void> {
  const config = loadConfig({ configPath: options.config, env: ctx.env, cwd: ctx.cwd });
  const factory = agentSessionFactory(ctx, config, options.agent, {
    reporter: stderrReporter(ctx),
    timeoutMs: options.timeoutSeconds * 1000,
    requestTimeoutMs: options.requestTimeoutSeconds * 1000,
  });
  await serveStdio(ctx, factory);
}
