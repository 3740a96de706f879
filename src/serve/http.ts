// Streamable HTTP for the MCP servers subs serves (`--http [HOST:]PORT` on `subs agent serve` and
// `subs mcp proxy`, issue 16). One SDK StreamableHTTPServerTransport per client session: an
// `initialize` without a session id starts one (SessionFactory), requests carrying a known id go to
// it, DELETE ends it, an unknown id is 404 (MCP spec 2025-11-25, basic/transports, "Session
// Management"). Plain node:http: express is not a runtime dependency.
//
// A local HTTP server is reachable by every program on the machine and, through DNS rebinding, by
// web pages in its browser (transports, "Security Warning"). So: loopback only; Host and Origin
// must name loopback (403 otherwise); and a bearer token made at start must come with every
// request (401 otherwise), which a page can neither read nor guess.
//
// Every program on the machine can also open connections and, with the token, sessions and calls:
// each is bounded (HttpLimits; docs/serve.md, "Limits of --http"), so no client can hold this
// server's memory, descriptors or upstream connections without end.
import { createHash, randomBytes, randomUUID, timingSafeEqual } from "node:crypto";
import { lookup } from "node:dns/promises";
import { constants } from "node:fs";
import { lstat, open, rename, unlink, type FileHandle } from "node:fs/promises";
import { createServer, type IncomingMessage, type ServerResponse } from "node:http";
import { isIP, type Socket } from "node:net";
import path from "node:path";
import { StreamableHTTPServerTransport } from "@modelcontextprotocol/sdk/server/streamableHttp.js";
import { isInitializeRequest, type JSONRPCMessage, type RequestId } from "@modelcontextprotocol/sdk/types.js";
import type { Context } from "../context.ts";
import { failed, SubsError, usage } from "../errors.ts";
import { checkLoopback, checkPort } from "./address.ts";
import type { SessionFactory, SessionServer } from "./session.ts";

export type ServeHttpOptions = {
  /** 127.0.0.1, ::1 or localhost; anything else is refused (usage, exit 2). */
  host: string;
  /** 0 picks a free port; the URL printed on stderr says which. */
  port: number;
  /**
   * Where to write the bearer token (mode 0600, relative to ctx.cwd) instead of printing it, so it
   * stays out of terminal scrollback and logs; a client's configuration can read it from there.
   */
  tokenFile?: string;
  newSession: SessionFactory;
  /** Called once listening, with the endpoint's URL (tests and scripts with port 0). */
  onListening?: (url: URL) => void;
  /** How long a session's close() may take at shutdown before serveHttp stops waiting for it. */
  closeGraceMs?: number;
  /** Each one not given is DEFAULT_LIMITS'. */
  limits?: Partial<HttpLimits>;
};

/** What one client, or every program on the machine together, can hold of the server (docs/serve.md, "Limits of --http"). */
export type HttpLimits = {
  /** Sessions open or starting; one more `initialize` is answered 503 with Retry-After. */
  maxSessions: number;
  /**
   * A session with no request in progress and no GET stream open for this long is ended; its id
   * then gets 404 and the client starts a new one (transports, "Session Management").
   */
  idleTimeoutMs: number;
  /** JSON-RPC requests in progress on one session; past it a request is answered a JSON-RPC error. */
  maxCalls: number;
  /**
   * Open TCP connections. A new one past it ends the oldest connection that has not yet carried a
   * request with the token (else it is itself refused), so connections nobody authenticates
   * cannot keep out the client that holds the token.
   */
  maxConnections: number;
  /** To receive a request's headers (node:http `headersTimeout`). */
  headersTimeoutMs: number;
  /**
   * To receive a whole request, headers and body (node:http `requestTimeout`). Only the request:
   * the answer, a long call's SSE stream or the GET stream, is not cut.
   */
  requestTimeoutMs: number;
};

/**
 * With these, `subs mcp proxy` stays within macOS's default of 256 descriptors: 100 client
 * connections (32 sessions' GET streams and calls) and as many to the upstream, plus Node's own.
 */
export const DEFAULT_LIMITS: HttpLimits = {
  maxSessions: 32,
  idleTimeoutMs: 300_000,
  maxCalls: 64,
  maxConnections: 100,
  headersTimeoutMs: 10_000,
  requestTimeoutMs: 30_000,
};

