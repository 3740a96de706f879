// The stdio runner every served command uses (src/serve/stdio.ts), in-process with
// streams of its own: it answers what the client sent, ends when stdin ends (after the answers),
// when stdout fails, or when the context's signal aborts, and closes the session exactly once.
import assert from "node:assert/strict";
import { PassThrough } from "node:stream";
import { test } from "node:test";
import { Server } from "@modelcontextprotocol/sdk/server/index.js";
import { CallToolRequestSchema, ListToolsRequestSchema } from "@modelcontextprotocol/sdk/types.js";
import type { SessionFactory, SessionServer } from "../src/serve/session.ts";
import { serveStdio } from "../src/serve/stdio.ts";
import { within } from "./support/wait.ts";

/** A session whose one tool answers after `ms`, counting how often it is closed. */
function fixture(ms: number) {
  const closes = { count: 0 };
  const waiting = new Set<() => void>();
  const open = async (): Promise<SessionServer> => {
    const server = new Server({ name: "fixture", version: "1.0.0" }, { capabilities: { tools: {} } });
    server.setRequestHandler(ListToolsRequestSchema, async () => ({ tools: [{ name: "wait", inputSchema: { type: "object" } }] }));
    server.setRequestHandler(CallToolRequestSchema, async (_request, extra) => {
      await new Promise<void>((resolve) => {
        const done = () => {
          clearTimeout(timer);
          waiting.delete(done);
          resolve();
        };
        const timer = setTimeout(done, ms);
        waiting.add(done);
        extra.signal.addEventListener("abort", done);
      });
      return { content: [{ type: "text", text: "done" }] };
    });
    // A stand-in for a slow upstream: its calls end with its session, so none keeps the test's
    // process alive after it (the calls of these tests last ten minutes).
    return { server, close: async () => (waiting.forEach((done) => done()), void closes.count++) };
  };
  const factory: SessionFactory = () => ({ open });
  const input = new PassThrough();
  const output = new PassThrough();
  const lines: Array<{ id?: number; result?: unknown; error?: unknown }> = [];
  let buffered = "";
  output.on("data", (chunk: Buffer) => {
    buffered += chunk.toString("utf8");
    for (let n = buffered.indexOf("\n"); n >= 0; n = buffered.indexOf("\n")) {
      lines.push(JSON.parse(buffered.slice(0, n)));
      buffered = buffered.slice(n + 1);
    }
  });
  const controller = new AbortController();
  let stderr = "";
  const ctx = { protocolStreams: () => ({ input, output }), signal: controller.signal, stderr: { write: (text: string) => (stderr += text) } };
  const send = (...messages: object[]) => input.write(messages.map((m) => JSON.stringify({ jsonrpc: "2.0", ...m })).join("\n") + "\n");
  const initialize = { id: 1, method: "initialize", params: { protocolVersion: "2025-06-18", capabilities: {}, clientInfo: { name: "t", version: "1" } } };
  return { open, factory, closes, input, output, lines, controller, ctx, send, initialize, stderr: () => stderr };
}

/** The fixture's session with what it answers before its server exists, the server built only once `release` is called. */
function early(f: ReturnType<typeof fixture>) {
  let release = () => {};
  const released = new Promise<void>((resolve) => (release = resolve));
  let opened = false;
  const factory: SessionFactory = () => ({
    early: {
      secrets: { scrub: (text) => text },
      initialize: async (params) => ({ protocolVersion: params.protocolVersion, capabilities: { tools: {} }, serverInfo: { name: "fixture", version: "1.0.0" } }),
    },
    open: async () => {
      opened = true;
      await released;
      return f.open();
    },
  });
  return { factory, release, opened: () => opened };
}

/** Resolves once a line with each of `ids` has been received; fails after 10 s. */
async function answered(f: ReturnType<typeof fixture>, ...ids: number[]): Promise<void> {
  const deadline = Date.now() + 10_000;
  while (!ids.every((id) => f.lines.some((l) => l.id === id))) {
    assert.ok(Date.now() < deadline, `no answer to ${ids.filter((id) => !f.lines.some((l) => l.id === id)).join(", ")} within 10 s`);
    await new Promise((r) => setTimeout(r, 5));
  }
}

test("stdin ending after requests: every request is answered first, then the session closes once", async () => {
  const f = fixture(100);
  const served = serveStdio(f.ctx, f.factory);
  await new Promise((r) => setImmediate(r));
  f.send(f.initialize, { method: "notifications/initialized" }, { id: 2, method: "tools/call", params: { name: "wait", arguments: {} } }, { id: 3, method: "tools/list" });
  f.input.end();
  await served;
  assert.deepEqual(f.lines.map((l) => l.id).sort(), [1, 2, 3]);
  assert.deepEqual(f.lines.find((l) => l.id === 2)!.result, { content: [{ type: "text", text: "done" }] });
  assert.equal(f.closes.count, 1);
});

