// McpSessions (src/serve/http-sessions.ts) with a SessionRegistry, as the deployment's replicas
// use it: two instances standing for two processes share one registry; a session started on one
// is continued on the other from its snapshot, the idle timeout counts a use on either, and a
// DELETE on one ends it on both. Without a registry nothing of this applies (test/serve-http.test.ts).
import assert from "node:assert/strict";
import { createServer, type Server as HttpServer } from "node:http";
import type { AddressInfo } from "node:net";
import { after, test } from "node:test";
import { Server } from "@modelcontextprotocol/sdk/server/index.js";
import { CallToolRequestSchema, ListToolsRequestSchema } from "@modelcontextprotocol/sdk/types.js";
import { McpSessions, type SessionRegistry, type StoredSession } from "../src/serve/http-sessions.ts";

const IDLE_MS = 2000;
const servers: HttpServer[] = [];
const all: McpSessions[] = [];
after(async () => {
  await Promise.all(all.map((s) => s.stop(1000)));
  for (const s of servers) s.close();
});

/** The registry of the store, in memory: a use moves the last use; idle past IDLE_MS, gone. */
function sharedRegistry() {
  const kept = new Map<string, { session: StoredSession; last: number }>();
  const registry: SessionRegistry = {
    save: async (session) => void kept.set(session.id, { session, last: Date.now() }),
    use: async (id) => {
      const k = kept.get(id);
      if (!k) return undefined;
      if (Date.now() - k.last >= IDLE_MS) return void kept.delete(id);
      k.last = Date.now();
      return k.session;
    },
    endIfIdle: async (id) => {
      const k = kept.get(id);
      if (k && Date.now() - k.last < IDLE_MS) return false;
      kept.delete(id);
      return true;
    },
    end: async (id) => void kept.delete(id),
  };
  return { registry, kept };
}

/** One "process": its sessions answer `where` with its name and the snapshot the session was continued from. */
async function process_(name: string, registry: SessionRegistry, opened: string[]) {
  const sessions = new McpSessions({ now: Date.now, stderr: { write: () => true } }, { maxSessions: 8, idleTimeoutMs: IDLE_MS, maxCalls: 8 }, (resumed) => ({
    open: async () => {
      opened.push(`${name}:${resumed === undefined ? "new" : "resumed"}`);
      const server = new Server({ name: "where", version: "1.0.0" }, { capabilities: { tools: {} } });
      server.setRequestHandler(ListToolsRequestSchema, async () => ({ tools: [{ name: "where", inputSchema: { type: "object" as const } }] }));
      server.setRequestHandler(CallToolRequestSchema, async () => ({ content: [{ type: "text", text: `${name} ${JSON.stringify(resumed ?? null)}` }] }));
      return { server, close: async () => {}, snapshot: async () => ({ startedOn: name }) };
    },
  }), registry);
  all.push(sessions);
  // What the deployment's server does with an error from the registry (its store): 503, retry.
  const http = createServer((req, res) => void sessions.handle(req, res, String(req.headers["x-owner"])).catch(() => res.headersSent || res.writeHead(503).end()));
  servers.push(http);
  await new Promise<void>((resolve) => http.listen(0, "127.0.0.1", resolve));
  return `http://127.0.0.1:${(http.address() as AddressInfo).port}/mcp`;
}

const headers = (owner: string, session?: string) => ({
  "content-type": "application/json",
  accept: "application/json, text/event-stream",
  "mcp-protocol-version": "2025-06-18",
  "x-owner": owner,
  ...(session ? { "mcp-session-id": session } : {}),
});
/** A POST of one JSON-RPC message; its status and the answer's text (an SSE event's data, or JSON). */
async function post(url: string, owner: string, session: string | undefined, message: object) {
  const res = await fetch(url, { method: "POST", headers: headers(owner, session), body: JSON.stringify({ jsonrpc: "2.0", ...message }) });
  const text = await res.text();
  const data = /^data: (.*)$/m.exec(text)?.[1] ?? text;
  return { status: res.status, session: res.headers.get("mcp-session-id") ?? undefined, body: data ? JSON.parse(data) : undefined };
}
const where = async (url: string, session: string, owner = "alice") => {
  const answer = await post(url, owner, session, { id: 2, method: "tools/call", params: { name: "where", arguments: {} } });
  return { status: answer.status, text: answer.body?.result?.content?.[0]?.text as string | undefined };
};

