// One upstream MCP connection kept open for a whole served session, the one
// implementation behind `subs agent serve` (one per connection of the agent) and `subs mcp proxy`
// (one per client session). Opened by openConnection (src/mcp/open.ts: static token, stored
// OAuth credential, open server, the 401 and issuer checks), then used for every request of the
// session. Two things outlive what openConnection gives a one-shot command:
// - the access token: every request of an OAuth connection carries the token current when it is
//   sent. One about to expire is refreshed first (src/auth/refresh.ts, race-safe across
//   processes); a 401 is answered by one refresh, shared by every request that met it, and one
//   retry of the same request, which the server did not run. A token stored since by another
//   process (a `subs mcp login`, another process's refresh) is used as it is.
// - the upstream's own session: a 404 to a request carrying its session id means the server ended
//   it (MCP Streamable HTTP, "Session Management"); a new one is opened, once for every request
//   that met it, and the request is sent again, once.
import type { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPError } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import type { ClientCapabilities, RequestId } from "@modelcontextprotocol/sdk/types.js";
import { isFresh, freshCredential, storedCredential } from "../auth/refresh.ts";
import type { Config, ConnectionConfig } from "../config/types.ts";
import type { Context } from "../context.ts";
import { needsLogin, SubsError } from "../errors.ts";
import { assertSameAuthorizationServer, challengeRecorder, openConnection, type AuthChallenge } from "../mcp/open.ts";
import type { Reporter } from "../report.ts";
import type { CredentialRow } from "../store/schema.ts";
import { openEnvironmentStore } from "../store/environment.ts";
import { anySignal, type AnySignal } from "../http/deadline.ts";
import type { UpstreamHandshake } from "../mcp/client-handshake.ts";

export type UpstreamContext = Pick<Context, "env" | "fetch" | "now"> & Partial<Pick<Context, "processGroups" | "debugLog" | "secrets" | "signal">>;

/** What a local server's process needs of the run's context: its process-group registry, --debug's trace, the run's secrets. */
export function localServerEffects(ctx: Partial<Pick<Context, "processGroups" | "debugLog" | "secrets" | "signal">>): Partial<Pick<Context, "processGroups" | "debugLog" | "secrets" | "signal">> {
  return {
    ...(ctx.signal ? { signal: ctx.signal } : {}),
    ...(ctx.processGroups ? { processGroups: ctx.processGroups } : {}),
    ...(ctx.debugLog ? { debugLog: ctx.debugLog } : {}),
    ...(ctx.secrets ? { secrets: ctx.secrets } : {}),
  };
}

export type OpenUpstreamOptions = {
  ctx: UpstreamContext;
  config: Config;
  connection: ConnectionConfig;
  reporter: Reporter;
  /** The session is over: ends the requests of an opening (an open connection is closed instead). */
  sessionSignal: AbortSignal;
  /** Also ends the requests made while first opening (the fetch's timeout at session start). */
  openSignal?: AbortSignal;
  /** How long one MCP request of an opening may go unanswered (src/mcp/connect.ts). */
  requestTimeoutMs: number;
  /** What the client says it can do at `initialize`, on every session opened (the proxy's client's). */
  capabilities?: ClientCapabilities;
  /**
   * Sets up the client of a new upstream session before any request is sent on it: the proxy
   * wires its handlers and sets up again what its client had set up (log level, subscriptions).
   */
  onReopen?: (client: Client) => Promise<void>;
  /** The first session, opened by hand (src/serve/upstream-handshake.ts): taken over, not opened again. */
  adopt?: UpstreamHandshake;
  /** A local server: one process for every session of this subs process (src/mcp/local-client.ts). */
  shareLocal?: boolean;
};

export type Upstream = {
  connection: ConnectionConfig;
  /** The client of the upstream's current session. */
  readonly client: Client;
  /**
   * Runs `send` on the current session; when the server ended that session (a 404 to its id), on
   * a new one, once. Not again once `signal` is aborted (the caller gave up).
   */
  run<T>(send: (client: Client) => Promise<T>, signal?: AbortSignal): Promise<T>;
  close(): Promise<void>;
};

/**
 * The server answered 401 and no other token could be had (the refresh was refused, the
 * credential is gone, the server moved to another authorization server): `problem` says why.
 */
export class CredentialRejected extends SubsError {
  constructor(readonly problem: SubsError) {
    super(problem.kind, problem.message, { cause: problem, ...(problem.hint ? { hint: problem.hint } : {}), ...(problem.code ? { code: problem.code } : {}) });
  }
}

