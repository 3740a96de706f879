// `subs agent serve <name>`: one MCP server whose tools are exactly what the agent's
// model sees. Each session fetches the agent's connections once and serves that snapshot
// (src/serve/agent-server.ts, which loads the MCP SDK). What it answers to `initialize` depends on
// nothing the upstreams say, so over stdio it is answered before that server is built.
import { findAgent } from "../config/lookup.ts";
import type { Config } from "../config/types.ts";
import type { Context } from "../context.ts";
import { refused } from "../errors.ts";
import { learnt } from "../secrets.ts";
import { agentInitializeResult, type AgentSessionOptions } from "./agent-answer.ts";
import type { SessionFactory } from "./session.ts";

export type { AgentSessionOptions } from "./agent-answer.ts";

/**
 * The factory of one agent's sessions. Refuses at once what no session could serve: an unknown
 * agent, or a file with [remote], where the deployment holds the credentials and runs the calls.
 */
export function agentSessionFactory(ctx: Context, config: Config, agentName: string, options: AgentSessionOptions): SessionFactory {
  if (config.remote) {
    throw refused(`subs agent serve works only without [remote]: with [remote], the deployment holds the credentials and runs the agent's tool calls`, {
      code: "remote_unsupported",
      hint: `see what the deployment gives the agent's model with \`subs agent tools ${agentName}\``,
    });
  }
  const agent = findAgent(config, agentName);
  return (resumed) => {
    const session = learnt(ctx);
    return {
      early: { secrets: session.secrets, initialize: async (params) => agentInitializeResult(params, agent.name) },
      open: async () => (await import("./agent-server.ts")).startSession(ctx, config, agent.name, options, session, resumed),
    };
  };
}