test("a session started on X continues on Y from its snapshot, for its owner only; idle on X but used on Y it lives on; idle everywhere it ends everywhere; DELETE on one ends it on both", async () => {
  const { registry, kept } = sharedRegistry();
  const opened: string[] = [];
  const x = await process_("X", registry, opened);
  const y = await process_("Y", registry, opened);
  const init = await post(x, "alice", undefined, { id: 1, method: "initialize", params: { protocolVersion: "2025-06-18", capabilities: {}, clientInfo: { name: "t", version: "1" } } });
  assert.equal(init.status, 200);
  const id = init.session!;
  assert.ok(kept.has(id), "kept before the initialize answer left");
  assert.equal((await post(y, "alice", id, { method: "notifications/initialized" })).status, 202);
  assert.deepEqual(await where(y, id), { status: 200, text: 'Y {"startedOn":"X"}' });
  assert.equal((await where(y, id, "mallory")).status, 404, "another owner's request is 404");
  assert.equal((await where(x, id, "mallory")).status, 404);

  // Used on Y only, for longer than the idle timeout: X's copy ends, the session does not.
  for (let t = 0; t < 1.5 * IDLE_MS; t += IDLE_MS / 10) {
    assert.equal((await where(y, id)).status, 200);
    await new Promise((r) => setTimeout(r, IDLE_MS / 10));
  }
  assert.deepEqual(await where(x, id), { status: 200, text: 'X {"startedOn":"X"}' }, "X ended its idle copy; the session, alive on Y, is rebuilt on X from its snapshot");
  assert.ok(opened.includes("X:resumed"), "X ended its idle copy and rebuilt it from the registry");

  // Idle everywhere past the timeout: gone on both.
  await new Promise((r) => setTimeout(r, IDLE_MS * 1.6));
  assert.equal((await where(y, id)).status, 404);
  assert.equal((await where(x, id)).status, 404);
  assert.ok(!kept.has(id));

  // DELETE on Y ends a session X started and holds.
  const second = (await post(x, "alice", undefined, { id: 1, method: "initialize", params: { protocolVersion: "2025-06-18", capabilities: {}, clientInfo: { name: "t", version: "1" } } })).session!;
  assert.equal((await where(y, second)).status, 200);
  const deleted = await fetch(y, { method: "DELETE", headers: headers("alice", second) });
  assert.equal(deleted.status, 200);
  assert.equal((await where(x, second)).status, 404, "ended on X too");
});

test("a registry that does not answer (its store down) is no answer about a session: the request fails, the session lives on, and continues when it answers again", async () => {
  const { registry } = sharedRegistry();
  let down = false;
  const flaky: SessionRegistry = { ...registry, use: (id) => (down ? Promise.reject(new Error("the store does not answer")) : registry.use(id)) };
  const x = await process_("X", flaky, []);
  const init = await post(x, "alice", undefined, { id: 1, method: "initialize", params: { protocolVersion: "2025-06-18", capabilities: {}, clientInfo: { name: "t", version: "1" } } });
  const id = init.session!;
  assert.equal((await post(x, "alice", id, { method: "notifications/initialized" })).status, 202);
  assert.equal((await where(x, id)).status, 200);
  down = true;
  assert.equal((await where(x, id)).status, 503, "not 404: the client must not start over for an outage");
  down = false;
  assert.deepEqual(await where(x, id), { status: 200, text: "X null" }, "the same session, on the same process");
});
