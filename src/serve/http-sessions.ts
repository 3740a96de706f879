// The MCP sessions of one Streamable HTTP endpoint: one SDK StreamableHTTPServerTransport per
// client session; an `initialize` without a session id starts one (SessionFactory), requests
// carrying a known id go to it, DELETE ends it, an unknown id is 404 (MCP spec 2025-11-25,
// basic/transports, "Session Management"). What a client can hold of them is bounded
// (HttpLimits; docs/serve.md, "Limits of --http"). Whoever serves the endpoint (serveHttp on
// loopback, the deployment for its agents) checks the caller first, then hands the request here.
// With a SessionRegistry (the deployment's replicas) a session is also kept outside the process,
// and any process holding the registry continues it; without one it lives in its process only.
import { randomUUID } from "node:crypto";
import type { IncomingMessage, ServerResponse } from "node:http";
import { StreamableHTTPServerTransport } from "@modelcontextprotocol/sdk/server/streamableHttp.js";
import { isInitializeRequest, type JSONRPCMessage, type RequestId } from "@modelcontextprotocol/sdk/types.js";
import type { Context } from "../context.ts";
import type { SessionFactory, SessionServer } from "./session.ts";

/** What one client, or every program on the machine together, can hold of the server (docs/serve.md, "Limits of --http"). */
export type SessionLimits = {
  /** Sessions open or starting; one more `initialize` is answered 503 with Retry-After. */
  maxSessions: number;
  /**
   * A session with no request in progress and no GET stream open for this long is ended; its id
   * then gets 404 and the client starts a new one (transports, "Session Management").
   */
  idleTimeoutMs: number;
  /** JSON-RPC requests in progress on one session; past it a request is answered a JSON-RPC error. */
  maxCalls: number;
};

/** A session as kept for other processes: enough to continue it there (SessionRegistry). */
export type StoredSession = {
  id: string;
  owner: string | undefined;
  /** The client's initialize request as it sent it: replayed to rebuild the session elsewhere. */
  initialize: unknown;
  /** SessionServer.snapshot's answer. */
  snapshot: unknown;
};

/**
 * Where the sessions of an endpoint served by several processes are kept, so that any of them
 * continues a session another started (the deployment's replicas). Without one (`subs agent serve
 * --http`), a session lives in its process only.
 */
export type SessionRegistry = {
  /**
   * Whether `owner` may start one more session, asked before the session's server is made (its
   * tools fetched); a refusal is the answer to the initialize. The deployment's is its per-token cap.
   */
  admit?(owner: string | undefined): Promise<SessionRefusal | undefined>;
  /**
   * Called before the initialize answer leaves, so the client's next request finds it anywhere. A
   * refusal (the owner's cap met by a session started meanwhile elsewhere, or the owner gone) is
   * the answer instead, and the session ends unstarted.
   */
  save(session: StoredSession): Promise<SessionRefusal | undefined>;
  /** The session if it was neither ended nor idle past the timeout anywhere; counts as a use of it. */
  use(id: string): Promise<StoredSession | undefined>;
  /** Ends it everywhere if it was used nowhere for the idle timeout; whether it did. */
  endIfIdle(id: string): Promise<boolean>;
  /** Ends it everywhere (DELETE). */
  end(id: string): Promise<void>;
};

/** Why a registry does not let a session start: the HTTP status and message the initialize is answered with. */
export type SessionRefusal = { status: number; message: string; headers?: Record<string, string> };

/** A session this process holds (McpSessions.held). */
export type HeldSession = {
  id: string;
  owner: string | undefined;
  /** A request in progress or the GET stream open. */
  busy: boolean;
};

/** How long McpSessions.end waits for a session's open answers to end cleanly before cutting them. */
const END_GRACE_MS = 1000;

/** What the SDK's own transport reads at most (requestBody.js, DEFAULT_MAX_REQUEST_BODY_SIZE). */
export const MAX_BODY_BYTES = 4 * 1024 * 1024;

