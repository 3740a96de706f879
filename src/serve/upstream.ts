// One upstream MCP connection kept open for a whole served session (issue 16): opened once by
// openConnection (src/mcp/open.ts: static token, stored OAuth credential, open server, the 401 and
// issuer checks), then used for every call of the session. A session outlives an access token, so
// every request of an OAuth connection carries the token that is current when it is sent: one
// about to expire is refreshed first (src/auth/refresh.ts, race-safe across processes), and a 401
// is answered by one refresh and one retry of the same request, which the server did not run.
import type { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { isFresh, freshCredential, storedCredential } from "../auth/refresh.ts";
import type { Config, ConnectionConfig } from "../config/types.ts";
import type { Context } from "../context.ts";
import { needsLogin } from "../errors.ts";
import { assertSameAuthorizationServer, challengeRecorder, openConnection, type AuthChallenge } from "../mcp/open.ts";
import type { Reporter } from "../report.ts";
import type { CredentialRow } from "../store/schema.ts";
import { openEnvironmentStore } from "../store/environment.ts";

export type UpstreamContext = Pick<Context, "env" | "fetch" | "now">;

export type OpenUpstreamOptions = {
  ctx: UpstreamContext;
  config: Config;
  connection: ConnectionConfig;
  reporter: Reporter;
  /** The session is over: ends the requests of an opening (an open connection is closed instead). */
  sessionSignal: AbortSignal;
  /** Also ends the requests made while opening (the fetch's timeout at session start). */
  openSignal?: AbortSignal;
  requestTimeoutMs: number;
};

export type Upstream = {
  connection: ConnectionConfig;
  client: Client;
  close(): Promise<void>;
};

export async function openUpstream(options: OpenUpstreamOptions): Promise<Upstream> {
  const { ctx, connection } = options;
  const bearer = connection.auth ? undefined : new Bearer(options);
  // Until the connection is open, the session's end and the opening's own signal (a timeout)
  // end its requests; from then on the session ends them by closing the client, which aborts
  // the transport's own signal.
  let opening = true;
  const openingSignal = AbortSignal.any(options.openSignal ? [options.sessionSignal, options.openSignal] : [options.sessionSignal]);
  const fetch = upstreamFetch(ctx.fetch, bearer, () => (opening ? openingSignal : undefined));
  // Refreshed here, one at a time in this process, so openConnection finds the token fresh and
  // never takes the db's write lock beside another connection's refresh (see `serially`).
  await bearer?.load();
  // While it opens, openConnection owns the token (and its own 401 retry); from then on the
  // session does, starting from what openConnection left stored.
  const client = await openConnection({
    ctx: { env: ctx.env, now: ctx.now, fetch },
    config: options.config,
    connection,
    signal: openingSignal,
    reporter: options.reporter,
    requestTimeoutMs: options.requestTimeoutMs,
  });
  try {
    await bearer?.load();
  } catch (error) {
    await client.close().catch(() => {});
    throw error;
  }
  opening = false;
  bearer?.take();
  return { connection, client, close: () => client.close().catch(() => {}) };
}

/**
 * Sends each request with the current token: the Authorization header openConnection set is
 * replaced, so the transport (opened once) never sends one the session has since replaced.
 */
function upstreamFetch(inner: typeof globalThis.fetch, bearer: Bearer | undefined, opening: () => AbortSignal | undefined): typeof globalThis.fetch {
  return async (input, init) => {
    // A signal of its own per request: fetch (undici) adds a listener to the signal it is given
    // and removes it only when the request is garbage-collected, so the transport's one signal for
    // the whole session collected thousands (MaxListenersExceededWarning on stderr, and memory).
    // A dependent signal (AbortSignal.any) holds no listener on its source.
    const sources = [init?.signal, opening()].filter((s): s is AbortSignal => s !== undefined && s !== null);
    const bound = sources.length > 0 ? AbortSignal.any(sources) : undefined;
    if (!bearer?.active) return inner(input, bound ? { ...init, signal: bound } : init);
    const headers = new Headers(init?.headers);
    const sent = /^Bearer\s+(\S+)$/i.exec(headers.get("authorization") ?? "")?.[1];
    if (sent === undefined) return inner(input, { ...init, signal: bound });
    const token = await bearer.current();
    headers.set("authorization", `Bearer ${token}`);
    const response = await inner(input, { ...init, headers, signal: bound });
    // Only a request that can be sent again is retried: every MCP POST body is a string.
    if (response.status !== 401 || (init?.body !== undefined && init?.body !== null && typeof init.body !== "string")) return response;
    let challenge: AuthChallenge | undefined;
    await challengeRecorder(async () => response, (c) => (challenge = c))(input, init);
    const next = await bearer.rejected(token, challenge);
    await response.body?.cancel().catch(() => {});
    headers.set("authorization", `Bearer ${next}`);
    return inner(input, { ...init, headers, signal: bound });
  };
}

/** The OAuth access token of one connection for the life of a session. */
class Bearer {
  private row: CredentialRow | undefined;
  /** Requests carry this session's token (once open, and when a credential is stored at all). */
  active = false;
  private stored = false;

  constructor(private readonly options: OpenUpstreamOptions) {}

  /** The stored credential, refreshed when it expires soon; none when the connection has none stored. */
  async load(): Promise<void> {
    await serially(async () => {
      const opened = await this.open();
      if (!opened) return;
      try {
        if (opened.store.getCredential(this.options.connection.id) === undefined) return;
        this.row = await freshCredential({ ctx: this.options.ctx, store: opened.store, connection: this.options.connection });
        this.stored = true;
      } finally {
        opened.store.close();
      }
    });
  }

  take(): void {
    this.active = this.stored;
  }

  /** The token to send now, refreshed first when it expires soon (the same margin as every command). */
  async current(): Promise<string> {
    const fresh = () => this.row !== undefined && isFresh(this.row, this.options.ctx.now());
    if (fresh()) return this.row!.access_token;
    return serially(async () => {
      if (fresh()) return this.row!.access_token;
      const opened = await this.required();
      try {
        this.row = await freshCredential({ ctx: this.options.ctx, store: opened.store, connection: this.options.connection });
        return this.row.access_token;
      } finally {
        opened.store.close();
      }
    });
  }

  /**
   * The server answered 401 to `token`: a newer one when another request or process stored it
   * meanwhile, else one refresh (MCP authorization: refresh, retry once). A credential now issued
   * by another authorization server is never refreshed or sent (assertSameAuthorizationServer).
   */
  async rejected(token: string, challenge: AuthChallenge | undefined): Promise<string> {
    return serially(async () => {
      if (this.row && this.row.access_token !== token) return this.row.access_token;
      const { ctx, config, connection } = this.options;
      await assertSameAuthorizationServer({ ctx, config, connection }, challenge);
      const opened = await this.required();
      try {
        const stored = storedCredential(opened.store, connection);
        if (stored.access_token !== token && (stored.expires_at === null || stored.expires_at > ctx.now())) {
          this.row = stored;
        } else {
          // Refreshes unless a token newer than the rejected one is stored by the time the lock is held.
          this.row = await freshCredential({ ctx, store: opened.store, connection, rejectedAt: stored.updated_at });
        }
        return this.row.access_token;
      } finally {
        opened.store.close();
      }
    });
  }

  private open() {
    return openEnvironmentStore(this.options.config, { create: false, reporter: this.options.reporter });
  }

  private async required() {
    const opened = await this.open();
    // The db went away mid-session: what storedCredential answers for a missing row.
    if (!opened) throw needsLogin(this.options.connection.id, "not logged in");
    return opened;
  }
}

// Refreshes in this process run one at a time. The db's write lock (BEGIN IMMEDIATE, held across
// the token request) is waited for by SQLite's busy handler, which blocks the thread: a second
// refresh started here while the first awaits its answer would stall both until the busy timeout.
let queue: Promise<unknown> = Promise.resolve();
function serially<T>(work: () => Promise<T>): Promise<T> {
  const run = queue.then(work, work);
  queue = run.catch(() => {});
  return run;
}
