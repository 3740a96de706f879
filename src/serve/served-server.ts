// The SDK's low-level server of a served session (src/serve/session.ts). Loading this module loads
// the MCP SDK's server and its schemas: only a session's `open` imports it.
import { Server, type ServerOptions } from "@modelcontextprotocol/sdk/server/index.js";
import type { Transport } from "@modelcontextprotocol/sdk/shared/transport.js";
import type { Implementation } from "@modelcontextprotocol/sdk/types.js";
import { scrubbedSends, type Scrubber } from "./session.ts";

/** Sends every message through the session's scrub (scrubbedSends). */
export class ServedServer extends Server {
  readonly #secrets: Scrubber;

  /** `secrets`: the run's (src/secrets.ts, `learnt`), learnt by the fetch of every upstream request. */
  constructor(info: Implementation, options: ServerOptions | undefined, secrets: Scrubber) {
    super(info, options);
    this.#secrets = secrets;
  }

  override async connect(transport: Transport): Promise<void> {
    // On the transport itself: what is sent past the Protocol (a notification passed on as it
    // came) goes through its send too.
    scrubbedSends(transport, this.#secrets);
    await super.connect(transport);
  }
}