type Live = {
  transport: StreamableHTTPServerTransport;
  session: SessionServer;
  ended?: Promise<void>;
  /** HTTP requests of this session still open: POSTs not yet answered, the GET stream. */
  open: number;
  /** Their responses, closed with the session when it is ended from outside (McpSessions.end). */
  responses: Set<ServerResponse>;
  /** JSON-RPC requests in those POSTs. */
  calls: number;
  /** Each of those requests, by id, with the ids of every request its POST carries. */
  inProgress: Map<RequestId, RequestId[]>;
  /** Armed while nothing is open; ends the session when it fires. */
  idle?: NodeJS.Timeout;
  idleSince: number;
  /** Who started it (handle's `owner`); only the same caller may continue it. */
  owner: string | undefined;
};

export class McpSessions {
  private readonly sessions = new Map<string, Live>();
  /** Every session that has a transport, initialized or not yet: stop() closes them all. */
  private readonly all = new Set<Live>();
  /** Sessions whose SessionFactory has not answered yet: they count against maxSessions too. */
  private starting = 0;
  /** Sessions being rebuilt from the registry, by id: concurrent requests wait on the same. */
  private readonly resuming = new Map<string, Promise<Live | undefined>>();
  private stopping = false;
  private streamsEnded = false;

  constructor(
    private readonly ctx: Pick<Context, "stderr" | "now">,
    private readonly limits: SessionLimits,
    private readonly newSession: SessionFactory,
    private readonly registry?: SessionRegistry,
  ) {}

  /**
   * One request to the endpoint, from a caller already checked. `owner` names that caller (the
   * deployment: its API token's id): a session is continued only by the caller that started it.
   */
  async handle(req: IncomingMessage, res: ServerResponse, owner?: string): Promise<void> {
    if (this.stopping || (this.streamsEnded && req.method === "GET")) return jsonRpcError(res, 503, -32000, "the server is shutting down", { "Retry-After": "1" });
    if (req.method !== "POST" && req.method !== "GET" && req.method !== "DELETE") {
      return jsonRpcError(res, 405, -32000, "Method not allowed", { Allow: "GET, POST, DELETE" });
    }
    const sessionId = req.headers["mcp-session-id"];
    if (typeof sessionId === "string") {
      let live = this.sessions.get(sessionId);
      if (this.registry) {
        // Ended (DELETE) or idle past the timeout on another process: ended here too. A registry
        // that does not answer is no answer about the session: its error goes to the caller (the
        // deployment says 503, retry), and the session lives on.
        const stored = await this.registry.use(sessionId);
        if (!stored || stored.owner !== owner) {
          if (live && !stored) void live.transport.close();
          return jsonRpcError(res, 404, -32001, "Session not found");
        }
        live ??= await this.resume(stored);
        if (live && req.method === "DELETE") await this.registry.end(sessionId);
      }
      // transports, "Session Management": an id the server does not know (ended, expired or
      // never issued) is 404, so the client starts a new session. Another caller's session is
      // answered the same, so an id is never confirmed to anyone but its owner (MCP "Security
      // Best Practices", "Session Hijacking": bind the session to the user).
      if (!live || live.owner !== owner) return jsonRpcError(res, 404, -32001, "Session not found");
      return this.onSession(live, req, res);
    }
    if (req.method !== "POST") return jsonRpcError(res, 400, -32000, "Bad Request: Mcp-Session-Id header is required");
    const read = await readJson(req, res);
    if (!read) return;
    const { body } = read;
    if (!isInitializeRequest(body)) return jsonRpcError(res, 400, -32000, "Bad Request: Mcp-Session-Id header is required");
    return this.startSession(req, res, body, owner);
  }

  /** Refuses new requests, then closes every session, waiting up to `graceMs` for them. */
  /**
   * Ends every session's GET stream, the session kept: its client reconnects (transports, "Listening
   * for Messages from the Server"), and a GET that comes here meanwhile is 503, to be retried.
   */
  endStreams(): void {
    this.streamsEnded = true;
    for (const live of this.all) live.transport.closeStandaloneSSEStream();
  }

