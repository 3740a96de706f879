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
import { createHash, randomBytes, randomUUID, timingSafeEqual } from "node:crypto";
import { lookup } from "node:dns/promises";
import { constants } from "node:fs";
import { open, type FileHandle } from "node:fs/promises";
import { createServer, type IncomingMessage, type ServerResponse } from "node:http";
import { isIP } from "node:net";
import path from "node:path";
import { StreamableHTTPServerTransport } from "@modelcontextprotocol/sdk/server/streamableHttp.js";
import { isInitializeRequest } from "@modelcontextprotocol/sdk/types.js";
import type { Context } from "../context.ts";
import { failed, usage } from "../errors.ts";
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
};

export const MCP_PATH = "/mcp";
/** What the SDK's own transport reads at most (requestBody.js, DEFAULT_MAX_REQUEST_BODY_SIZE). */
const MAX_BODY_BYTES = 4 * 1024 * 1024;
const CLOSE_GRACE_MS = 5000;
/** Host and Origin hostnames a loopback server answers to (URL.hostname spelling). */
const LOOPBACK_HOSTNAMES = new Set(["localhost", "127.0.0.1", "[::1]"]);

type Live = {
  transport: StreamableHTTPServerTransport;
  session: SessionServer;
  ended?: Promise<void>;
};

/**
 * Serves MCP over Streamable HTTP until ctx.signal aborts, then closes every session (each
 * SessionServer's close()), stops listening and resolves. Rejects only when it cannot start.
 */
export async function serveHttp(ctx: Context, options: ServeHttpOptions): Promise<void> {
  const host = checkLoopback(options.host);
  const port = checkPort(options.port);
  const bindAddress = await loopbackAddress(host);
  if (ctx.signal.aborted) return;

  const token = randomBytes(32).toString("base64url");
  const expected = digest(token);
  if (options.tokenFile !== undefined) await writeTokenFile(path.resolve(ctx.cwd, options.tokenFile), token);

  const sessions = new Map<string, Live>();
  /** Every session that has a transport, initialized or not yet: shutdown closes them all. */
  const all = new Set<Live>();
  let stopping = false;

  const endSession = (live: Live): Promise<void> => {
    live.ended ??= (async () => {
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

  const startSession = async (req: IncomingMessage, res: ServerResponse, body: unknown) => {
    let session: SessionServer;
    try {
      session = await options.newSession();
    } catch (error) {
      ctx.stderr.write(`subs: could not start a session: ${error instanceof Error ? error.message : String(error)}\n`);
      return jsonRpcError(res, 500, -32603, "could not start the session");
    }
    const transport = new StreamableHTTPServerTransport({
      sessionIdGenerator: () => randomUUID(),
      onsessioninitialized: (id) => {
        sessions.set(id, live);
      },
    });
    const live: Live = { transport, session };
    // Set before connect: Protocol.connect chains its own onclose after this one. Runs on DELETE,
    // on shutdown, and when the session's server closes itself.
    transport.onclose = () => void endSession(live);
    if (stopping) {
      await endSession(live);
      return jsonRpcError(res, 503, -32000, "the server is shutting down");
    }
    all.add(live);
    try {
      await session.server.connect(transport);
      await transport.handleRequest(req, res, body);
    } finally {
      // The transport refused the initialize (a bad protocol version, a batch): no session began.
      if (transport.sessionId === undefined || !sessions.has(transport.sessionId)) await transport.close().then(() => endSession(live));
    }
  };

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
    if (stopping) return jsonRpcError(res, 503, -32000, "the server is shutting down");
    if (req.method !== "POST" && req.method !== "GET" && req.method !== "DELETE") {
      return jsonRpcError(res, 405, -32000, "Method not allowed", { Allow: "GET, POST, DELETE" });
    }
    const sessionId = req.headers["mcp-session-id"];
    if (typeof sessionId === "string") {
      const live = sessions.get(sessionId);
      // transports, "Session Management": an id the server does not know (ended, or never
      // issued) is 404, so the client starts a new session.
      if (!live) return jsonRpcError(res, 404, -32001, "Session not found");
      return live.transport.handleRequest(req, res);
    }
    if (req.method !== "POST") return jsonRpcError(res, 400, -32000, "Bad Request: Mcp-Session-Id header is required");
    const read = await readBody(req);
    if (read === "too large") return jsonRpcError(res, 413, -32000, `Payload too large: at most ${MAX_BODY_BYTES} bytes`);
    let body: unknown;
    try {
      body = JSON.parse(read);
    } catch {
      return jsonRpcError(res, 400, -32700, "Parse error");
    }
    if (!isInitializeRequest(body)) return jsonRpcError(res, 400, -32000, "Bad Request: Mcp-Session-Id header is required");
    return startSession(req, res, body);
  };

  const server = createServer((req, res) => {
    // Each request is its own promise: a session whose handler never returns holds only its own
    // requests, never the others'.
    handle(req, res).catch((error: unknown) => {
      ctx.stderr.write(`subs: a request failed: ${error instanceof Error ? error.message : String(error)}\n`);
      if (!res.headersSent) jsonRpcError(res, 500, -32603, "Internal error");
      else res.destroy();
    });
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

/**
 * Written with O_NOFOLLOW and mode 0600, and chmod-ed in case the file existed with a wider mode:
 * the token is a credential to every connection this server holds.
 */
async function writeTokenFile(file: string, token: string): Promise<void> {
  let handle: FileHandle | undefined;
  try {
    handle = await open(file, constants.O_WRONLY | constants.O_CREAT | constants.O_TRUNC | constants.O_NOFOLLOW, 0o600);
    await handle.chmod(0o600);
    await handle.writeFile(`${token}\n`, "utf8");
  } catch (error) {
    throw usage(`--token-file ${file}: cannot write it (${(error as NodeJS.ErrnoException).code ?? String(error)})`, { hint: "give a writable path, not a symbolic link" });
  } finally {
    await handle?.close();
  }
}

async function readBody(req: IncomingMessage): Promise<string | "too large"> {
  const declared = Number(req.headers["content-length"]);
  if (Number.isFinite(declared) && declared > MAX_BODY_BYTES) return "too large";
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of req as AsyncIterable<Buffer>) {
    size += chunk.length;
    if (size > MAX_BODY_BYTES) return "too large";
    chunks.push(chunk);
  }
  return Buffer.concat(chunks).toString("utf8");
}

function jsonRpcError(res: ServerResponse, status: number, code: number, message: string, headers: Record<string, string> = {}): void {
  res.writeHead(status, { "Content-Type": "application/json", ...headers });
  res.end(JSON.stringify({ jsonrpc: "2.0", error: { code, message }, id: null }));
}

function plain(res: ServerResponse, status: number, text: string): void {
  res.writeHead(status, { "Content-Type": "text/plain; charset=utf-8" });
  res.end(`${text}\n`);
}

