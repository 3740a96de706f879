// What an agent's served session says of itself, shared by the early answer (agent-session.ts,
// before the MCP SDK loads) and the session's server (agent-server.ts): the two must answer
// `initialize` alike.
import type { InitializeResult, ServerCapabilities } from "@modelcontextprotocol/sdk/types.js";
import type { ToolLock } from "../config/tool-lock.ts";
import type { Reporter } from "../report.ts";
import { VERSION } from "../version.ts";
import { answeredVersion, type InitializeParams } from "./handshake.ts";

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
  /**
   * Told of each tools/call the session answered, after it answered: how it ended, never its
   * arguments nor its result (the deployment's record, docs/deployment-protocol.md section 3.14).
   * `subs agent serve` passes none. Whatever it throws is ignored.
   */
  onCall?: (call: ServedToolCall) => void;
  /**
   * substructure.lock, read at the start of each session (a lock written meanwhile applies to the
   * next session): what it does not allow is withheld (src/agents/resolve.ts). Absent or
   * resolving to undefined: nothing is withheld.
   */
  lock?: () => Promise<ToolLock | undefined>;
};

/**
 * How a served call ended: `tool_error` the server's own result with isError; `refused` not run
 * because the session may not (no usable credential: needs_login; a connection outside the
 * catalog; a tool name the session does not serve); `upstream_error` no answer, the connection
 * failed, or the server answered a JSON-RPC error; `ok` otherwise.
 */
export type ServedCallOutcome = "ok" | "tool_error" | "refused" | "upstream_error";
/** `tool` and `connection`: the served name and its connection; both undefined for a name the session does not serve (its text is the client's, not recorded). `requestId`: the HTTP request's X-Request-Id, when it has one. */
export type ServedToolCall = { tool: string | undefined; connection: string | undefined; outcome: ServedCallOutcome; durationMs: number; requestId: string | undefined };

/** A snapshot that never changes during a session (listChanged false), and MCP log messages of what it left out. */
export const AGENT_SERVER_CAPABILITIES = { tools: { listChanged: false }, logging: {} } satisfies ServerCapabilities;

export const agentServerInfo = (agentName: string) => ({ name: "subs", title: `subs agent serve ${agentName}`, version: VERSION });

/**
 * What the session's server answers `initialize` with (the SDK's Server: the revision asked for
 * when it speaks it, its capabilities and its info), for a request that server would take: one
 * whose clientInfo has the version the SDK's schema requires. Anything else is the server's to
 * answer.
 */
export function agentInitializeResult(params: InitializeParams, agentName: string): InitializeResult | undefined {
  if (typeof params.clientInfo.version !== "string") return undefined;
  return { protocolVersion: answeredVersion(params.protocolVersion), capabilities: AGENT_SERVER_CAPABILITIES, serverInfo: agentServerInfo(agentName) };
}
