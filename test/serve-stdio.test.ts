// The stdio runner every served command uses (src/serve/stdio.ts, issue 16), in-process with
// streams of its own: it answers what the client sent, ends when stdin ends (after the answers),
// when stdout fails, or when the context's signal aborts, and closes the session exactly once.
import assert from "node:assert/strict";
import { PassThrough } from "node:stream";
import { test } from "node:test";
import { Server } from "@modelcontextprotocol/sdk/server/index.js";
import { CallToolRequestSchema, ListToolsRequestSchema } from "@modelcontextprotocol/sdk/types.js";
import type { SessionFactory, SessionServer } from "../src/serve/session.ts";
import { serveStdio } from "../src/serve/stdio.ts";

/** A session whose one tool answers after `ms`, counting how often it is closed. */
function fixture(ms: number) {
  const closes = { count: 0 };
  const open = async (): Promise<SessionServer> => {
    const server = new Server({ name: "fixture", version: "1.0.0" }, { capabilities: { tools: {} } });
    server.setRequestHandler(ListToolsRequestSchema, async () => ({ tools: [{ name: "wait", inputSchema: { type: "object" } }] }));
    server.setRequestHandler(CallToolRequestSchema, async (_request, extra) => {
      await new Promise<void>((resolve) => {
        const timer = setTimeout(resolve, ms);
        extra.signal.addEventListener("abort", () => (clearTimeout(timer), resolve()));
      });
      return { content: [{ type: "text", text: "done" }] };
    });
    return { server, close: async () => void closes.count++ };
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
  return { factory, closes, input, output, lines, controller, ctx, send, initialize };
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
  const f = fixture(60_000);
  const served = serveStdio(f.ctx, f.factory);
  await new Promise((r) => setImmediate(r));
  f.send(f.initialize, { method: "notifications/initialized" }, { id: 2, method: "tools/call", params: { name: "wait", arguments: {} } });
  f.send({ method: "notifications/cancelled", params: { requestId: 2, reason: "no longer needed" } });
  f.input.end();
  const started = Date.now();
  await served;
  assert.ok(Date.now() - started < 10_000, "far sooner than the 60 s call");
  assert.deepEqual(f.lines.map((l) => l.id), [1], "a cancelled request gets no answer (MCP cancellation)");
  assert.equal(f.closes.count, 1);
});

test("the context's signal (Ctrl-C, SIGTERM) ends it at once, a call in flight or not", async () => {
  const f = fixture(60_000);
  const served = serveStdio(f.ctx, f.factory);
  await new Promise((r) => setImmediate(r));
  f.send(f.initialize, { method: "notifications/initialized" }, { id: 2, method: "tools/call", params: { name: "wait", arguments: {} } });
  await new Promise((r) => setTimeout(r, 50));
  const started = Date.now();
  f.controller.abort();
  await served;
  assert.ok(Date.now() - started < 10_000, "far sooner than the 60 s call");
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
