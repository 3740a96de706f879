// What `subs agent serve` and `subs mcp proxy` hand to a transport (issue 16): one MCP server per
// client session. Over stdio the process has one session; over Streamable HTTP (--http) every
// `initialize` without a session id starts a new one, so each client gets its own snapshot of
// tools and its own upstream connections (connectors.md, "When tools are fetched": once per
// session).
import { Server, type ServerOptions } from "@modelcontextprotocol/sdk/server/index.js";
import type { Transport } from "@modelcontextprotocol/sdk/shared/transport.js";
import type { Implementation } from "@modelcontextprotocol/sdk/types.js";
import { scrubbedJson } from "../secrets.ts";

export type SessionServer = {
  /** The SDK's low-level server, not yet connected; the transport's owner connects it. */
  server: Server;
  /** Ends the session's upstream connections. Called once, when the session's transport closes. */
  close(): Promise<void>;
};

/** Called once per client session, before the session's first message is handled. */
export type SessionFactory = () => Promise<SessionServer>;

/**
 * The SDK's low-level server of a served session, which removes every secret of the run from every
 * message it sends its client, whatever the transport: results, errors, notifications (progress,
 * log messages) and its own requests (sampling, elicitation, roots), the initialize result
 * included. What an upstream server says reaches the client only through here, so an upstream
 * that quotes the credential it received back, in any field and any encoding Secrets knows, hands
 * the client nothing (docs/serve.md).
 */
export class ServedServer extends Server {
  readonly #secrets: { scrub(text: string): string };

  /** `secrets`: the run's (src/secrets.ts, `learnt`), learnt by the fetch of every upstream request. */
  constructor(info: Implementation, options: ServerOptions | undefined, secrets: { scrub(text: string): string }) {
    super(info, options);
    this.#secrets = secrets;
  }

  override async connect(transport: Transport): Promise<void> {
    // On the transport itself: what is sent past the Protocol (a notification passed on as it
    // came) goes through its send too.
    const send = transport.send.bind(transport);
    const scrub = (text: string) => this.#secrets.scrub(text);
    transport.send = (message, options) => send(scrubbedJson(message, scrub), options);
    await super.connect(transport);
  }
}