  async stop(graceMs: number): Promise<void> {
    this.stopping = true;
    await stopSessions([...this.all], (live) => this.endSession(live), graceMs, this.ctx);
  }

  /** The sessions this process holds (started here or continued from another process). */
  held(): HeldSession[] {
    return [...this.sessions].map(([id, live]) => ({ id, owner: live.owner, busy: live.open > 0 }));
  }

  /**
   * Ends these sessions here, from outside their requests (their token revoked, or the session
   * ended on another process): each one's GET stream and requests in progress are closed now, not
   * at their next request, and its upstream connections with it. Its id is then unknown here (404).
   */
  async end(ids: Iterable<string>): Promise<void> {
    const ending: Array<Promise<void>> = [];
    for (const id of ids) {
      const live = this.sessions.get(id);
      if (!live) continue;
      ending.push(
        (async () => {
          const open = [...live.responses];
          const closed = Promise.all(open.map((res) => (res.closed ? undefined : new Promise((resolve) => res.once("close", resolve)))));
          await live.transport.close().catch(() => {});
          // The transport ends each stream it knows, and its answer then ends cleanly; one still
          // open after END_GRACE_MS (a request the transport had not yet given a stream) is cut.
          let timer: NodeJS.Timeout | undefined;
          await Promise.race([closed, new Promise((resolve) => (timer = setTimeout(resolve, END_GRACE_MS)))]);
          clearTimeout(timer);
          for (const res of open) if (!res.closed) res.destroy();
          await this.endSession(live);
        })(),
      );
    }
    await Promise.all(ending);
  }

  private endSession(live: Live): Promise<void> {
    live.ended ??= (async () => {
      clearTimeout(live.idle);
      this.all.delete(live);
      if (live.transport.sessionId !== undefined) this.sessions.delete(live.transport.sessionId);
      try {
        await live.session.close();
      } catch (error) {
        this.ctx.stderr.write(`subs: a session did not close cleanly: ${error instanceof Error ? error.message : String(error)}\n`);
      }
    })();
    return live.ended;
  }

  private armIdle(live: Live): void {
    clearTimeout(live.idle);
    live.idleSince = this.ctx.now();
    live.idle = setTimeout(async () => {
      if (live.open > 0 || live.ended) return;
      // Used on another process meanwhile: only this process's copy ends; the registry still has it.
      const id = live.transport.sessionId;
      const idle = !this.registry || id === undefined || (await this.registry.endIfIdle(id).catch(() => true));
      if (idle) this.ctx.stderr.write(`subs: ended a session idle for ${seconds(this.limits.idleTimeoutMs)} (its id now gets 404: its client starts a new session)\n`);
      // Closing the transport ends the session (its onclose); its id is then unknown: 404.
      void live.transport.close();
    }, this.limits.idleTimeoutMs);
    live.idle.unref();
  }

  /**
   * Counts `res` as open on `live` until it closes, with the ids of the JSON-RPC requests it
   * carries. One that closes before its answers went out had its client go away: no answer can
   * reach that client any more (no event store, so no resumption: transports, "Resumability and
   * Redelivery"), so each request still running is cancelled as if the client had sent
   * notifications/cancelled (MCP "Cancellation"); the session's server passes that on upstream.
   */
  private hold(live: Live, res: ServerResponse, ids: RequestId[]): void {
    live.open++;
    live.responses.add(res);
    live.calls += ids.length;
    for (const id of ids) live.inProgress.set(id, ids);
    clearTimeout(live.idle);
    res.once("close", () => {
      live.open--;
      live.responses.delete(res);
      live.calls -= ids.length;
      for (const id of ids) if (live.inProgress.get(id) === ids) live.inProgress.delete(id);
      if (!res.writableFinished && !live.ended) {
        for (const requestId of ids) {
          const cancel: JSONRPCMessage = { jsonrpc: "2.0", method: "notifications/cancelled", params: { requestId, reason: "the client closed the connection before the answer" } };
          live.transport.onmessage?.(cancel);
          forget(live, requestId);
        }
      }
      if (live.open === 0 && !live.ended) this.armIdle(live);
    });
  }