export const MCP_PATH = "/mcp";
/** What the SDK's own transport reads at most (requestBody.js, DEFAULT_MAX_REQUEST_BODY_SIZE). */
const MAX_BODY_BYTES = 4 * 1024 * 1024;
const CLOSE_GRACE_MS = 5000;
/** `host[:port]`: a name or IPv4 address, or an IPv6 address in brackets, and an optional port. */
const HOST_FORM = /^(?:[A-Za-z0-9.-]+|\[[0-9A-Fa-f:.]+\])(?::\d{1,5})?$/;
/** Host and Origin hostnames a loopback server answers to (URL.hostname spelling). */
const LOOPBACK_HOSTNAMES = new Set(["localhost", "127.0.0.1", "[::1]"]);

type Live = {
  transport: StreamableHTTPServerTransport;
  session: SessionServer;
  ended?: Promise<void>;
  /** HTTP requests of this session still open: POSTs not yet answered, the GET stream. */
  open: number;
  /** JSON-RPC requests in those POSTs. */
  calls: number;
  /** Each of those requests, by id, with the ids of every request its POST carries. */
  inProgress: Map<RequestId, RequestId[]>;
  /** Armed while nothing is open; ends the session when it fires. */
  idle?: NodeJS.Timeout;
  idleSince: number;
};

/**
 * Serves MCP over Streamable HTTP until ctx.signal aborts, then closes every session (each
 * SessionServer's close()), stops listening and resolves. Rejects only when it cannot start.
 */
