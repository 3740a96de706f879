// serveHttp (src/serve/http.ts): the Streamable HTTP side of `subs agent serve` and
// `subs mcp proxy`, driven by the MCP SDK's own Client over StreamableHTTPClientTransport against a
// SessionFactory built here from the SDK's low-level Server.
import assert from "node:assert/strict";
import { fstatSync, mkdirSync, mkdtempSync, openSync, readdirSync, readFileSync, readSync, closeSync, chmodSync, lstatSync, statSync, symlinkSync, writeFileSync } from "node:fs";
import { request } from "node:http";
import { tmpdir } from "node:os";
import path from "node:path";
import { describe, it } from "node:test";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { Server } from "@modelcontextprotocol/sdk/server/index.js";
import { CallToolRequestSchema, ListToolsRequestSchema, type CallToolResult } from "@modelcontextprotocol/sdk/types.js";
import { exitCodeFor, SubsError } from "../src/errors.ts";
import { parseHttpAddress } from "../src/serve/address.ts";
import { serveHttp, type ServeHttpOptions } from "../src/serve/http.ts";
import type { SessionFactory, SessionServer } from "../src/serve/session.ts";
import { testContext } from "./support/cli.ts";
import { halfOpen, rawCall } from "./support/serve-client.ts";
import { waitFor as waitUntil, within } from "./support/wait.ts";

/**
 * Sessions numbered from 1. Tools: `whoami` (the session's number), `remember`/`recall` (state of
 * this session only), `hang` (answers only when the test releases it, or stops when cancelled).
 */
function numberedSessions(options: { stuckClose?: (n: number) => boolean } = {}) {
  let count = 0;
  let cancelled = 0;
  let hanging = 0;
  const closed: number[] = [];
  let release: () => void = () => {};
  const released = new Promise<void>((resolve) => (release = resolve));
  const open = async (): Promise<SessionServer> => {
    const n = ++count;
    let remembered = "";
    const server = new Server({ name: "numbered", version: "1.0.0" }, { capabilities: { tools: {} } });
    server.setRequestHandler(ListToolsRequestSchema, async () => ({
      tools: ["whoami", "remember", "recall", "hang"].map((name) => ({ name, inputSchema: { type: "object" as const } })),
    }));
    server.setRequestHandler(CallToolRequestSchema, async (req, extra): Promise<CallToolResult> => {
      const text = (t: string): CallToolResult => ({ content: [{ type: "text", text: t }] });
      switch (req.params.name) {
        case "whoami":
          return text(`session ${n}`);
        case "remember":
          remembered = String(req.params.arguments?.value);
          return text("ok");
        case "recall":
          return text(remembered);
        case "hang":
          hanging++;
          await Promise.race([released, new Promise((resolve) => extra.signal.addEventListener("abort", resolve, { once: true }))]);
          if (extra.signal.aborted) cancelled++;
          return text("released");
        default:
          return { content: [{ type: "text", text: "unknown tool" }], isError: true };
      }
    });
    return {
      server,
      close: async () => {
        closed.push(n);
        if (options.stuckClose?.(n)) await new Promise(() => {});
      },
    };
  };
  const factory: SessionFactory = () => ({ open });
  return { factory, closed, release: () => release(), started: () => count, cancelled: () => cancelled, hanging: () => hanging };
}

type Running = {
  url: URL;
  token: string;
  stderr: () => string;
  stop: () => Promise<void>;
  done: Promise<void>;
};

async function start(newSession: SessionFactory, extra: Partial<ServeHttpOptions> = {}, cwd = tmpdir()): Promise<Running> {
  const controller = new AbortController();
  const t = testContext({ cwd, signal: controller.signal });
  let listening!: (url: URL) => void;
  const ready = new Promise<URL>((resolve) => (listening = resolve));
  const done = serveHttp(t.ctx, { host: "127.0.0.1", port: 0, newSession, onListening: listening, ...extra });
  const url = await Promise.race([ready, done.then(() => Promise.reject(new Error(`serveHttp ended before listening: ${t.stderr()}`)))]);
  const token = /Authorization: Bearer ([A-Za-z0-9_-]{20,})/.exec(t.stderr())?.[1] ?? "";
  return {
    url,
    token,
    stderr: t.stderr,
    done,
    stop: async () => {
      controller.abort();
      await done;
    },
  };
}

async function connect(server: Pick<Running, "url" | "token">, token = server.token): Promise<{ client: Client; transport: StreamableHTTPClientTransport }> {
  const transport = new StreamableHTTPClientTransport(server.url, { requestInit: { headers: { Authorization: `Bearer ${token}` } } });
  const client = new Client({ name: "serve-http-test", version: "1.0.0" });
  await client.connect(transport);
  return { client, transport };
}