export async function openUpstream(options: OpenUpstreamOptions): Promise<Upstream> {
  const { connection, sessionSignal, reporter } = options;
  let current = await openClient(options, options.openSignal, options.adopt);
  let closed = false;
  // One new session per ended one, however many requests found it ended.
  let reopening: Promise<Client> | undefined;
  // Requests still out on each client. A replaced client is closed once its last one settles:
  // closing it at once would end a request whose own 404 had not arrived yet ("Connection
  // closed"), which could then not tell whether the server had run it, so could not resend it.
  const pending = new Map<Client, number>();
  const retired = new Set<Client>();
  const closeWhenIdle = (client: Client) => {
    if ((pending.get(client) ?? 0) > 0) return;
    retired.delete(client);
    void client.close().catch(() => {});
  };
  const on = async <T>(client: Client, send: (client: Client) => Promise<T>): Promise<T> => {
    pending.set(client, (pending.get(client) ?? 0) + 1);
    try {
      return await send(client);
    } finally {
      const left = pending.get(client)! - 1;
      if (left > 0) pending.set(client, left);
      else pending.delete(client);
      if (retired.has(client)) closeWhenIdle(client);
    }
  };
  const reopen = (stale: Client): Promise<Client> => {
    if (current !== stale) return Promise.resolve(current);
    reopening ??= (async () => {
      try {
        reporter.info(`${connection.id}: the server ended its session; starting a new one`);
        const client = await openClient(options, undefined);
        if (closed || sessionSignal.aborted) {
          await client.close().catch(() => {});
          throw sessionSignal.reason ?? new Error("the session closed");
        }
        await options.onReopen?.(client);
        current = client;
        // Retired, not lost: its end is no news to whoever listens for the upstream going away.
        stale.onclose = undefined;
        retired.add(stale);
        closeWhenIdle(stale);
        return client;
      } finally {
        reopening = undefined;
      }
    })();
    return reopening;
  };
  return {
    connection,
    get client() {
      return current;
    },
    async run(send, signal) {
      const used = current;
      // Read before the request: once it settles, a replaced client may be closed (closeWhenIdle).
      const sessionId = sessionOf(used);
      try {
        return await on(used, send);
      } catch (error) {
        if (signal?.aborted || !sessionEnded(error, sessionId)) throw error;
      }
      return on(await reopen(used), send);
    },
    async close() {
      closed = true;
      await Promise.all([current, ...retired].map((client) => client.close().catch(() => {})));
    },
  };
}

function sessionOf(client: Client): string | undefined {
  return (client.transport as { sessionId?: string } | undefined)?.sessionId;
}

/** A 404 to a request that carried the upstream's session id: the server ended the session. */
function sessionEnded(error: unknown, sessionId: string | undefined): boolean {
  return error instanceof StreamableHTTPError && error.code === 404 && sessionId !== undefined;
}

async function openClient(options: OpenUpstreamOptions, openSignal: AbortSignal | undefined, adopt?: UpstreamHandshake): Promise<Client> {
  const { ctx, connection } = options;
  const bearer = connection.auth ? undefined : new Bearer(options);
  // Until the connection is open, the session's end and the opening's own signal (a timeout)
  // end its requests; from then on the session ends them by closing the client, which aborts
  // the transport's own signal. What follows the session's signal here is let go of once the
  // opening is over, open or not: that signal outlives it.
  let opening = true;
  const openingSignal = anySignal([options.sessionSignal, openSignal]);
  const fetch = perRequestSignals(upstreamFetch(ctx.fetch, connection, bearer), () => (opening ? openingSignal.signal : undefined));
  try {
    // Refreshed here, one at a time in this process, so openConnection finds the token fresh and
    // never takes the db's write lock beside another connection's refresh (see `serially`).
    await bearer?.load();
    // While it opens, openConnection owns the token (and its own 401 retry); from then on the
    // session does, starting from what openConnection left stored.
    const client = await openConnection({
      ctx: { ...ctx, fetch },
      config: options.config,
      connection,
      signal: openingSignal.signal,
      reporter: options.reporter,
      requestTimeoutMs: options.requestTimeoutMs,
      ...(options.capabilities ? { capabilities: options.capabilities } : {}),
      ...(adopt ? { adopt } : {}),
      ...(options.shareLocal ? { shareLocal: true } : {}),
    });
    try {
      await bearer?.load();
    } catch (error) {
      await client.close().catch(() => {});
      throw error;
    }
    opening = false;
    bearer?.take();
    return client;
  } finally {
    openingSignal.release();
  }
}

/**
 * Sends each request with the current token: the Authorization header openConnection set is
 * replaced, so the transport (opened once) never sends one the session has since replaced.
 */
