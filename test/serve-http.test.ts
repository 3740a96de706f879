// serveHttp (src/serve/http.ts, issue 16): the Streamable HTTP side of `subs agent serve` and
// `subs mcp proxy`, driven by the MCP SDK's own Client over StreamableHTTPClientTransport against a
// SessionFactory built here from the SDK's low-level Server.
import assert from "node:assert/strict";
import { mkdtempSync, readFileSync, statSync, writeFileSync } from "node:fs";
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
import type { SessionFactory } from "../src/serve/session.ts";
import { testContext } from "./support/cli.ts";

/**
 * Sessions numbered from 1. Tools: `whoami` (the session's number), `remember`/`recall` (state of
 * this session only), `hang` (answers only when the test releases it).
 */
function numberedSessions(options: { stuckClose?: (n: number) => boolean } = {}) {
  let count = 0;
  const closed: number[] = [];
  let release: () => void = () => {};
  const released = new Promise<void>((resolve) => (release = resolve));
  const factory: SessionFactory = async () => {
    const n = ++count;
    let remembered = "";
    const server = new Server({ name: "numbered", version: "1.0.0" }, { capabilities: { tools: {} } });
    server.setRequestHandler(ListToolsRequestSchema, async () => ({
      tools: ["whoami", "remember", "recall", "hang"].map((name) => ({ name, inputSchema: { type: "object" as const } })),
    }));
    server.setRequestHandler(CallToolRequestSchema, async (req): Promise<CallToolResult> => {
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
          await released;
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
  return { factory, closed, release: () => release(), started: () => count };
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

      await assert.rejects(connect(server, "not-the-token"));
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
    const started = Date.now();
    await server.stop();
    assert.ok(Date.now() - started < 3000, "did not wait for the stuck session");
    assert.deepEqual([...sessions.closed].sort(), [1, 2]);
    assert.match(server.stderr(), /did not close within 300 ms/);
    await Promise.all([a.client.close(), b.client.close()]);
  });

  it("serves other sessions while one is still starting (a stuck upstream at initialize), and still ends on the signal", async () => {
    const sessions = numberedSessions();
    let calls = 0;
    const server = await start(async () => (++calls === 1 ? new Promise<never>(() => {}) : sessions.factory()));
    const stuck = connect(server).then(
      () => "connected",
      () => "ended",
    );
    // The stuck initialize reached the factory before the next one starts.
    while (calls === 0) await new Promise((resolve) => setTimeout(resolve, 5));
    const a = await connect(server);
    assert.equal(textOf(await a.client.callTool({ name: "whoami" })), "session 1");
    const started = Date.now();
    await server.stop();
    assert.ok(Date.now() - started < 3000, "the stop did not wait for the stuck start");
    assert.equal(await stuck, "ended");
    assert.deepEqual(sessions.closed, [1]);
    await a.client.close();
  });

  it("answers 500 when a session cannot start, and serves the next one", async () => {
    const sessions = numberedSessions();
    let fail = true;
    const server = await start(async () => {
      if (fail) {
        fail = false;
        throw new Error("upstream unreachable");
      }
      return sessions.factory();
    });
    try {
      await assert.rejects(connect(server));
      assert.match(server.stderr(), /could not start a session: upstream unreachable/);
      const a = await connect(server);
      assert.equal(textOf(await a.client.callTool({ name: "whoami" })), "session 1");
      await a.client.close();
    } finally {
      await server.stop();
    }
  });

  it("with --token-file writes the token there (mode 0600, even over an existing file) and never prints it", async () => {
    const dir = mkdtempSync(path.join(tmpdir(), "subs-serve-http-"));
    const file = path.join(dir, "token");
    writeFileSync(file, "old\n", { mode: 0o644 });
    const sessions = numberedSessions();
    const server = await start(sessions.factory, { tokenFile: "token" }, dir);
    try {
      assert.equal(statSync(file).mode & 0o777, 0o600);
      const token = readFileSync(file, "utf8").trim();
      assert.match(token, /^[A-Za-z0-9_-]{43}$/);
      assert.equal(server.token, "", "no Bearer line on stderr");
      assert.ok(!server.stderr().includes(token), server.stderr());
      assert.match(server.stderr(), /serving MCP on http:\/\/127\.0\.0\.1:\d+\/mcp/);
      assert.match(server.stderr(), /the token in token/);
      const a = await connect({ url: server.url, token });
      assert.equal(textOf(await a.client.callTool({ name: "whoami" })), "session 1");
      await a.client.close();
    } finally {
      await server.stop();
    }
  });
});