export async function serveHttp(ctx: Context, options: ServeHttpOptions): Promise<void> {
  const host = checkLoopback(options.host);
  const port = checkPort(options.port);
  const limits: HttpLimits = { ...DEFAULT_LIMITS, ...options.limits };
  const bindAddress = await loopbackAddress(host);
  if (ctx.signal.aborted) return;

  let token = randomBytes(32).toString("base64url");
  if (options.tokenFile !== undefined) {
    const file = path.resolve(ctx.cwd, options.tokenFile);
    const held = await heldToken(file);
    if (held.token !== undefined) {
      token = held.token;
      ctx.stderr.write(`subs: kept the token already in ${options.tokenFile}: clients that read it there keep working\n`);
    } else {
      await writeTokenFile(file, token);
      ctx.stderr.write(`subs: wrote a new token to ${options.tokenFile}${held.why ? `: ${held.why}` : ""}\n`);
    }
  }
  const expected = digest(token);

  const sessions = new Map<string, Live>();
  /** Every session that has a transport, initialized or not yet: shutdown closes them all. */
  const all = new Set<Live>();
  /** Sessions whose SessionFactory has not answered yet: they count against maxSessions too. */
  let starting = 0;
  let stopping = false;

  const endSession = (live: Live): Promise<void> => {
    live.ended ??= (async () => {
      clearTimeout(live.idle);
      all.delete(live);
      if (live.transport.sessionId !== undefined) sessions.delete(live.transport.sessionId);
      try {
        await live.session.close();
      } catch (error) {
        ctx.stderr.write(`subs: a session did not close cleanly: ${error instanceof Error ? error.message : String(error)}\n`);
      }
    })();
    return live.ended;
  };

  const armIdle = (live: Live) => {
    clearTimeout(live.idle);
    live.idleSince = ctx.now();
    live.idle = setTimeout(() => {
      if (live.open > 0 || live.ended) return;
      ctx.stderr.write(`subs: ended a session idle for ${seconds(limits.idleTimeoutMs)} (its id now gets 404: its client starts a new session)\n`);
      // Closing the transport ends the session (its onclose); its id is then unknown: 404.
      void live.transport.close();
    }, limits.idleTimeoutMs);
    live.idle.unref();
  };

  /**
   * Counts `res` as open on `live` until it closes, with the ids of the JSON-RPC requests it
   * carries. One that closes before its answers went out had its client go away: no answer can
   * reach that client any more (no event store, so no resumption: transports, "Resumability and
   * Redelivery"), so each request still running is cancelled as if the client had sent
   * notifications/cancelled (MCP "Cancellation"); the session's server passes that on upstream.
   */
  const hold = (live: Live, res: ServerResponse, ids: RequestId[]) => {
    live.open++;
    live.calls += ids.length;
    for (const id of ids) live.inProgress.set(id, ids);
    clearTimeout(live.idle);
    res.once("close", () => {
      live.open--;
      live.calls -= ids.length;
      for (const id of ids) if (live.inProgress.get(id) === ids) live.inProgress.delete(id);
      if (!res.writableFinished && !live.ended) {
        for (const requestId of ids) {
          const cancel: JSONRPCMessage = { jsonrpc: "2.0", method: "notifications/cancelled", params: { requestId, reason: "the client closed the connection before the answer" } };
          live.transport.onmessage?.(cancel);
          forget(live, requestId);
        }
      }
      if (live.open === 0 && !live.ended) armIdle(live);
    });
  };

  /**
   * A request the client cancelled gets no answer (MCP "Cancellation": the receiver SHOULD NOT
   * respond), so the SDK's transport would keep the POST that carried it open, and the session
   * would count it in progress, until the client hung up. Its POST is ended now, without an
   * answer, when it carried only that request; a batch's stream carries the others' answers, so
   * there the cancelled one is answered an error instead.
   */
  const cancelled = (live: Live, requestId: RequestId) => {
    const group = live.inProgress.get(requestId);
    if (!group) return;
    if (group.length === 1) live.transport.closeSSEStream(requestId);
    forget(live, requestId);
  };

  /**
   * An answer the transport can no longer deliver releases what it keeps for the request
   * (webStandardStreamableHttp.js `send`: a missing stream drops the request's entries); the
   * aborted handler sends none of its own.
   */
  const forget = (live: Live, requestId: RequestId) => {
    live.transport.send({ jsonrpc: "2.0", id: requestId, error: { code: -32800, message: "Request cancelled" } }).catch(() => {});
  };

  /** Seconds until a session may end on its own: the soonest idle one's expiry, else a whole idle timeout. */
  const retryAfter = () => {
    const now = ctx.now();
    let soonest = limits.idleTimeoutMs;
    for (const live of all) if (live.open === 0) soonest = Math.min(soonest, live.idleSince + limits.idleTimeoutMs - now);
    return String(Math.max(1, Math.ceil(soonest / 1000)));
  };

  const startSession = async (req: IncomingMessage, res: ServerResponse, body: unknown) => {
    if (all.size + starting >= limits.maxSessions) {
      return jsonRpcError(res, 503, -32000, `too many sessions (at most ${limits.maxSessions}): end one (DELETE) or retry later`, { "Retry-After": retryAfter() });
    }
    let session: SessionServer;
    starting++;
    try {
      session = await options.newSession().open();
    } catch (error) {
      ctx.stderr.write(`subs: could not start a session: ${error instanceof Error ? error.message : String(error)}\n`);
      return jsonRpcError(res, 500, -32603, "could not start the session");
    } finally {
      starting--;
    }
    const transport = new StreamableHTTPServerTransport({
      sessionIdGenerator: () => randomUUID(),
      onsessioninitialized: (id) => {
        sessions.set(id, live);
      },
    });
    const live: Live = { transport, session, open: 0, calls: 0, inProgress: new Map(), idleSince: ctx.now() };
    // Set before connect: Protocol.connect chains its own onclose after this one. Runs on DELETE,
    // on shutdown, at the idle timeout, and when the session's server closes itself.
    transport.onclose = () => void endSession(live);
    if (stopping) {
      await endSession(live);
      return jsonRpcError(res, 503, -32000, "the server is shutting down");
    }
    all.add(live);
    hold(live, res, []);
    try {
      await session.server.connect(transport);
      await transport.handleRequest(req, res, body);
    } finally {
      // The transport refused the initialize (a bad protocol version, a batch): no session began.
      if (transport.sessionId === undefined || !sessions.has(transport.sessionId)) await transport.close().then(() => endSession(live));
    }
  };

  /** A request on an open session. A POST's body is read here, to know the requests it carries. */
  const onSession = async (live: Live, req: IncomingMessage, res: ServerResponse) => {
    if (req.method !== "POST") {
      hold(live, res, []);
      return live.transport.handleRequest(req, res);
    }
    const read = await readJson(req, res);
    if (!read) return;
    const { body } = read;
    const ids = requestIds(body);
    if (ids.length > 0 && live.calls + ids.length > limits.maxCalls) {
      // Each request answered (MCP transports: a POST of requests gets their responses), so the
      // client sees which call failed and why.
      const message = `too many requests in progress on this session (at most ${limits.maxCalls}): wait for an answer, or cancel a request`;
      const answers = ids.map((id) => ({ jsonrpc: "2.0", id, error: { code: -32000, message } }));
      res.writeHead(200, { "Content-Type": "application/json" });
      res.end(JSON.stringify(Array.isArray(body) ? answers : answers[0]));
      return;
    }
    hold(live, res, ids);
    await live.transport.handleRequest(req, res, body);
    for (const requestId of cancellations(body)) cancelled(live, requestId);
  };

  /** Sockets open, oldest first, and those that have carried a request with the token. */
  const connections = new Set<Socket>();
  const trusted = new WeakSet<Socket>();

  const handle = async (req: IncomingMessage, res: ServerResponse) => {
    const url = new URL(req.url ?? "/", "http://localhost");
    if (url.pathname !== MCP_PATH) return plain(res, 404, `not found: the MCP endpoint is ${MCP_PATH}`);
    // DNS rebinding (transports, "Security Warning": validate Origin, 403 when invalid; the
    // conformance suite's dns-rebinding-protection sends a foreign Host and Origin together).
    const rebinding = foreignHostOrOrigin(req);
    if (rebinding) return jsonRpcError(res, 403, -32000, rebinding);
    if (!authorized(req.headers.authorization, expected)) {
      // RFC 6750 §3: a request without credentials gets no error code; a wrong one invalid_token.
      const challenge = req.headers.authorization === undefined ? `Bearer realm="subs"` : `Bearer realm="subs", error="invalid_token"`;
      return jsonRpcError(res, 401, -32000, "Unauthorized: send the token subs printed at start as `Authorization: Bearer <token>`", { "WWW-Authenticate": challenge });
    }
    trusted.add(req.socket);
    if (stopping) return jsonRpcError(res, 503, -32000, "the server is shutting down");
    if (req.method !== "POST" && req.method !== "GET" && req.method !== "DELETE") {
      return jsonRpcError(res, 405, -32000, "Method not allowed", { Allow: "GET, POST, DELETE" });
    }
    const sessionId = req.headers["mcp-session-id"];
    if (typeof sessionId === "string") {
      const live = sessions.get(sessionId);
      // transports, "Session Management": an id the server does not know (ended, expired or
      // never issued) is 404, so the client starts a new session.
      if (!live) return jsonRpcError(res, 404, -32001, "Session not found");
      return onSession(live, req, res);
    }
    if (req.method !== "POST") return jsonRpcError(res, 400, -32000, "Bad Request: Mcp-Session-Id header is required");
    const read = await readJson(req, res);
    if (!read) return;
    const { body } = read;
    if (!isInitializeRequest(body)) return jsonRpcError(res, 400, -32000, "Bad Request: Mcp-Session-Id header is required");
    return startSession(req, res, body);
  };

  const server = createServer(
    {
      headersTimeout: limits.headersTimeoutMs,
      requestTimeout: limits.requestTimeoutMs,
      // How often node:http looks for connections past those two (its default, 30 s, would let a
      // half-open connection live three times the headers timeout).
      connectionsCheckingInterval: Math.max(100, Math.min(limits.headersTimeoutMs, limits.requestTimeoutMs) / 4),
    },
    (req, res) => {
      // Each request is its own promise: a session whose handler never returns holds only its own
      // requests, never the others'.
      handle(req, res).catch((error: unknown) => {
        ctx.stderr.write(`subs: a request failed: ${error instanceof Error ? error.message : String(error)}\n`);
        if (!res.headersSent) jsonRpcError(res, 500, -32603, "Internal error");
        else res.destroy();
      });
    },
  );
  // node:http's own maxConnections refuses the newest connection, the token holder's as readily
  // as the hundredth one a local program left half-open; here the oldest untrusted one goes.
  server.on("connection", (socket: Socket) => {
    connections.add(socket);
    socket.once("close", () => connections.delete(socket));
    if (connections.size <= limits.maxConnections) return;
    let victim = socket;
    for (const held of connections) {
      if (!trusted.has(held)) {
        victim = held;
        break;
      }
    }
    connections.delete(victim);
    victim.destroy();
  });

  await new Promise<void>((resolve, reject) => {
    const onError = (error: NodeJS.ErrnoException) => {
      const where = `${bindAddress.includes(":") ? `[${bindAddress}]` : bindAddress}:${port}`;
      reject(failed(`cannot listen on ${where}: ${error.code === "EADDRINUSE" ? "the port is in use" : (error.code ?? error.message)}`, { hint: "choose another port, or 0 for a free one" }));
    };
    server.once("error", onError);
    server.listen(port, bindAddress, () => {
      server.off("error", onError);
      resolve();
    });
  });

  const address = server.address();
  const boundPort = address !== null && typeof address === "object" ? address.port : port;
  const endpoint = new URL(`http://${bindAddress.includes(":") ? `[${bindAddress}]` : bindAddress}:${boundPort}${MCP_PATH}`);
  ctx.stderr.write(`subs: serving MCP on ${endpoint.href}\n`);
  if (options.tokenFile !== undefined) {
    ctx.stderr.write(`subs: clients must send "Authorization: Bearer <token>" with the token in ${options.tokenFile}\n`);
  } else {
    // Printed once, deliberately: the person starting the server needs it for their client. It is
    // this server's own credential, valid until it stops, not an upstream one.
    ctx.stderr.write(`subs: clients must send this header: Authorization: Bearer ${token}\n`);
  }
  // From here on, any other line that quoted it (an error echoing a request) is scrubbed.
  ctx.secrets?.add(token);
  options.onListening?.(endpoint);

  await new Promise<void>((resolve) => {
    if (ctx.signal.aborted) resolve();
    else ctx.signal.addEventListener("abort", () => resolve(), { once: true });
  });
  stopping = true;
  const closed = new Promise<void>((resolve) => server.close(() => resolve()));
  server.closeIdleConnections();
  await stopSessions([...all], endSession, options.closeGraceMs ?? CLOSE_GRACE_MS, ctx);
  // Event streams and requests a stuck session still holds open.
  server.closeAllConnections();
  await closed;
}

