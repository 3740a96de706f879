// What `subs agent serve` and `subs mcp proxy` hand to a transport: one MCP server per
// client session. Over stdio the process has one session; over Streamable HTTP (--http) every
// `initialize` without a session id starts a new one, so each client gets its own snapshot of
// tools and its own upstream connections (connectors.md, "When tools are fetched": once per
// session).
//
// A session is begun without the MCP SDK: its server (src/serve/served-server.ts, which loads the
// SDK, about as long again as the rest of the start-up) is built by `open`. Over stdio,
// `initialize` and `ping` are answered from the begun session while the server is built
// (src/serve/stdio.ts), so a client that starts several servers at once is not kept waiting.
import type { Server } from "@modelcontextprotocol/sdk/server/index.js";
import type { Transport } from "@modelcontextprotocol/sdk/shared/transport.js";
import type { InitializeResult, JSONRPCMessage } from "@modelcontextprotocol/sdk/types.js";
import { scrubbedJson } from "../secrets.ts";
import type { InitializeParams } from "./handshake.ts";

export type Scrubber = { scrub(text: string): string };

export type SessionServer = {
  /** The SDK's low-level server, not yet connected; the transport's owner connects it. */
  server: Server;
  /** Ends the session's upstream connections. Called once, when the session's transport closes. */
  close(): Promise<void>;
  /**
   * What another process needs to continue this session as it is (its tools as served), once it
   * is known; absent for a session that cannot be continued elsewhere.
   */
  snapshot?(): Promise<unknown>;
};

export type Session = {
  /** Builds the session's server and starts what the session does (an agent's fetch of its tools). */
  open(): Promise<SessionServer>;
  /** What can be answered before `open` has built the server; without it the server answers everything. */
  early?: EarlyAnswers;
};

export type EarlyAnswers = {
  /** The session's secrets: the same the server's messages pass (scrubbedSends). */
  secrets: Scrubber;
  /**
   * The result of the client's `initialize`, given without the server; undefined when the server
   * is to answer it (it then sees the request first). The server still receives the request
   * afterwards, so its own state is what an answer of its own leaves; that answer is not sent.
   */
  initialize(params: InitializeParams): Promise<InitializeResult | undefined>;
};

/**
 * Called once per client session, before the session's first message is handled; loads nothing
 * heavy. `resumed`: the snapshot (SessionServer.snapshot) of a session another process started,
 * which this one continues; only the deployment's agent sessions are resumed. `owner`: who started
 * it, as the transport's caller named it (the deployment: its API token's id; its record names
 * who made each call).
 */
export type SessionFactory = (resumed?: unknown, owner?: string) => Session;

/**
 * Removes every secret of the run from every message `transport` sends its client, whatever the
 * transport: results, errors, notifications (progress, log messages) and requests of the server
 * (sampling, elicitation, roots), the initialize result included, whether the SDK's server or
 * src/serve/stdio.ts wrote it. What an upstream server says reaches the client only through here,
 * so an upstream that quotes the credential it received back, in any field and any encoding
 * Secrets knows, hands the client nothing (docs/serve.md).
 */
export function scrubbedSends(transport: Pick<Transport, "send">, secrets: Scrubber): void {
  const send = transport.send.bind(transport);
  const scrub = (text: string) => secrets.scrub(text);
  transport.send = (message: JSONRPCMessage, options) => send(scrubbedJson(message, scrub), options);
}