/** How the SDK's client fails against a wrong token: our 401 (src/serve/http.ts), with its message. */
const REFUSED_TOKEN = { code: 401, message: /^Streamable HTTP error: Error POSTing to endpoint: .*"Unauthorized: send the token subs printed at start as `Authorization: Bearer <token>`"/ };

const textOf = (result: unknown) => ((result as CallToolResult).content[0] as { text: string }).text;

const initialize = JSON.stringify({
  jsonrpc: "2.0",
  id: 1,
  method: "initialize",
  params: { protocolVersion: "2025-11-25", capabilities: {}, clientInfo: { name: "raw", version: "1.0.0" } },
});

/** A raw request, with headers fetch would not let a test set (Host). */
function raw(url: URL, options: { method?: string; headers?: Record<string, string>; body?: string }): Promise<{ status: number; headers: Record<string, string | string[] | undefined>; body: string }> {
  return new Promise((resolve, reject) => {
    const req = request(url, { method: options.method ?? "POST", headers: { "Content-Type": "application/json", Accept: "application/json, text/event-stream", ...options.headers } }, (res) => {
      let body = "";
      res.setEncoding("utf8");
      res.on("data", (chunk: string) => (body += chunk));
      res.on("end", () => resolve({ status: res.statusCode ?? 0, headers: res.headers, body }));
    });
    req.on("error", reject);
    req.end(options.body);
  });
}


const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

async function waitFor(condition: () => boolean, what: string, timeoutMs = 5000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!condition()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await sleep(20);
  }
}

/** A session begun with a raw initialize and initialized; its id. */
async function rawSession(server: Pick<Running, "url" | "token">): Promise<string> {
  const auth = { Authorization: `Bearer ${server.token}` };
  const started = await raw(server.url, { body: initialize, headers: auth });
  assert.equal(started.status, 200, started.body);
  const id = String(started.headers["mcp-session-id"]);
  const initialized = await raw(server.url, { body: JSON.stringify({ jsonrpc: "2.0", method: "notifications/initialized" }), headers: { ...auth, "Mcp-Session-Id": id } });
  assert.equal(initialized.status, 202, initialized.body);
  return id;
}