  /**
   * A request the client cancelled gets no answer (MCP "Cancellation": the receiver SHOULD NOT
   * respond), so the SDK's transport would keep the POST that carried it open, and the session
   * would count it in progress, until the client hung up. Its POST is ended now, without an
   * answer, when it carried only that request; a batch's stream carries the others' answers, so
   * there the cancelled one is answered an error instead.
   */
  private cancelled(live: Live, requestId: RequestId): void {
    const group = live.inProgress.get(requestId);
    if (!group) return;
    if (group.length === 1) live.transport.closeSSEStream(requestId);
    forget(live, requestId);
  }

  /** Seconds until a session may end on its own: the soonest idle one's expiry, else a whole idle timeout. */
  private retryAfter(): string {
    const now = this.ctx.now();
    let soonest = this.limits.idleTimeoutMs;
    for (const live of this.all) if (live.open === 0) soonest = Math.min(soonest, live.idleSince + this.limits.idleTimeoutMs - now);
    return String(Math.max(1, Math.ceil(soonest / 1000)));
  }

  private async startSession(req: IncomingMessage, res: ServerResponse, body: unknown, owner: string | undefined): Promise<void> {
    const { limits } = this;
    if (this.all.size + this.starting >= limits.maxSessions) {
      return jsonRpcError(res, 503, -32000, `too many sessions (at most ${limits.maxSessions}): end one (DELETE) or retry later`, { "Retry-After": this.retryAfter() });
    }
    let session: SessionServer;
    this.starting++;
    try {
      // Before the tools are fetched: a caller at its cap costs no upstream request. A registry
      // that does not answer is the caller's error (the deployment says 503, retry).
      const refused = await this.registry?.admit?.(owner);
      if (refused) return jsonRpcError(res, refused.status, -32000, refused.message, refused.headers);
      try {
        session = await this.newSession(undefined, owner).open();
      } catch (error) {
        this.ctx.stderr.write(`subs: could not start a session: ${error instanceof Error ? error.message : String(error)}\n`);
        return jsonRpcError(res, 500, -32603, "could not start the session");
      }
    } finally {
      this.starting--;
    }
    const id = randomUUID();
    if (this.registry) {
      // Kept before the initialize answer leaves: the client's next request may reach another process.
      let refused: SessionRefusal | undefined;
      try {
        refused = await this.registry.save({ id, owner, initialize: body, snapshot: await session.snapshot?.() });
      } catch (error) {
        await session.close().catch(() => {});
        this.ctx.stderr.write(`subs: could not start a session: ${error instanceof Error ? error.message : String(error)}\n`);
        return jsonRpcError(res, 500, -32603, "could not start the session");
      }
      if (refused) {
        await session.close().catch(() => {});
        return jsonRpcError(res, refused.status, -32000, refused.message, refused.headers);
      }
    }
    const transport = new StreamableHTTPServerTransport({
      sessionIdGenerator: () => id,
      onsessioninitialized: (id) => {
        this.sessions.set(id, live);
      },
    });
    const live: Live = { transport, session, open: 0, responses: new Set(), calls: 0, inProgress: new Map(), idleSince: this.ctx.now(), owner };
    // Set before connect: Protocol.connect chains its own onclose after this one. Runs on DELETE,
    // on shutdown, at the idle timeout, and when the session's server closes itself.
    transport.onclose = () => void this.endSession(live);
    if (this.stopping) {
      await this.endSession(live);
      return jsonRpcError(res, 503, -32000, "the server is shutting down");
    }
    this.all.add(live);
    this.hold(live, res, []);
    try {
      await session.server.connect(transport);
      await transport.handleRequest(req, res, body);
    } finally {
      // The transport refused the initialize (a bad protocol version, a batch): no session began.
      if (transport.sessionId === undefined || !this.sessions.has(transport.sessionId)) {
        await this.registry?.end(id).catch(() => {});
        await transport.close().then(() => this.endSession(live));
      }
    }
  }

