// What one caller can hold of a real `subs deployment serve`, and how it is made to give it back.
// Connections nobody authenticates (idle past the cap, or never sending a request) keep out
// neither an authenticated client nor a health probe. One API token holds at most so many MCP
// sessions, on all agents and every replica together. A token revoked with `subs deployment token
// revoke` (which writes the store, telling no server) loses its sessions, their GET streams and
// its calls in progress within seconds on every process, and they leave the store.
import assert from "node:assert/strict";
import { mkdtempSync, rmSync } from "node:fs";
import { connect, type Socket } from "node:net";
import { tmpdir } from "node:os";
import path from "node:path";
import { after, before, describe, test } from "node:test";
import Database from "better-sqlite3";
import { runCli } from "../support/cli.ts";
import { authorizeServed, callServed, startServedDeployment, type ServedDeployment, type StoreKind } from "../support/deployment-serve.ts";
import { annotatedTool, startMcpServer, type RunningMcpServer, type TestTool } from "../support/mcp-server.ts";
import { startAuthServer, type RunningAuthServer } from "../support/oauth-server.ts";
import { startReplicas, type Replicas } from "../support/replicas.ts";

const INITIALIZE = { jsonrpc: "2.0", id: 0, method: "initialize", params: { protocolVersion: "2025-06-18", capabilities: {}, clientInfo: { name: "limits-test", version: "1" } } };
/** A tool whose call runs for two minutes: a call in progress. */
const SLOW: TestTool = { ...annotatedTool("slow"), work: { steps: 1200, everyMs: 100, reports: false } };

