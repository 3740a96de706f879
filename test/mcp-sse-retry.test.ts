// A tool call whose event stream the server closes before the result (MCP Streamable HTTP,
// "Resumability and Redelivery"; SEP-1699): the client waits the stream's `retry:` before it
// reconnects with GET and sends the last event id as `Last-Event-ID` (the conformance
// scenario sse-retry checks the same against the real CLI). subs relies on the SDK's transport
// for this (src/mcp/connect.ts), so this is what notices an SDK upgrade that drops it.
import assert from "node:assert/strict";
import { createServer, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { test } from "node:test";
import { connectMcp } from "../src/mcp/connect.ts";

/** Longer than the SDK's own first backoff (1 s), so reconnecting after it proves `retry:` was read. */
const RETRY_MS = 1500;

test("a closed tool-call stream is resumed after the server's retry, with Last-Event-ID", async () => {
  let closedAt = 0;
  const resumes: Array<{ lastEventId: string | undefined; after: number }> = [];
  let pendingId: unknown;
  const open = new Set<ServerResponse>();
  const server = createServer((req, res) => {
    open.add(res);
    res.on("close", () => open.delete(res));
    let body = "";
    req.on("data", (chunk) => (body += chunk));
    req.on("end", () => {
      const session = { "mcp-session-id": "s1" };
      if (req.method === "GET") {
        const lastEventId = req.headers["last-event-id"];
        // No standalone stream, only resumption.
        if (typeof lastEventId !== "string") return void res.writeHead(405).end();
        resumes.push({ lastEventId, after: performance.now() - closedAt });
        res.writeHead(200, { "content-type": "text/event-stream", ...session });
        res.write(`id: e2\nevent: message\ndata: ${JSON.stringify({ jsonrpc: "2.0", id: pendingId, result: { content: [{ type: "text", text: "resumed" }] } })}\n\n`);
        return;
      }
      const message = JSON.parse(body);
      if (message.method === "initialize") {
        res.writeHead(200, { "content-type": "application/json", ...session });
        res.end(JSON.stringify({ jsonrpc: "2.0", id: message.id, result: { protocolVersion: "2025-11-25", capabilities: { tools: {} }, serverInfo: { name: "t", version: "1" } } }));
      } else if (message.id === undefined) {
        res.writeHead(202).end();
      } else if (message.method === "tools/call") {
        pendingId = message.id;
        res.writeHead(200, { "content-type": "text/event-stream", ...session });
        res.write(`id: e1\nretry: ${RETRY_MS}\ndata: \n\n`);
        setTimeout(() => {
          closedAt = performance.now();
          res.end();
        }, 20);
      } else {
        res.writeHead(200, { "content-type": "application/json", ...session }).end(JSON.stringify({ jsonrpc: "2.0", id: message.id, result: {} }));
      }
    });
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/mcp`;
  const client = await connectMcp({ url, fetch: globalThis.fetch });
  try {
    const result = await client.callTool({ name: "slow", arguments: {} });
    assert.deepEqual(result.content, [{ type: "text", text: "resumed" }]);
    assert.equal(resumes.length, 1);
    assert.equal(resumes[0]!.lastEventId, "e1");
    assert.ok(resumes[0]!.after >= RETRY_MS - 50, `reconnected ${Math.round(resumes[0]!.after)} ms after the close, before the server's retry of ${RETRY_MS} ms`);
  } finally {
    await client.close();
    for (const res of open) res.destroy();
    await new Promise((resolve) => server.close(resolve));
  }
});
