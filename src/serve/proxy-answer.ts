// What a proxied session answers `initialize` with, and what it is given, shared by the early
// answer (proxy-session.ts, before the MCP SDK loads) and the session's server (proxy-server.ts).
import type { InitializeResult, ServerCapabilities } from "@modelcontextprotocol/sdk/types.js";
import type { ConnectionConfig } from "../config/types.ts";
import type { Context } from "../context.ts";
import type { SubsError } from "../errors.ts";
import type { ToolLock } from "../config/tool-lock.ts";
import type { Reporter } from "../report.ts";
import { negotiated } from "./handshake.ts";
import type { UpstreamInitializeResult } from "../mcp/client-handshake.ts";

export type ProxyOptions = {
  /** stderr: the one-line notices of a session (connected, could not connect, upstream gone). */
  reporter: Reporter;
  /** The upstream could not be opened at a session's `initialize` (needs a login, unreachable…). */
  onUnavailable?: (error: SubsError) => void;
  /** --debug shows every HTTP exchange, which only the SDK's client's requests do: no initialize by hand. */
  debug?: boolean;
  /**
   * substructure.lock, read once per session: when there is one, only its tools of this connection
   * are listed and may be called, each with only its locked fields (src/agents/resolve.ts's
   * lockVerdict). Absent or resolving to undefined: everything crosses as it is.
   */
  lock?: () => Promise<ToolLock | undefined>;
};

export type ProxyContext = Pick<Context, "env" | "fetch" | "now" | "signal" | "secrets">;

/**
 * The proxy's answer to its client's initialize: the upstream's, but for the revision, which is
 * negotiated with both (negotiated). The upstream's own name: what a client shows is the server it
 * is talking to.
 */
export function proxyInitializeResult(
  requestedVersion: string,
  upstream: Partial<Pick<UpstreamInitializeResult, "protocolVersion" | "capabilities" | "serverInfo" | "instructions">>,
  connection: ConnectionConfig,
): InitializeResult {
  return {
    protocolVersion: negotiated(requestedVersion, upstream.protocolVersion),
    capabilities: (upstream.capabilities ?? {}) as ServerCapabilities,
    serverInfo: upstream.serverInfo ?? { name: connection.id, version: "unknown" },
    ...(upstream.instructions ? { instructions: upstream.instructions } : {}),
  };
}