  /** A session another process started, rebuilt here; undefined (the client gets 404) when it cannot be. */
  private resume(stored: StoredSession): Promise<Live | undefined> {
    let pending = this.resuming.get(stored.id);
    if (!pending) {
      pending = this.rebuild(stored).finally(() => this.resuming.delete(stored.id));
      this.resuming.set(stored.id, pending);
    }
    return pending;
  }

  /**
   * The SDK's transport begins a session only on an initialize request: a new transport whose
   * generator gives the stored id is connected to a new server of the session (its tools from the
   * stored snapshot), and the client's stored initialize is replayed to it, its answer discarded.
   * Both then hold what they held in the process that started it: the session id, the negotiated
   * protocol version, the client's capabilities.
   */
  private async rebuild(stored: StoredSession): Promise<Live | undefined> {
    if (this.stopping || this.all.size + this.starting >= this.limits.maxSessions) return undefined;
    let session: SessionServer;
    this.starting++;
    try {
      session = await this.newSession(stored.snapshot, stored.owner).open();
    } catch (error) {
      this.ctx.stderr.write(`subs: could not continue a session started elsewhere: ${error instanceof Error ? error.message : String(error)}\n`);
      return undefined;
    } finally {
      this.starting--;
    }
    const transport = new StreamableHTTPServerTransport({
      sessionIdGenerator: () => stored.id,
      onsessioninitialized: (id) => {
        this.sessions.set(id, live);
      },
    });
    const live: Live = { transport, session, open: 0, responses: new Set(), calls: 0, inProgress: new Map(), idleSince: this.ctx.now(), owner: stored.owner };
    transport.onclose = () => void this.endSession(live);
    this.all.add(live);
    try {
      await session.server.connect(transport);
      // The Node transport wraps the Web-standard one, which takes a Request: the replay needs no socket.
      const web = (transport as unknown as { _webStandardTransport?: { handleRequest(r: Request, o: { parsedBody: unknown }): Promise<Response> } })._webStandardTransport;
      if (!web) throw new Error("this MCP SDK's transport cannot be primed");
      const replay = new Request("http://localhost/", {
        method: "POST",
        headers: { "content-type": "application/json", accept: "application/json, text/event-stream" },
        body: JSON.stringify(stored.initialize),
      });
      await (await web.handleRequest(replay, { parsedBody: stored.initialize })).text();
    } catch (error) {
      this.ctx.stderr.write(`subs: could not continue a session started elsewhere: ${error instanceof Error ? error.message : String(error)}\n`);
    }
    if (transport.sessionId !== stored.id || this.sessions.get(stored.id) !== live) {
      await transport.close().then(() => this.endSession(live));
      return undefined;
    }
    this.armIdle(live);
    return live;
  }

  /** A request on an open session. A POST's body is read here, to know the requests it carries. */
  private async onSession(live: Live, req: IncomingMessage, res: ServerResponse): Promise<void> {
    if (req.method !== "POST") {
      this.hold(live, res, []);
      return live.transport.handleRequest(req, res);
    }
    const read = await readJson(req, res);
    if (!read) return;
    const { body } = read;
    const ids = requestIds(body);
    if (ids.length > 0 && live.calls + ids.length > this.limits.maxCalls) {
      // Each request answered (MCP transports: a POST of requests gets their responses), so the
      // client sees which call failed and why.
      const message = `too many requests in progress on this session (at most ${this.limits.maxCalls}): wait for an answer, or cancel a request`;
      const answers = ids.map((id) => ({ jsonrpc: "2.0", id, error: { code: -32000, message } }));
      res.writeHead(200, { "Content-Type": "application/json" });
      res.end(JSON.stringify(Array.isArray(body) ? answers : answers[0]));
      return;
    }
    this.hold(live, res, ids);
    await live.transport.handleRequest(req, res, body);
    for (const requestId of cancellations(body)) this.cancelled(live, requestId);
  }
}

