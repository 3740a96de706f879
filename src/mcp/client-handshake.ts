// subs as an MCP client, in the handshake (MCP lifecycle, "Initialization"): what it calls itself,
// and what a server answered its initialize with when that was sent by hand before the SDK was
// loaded (src/serve/upstream-handshake.ts) and the session is then taken over (connect.ts, `adopt`).
// Here, below both, so that mcp/ needs nothing of serve/, which builds on it.
import { VERSION } from "../version.ts";

/** What subs calls itself as an MCP client (connect.ts, src/serve/upstream-handshake.ts). */
export const SUBS_CLIENT_INFO = { name: "subs", version: VERSION };

/** What the upstream answered its initialize with, as far as the proxy reads it; the rest as it came. */
export type UpstreamInitializeResult = {
  protocolVersion: string;
  capabilities: Record<string, unknown>;
  serverInfo: { name: string; version: string } & Record<string, unknown>;
  instructions?: string;
} & Record<string, unknown>;

export type UpstreamHandshake = {
  /** The initialize result, as the server sent it. */
  result: UpstreamInitializeResult;
  /** The session it opened (Mcp-Session-Id), if any. */
  sessionId?: string;
};
