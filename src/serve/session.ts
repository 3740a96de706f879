// What `subs agent serve` and `subs mcp proxy` hand to a transport (issue 16): one MCP server per
// client session. Over stdio the process has one session; over Streamable HTTP (--http) every
// `initialize` without a session id starts a new one, so each client gets its own snapshot of
// tools and its own upstream connections (connectors.md, "When tools are fetched": once per
// session).
import type { Server } from "@modelcontextprotocol/sdk/server/index.js";

export type SessionServer = {
  /** The SDK's low-level server, not yet connected; the transport's owner connects it. */
  server: Server;
  /** Ends the session's upstream connections. Called once, when the session's transport closes. */
  close(): Promise<void>;
};

/** Called once per client session, before the session's first message is handled. */
export type SessionFactory = () => Promise<SessionServer>;