test("a request the client cancelled is not waited for once stdin ends", async () => {
  // A call of ten minutes, past the wait below: only not waiting for it ends the serve in time.
  const f = fixture(600_000);
  const served = serveStdio(f.ctx, f.factory);
  await new Promise((r) => setImmediate(r));
  f.send(f.initialize, { method: "notifications/initialized" }, { id: 2, method: "tools/call", params: { name: "wait", arguments: {} } });
  f.send({ method: "notifications/cancelled", params: { requestId: 2, reason: "no longer needed" } });
  f.input.end();
  await within(served, "the serve to end without the cancelled call");
  assert.deepEqual(f.lines.map((l) => l.id), [1], "a cancelled request gets no answer (MCP cancellation)");
  assert.equal(f.closes.count, 1);
});

test("the context's signal (Ctrl-C, SIGTERM) ends it at once, a call in flight or not", async () => {
  // A call of ten minutes, past the wait below: only not waiting for it ends the serve in time.
  const f = fixture(600_000);
  const served = serveStdio(f.ctx, f.factory);
  await new Promise((r) => setImmediate(r));
  f.send(f.initialize, { method: "notifications/initialized" }, { id: 2, method: "tools/call", params: { name: "wait", arguments: {} } });
  await answered(f, 1);
  f.controller.abort();
  await within(served, "the serve to end on the signal, a call in flight");
  assert.equal(f.closes.count, 1);
});

test("stdout failing (the client went away: EPIPE) ends it without an uncaught error", async () => {
  const f = fixture(60_000);
  const served = serveStdio(f.ctx, f.factory);
  await new Promise((r) => setImmediate(r));
  f.send(f.initialize);
  await new Promise((r) => setTimeout(r, 50));
  f.output.destroy(Object.assign(new Error("write EPIPE"), { code: "EPIPE" }));
  await served;
  assert.equal(f.closes.count, 1);
});

test("initialize and ping are answered before the session's server is built; the server then reads everything in order, and answers nothing twice", async () => {
  const f = fixture(10);
  const e = early(f);
  const served = serveStdio(f.ctx, e.factory);
  f.send({ id: 0, method: "ping" }, f.initialize, { method: "notifications/initialized" }, { id: 2, method: "tools/list" });
  await answered(f, 0, 1);
  assert.deepEqual(f.lines, [
    { jsonrpc: "2.0", id: 0, result: {} },
    { jsonrpc: "2.0", id: 1, result: { protocolVersion: "2025-06-18", capabilities: { tools: {} }, serverInfo: { name: "fixture", version: "1.0.0" } } },
  ]);
  assert.ok(e.opened(), "the server is being built once initialize is answered");
  await new Promise((r) => setTimeout(r, 50));
  assert.equal(f.lines.length, 2, "tools/list waits for the server");
  e.release();
  await answered(f, 2);
  f.send({ id: 3, method: "tools/call", params: { name: "wait", arguments: {} } });
  f.input.end();
  await served;
  assert.deepEqual(
    f.lines.map((l) => l.id),
    [0, 1, 2, 3],
  );
  assert.deepEqual(f.lines[2]!.result, { tools: [{ name: "wait", inputSchema: { type: "object" } }] });
  assert.equal(f.closes.count, 1);
  assert.equal(f.stderr(), "");
});

test("what is answered early passes the session's scrub, as what its server sends does", async () => {
  const f = fixture(10);
  const e = early(f);
  const served = serveStdio(f.ctx, () => ({
    ...e.factory(),
    early: {
      secrets: { scrub: (text) => text.replaceAll("SECRET-token", "[redacted]") },
      initialize: async () => ({ protocolVersion: "2025-06-18", capabilities: {}, serverInfo: { name: "heard SECRET-token", version: "1" }, instructions: "SECRET-token" }),
    },
  }));
  f.send(f.initialize);
  await answered(f, 1);
  assert.deepEqual(f.lines[0]!.result, { protocolVersion: "2025-06-18", capabilities: {}, serverInfo: { name: "heard [redacted]", version: "1" }, instructions: "[redacted]" });
  e.release();
  f.input.end();
  await served;
});

test("stdin closing right after initialize: answered, and the session still opens, reads it and closes once", async () => {
  const f = fixture(10);
  const e = early(f);
  e.release();
  const served = serveStdio(f.ctx, e.factory);
  f.send(f.initialize);
  f.input.end();
  await served;
  assert.deepEqual(
    f.lines.map((l) => l.id),
    [1],
  );
  assert.equal(f.closes.count, 1);
});

test("a server that refuses an initialize already answered ends the session, saying so on stderr", async () => {
  const f = fixture(10);
  const e = early(f);
  e.release();
  const served = serveStdio(f.ctx, e.factory);
  // The early check reads protocolVersion, capabilities and clientInfo.name; the SDK's schema also
  // wants capabilities.roots.listChanged to be a boolean.
  f.send({ ...f.initialize, params: { ...f.initialize.params, capabilities: { roots: { listChanged: "yes" } } } });
  await served;
  assert.deepEqual(
    f.lines.map((l) => l.id),
    [1],
    "answered once, by the early path",
  );
  assert.match(f.stderr(), /the server refused the client's initialize .*; ending the session/);
  assert.equal(f.closes.count, 1);
});
