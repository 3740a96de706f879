// Streamable HTTP for the MCP servers subs serves (`--http [HOST:]PORT` on `subs agent serve` and
// `subs mcp proxy`): the sessions are http-sessions.ts's; this is the loopback server in front of
// them. Plain node:http: express is not a runtime dependency.
//
// A local HTTP server is reachable by every program on the machine and, through DNS rebinding, by
// web pages in its browser (transports, "Security Warning"). So: loopback only; Host and Origin
// must name loopback (403 otherwise); and a bearer token made at start must come with every
// request (401 otherwise), which a page can neither read nor guess.
//
// Every program on the machine can also open connections and, with the token, sessions and calls:
// each is bounded (HttpLimits; docs/serve.md, "Limits of --http"), so no client can hold this
// server's memory, descriptors or upstream connections without end.
import { createHash, randomBytes, timingSafeEqual } from "node:crypto";
import { lookup } from "node:dns/promises";
import { constants } from "node:fs";
import { lstat, open, rename, unlink, type FileHandle } from "node:fs/promises";
import { createServer, type IncomingMessage, type ServerResponse } from "node:http";
import { isIP } from "node:net";
import path from "node:path";
import type { Context } from "../context.ts";
import { failed, SubsError, usage } from "../errors.ts";
import { checkLoopback, checkPort } from "./address.ts";
import { connectionsCheckingInterval, guardConnections } from "./connections.ts";
import { jsonRpcError, McpSessions, type SessionLimits } from "./http-sessions.ts";
import type { SessionFactory } from "./session.ts";

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
export type HttpLimits = SessionLimits & {
  /**
   * Open TCP connections. A new one past it ends the oldest connection that has not yet carried a
   * request with the token (else it is itself refused), so connections nobody authenticates
   * cannot keep out the client that holds the token (connections.ts).
   */
  maxConnections: number;
  /**
   * To receive a request's headers (node:http `headersTimeout`); also the time a new connection
   * has to send a whole first request, or one with the token, before it is closed.
   */
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
const CLOSE_GRACE_MS = 5000;
/** `host[:port]`: a name or IPv4 address, or an IPv6 address in brackets, and an optional port. */
const HOST_FORM = /^(?:[A-Za-z0-9.-]+|\[[0-9A-Fa-f:.]+\])(?::\d{1,5})?$/;
/** Host and Origin hostnames a loopback server answers to (URL.hostname spelling). */
const LOOPBACK_HOSTNAMES = new Set(["localhost", "127.0.0.1", "[::1]"]);

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

  const token = await serverToken(ctx, options.tokenFile);
  const expected = digest(token);

  const mcp = new McpSessions(ctx, limits, options.newSession);

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
    connections.trust(req);
    return mcp.handle(req, res);
  };

  const server = createServer(
    {
      headersTimeout: limits.headersTimeoutMs,
      requestTimeout: limits.requestTimeoutMs,
      connectionsCheckingInterval: connectionsCheckingInterval(limits),
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
  // The oldest connection that never sent the token gives way at the cap; one that sends no
  // whole request within the headers timeout is closed.
  const connections = guardConnections(server, { maxConnections: limits.maxConnections, preAuthMs: limits.headersTimeoutMs });

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
  const closed = new Promise<void>((resolve) => server.close(() => resolve()));
  server.closeIdleConnections();
  await mcp.stop(options.closeGraceMs ?? CLOSE_GRACE_MS);
  // Event streams and requests a stuck session still holds open.
  server.closeAllConnections();
  await closed;
}

/** A new token, or with --token-file the one it holds when subs can trust it (heldToken). */
async function serverToken(ctx: Context, tokenFile: string | undefined): Promise<string> {
  const token = randomBytes(32).toString("base64url");
  if (tokenFile === undefined) return token;
  const file = path.resolve(ctx.cwd, tokenFile);
  const held = await heldToken(file);
  if (held.token !== undefined) {
    ctx.stderr.write(`subs: kept the token already in ${tokenFile}: clients that read it there keep working\n`);
    return held.token;
  }
  await writeTokenFile(file, token);
  ctx.stderr.write(`subs: wrote a new token to ${tokenFile}${held.why ? `: ${held.why}` : ""}\n`);
  return token;
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

function plain(res: ServerResponse, status: number, text: string): void {
  res.writeHead(status, { "Content-Type": "text/plain; charset=utf-8" });
  res.end(`${text}\n`);
}