function upstreamFetch(inner: typeof globalThis.fetch, connection: ConnectionConfig, bearer: Bearer | undefined): typeof globalThis.fetch {
  return async (input, init) => {
    if (!bearer?.active) return inner(input, init);
    const headers = new Headers(init?.headers);
    const sent = /^Bearer\s+(\S+)$/i.exec(headers.get("authorization") ?? "")?.[1];
    if (sent === undefined) return inner(input, init);
    const token = await bearer.current();
    headers.set("authorization", `Bearer ${token}`);
    const response = await inner(input, { ...init, headers });
    // Only a request that can be sent again is retried: every MCP POST body is a string.
    if (response.status !== 401 || (init?.body !== undefined && init?.body !== null && typeof init.body !== "string")) return response;
    let challenge: AuthChallenge | undefined;
    await challengeRecorder(async () => response, (c) => (challenge = c))(input, init);
    await response.body?.cancel().catch(() => {});
    let next: string;
    try {
      next = await bearer.rejected(token, challenge);
    } catch (error) {
      const problem = error instanceof SubsError ? error : new SubsError("failed", `${connection.id}: ${error instanceof Error ? error.message : String(error)}`, { cause: error });
      throw new CredentialRejected(problem);
    }
    headers.set("authorization", `Bearer ${next}`);
    return inner(input, { ...init, headers });
  };
}

/**
 * Gives every request a signal of its own, and ends a cancelled request's HTTP exchange.
 *
 * A signal of its own, aborted with the transport's signal (one for the whole session) and, while
 * opening, with the opening's: fetch (undici) adds a listener to the signal it is given and
 * removes it only when the request is garbage-collected, so the transport's one signal collected
 * thousands (MaxListenersExceededWarning on stderr, and memory). Nor is it made by
 * AbortSignal.any(), which on Node 20 leaves one dependant per call in each source's set for as
 * long as the source lives (src/http/deadline.ts): anySignal follows the sources instead and lets
 * go of them once the request is over, its answer's body read to its end, failed or cancelled (an
 * SSE answer is over when its stream is, not when fetch resolves), or the request failed.
 *
 * A cancelled request: its HTTP exchange ends once the cancellation is sent. A server stops a
 * request it is told is cancelled and sends no answer (MCP "Cancellation": receivers SHOULD NOT
 * respond), and the SDK's transport reads the POST's SSE answer until it ends, so without this
 * every call a client gave up on (or that timed out) would hold a socket here and a request at
 * the server for as long as the session lasts. Each POST the SDK's transport sends carries one
 * message; a request's is tracked by its id until its answer's body ends.
 */
function perRequestSignals(inner: typeof globalThis.fetch, opening: () => AbortSignal | undefined): typeof globalThis.fetch {
  const exchanges = new Map<RequestId, AnySignal>();
  return async (input, init) => {
    const message = typeof init?.body === "string" ? sentMessage(init.body) : undefined;
    const own = anySignal([init?.signal, opening()]);
    const id = message?.request;
    if (id !== undefined) exchanges.set(id, own);
    const forget = () => {
      if (id !== undefined && exchanges.get(id) === own) exchanges.delete(id);
    };
    const over = () => {
      forget();
      own.release();
    };
    let response: Response;
    try {
      response = await inner(input, { ...init, signal: own.signal });
    } catch (error) {
      over();
      throw error;
    } finally {
      const cancelled = message?.cancels;
      if (cancelled !== undefined) {
        exchanges.get(cancelled)?.abort(new Error("the request was cancelled"));
        exchanges.delete(cancelled);
      }
    }
    if (!response.ok) forget();
    return untilEnd(response, over);
  };
}

/** The request id a POST body carries, or the id a cancellation names; nothing for anything else. */
function sentMessage(body: string): { request?: RequestId; cancels?: RequestId } | undefined {
  let message: unknown;
  try {
    message = JSON.parse(body);
  } catch {
    return undefined;
  }
  if (message === null || typeof message !== "object" || Array.isArray(message)) return undefined;
  const { method, id, params } = message as { method?: unknown; id?: unknown; params?: { requestId?: unknown } };
  const isId = (value: unknown): value is RequestId => typeof value === "string" || typeof value === "number";
  if (method === "notifications/cancelled") return isId(params?.requestId) ? { cancels: params.requestId } : undefined;
  return typeof method === "string" && isId(id) ? { request: id } : undefined;
}

/** Statuses whose answer has no body (Fetch standard, "null body status"). */
const NULL_BODY = new Set([101, 103, 204, 205, 304]);

/** `response` as it is, calling `ended` once its body is read to its end, fails, or is cancelled (at once when it has none). */
function untilEnd(response: Response, ended: () => void): Response {
  if (response.body === null || NULL_BODY.has(response.status)) {
    ended();
    return response;
  }
  const reader = response.body.getReader();
  const body = new ReadableStream<Uint8Array>({
    async pull(controller) {
      try {
        const { done, value } = await reader.read();
        if (done) {
          ended();
          controller.close();
        } else controller.enqueue(value);
      } catch (error) {
        ended();
        controller.error(error);
      }
    },
    cancel(reason) {
      ended();
      return reader.cancel(reason);
    },
  });
  const tracked = new Response(body, { status: response.status, statusText: response.statusText, headers: response.headers });
  Object.defineProperty(tracked, "url", { value: response.url });
  return tracked;
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
