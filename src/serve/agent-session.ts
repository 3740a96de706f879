// `subs agent serve <name>` (issue 16): one MCP server whose tools are exactly what the agent's
// model sees. Each session fetches the agent's connections once and serves that snapshot
// (src/serve/agent-server.ts, which loads the MCP SDK). What it answers to `initialize` depends on
// nothing the upstreams say, so over stdio it is answered before that server is built.
import type { InitializeResult, ServerCapabilities } from "@modelcontextprotocol/sdk/types.js";
import { findAgent } from "../config/lookup.ts";
import type { Config } from "../config/types.ts";
import type { Context } from "../context.ts";
import { refused } from "../errors.ts";
import { learnt } from "../secrets.ts";
import type { Reporter } from "../report.ts";
import { VERSION } from "../version.ts";
import { answeredVersion, type InitializeParams } from "./handshake.ts";
import type { SessionFactory } from "./session.ts";

export type AgentSessionOptions = {
  /** Notices for a person (stderr): what each session serves, and what it left out. */
  reporter: Reporter;
  /** How long each connection has to list its tools at the start of a session. */
  timeoutMs: number;
  /**
   * How long an upstream request may go unanswered; a progress notification restarts the wait,
   * so a long tool that reports progress is not cut short.
   */
  requestTimeoutMs: number;
};

/** A snapshot that never changes during a session (listChanged false), and MCP log messages of what it left out. */
export const AGENT_SERVER_CAPABILITIES = { tools: { listChanged: false }, logging: {} } satisfies ServerCapabilities;

export const agentServerInfo = (agentName: string) => ({ name: "subs", title: `subs agent serve ${agentName}`, version: VERSION });

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
  return () => {
    const session = learnt(ctx);
    return {
      early: { secrets: session.secrets, initialize: async (params) => initializeResult(params, agent.name) },
      open: async () => (await import("./agent-server.ts")).startSession(ctx, config, agent.name, options, session),
    };
  };
}

/**
 * What the session's server answers `initialize` with (the SDK's Server: the revision asked for
 * when it speaks it, its capabilities and its info), for a request that server would take: one
 * whose clientInfo has the version the SDK's schema requires. Anything else is the server's to
 * answer.
 */
function initializeResult(params: InitializeParams, agentName: string): InitializeResult | undefined {
  if (typeof params.clientInfo.version !== "string") return undefined;
  return { protocolVersion: answeredVersion(params.protocolVersion), capabilities: AGENT_SERVER_CAPABILITIES, serverInfo: agentServerInfo(agentName) };
}