async function waitFor(condition: () => boolean | Promise<boolean>, what: () => string, timeoutMs = 30_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await condition())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what()}`);
    await new Promise((r) => setTimeout(r, 25));
  }
}

/** An MCP request to an agent's endpoint, with `token`, on a session or (without one) an initialize. */
async function mcp(endpoint: string, token: string, options: { session?: string; method?: string; body?: unknown } = {}) {
  const res = await fetch(endpoint, {
    method: options.method ?? "POST",
    headers: {
      authorization: `Bearer ${token}`,
      "content-type": "application/json",
      accept: "application/json, text/event-stream",
      ...(options.session ? { "mcp-session-id": options.session, "mcp-protocol-version": "2025-06-18" } : {}),
    },
    ...(options.method === "GET" || options.method === "DELETE" ? {} : { body: JSON.stringify(options.body ?? INITIALIZE) }),
  });
  return res;
}

/** A new session's id, or the refusal. */
async function initialize(endpoint: string, token: string): Promise<{ status: number; session: string | null; retryAfter: string | null; text: string }> {
  const res = await mcp(endpoint, token);
  return { status: res.status, session: res.headers.get("mcp-session-id"), retryAfter: res.headers.get("retry-after"), text: await res.text() };
}

/**
 * An answer streamed to the client (a GET stream, a call in progress): whether it has ended yet
 * (its body ended or was cut), and what it carried. The SDK's transport sends a call's headers
 * with its first event, so a call's answer is not awaited before it is watched.
 */
function streaming(answer: Promise<Response>): { ended: () => boolean; text: () => string; close: () => Promise<void> } {
  let ended = false;
  let text = "";
  let reader: ReadableStreamDefaultReader<Uint8Array> | undefined;
  void (async () => {
    try {
      reader = (await answer).body!.getReader();
      for (;;) {
        const chunk = await reader.read();
        if (chunk.done) break;
        text += Buffer.from(chunk.value).toString("utf8");
      }
    } catch {
      // Cut rather than ended: ended all the same.
    }
    ended = true;
  })();
  // The client going away: a stream left open would hold the deployment's stop for its whole drain
  // time (src/deployment/serve.ts), which is not what these tests are about.
  const close = async () => {
    await reader?.cancel().catch(() => {});
    await waitFor(() => ended, () => "the stream to end on this side");
  };
  return { ended: () => ended, text: () => text, close };
}

/** A GET stream, once the server accepted it. */
async function getStream(endpoint: string, token: string, session: string): Promise<ReturnType<typeof streaming>> {
  const res = await mcp(endpoint, token, { session, method: "GET" });
  assert.equal(res.status, 200, `the GET stream of ${session}`);
  return streaming(Promise.resolve(res));
}

/** A TCP connection that never sends a byte. */
function idle(url: string): Promise<{ socket: Socket; closed: () => boolean }> {
  const { hostname, port } = new URL(url);
  return new Promise((resolve, reject) => {
    const socket = connect(Number(port), hostname);
    let closed = false;
    socket.on("close", () => (closed = true));
    socket.on("error", () => {});
    // Read what comes (a 408 from node:http), so the server's end of the connection is seen.
    socket.resume();
    socket.once("connect", () => resolve({ socket, closed: () => closed }));
    socket.once("error", reject);
  });
}

/** Declares the connection `tracker` (authorized) and the agents `helper` and `scribe` on it. */
async function declare(d: ServedDeployment, mcpUrl: string): Promise<void> {
  assert.deepEqual(await authorizeServed(d, "tracker", { url: mcpUrl }), { status: "authorized" });
  for (const agent of ["helper", "scribe"]) assert.equal((await callServed(d, "PUT", `/v1/agents/${agent}`, { mcp: [{ id: "tracker" }] })).status, 201);
}

describe("connections of subs deployment serve", () => {
  let authServer: RunningAuthServer;
  let upstream: RunningMcpServer;
  let d: ServedDeployment;
  before(async () => {
    authServer = await startAuthServer();
    upstream = await startMcpServer({ tools: [annotatedTool("search")], oauth: { authServer } });
    d = await startServedDeployment({ env: { SUBS_DEPLOYMENT_MAX_CONNECTIONS: "20" } });
    await declare(d, upstream.url);
  });
  after(async () => {
    await d.close();
    await upstream.close();
    await authServer.close();
  });

  test("40 connections that never send a byte, past a cap of 20: the oldest give way to an admin request and to health probes, all are closed within seconds, and an authenticated GET stream is kept", async () => {
    const endpoint = `${d.direct}/v1/agents/helper/mcp`;
    const useToken = await d.tokenFor("use");
    const started = await initialize(endpoint, useToken);
    assert.equal(started.status, 200, started.text);
    const stream = await getStream(endpoint, useToken, started.session!);

    const held: Array<Awaited<ReturnType<typeof idle>>> = [];
    for (let n = 0; n < 40; n++) held.push(await idle(d.direct));
    // 41 connections or more (the stream's among them) for 20 places: the oldest idle ones go
    // first, while the newest are still open (a deadline would have closed them all at once).
    await waitFor(() => held.filter((h) => h.closed()).length >= 21, () => `21 of 40 idle connections closed (${held.filter((h) => h.closed()).length})`);
    assert.equal(held.at(-1)!.closed(), false, "the newest idle connection is still open: the oldest gave way");
    assert.ok(held.slice(0, 21).every((h) => h.closed()), "the oldest went first");

    const probes = await Promise.all(["/healthz", "/readyz"].map((p) => fetch(`${d.direct}${p}`).then((r) => r.status)));
    assert.deepEqual(probes, [200, 200], "health probes, without a token, are answered");
    const listed = await fetch(`${d.direct}/v1/mcp`, { headers: { authorization: `Bearer ${d.token}` } });
    assert.equal(listed.status, 200, "the admin token's request is answered");
    // Longer than a balancer keeps an idle upstream connection, so the balancer closes it first.
    assert.equal(listed.headers.get("keep-alive"), "timeout=75");
    await listed.text();

    // A connection that sent no request at all is closed after a few seconds, wherever the cap is.
    await waitFor(() => held.every((h) => h.closed()), () => `every idle connection closed (${held.filter((h) => !h.closed()).length} open)`);
    assert.equal(stream.ended(), false, "the authenticated GET stream is kept past that deadline");
    const called = await mcp(endpoint, useToken, { session: started.session!, body: { jsonrpc: "2.0", id: 1, method: "tools/call", params: { name: "search", arguments: { q: "x" } } } });
    assert.equal(called.status, 200);
    assert.match(await called.text(), /\\"q\\":\\"x\\"/);
    await stream.close();
  });
});

test("a limit that is not a positive whole number refuses to start (exit 2), naming its variable", async () => {
  const dir = mkdtempSync(path.join(tmpdir(), "subs-limits-"));
  try {
    for (const [name, value] of [["SUBS_DEPLOYMENT_MAX_CONNECTIONS", "0"], ["SUBS_DEPLOYMENT_MAX_SESSIONS_PER_TOKEN", "2.5"]] as const) {
      const run = await runCli(["deployment", "serve", "--listen", "127.0.0.1:0", "--store", "data"], { cwd: dir, env: { [name]: value } });
      assert.equal(run.code, 2, run.stderr);
      assert.match(run.stderr, new RegExp(`\\$${name} "${value.replace(".", "\\.")}": must be a positive whole number`));
    }
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

const TOPOLOGIES: Array<{ store: StoreKind; replicas: number }> = [
  { store: "sqlite", replicas: 1 },
  { store: "postgres", replicas: 2 },
];

for (const { store, replicas } of TOPOLOGIES) describe(`MCP sessions per API token, ${replicas} process(es) on ${store}`, () => {
  let authServer: RunningAuthServer;
  let upstream: RunningMcpServer;
  let set: Replicas;
  const dir = mkdtempSync(path.join(tmpdir(), "subs-limits-"));
  const endpoint = (agent: string) => `${set.balancer.url}/v1/agents/${agent}/mcp`;
  /** The next request goes to replica `n`. */
  const on = (n: number) => void (set.balancer.next = n % replicas);
  /** The sessions the store keeps for a token id. */
  const storedSessions = async (owner: string): Promise<number> => {
    const d = set.front;
    if (store === "sqlite") {
      const db = new Database(d.dbPath, { readonly: true });
      try {
        return (db.prepare("SELECT count(*) AS n FROM mcp_sessions WHERE owner = ?").get(owner) as { n: number }).n;
      } finally {
        db.close();
      }
    }
    const [row] = await d.postgres!.query<{ n: string }>(d.storeArg, "SELECT count(*) AS n FROM mcp_sessions WHERE owner = $1", [owner]);
    return Number(row!.n);
  };

  before(async () => {
    authServer = await startAuthServer();
    upstream = await startMcpServer({ tools: [annotatedTool("search"), SLOW], oauth: { authServer } });
    set = await startReplicas(replicas, { store, env: { SUBS_DEPLOYMENT_MAX_SESSIONS_PER_TOKEN: "3" } });
    await declare(set.front, upstream.url);
  });
  after(async () => {
    await set.close();
    await upstream.close();
    await authServer.close();
    rmSync(dir, { recursive: true, force: true });
  });

  test("a token holds at most 3 sessions on all agents and processes together: the next initialize is 503 with Retry-After naming that limit, another token still starts one, and a DELETE makes room", async () => {
    const [greedy, other] = [await set.front.tokenFor("use"), await set.front.tokenFor("use")];
    const sessions: string[] = [];
    for (let n = 0; n < 3; n++) {
      on(n);
      const started = await initialize(endpoint(n % 2 ? "scribe" : "helper"), greedy);
      assert.equal(started.status, 200, started.text);
      sessions.push(started.session!);
    }
    for (let n = 0; n < 4; n++) {
      on(n);
      const refused = await initialize(endpoint(n % 2 ? "scribe" : "helper"), greedy);
      assert.equal(refused.status, 503, `the 4th session, on replica ${n % replicas}: ${refused.text}`);
      assert.match(refused.text, /too many sessions for this API token \(at most 3, on all agents together\)/);
      assert.ok(Number(refused.retryAfter) >= 1, `Retry-After: ${refused.retryAfter}`);
    }
    const others = await initialize(endpoint("helper"), other);
    assert.equal(others.status, 200, "another token is not held back");

    on(1);
    const ended = await mcp(endpoint("helper"), greedy, { session: sessions[0]!, method: "DELETE" });
    assert.equal(ended.status, 200);
    on(0);
    assert.equal((await initialize(endpoint("helper"), greedy)).status, 200, "a DELETE made room");
  });

  test("`subs deployment token revoke` ends the token's sessions, GET streams and calls in progress on every process within seconds, and deletes them from the store; another token's session goes on, and a new token starts one", async () => {
    const made = await runCli(["deployment", "token", "create", "--name", "leaver", "--role", "use", "--store", set.front.storeArg], { cwd: dir });
    assert.equal(made.code, 0, made.stderr);
    const leaver = made.stdout.trim();
    const leaverId = /made use token ([0-9a-f]{12})/.exec(made.stderr)![1]!;
    const stayer = await set.front.tokenFor("use");
    const callsBefore = upstream.requests.filter((m) => m === "tools/call").length;

    // Two sessions of the leaver's, each with its GET stream on another process than its call in
    // progress, so that with two replicas each holds both; and the stayer's session with its stream.
    const streams: Array<{ ended: () => boolean }> = [];
    const calls: Array<{ ended: () => boolean; text: () => string }> = [];
    const leaverSessions: string[] = [];
    for (const agent of ["helper", "scribe"]) {
      on(0);
      const started = await initialize(endpoint(agent), leaver);
      assert.equal(started.status, 200, started.text);
      leaverSessions.push(started.session!);
      on(1);
      streams.push(await getStream(endpoint(agent), leaver, started.session!));
      on(0);
      calls.push(streaming(mcp(endpoint(agent), leaver, { session: started.session!, body: { jsonrpc: "2.0", id: 1, method: "tools/call", params: { name: "slow", arguments: {} } } })));
    }
    await waitFor(() => upstream.requests.filter((m) => m === "tools/call").length >= callsBefore + 2, () => "both calls to be running upstream");
    const open = [...streams, ...calls];
    const kept = await initialize(endpoint("helper"), stayer);
    assert.equal(kept.status, 200);
    const keptStream = await getStream(endpoint("helper"), stayer, kept.session!);
    assert.equal(await storedSessions(leaverId), 2);

    const revoked = await runCli(["deployment", "token", "revoke", "leaver", "--store", set.front.storeArg], { cwd: dir });
    assert.equal(revoked.code, 0, revoked.stderr);
    await waitFor(() => open.every((s) => s.ended()), () => `every stream and call of the revoked token ended (${open.filter((s) => !s.ended()).length} of ${open.length} open)`);
    assert.ok(calls.every((c) => !c.text().includes('"result"')), "the calls were cut, not answered (a call answers after a minute)");
    assert.equal(await storedSessions(leaverId), 0, "its sessions are gone from the store");
    for (const [n, replica] of set.replicas.entries()) {
      await waitFor(
        () => replica.logs.some((l) => l.msg === "ended the sessions of a revoked token" && l.token === leaverId),
        // What it logged of sessions instead, should it never say so: the failure's only witness.
        () => `replica ${n} to log the sessions it ended (it logged: ${JSON.stringify(replica.logs.filter((l) => /session/.test(String(l.msg))).slice(-8))})`,
      );
    }
    for (let n = 0; n < replicas; n++) {
      on(n);
      const res = await mcp(endpoint("helper"), leaver, { session: leaverSessions[0]!, body: { jsonrpc: "2.0", id: 2, method: "tools/list" } });
      assert.equal(res.status, 401, `the revoked token's next request on replica ${n}`);
      await res.text();
    }

    assert.equal(keptStream.ended(), false, "another token's GET stream goes on");
    for (let n = 0; n < replicas; n++) {
      on(n);
      const listed = await mcp(endpoint("helper"), stayer, { session: kept.session!, body: { jsonrpc: "2.0", id: 3, method: "tools/list" } });
      assert.equal(listed.status, 200, `another token's session on replica ${n}`);
      assert.match(await listed.text(), /"search"/);
    }
    assert.equal((await initialize(endpoint("scribe"), await set.front.tokenFor("use"))).status, 200, "a new token starts a session");
    await keptStream.close();
  });
});