async function stopSessions(lives: Live[], endSession: (live: Live) => Promise<void>, graceMs: number, ctx: Context): Promise<void> {
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

/** The address to bind for a loopback host; `localhost` must resolve to loopback too. */
async function loopbackAddress(host: string): Promise<string> {
  if (isIP(host) !== 0) return host;
  let address: string;
  try {
    address = (await lookup(host)).address;
  } catch (error) {
    throw failed(`cannot resolve ${host}: ${(error as NodeJS.ErrnoException).code ?? String(error)}`, { hint: "use --http 127.0.0.1:PORT" });
  }
  if (!(address === "::1" || /^127\./.test(address))) throw usage(`${host} resolves to ${address}, not a loopback address`, { hint: "use --http 127.0.0.1:PORT" });
  return address;
}

/** Why a request's Host or Origin is not this loopback server's, or undefined when both are. */
function foreignHostOrOrigin(req: IncomingMessage): string | undefined {
  const hostHeader = req.headers.host;
  if (!hostHeader) return "Forbidden: missing Host header";
  // A Host is `host[:port]` (RFC 9110 §7.2): anything else (`evil.example@localhost`, which URL
  // parsing would read as user info before a loopback host) is not read as a host at all.
  if (!HOST_FORM.test(hostHeader)) return "Forbidden: the Host header is not a host and port";
  if (!LOOPBACK_HOSTNAMES.has(hostnameOf(`http://${hostHeader}`) ?? "")) return "Forbidden: the Host header does not name this loopback server";
  const origin = req.headers.origin;
  if (origin !== undefined) {
    const url = safeUrl(origin);
    if (!url || (url.protocol !== "http:" && url.protocol !== "https:") || !LOOPBACK_HOSTNAMES.has(url.hostname)) return "Forbidden: the Origin is not a loopback origin";
  }
  return undefined;
}

function safeUrl(text: string): URL | undefined {
  try {
    return new URL(text);
  } catch {
    return undefined;
  }
}

const hostnameOf = (text: string) => safeUrl(text)?.hostname.toLowerCase();

const digest = (text: string) => createHash("sha256").update(text, "utf8").digest();

/** Constant time over equal-length digests, so neither the token's length nor a prefix leaks. */
function authorized(header: string | undefined, expected: Buffer): boolean {
  const match = header === undefined ? null : /^Bearer +(\S+) *$/i.exec(header);
  return match !== null && timingSafeEqual(digest(match[1]!), expected);
}

/** What subs writes to a token file: 32 random bytes, base64url, and a newline. */
const TOKEN_FILE_TEXT = /^([A-Za-z0-9_-]{43})\n?$/;

/**
 * The token a --token-file already holds, kept across restarts so that a client registered once
 * (reading the file through a header helper or a variable) keeps working. Kept only when the file
 * is what subs itself leaves: a regular file of this user's, no access for group or others (else
 * another user may have read it: a new token makes the old one worthless), holding one token in
 * the form subs writes. Otherwise `why` says what a new token replaces. A symbolic link, or
 * anything but a regular file, is refused by writeTokenFile, as before.
 */
async function heldToken(file: string): Promise<{ token?: string; why?: string }> {
  let before;
  try {
    before = await lstat(file);
  } catch {
    return {};
  }
  if (!before.isFile()) return {};
  let handle: FileHandle | undefined;
  try {
    // O_NOFOLLOW and the same inode as lstat saw: what is read is the file that was checked, not
    // something swapped in between. O_NONBLOCK: a FIFO put there meanwhile cannot hold the open.
    handle = await open(file, constants.O_RDONLY | constants.O_NOFOLLOW | constants.O_NONBLOCK);
    const stat = await handle.stat();
    if (!stat.isFile() || stat.ino !== before.ino || stat.dev !== before.dev) return {};
    const uid = process.getuid?.();
    if (uid !== undefined && stat.uid !== uid) return { why: "the old one belongs to another user" };
    if ((stat.mode & 0o077) !== 0) return { why: `the old one was open to group or others (mode ${(stat.mode & 0o777).toString(8).padStart(4, "0")}) and may have leaked` };
    if (stat.size > 64) return { why: "the old file did not hold a token subs writes" };
    const match = TOKEN_FILE_TEXT.exec(await handle.readFile("utf8"));
    return match ? { token: match[1]! } : { why: "the old file did not hold a token subs writes" };
  } catch {
    return {};
  } finally {
    await handle?.close().catch(() => {});
  }
}

/**
 * A new file, mode 0600, renamed into place: a program that opened the file that was there before
 * (readable by others, say) keeps reading what it held through its descriptor, never this token,
 * which is a credential to every connection this server holds. Written under a random name in the
 * same directory (O_EXCL, so nothing already there is written through) and renamed over the path.
 * A symbolic link at the path is refused, as before: rename would replace the link rather than
 * write through it, but a link there says the token is meant to go somewhere else.
 */
async function writeTokenFile(file: string, token: string): Promise<void> {
  const refused = (why: string) => usage(`--token-file ${file}: ${why}`, { hint: "give the path of a regular file, or of a new one, in a directory you can write" });
  const code = (error: unknown) => (error as NodeJS.ErrnoException).code ?? String(error);
  try {
    const existing = await lstat(file);
    if (existing.isSymbolicLink()) throw refused("it is a symbolic link; subs does not write the token through one");
    if (!existing.isFile()) throw refused("it is not a regular file");
  } catch (error) {
    if (error instanceof SubsError) throw error;
    if (code(error) !== "ENOENT") throw refused(`cannot check it (${code(error)})`);
  }
  const fresh = path.join(path.dirname(file), `.${path.basename(file)}.${randomBytes(8).toString("hex")}`);
  let handle: FileHandle | undefined;
  try {
    handle = await open(fresh, constants.O_WRONLY | constants.O_CREAT | constants.O_EXCL | constants.O_NOFOLLOW, 0o600);
    // open's mode is narrowed by the umask: exactly 0600, whatever the umask.
    await handle.chmod(0o600);
    await handle.writeFile(`${token}\n`, "utf8");
    await handle.close();
    handle = undefined;
    await rename(fresh, file);
  } catch (error) {
    await handle?.close().catch(() => {});
    await unlink(fresh).catch(() => {});
    throw refused(`cannot write it (${code(error)})`);
  }
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

function jsonRpcError(res: ServerResponse, status: number, code: number, message: string, headers: Record<string, string> = {}): void {
  res.writeHead(status, { "Content-Type": "application/json", ...headers });
  res.end(JSON.stringify({ jsonrpc: "2.0", error: { code, message }, id: null }));
}

function plain(res: ServerResponse, status: number, text: string): void {
  res.writeHead(status, { "Content-Type": "text/plain; charset=utf-8" });
  res.end(`${text}\n`);
}