describe("serveHttp", () => {
  it("gives two concurrent clients independent sessions, and a stuck call in one holds up neither the other nor its own session's other calls", async () => {
    const sessions = numberedSessions();
    const server = await start(sessions.factory);
    try {
      const [a, b] = await Promise.all([connect(server), connect(server)]);
      assert.notEqual(a.transport.sessionId, undefined);
      assert.notEqual(a.transport.sessionId, b.transport.sessionId);
      const [whoA, whoB] = await Promise.all([a.client.callTool({ name: "whoami" }), b.client.callTool({ name: "whoami" })]);
      assert.notEqual(textOf(whoA), textOf(whoB));
      assert.match(textOf(whoA), /^session [12]$/);

      await a.client.callTool({ name: "remember", arguments: { value: "for a only" } });
      assert.equal(textOf(await a.client.callTool({ name: "recall" })), "for a only");
      assert.equal(textOf(await b.client.callTool({ name: "recall" })), "");

      const stuck = a.client.callTool({ name: "hang" });
      // 20 calls while `hang` waits: all answered.
      const others = await Promise.all(Array.from({ length: 10 }, () => [b.client.callTool({ name: "whoami" }), a.client.callTool({ name: "recall" })]).flat());
      assert.equal(others.length, 20);
      assert.equal(textOf(others[0]), textOf(whoB));
      assert.equal(textOf(others[1]), "for a only");
      sessions.release();
      assert.equal(textOf(await stuck), "released");
      assert.equal(sessions.started(), 2);
      await Promise.all([a.client.close(), b.client.close()]);
    } finally {
      await server.stop();
    }
  });

  it("answers 401 with WWW-Authenticate: Bearer without the token or with a wrong one, and the SDK client cannot connect", async () => {
    const sessions = numberedSessions();
    const server = await start(sessions.factory);
    try {
      assert.ok(server.token.length >= 40, "a 32-byte random token, base64url");
      const missing = await raw(server.url, { body: initialize });
      assert.equal(missing.status, 401);
      assert.match(String(missing.headers["www-authenticate"]), /^Bearer\b/);
      assert.doesNotMatch(String(missing.headers["www-authenticate"]), /error=/);

      const wrong = await raw(server.url, { body: initialize, headers: { Authorization: `Bearer ${server.token.slice(0, -1)}x` } });
      assert.equal(wrong.status, 401);
      assert.match(String(wrong.headers["www-authenticate"]), /^Bearer .*error="invalid_token"/);
      // A longer value that starts with the token is not the token.
      assert.equal((await raw(server.url, { body: initialize, headers: { Authorization: `Bearer ${server.token}x` } })).status, 401);
      assert.equal((await raw(server.url, { body: initialize, headers: { Authorization: `Basic ${server.token}` } })).status, 401);
      assert.ok(!wrong.body.includes(server.token), "the answer never quotes the token");

      await assert.rejects(connect(server, "not-the-token"), REFUSED_TOKEN);
      assert.equal(sessions.started(), 0, "no session is started for a request without the token");

      const right = await raw(server.url, { body: initialize, headers: { Authorization: `Bearer ${server.token}` } });
      assert.equal(right.status, 200, right.body);
      assert.equal(sessions.started(), 1);
    } finally {
      await server.stop();
    }
  });

  it("refuses a foreign Host or Origin with 403 before anything else (DNS rebinding), and accepts loopback ones", async () => {
    const sessions = numberedSessions();
    const server = await start(sessions.factory);
    const auth = { Authorization: `Bearer ${server.token}` };
    try {
      // What the conformance suite's dns-rebinding-protection sends.
      const rebound = await raw(server.url, { body: initialize, headers: { ...auth, Host: "evil.example.com", Origin: "http://evil.example.com" } });
      assert.equal(rebound.status, 403);
      assert.equal((await raw(server.url, { body: initialize, headers: { ...auth, Host: `evil.example.com:${server.url.port}` } })).status, 403);
      assert.equal((await raw(server.url, { body: initialize, headers: { ...auth, Origin: "http://evil.example.com" } })).status, 403);
      assert.equal((await raw(server.url, { body: initialize, headers: { ...auth, Origin: "null" } })).status, 403);
      assert.equal((await raw(server.url, { body: initialize, headers: { ...auth, Origin: `http://127.0.0.1.evil.example.com:${server.url.port}` } })).status, 403);
      // Without the token too: the rebinding check comes first.
      assert.equal((await raw(server.url, { body: initialize, headers: { Host: "evil.example.com" } })).status, 403);
      assert.equal(sessions.started(), 0);

      for (const hostname of ["localhost", "127.0.0.1", "[::1]"]) {
        const ok = await raw(server.url, { body: initialize, headers: { ...auth, Host: `${hostname}:${server.url.port}`, Origin: `http://${hostname}:${server.url.port}` } });
        assert.equal(ok.status, 200, `${hostname}: ${ok.body}`);
      }
      assert.equal(sessions.started(), 3);
    } finally {
      await server.stop();
    }
  });

  it("refuses to bind anything but loopback (usage, exit 2), and reads [HOST:]PORT", async () => {
    const t = testContext({ cwd: tmpdir() });
    for (const host of ["0.0.0.0", "192.168.1.10", "::", "example.com"]) {
      const error = await serveHttp(t.ctx, { host, port: 0, newSession: numberedSessions().factory }).then(
        () => assert.fail(`${host} was accepted`),
        (e: unknown) => e,
      );
      assert.ok(error instanceof SubsError, String(error));
      assert.equal(exitCodeFor(error), 2);
      assert.match(error.message, /loopback/);
    }
    assert.equal(t.stderr(), "", "nothing was served");

    assert.deepEqual(parseHttpAddress("8931"), { host: "127.0.0.1", port: 8931 });
    assert.deepEqual(parseHttpAddress("127.0.0.1:0"), { host: "127.0.0.1", port: 0 });
    assert.deepEqual(parseHttpAddress("localhost:8931"), { host: "localhost", port: 8931 });
    assert.deepEqual(parseHttpAddress("[::1]:8931"), { host: "::1", port: 8931 });
    for (const bad of ["0.0.0.0:8931", "192.168.1.10:80", "[::]:80", "::1:80", "example.com:80", "8931x", "70000", "127.0.0.1:", ":80"]) {
      assert.throws(() => parseHttpAddress(bad), (e: unknown) => e instanceof SubsError && exitCodeFor(e) === 2, bad);
    }
  });

  it("ends a session on DELETE (its close() runs once), and answers 404 for its id afterwards and for an id never issued", async () => {
    const sessions = numberedSessions();
    const server = await start(sessions.factory);
    try {
      const a = await connect(server);
      const b = await connect(server);
      const idA = a.transport.sessionId!;
      await a.transport.terminateSession();
      assert.deepEqual(sessions.closed, [1]);

      const auth = { Authorization: `Bearer ${server.token}` };
      const ping = JSON.stringify({ jsonrpc: "2.0", id: 2, method: "ping" });
      const gone = await raw(server.url, { body: ping, headers: { ...auth, "Mcp-Session-Id": idA } });
      assert.equal(gone.status, 404);
      assert.equal((await raw(server.url, { body: ping, headers: { ...auth, "Mcp-Session-Id": "never-issued" } })).status, 404);
      assert.equal((await raw(server.url, { method: "DELETE", headers: { ...auth, "Mcp-Session-Id": idA } })).status, 404);
      // Without a session id, only an initialize may come.
      assert.equal((await raw(server.url, { body: ping, headers: auth })).status, 400);
      assert.equal((await raw(server.url, { method: "GET", headers: auth })).status, 400);

      assert.equal(textOf(await b.client.callTool({ name: "whoami" })), "session 2", "the other session goes on");
      assert.deepEqual(sessions.closed, [1]);
      await b.client.close();
    } finally {
      await server.stop();
    }
  });

  it("ends on the signal: every session closed (one in the middle of a call), no longer listening, resolved", async () => {
    const sessions = numberedSessions();
    const server = await start(sessions.factory);
    const a = await connect(server);
    const b = await connect(server);
    const pending = a.client.callTool({ name: "hang" }).then(
      () => "answered",
      () => "ended",
    );
    await b.client.callTool({ name: "whoami" });
    await server.stop();
    assert.deepEqual([...sessions.closed].sort(), [1, 2]);
    await assert.rejects(raw(server.url, { body: initialize, headers: { Authorization: `Bearer ${server.token}` } }), /ECONNREFUSED/);
    sessions.release();
    await Promise.all([a.client.close(), b.client.close()]);
    assert.equal(await pending, "ended");
  });

  it("still ends on the signal when a session's close() never returns", async () => {
    const sessions = numberedSessions({ stuckClose: (n) => n === 1 });
    const server = await start(sessions.factory, { closeGraceMs: 300 });
    const a = await connect(server);
    const b = await connect(server);
    // That close() never returns: a stop that waited for it would never end.
    await within(server.stop(), "the stop, past the stuck session's grace");
    assert.deepEqual([...sessions.closed].sort(), [1, 2]);
    assert.match(server.stderr(), /did not close within 300 ms/);
    await Promise.all([a.client.close(), b.client.close()]);
  });

  it("serves other sessions while one is still starting (a stuck upstream at initialize), and still ends on the signal", async () => {
    const sessions = numberedSessions();
    let calls = 0;
    const server = await start(() => ({ open: async () => (++calls === 1 ? new Promise<never>(() => {}) : sessions.factory().open()) }));
    const stuck = connect(server).then(
      () => "connected",
      () => "ended",
    );
    // The stuck initialize reached the factory before the next one starts.
    await waitUntil(() => calls > 0, "the stuck initialize to reach the factory", undefined, 5);
    const a = await connect(server);
    assert.equal(textOf(await a.client.callTool({ name: "whoami" })), "session 1");
    // That start never ends: a stop that waited for it would never end either.
    await within(server.stop(), "the stop, with a session still starting");
    assert.equal(await stuck, "ended");
    assert.deepEqual(sessions.closed, [1]);
    await a.client.close();
  });

  it("answers 500 when a session cannot start, and serves the next one", async () => {
    const sessions = numberedSessions();
    let fail = true;
    const server = await start(() => ({
      open: async () => {
        if (fail) {
          fail = false;
          throw new Error("upstream unreachable");
        }
        return sessions.factory().open();
      },
    }));
    try {
      await assert.rejects(connect(server), { code: 500, message: /^Streamable HTTP error: Error POSTing to endpoint: .*"could not start the session"/ });
      assert.match(server.stderr(), /could not start a session: upstream unreachable/);
      const a = await connect(server);
      assert.equal(textOf(await a.client.callTool({ name: "whoami" })), "session 1");
      await a.client.close();
    } finally {
      await server.stop();
    }
  });

  it("with --token-file writes the token to a new 0600 file renamed into place: a descriptor open on the old file never reads it; never printed", async () => {
    const dir = mkdtempSync(path.join(tmpdir(), "subs-serve-http-"));
    const file = path.join(dir, "token");
    writeFileSync(file, "old\n");
    chmodSync(file, 0o644);
    // Another user's program that opened the file while it was readable.
    const reader = openSync(file, "r");
    const sessions = numberedSessions();
    const server = await start(sessions.factory, { tokenFile: "token" }, dir);
    try {
      assert.equal(statSync(file).mode & 0o777, 0o600);
      const token = readFileSync(file, "utf8").trim();
      assert.match(token, /^[A-Za-z0-9_-]{43}$/);
      const seen = Buffer.alloc(256);
      const n = readSync(reader, seen, 0, seen.length, 0);
      assert.equal(seen.subarray(0, n).toString("utf8"), "old\n", "the old descriptor still reads the old file");
      assert.notEqual(fstatSync(reader).ino, statSync(file).ino, "a new file, not the old one rewritten");
      assert.deepEqual(readdirSync(dir), ["token"], "nothing left beside it");
      assert.equal(server.token, "", "no Bearer line on stderr");
      assert.ok(!server.stderr().includes(token), server.stderr());
      assert.match(server.stderr(), /serving MCP on http:\/\/127\.0\.0\.1:\d+\/mcp/);
      assert.match(server.stderr(), /the token in token/);
      const a = await connect({ url: server.url, token });
      assert.equal(textOf(await a.client.callTool({ name: "whoami" })), "session 1");
      await a.client.close();
    } finally {
      closeSync(reader);
      await server.stop();
    }
  });

  it("with --token-file keeps the token a private file of this user's already holds: the same token and file across a restart, said on stderr, a client holding it gets in", async () => {
    const dir = mkdtempSync(path.join(tmpdir(), "subs-serve-http-"));
    const file = path.join(dir, "token");
    const first = await start(numberedSessions().factory, { tokenFile: "token" }, dir);
    await first.stop();
    const held = readFileSync(file, "utf8");
    const inode = statSync(file).ino;
    assert.match(first.stderr(), /wrote a new token to token\n/);

    const second = await start(numberedSessions().factory, { tokenFile: "token" }, dir);
    try {
      assert.equal(readFileSync(file, "utf8"), held, "the same token");
      assert.equal(statSync(file).ino, inode, "the same file, not rewritten");
      assert.equal(statSync(file).mode & 0o777, 0o600);
      assert.match(second.stderr(), /subs: kept the token already in token: clients that read it there keep working\n/);
      assert.ok(!second.stderr().includes(held.trim()), "the token is never printed");
      const a = await connect({ url: second.url, token: held.trim() });
      assert.equal(textOf(await a.client.callTool({ name: "whoami" })), "session 1");
      await a.client.close();
    } finally {
      await second.stop();
    }
    // A token written by hand in subs' form (no final newline, mode 0400) is kept as well.
    const own = "A".repeat(43);
    writeFileSync(file, own, { mode: 0o400 });
    chmodSync(file, 0o400);
    const third = await start(numberedSessions().factory, { tokenFile: "token" }, dir);
    try {
      assert.match(third.stderr(), /kept the token/);
      const a = await connect({ url: third.url, token: own });
      assert.equal(textOf(await a.client.callTool({ name: "whoami" })), "session 1");
      await a.client.close();
    } finally {
      await third.stop();
    }
  });

  it("with --token-file replaces a token others could read (0644, 0640, 0604) with a new file: an old descriptor never reads the new token; said why on stderr, never the token", async () => {
    for (const mode of [0o644, 0o640, 0o604]) {
      const dir = mkdtempSync(path.join(tmpdir(), "subs-serve-http-"));
      const file = path.join(dir, "token");
      const old = "B".repeat(43);
      writeFileSync(file, `${old}\n`);
      chmodSync(file, mode);
      const reader = openSync(file, "r");
      const server = await start(numberedSessions().factory, { tokenFile: "token" }, dir);
      try {
        const token = readFileSync(file, "utf8").trim();
        assert.match(token, /^[A-Za-z0-9_-]{43}$/);
        assert.notEqual(token, old, `mode ${mode.toString(8)}: a new token`);
        assert.equal(statSync(file).mode & 0o777, 0o600);
        const seen = Buffer.alloc(256);
        const n = readSync(reader, seen, 0, seen.length, 0);
        assert.equal(seen.subarray(0, n).toString("utf8"), `${old}\n`, "the old descriptor still reads the old token only");
        assert.match(server.stderr(), new RegExp(`wrote a new token to token: the old one was open to group or others \\(mode 0${mode.toString(8)}\\) and may have leaked`));
        assert.ok(!server.stderr().includes(token) && !server.stderr().includes(old), server.stderr());
        await assert.rejects(connect({ url: server.url, token: old }), REFUSED_TOKEN, "the old token no longer gets in");
        const a = await connect({ url: server.url, token });
        assert.equal(textOf(await a.client.callTool({ name: "whoami" })), "session 1");
        await a.client.close();
      } finally {
        closeSync(reader);
        await server.stop();
      }
    }
  });

  it("with --token-file replaces a private file that does not hold a token in subs' form (empty, other text, too short, two lines, a token and more)", async () => {
    const valid = "C".repeat(43);
    for (const text of ["", "not a token\n", "C".repeat(42), `${valid}\n\n`, `${valid}\n${valid}\n`, `${valid} \n`, `Bearer ${valid}\n`, `${valid}=\n`, "é".repeat(43)]) {
      const dir = mkdtempSync(path.join(tmpdir(), "subs-serve-http-"));
      const file = path.join(dir, "token");
      writeFileSync(file, text, { mode: 0o600 });
      const server = await start(numberedSessions().factory, { tokenFile: "token" }, dir);
      try {
        const written = readFileSync(file, "utf8");
        assert.match(written, /^[A-Za-z0-9_-]{43}\n$/, JSON.stringify(text));
        assert.notEqual(written.trim(), valid);
        assert.match(server.stderr(), /wrote a new token to token: the old file did not hold a token subs writes\n/, JSON.stringify(text));
      } finally {
        await server.stop();
      }
    }
  });

  it("refuses a --token-file that is a symbolic link (dangling, or to a file holding a token), a directory, or in a missing directory: usage, exit 2, nothing written or left", async () => {
    const dir = mkdtempSync(path.join(tmpdir(), "subs-serve-http-"));
    writeFileSync(path.join(dir, "elsewhere"), "keep\n");
    symlinkSync(path.join(dir, "elsewhere"), path.join(dir, "link"));
    // A link to a file that would be kept were it there: still refused, never read through.
    writeFileSync(path.join(dir, "valid"), `${"D".repeat(43)}\n`, { mode: 0o600 });
    symlinkSync(path.join(dir, "valid"), path.join(dir, "validlink"));
    symlinkSync(path.join(dir, "nowhere"), path.join(dir, "dangling"));
    mkdirSync(path.join(dir, "adir"));
    const t = testContext({ cwd: dir });
    for (const [tokenFile, why] of [
      ["link", /symbolic link/],
      ["dangling", /symbolic link/],
      ["validlink", /symbolic link/],
      ["adir", /not a regular file/],
      ["no/such/dir/token", /cannot write it \(ENOENT\)/],
    ] as const) {
      const error = await serveHttp(t.ctx, { host: "127.0.0.1", port: 0, tokenFile, newSession: numberedSessions().factory }).then(
        () => assert.fail(`${tokenFile} was accepted`),
        (e: unknown) => e,
      );
      assert.ok(error instanceof SubsError, String(error));
      assert.equal(exitCodeFor(error), 2, tokenFile);
      assert.match(error.message, why, tokenFile);
    }
    assert.equal(readFileSync(path.join(dir, "elsewhere"), "utf8"), "keep\n");
    assert.ok(lstatSync(path.join(dir, "link")).isSymbolicLink(), "the link is left as it was");
    assert.equal(readFileSync(path.join(dir, "valid"), "utf8"), `${"D".repeat(43)}\n`);
    assert.deepEqual(readdirSync(dir).sort(), ["adir", "dangling", "elsewhere", "link", "valid", "validlink"], "nothing created, no temporary file left");
    assert.equal(t.stderr(), "", "nothing was served");
  });

  it("answers 401 before reading a body sent without the token, and 413 past 4 MB, declared or chunked, with or without a session", async () => {
    const sessions = numberedSessions();
    const server = await start(sessions.factory);
    const auth = { Authorization: `Bearer ${server.token}` };
    /** Sends headers and `sent` bytes of a body declared `declared` long (chunked when undefined), never the rest unless it is whole. */
    const partial = (headers: Record<string, string>, sent: number, declared?: number) =>
      new Promise<number>((resolve, reject) => {
        const req = request(server.url, {
          method: "POST",
          agent: false,
          headers: { "Content-Type": "application/json", Accept: "application/json, text/event-stream", ...headers, ...(declared !== undefined ? { "Content-Length": String(declared) } : {}) },
        });
        req.on("response", (res) => {
          res.resume();
          resolve(res.statusCode ?? 0);
          req.destroy();
        });
        req.on("error", reject);
        req.write(Buffer.alloc(sent, 0x20));
        if (declared === undefined || sent === declared) req.end();
      });
    try {
      assert.equal(await partial({}, 1024, 5 * 1024 * 1024), 401, "answered without the rest of the body");
      assert.equal(await partial(auth, 1024, 5 * 1024 * 1024), 413, "declared too large");
      assert.equal(await partial(auth, 5 * 1024 * 1024), 413, "chunked, too large");
      const session = await rawSession(server);
      assert.equal(await partial({ ...auth, "Mcp-Session-Id": session }, 1024, 5 * 1024 * 1024), 413);
      assert.equal(await partial({ ...auth, "Mcp-Session-Id": session }, 5 * 1024 * 1024), 413);
      assert.equal(sessions.started(), 1);
    } finally {
      await server.stop();
    }
  });

  it("keeps at most 32 sessions by default: of 2,000 initializes never deleted, the rest get 503 with Retry-After and start nothing", async () => {
    const sessions = numberedSessions();
    const server = await start(sessions.factory);
    const auth = { Authorization: `Bearer ${server.token}` };
    try {
      const statuses = new Map<number, number>();
      const retryAfter = new Set<string>();
      for (let sent = 0; sent < 2000; sent += 50) {
        const answers = await Promise.all(Array.from({ length: 50 }, () => raw(server.url, { body: initialize, headers: auth })));
        for (const answer of answers) {
          statuses.set(answer.status, (statuses.get(answer.status) ?? 0) + 1);
          if (answer.status === 503) {
            retryAfter.add(String(answer.headers["retry-after"]));
            assert.match(answer.body, /too many sessions \(at most 32\)/);
          }
        }
      }
      assert.deepEqual([...statuses].sort(), [[200, 32], [503, 1968]]);
      assert.equal(sessions.started(), 32, "no session begun past the cap");
      for (const value of retryAfter) assert.match(value, /^\d+$/, "Retry-After in seconds");
      assert.ok([...retryAfter].every((v) => Number(v) >= 1 && Number(v) <= 300), [...retryAfter].join(","));
    } finally {
      await server.stop();
    }
  });

  it("ends a session idle past --idle-timeout (its id then 404, a new one can start), never one with a call in progress or a GET stream open", async () => {
    const sessions = numberedSessions();
    const server = await start(sessions.factory, { limits: { maxSessions: 4, idleTimeoutMs: 1000 } });
    const auth = { Authorization: `Bearer ${server.token}` };
    const ping = JSON.stringify({ jsonrpc: "2.0", id: 9, method: "ping" });
    try {
      // Session 1: the SDK's client, which keeps its GET stream open.
      const streaming = await connect(server);
      const idleA = await rawSession(server);
      const idleB = await rawSession(server);
      const busy = await rawSession(server);
      const call = await rawCall(server, busy, 7, "hang");
      const full = await raw(server.url, { body: initialize, headers: auth });
      // An order, not a race against the 1 s idle timeout: while the four are all live, a fifth is
      // refused. An idle session is said ended before its place is freed, so a machine slow enough
      // to let one end first shows it here, and the fifth may then have its place.
      const endedFirst = /ended a session idle/.test(server.stderr());
      if (!endedFirst || full.status !== 200) {
        assert.equal(full.status, 503);
        assert.equal(full.headers["retry-after"], "1", "an idle session ends within the second");
      }
      const fifth = full.status === 200 ? 1 : 0;

      await waitFor(() => sessions.closed.length === 2 + fifth, "the two idle sessions to end");
      // Two idle timeouts more: the call and the stream keep theirs.
      await sleep(2000);
      assert.deepEqual([...sessions.closed].sort(), fifth ? [2, 3, 5] : [2, 3]);
      assert.match(server.stderr(), /ended a session idle for 1 s \(its id now gets 404/);
      for (const id of [idleA, idleB]) assert.equal((await raw(server.url, { body: ping, headers: { ...auth, "Mcp-Session-Id": id } })).status, 404);
      assert.equal(textOf(await streaming.client.callTool({ name: "whoami" })), "session 1");
      sessions.release();
      assert.match(await call.answer(), /released/);

      const next = await raw(server.url, { body: initialize, headers: auth });
      assert.equal(next.status, 200, next.body);
      // The busy one, now idle, ends too.
      await waitFor(() => sessions.closed.includes(4), "the session whose call ended to expire");
      assert.ok(!sessions.closed.includes(1), "the session with a GET stream is kept");
      await streaming.client.close();
    } finally {
      await server.stop();
    }
  });

  it("caps the requests in progress on one session: one more is answered a JSON-RPC error; other sessions and later calls go on", async () => {
    const sessions = numberedSessions();
    const server = await start(sessions.factory, { limits: { maxCalls: 3 } });
    try {
      const a = await connect(server);
      const b = await connect(server);
      const hung = [1, 2, 3].map(() => a.client.callTool({ name: "hang" }));
      await waitFor(() => sessions.hanging() === 3, "three calls in progress");
      await assert.rejects(a.client.callTool({ name: "whoami" }), /too many requests in progress on this session \(at most 3\)/);
      assert.equal(textOf(await b.client.callTool({ name: "whoami" })), "session 2");
      sessions.release();
      for (const result of await Promise.all(hung)) assert.equal(textOf(result), "released");
      assert.equal(textOf(await a.client.callTool({ name: "whoami" })), "session 1");
      await Promise.all([a.client.close(), b.client.close()]);
    } finally {
      await server.stop();
    }
  });

  it("ends the POST of a call the client cancels (notifications/cancelled), without an answer: cancelled calls do not stay in progress", async () => {
    const sessions = numberedSessions();
    const server = await start(sessions.factory, { limits: { maxCalls: 3 } });
    try {
      const a = await connect(server);
      for (let n = 1; n <= 5; n++) {
        const controller = new AbortController();
        const call = a.client.callTool({ name: "hang" }, undefined, { signal: controller.signal });
        await waitFor(() => sessions.hanging() === n, "the call to reach the handler");
        controller.abort("enough");
        // The SDK's client fails the call with the reason it was given.
        await assert.rejects(call, { code: -32001, message: "MCP error -32001: enough" });
        await waitFor(() => sessions.cancelled() === n, "the handler to see the cancellation");
      }
      assert.equal(textOf(await a.client.callTool({ name: "whoami" })), "session 1", "five cancelled calls hold none of the three places");
      await a.client.close();

      // Seen on the wire: the POST's answer ends, and carries no answer to the call.
      const session = await rawSession(server);
      const call = await rawCall(server, session, 41, "hang");
      await waitFor(() => sessions.hanging() === 6, "the raw call to reach the handler");
      const cancel = JSON.stringify({ jsonrpc: "2.0", method: "notifications/cancelled", params: { requestId: 41, reason: "enough" } });
      assert.equal((await raw(server.url, { body: cancel, headers: { Authorization: `Bearer ${server.token}`, "Mcp-Session-Id": session } })).status, 202);
      const body = await Promise.race([call.answer(), sleep(5000).then(() => "still open after 5 s")]);
      assert.doesNotMatch(body, /still open|"id":41/);
      await waitFor(() => sessions.cancelled() === 6, "the handler to see the cancellation");
    } finally {
      await server.stop();
    }
  });

  it("cancels each call whose client closed its POST before the answer (300 of them), and the session goes on", async () => {
    const sessions = numberedSessions();
    const server = await start(sessions.factory);
    try {
      const session = await rawSession(server);
      for (let round = 0; round < 6; round++) {
        const calls = await Promise.all(Array.from({ length: 50 }, (_, n) => rawCall(server, session, 100 + round * 50 + n, "hang")));
        await waitFor(() => sessions.hanging() === (round + 1) * 50, "the calls to reach the handler");
        for (const call of calls) call.drop();
      }
      await waitFor(() => sessions.cancelled() === 300, `300 calls cancelled (${sessions.cancelled()})`);
      const whoami = await rawCall(server, session, 1, "whoami");
      assert.match(await whoami.answer(), /session 1/);
      assert.equal(sessions.started(), 1);
    } finally {
      await server.stop();
    }
  });

  it("holds at most --max-connections: connections that never send the token give way to the one that does, and half-open ones are dropped at the headers timeout", async () => {
    const sessions = numberedSessions();
    const server = await start(sessions.factory, { limits: { maxConnections: 10 } });
    try {
      const held: Array<Awaited<ReturnType<typeof halfOpen>>> = [];
      for (let n = 0; n < 40; n++) held.push(await halfOpen(server.url));
      await waitFor(() => held.filter((h) => h.closed()).length >= 30, "the server to close all but 10");
      const a = await connect(server);
      assert.equal(textOf(await a.client.callTool({ name: "whoami" })), "session 1");
      await a.client.close();
      for (const h of held) h.socket.destroy();
    } finally {
      await server.stop();
    }

    const timed = await start(sessions.factory, { limits: { headersTimeoutMs: 300, requestTimeoutMs: 600, idleTimeoutMs: 300 } });
    try {
      const a = await connect(timed);
      const started = Date.now();
      const call = a.client.callTool({ name: "hang" });
      const headers = await halfOpen(timed.url);
      // Headers sent whole, with the token; the body never.
      const body = await halfOpen(timed.url);
      body.socket.write(`Authorization: Bearer ${timed.token}\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{"jsonrpc"`);
      await waitFor(() => headers.closed() && body.closed(), "both to be dropped");
      // A call longer than the request timeout and the idle timeout, on a session with its GET stream: not cut.
      while (Date.now() - started < 1500) await sleep(50);
      sessions.release();
      assert.equal(textOf(await call), "released");
      assert.equal(textOf(await a.client.callTool({ name: "whoami" })), "session 2");
      await a.client.close();
    } finally {
      await timed.stop();
    }
  });
});