/**
 * An answer the transport can no longer deliver releases what it keeps for the request
 * (webStandardStreamableHttp.js `send`: a missing stream drops the request's entries); the
 * aborted handler sends none of its own.
 */
function forget(live: Live, requestId: RequestId): void {
  live.transport.send({ jsonrpc: "2.0", id: requestId, error: { code: -32800, message: "Request cancelled" } }).catch(() => {});
}

async function stopSessions(lives: Live[], endSession: (live: Live) => Promise<void>, graceMs: number, ctx: Pick<Context, "stderr">): Promise<void> {
  const ends = lives.map(async (live) => {
    await live.transport.close().catch(() => {});
    await endSession(live);
  });
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<"late">((resolve) => (timer = setTimeout(() => resolve("late"), graceMs)));
  const outcome = await Promise.race([Promise.allSettled(ends), late]);
  clearTimeout(timer);
  if (outcome === "late") ctx.stderr.write(`subs: stopped without waiting longer for a session that did not close within ${graceMs} ms\n`);
}

/** The ids of the JSON-RPC requests in a POST's body (one message, or a batch of them). */
function requestIds(body: unknown): RequestId[] {
  const ids: RequestId[] = [];
  for (const message of Array.isArray(body) ? body : [body]) {
    if (message === null || typeof message !== "object") continue;
    const { method, id } = message as { method?: unknown; id?: unknown };
    if (typeof method === "string" && (typeof id === "string" || typeof id === "number")) ids.push(id);
  }
  return ids;
}

/** The ids that the notifications/cancelled in a POST's body name. */
function cancellations(body: unknown): RequestId[] {
  const ids: RequestId[] = [];
  for (const message of Array.isArray(body) ? body : [body]) {
    if (message === null || typeof message !== "object") continue;
    const { method, params } = message as { method?: unknown; params?: { requestId?: unknown } };
    const id = params?.requestId;
    if (method === "notifications/cancelled" && (typeof id === "string" || typeof id === "number")) ids.push(id);
  }
  return ids;
}

const seconds = (ms: number) => `${Math.round(ms / 100) / 10} s`;

/**
 * A POST's JSON body, or undefined once answered (413 past MAX_BODY_BYTES, 400 when it is not
 * JSON) or when the connection closed first (the client left, or the request timeout ended it).
 */
async function readJson(req: IncomingMessage, res: ServerResponse): Promise<{ body: unknown } | undefined> {
  const tooLarge = () => jsonRpcError(res, 413, -32000, `Payload too large: at most ${MAX_BODY_BYTES} bytes`);
  const declared = Number(req.headers["content-length"]);
  if (Number.isFinite(declared) && declared > MAX_BODY_BYTES) return void tooLarge();
  const chunks: Buffer[] = [];
  let size = 0;
  try {
    for await (const chunk of req as AsyncIterable<Buffer>) {
      size += chunk.length;
      if (size > MAX_BODY_BYTES) break;
      chunks.push(chunk);
    }
  } catch {
    return undefined;
  }
  if (size > MAX_BODY_BYTES) return void tooLarge();
  try {
    return { body: JSON.parse(Buffer.concat(chunks).toString("utf8")) };
  } catch {
    return void jsonRpcError(res, 400, -32700, "Parse error");
  }
}

export function jsonRpcError(res: ServerResponse, status: number, code: number, message: string, headers: Record<string, string> = {}): void {
  res.writeHead(status, { "Content-Type": "application/json", ...headers });
  res.end(JSON.stringify({ jsonrpc: "2.0", error: { code, message }, id: null }));
}
