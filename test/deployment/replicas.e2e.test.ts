// Three `subs deployment serve` processes on one store (one SQLite file, or one Postgres database)
// behind a round-robin balancer (test/support/replicas.ts): any replica answers any request of a consent
// (docs/deployment-protocol.md sections 3.4 and 3.5), a code is exchanged once however many
// replicas its redirect reaches, and a consent outlives a restart of every process.
import assert from "node:assert/strict";
import { randomBytes } from "node:crypto";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import Database from "better-sqlite3";
import { after, before, describe, test } from "node:test";
import { authorizeServed, callServed, STORES } from "../support/deployment-serve.ts";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { annotatedTool, startMcpServer, type RunningMcpServer } from "../support/mcp-server.ts";
import { digestOf, faceOf } from "../../src/config/tool-lock.ts";
import { ensureInspector, inspect } from "../support/inspector.ts";
import { echoesOf, startQuotingServer } from "../support/mcp-quoting-server.ts";
import { startAuthServer, type RunningAuthServer } from "../support/oauth-server.ts";
import { meetingPoint } from "../support/balancer.ts";
import { startReplicas, type Replicas } from "../support/replicas.ts";

for (const store of STORES) describe(`subs deployment serve as three replicas on one ${store} store behind a round-robin balancer`, () => {
  let set: Replicas;
  const servers: Array<RunningAuthServer | RunningMcpServer> = [];
  before(async () => {
    set = await startReplicas(3, { store });
  });
  after(async () => {
    await set.close();
    for (const s of servers) await s.close();
  });
  const call = (method: string, pathname: string, body?: unknown) => callServed(set.front, method, pathname, body);
  /** The next request goes to replica `n` (0, 1, 2); the answer says which one served it. */
  const on = async <T>(n: number, request: () => Promise<T>): Promise<T> => {
    set.balancer.next = n;
    const before = set.balancer.served.length;
    const answer = await request();
    assert.equal(set.balancer.served[before], n, `replica ${n} served it`);
    return answer;
  };
  const protectedServer = async (options: Parameters<typeof startAuthServer>[0] = {}) => {
    const authServer = await startAuthServer(options);
    const mcp = await startMcpServer({ tools: [annotatedTool("search")], oauth: { authServer } });
    servers.push(authServer, mcp);
    return { authServer, mcp };
  };
  /** POSTs the consent's start; follows the authorization server's answer up to the redirect back, which it returns unvisited. */
  const startConsent = async (id: string) => {
    const started = await call("POST", `/v1/mcp/${id}/authorizations`, {});
    assert.equal(started.status, 201, JSON.stringify(started.body));
    const consent = await fetch(started.body.authorization_url, { redirect: "manual" });
    await consent.body?.cancel();
    const redirect = consent.headers.get("location");
    assert.ok(redirect?.startsWith(`${set.balancer.url}/oauth/callback?`), `redirected to the balancer's callback: ${redirect}`);
    return { redirect: redirect!, poll: new URL(started.body.poll_url, set.balancer.url).pathname };
  };
  const visit = async (url: string) => {
    const res = await fetch(url);
    return { status: res.status, text: await res.text() };
  };

  test("started on A, the redirect lands on B, the poll on C: authorized; the same redirect replayed to A is refused and its code never sent again", async () => {
    const { authServer, mcp } = await protectedServer();
    assert.equal((await call("PUT", "/v1/mcp/tracker", { url: mcp.url, prefix_tools: false })).status, 201);
    const { redirect, poll } = await on(0, () => startConsent("tracker"));
    assert.equal((await on(0, () => call("GET", poll))).body.status, "pending");
    const landed = await on(1, () => visit(redirect));
    assert.equal(landed.status, 200, landed.text);
    assert.match(landed.text, /Authorized/);
    assert.deepEqual((await on(2, () => call("GET", poll))).body, { status: "authorized" });
    const replayed = await on(0, () => visit(redirect));
    assert.equal(replayed.status, 400);
    assert.equal(authServer.counters.codeExchanges, 1);
    assert.deepEqual(authServer.rejections, [], "no code reached the token endpoint twice");
    assert.deepEqual((await on(2, () => call("GET", poll))).body, { status: "authorized" }, "the replay changed nothing");
    assert.equal((await on(1, () => call("GET", "/v1/mcp/tracker/tools"))).status, 200);
  });

  // The race is made, not hoped for: the balancer holds the two callbacks until both have arrived
  // and forwards them together, to replicas 1 and 2. With the store's claim taking a consent once
  // left out (the `claimed` condition, on either store), both replicas went on to the exchange in
  // round 1; ROUNDS rounds leave room for a machine that orders them otherwise now and then.
  const ROUNDS = 3;
  test("one redirect reaching two replicas at once is exchanged by one of them only", async () => {
    const { authServer, mcp } = await protectedServer({ codeExchangeDelayMs: 300 });
    assert.equal((await call("PUT", "/v1/mcp/twice", { url: mcp.url, prefix_tools: false })).status, 201);
    for (let round = 1; round <= ROUNDS; round++) {
      const { redirect, poll } = await on(0, () => startConsent("twice"));
      const point = meetingPoint((req) => req.url?.startsWith("/oauth/callback?") ?? false);
      set.balancer.hold = point.hold;
      set.balancer.next = 1;
      const exchanges = authServer.counters.codeExchanges;
      const before = set.balancer.served.length;
      try {
        const both = await Promise.all([visit(redirect), visit(redirect)]);
        assert.ok(point.met, `round ${round}: the two callbacks did not meet at the balancer (${point.arrived} arrived)`);
        assert.deepEqual(set.balancer.served.slice(before), [1, 2], `round ${round}: each callback reached its own replica`);
        assert.deepEqual(both.map((a) => a.status).sort(), [200, 400], `round ${round}: ${JSON.stringify(both)}`);
      } finally {
        point.end();
        set.balancer.hold = undefined;
      }
      assert.equal(authServer.counters.codeExchanges, exchanges + 1, `round ${round}: the code was exchanged once`);
      assert.deepEqual(authServer.rejections, [], `round ${round}`);
      assert.deepEqual((await call("GET", poll)).body, { status: "authorized" }, `round ${round}`);
    }
  });

  test("a newer start on B supersedes a pending one of A, and a url change made on C ends B's, as read from any replica", async () => {
    const { mcp } = await protectedServer();
    const other = await protectedServer();
    assert.equal((await call("PUT", "/v1/mcp/moving", { url: mcp.url, prefix_tools: false })).status, 201);
    const first = await on(0, () => startConsent("moving"));
    const second = await on(1, () => startConsent("moving"));
    assert.equal((await on(2, () => call("GET", first.poll))).body.error, "superseded");
    assert.equal((await on(0, () => call("PUT", "/v1/mcp/moving", { url: other.mcp.url, prefix_tools: false }))).status, 200);
    assert.equal((await on(1, () => call("GET", second.poll))).body.error, "connection_changed");
    assert.equal((await on(2, () => visit(second.redirect))).status, 400, "an ended consent's redirect exchanges nothing");
  });

  test("a credential due for refresh, 24 requests at once spread over the three: one refresh, its rotating refresh token never reused, every request answered", async () => {
    // Rotating refresh tokens, any reuse rejected (and the grant with it), a slow token endpoint.
    // A refreshed access token lives an hour: with the 4 s one it replaced, a burst spread over
    // more than 2 s by a loaded machine (two suites at once) found the new token due too and
    // refreshed it again, a second refresh that was right. Round 2 makes the credential due again
    // by the MCP server no longer honouring its access token (401): a replica that kept the first
    // refresh token in memory would send it again, rejected.
    const { authServer, mcp } = await protectedServer({ accessTokenTtlSeconds: 4, refreshedAccessTokenTtlSeconds: 3600, refreshDelayMs: 400 });
    assert.deepEqual(await authorizeServed(set.front, "rotating", { url: mcp.url }), { status: "authorized" });
    for (let round = 1; round <= 2; round++) {
      // Round 1: past the first half of the token's life, due for refresh on every replica.
      if (round === 1) await new Promise((r) => setTimeout(r, 2600));
      else authServer.forgetAccessTokens();
      const answers = await Promise.all(Array.from({ length: 24 }, () => call("GET", "/v1/mcp/rotating/tools")));
      assert.deepEqual(answers.map((a) => a.status), Array(24).fill(200), JSON.stringify(answers.find((a) => a.status !== 200)?.body));
      assert.equal(authServer.counters.refreshes, round, `round ${round}: one refresh across the three replicas`);
      assert.equal(authServer.counters.rejectedRefreshes, 0, "no refresh token was sent twice");
    }
    assert.equal(new Set(set.balancer.served.slice(-24)).size, 3, "every replica had requests");
  });

  test("an agent's MCP session started on one replica continues on the others: 30 calls through the balancer all answered, the tools never listed again; another token's request with its id is 404 on every replica; DELETE ends it everywhere", async () => {
    const { mcp } = await protectedServer();
    assert.deepEqual(await authorizeServed(set.front, "shared", { url: mcp.url }), { status: "authorized" });
    assert.equal((await call("PUT", "/v1/agents/helper", { mcp: [{ id: "shared" }] })).status, 201);
    const [useToken, otherToken] = [await set.front.tokenFor("use"), await set.front.tokenFor("use")];
    const endpoint = `${set.balancer.url}/v1/agents/helper/mcp`;
    const transport = new StreamableHTTPClientTransport(new URL(endpoint), { requestInit: { headers: { authorization: `Bearer ${useToken}` } } });
    const client = new Client({ name: "replicas-test", version: "1.0.0" });
    const first = set.balancer.served.length;
    await client.connect(transport);
    const sessionId = transport.sessionId!;
    assert.ok(sessionId);
    assert.deepEqual((await client.listTools()).tools.map((t) => t.name), ["search"]);
    for (let n = 0; n < 30; n++) {
      const result = (await client.callTool({ name: "search", arguments: { n } })) as { content: Array<{ text: string }>; isError?: boolean };
      assert.equal(result.isError, undefined, JSON.stringify(result));
      assert.deepEqual(result.content, [{ type: "text", text: JSON.stringify({ n }) }]);
    }
    assert.equal(new Set(set.balancer.served.slice(first)).size, 3, "the session's requests reached every replica");
    assert.equal(mcp.requests.filter((m) => m === "tools/list").length, 1, "the tools were listed once, when the session started");
    const withId = (token: string, method = "POST") =>
      fetch(endpoint, {
        method,
        headers: { authorization: `Bearer ${token}`, "mcp-session-id": sessionId, "mcp-protocol-version": "2025-06-18", "content-type": "application/json", accept: "application/json, text/event-stream" },
        ...(method === "POST" ? { body: JSON.stringify({ jsonrpc: "2.0", id: 99, method: "tools/list" }) } : {}),
      });
    for (let n = 0; n < 3; n++) {
      set.balancer.next = n;
      const res = await withId(otherToken);
      await res.body?.cancel();
      assert.equal(res.status, 404, `another token's request on replica ${n}`);
    }
    set.balancer.next = 1;
    await transport.terminateSession();
    for (let n = 0; n < 3; n++) {
      set.balancer.next = n;
      const res = await withId(useToken);
      await res.body?.cancel();
      assert.equal(res.status, 404, `after DELETE, replica ${n}`);
    }
    await client.close();
  });

  test("a session's kept tools hold no credential: a server quoting its token in every field of its tools hands it to no replica's client, nor to the store", async () => {
    const quoting = await startQuotingServer();
    try {
      const token = `quoted-${randomBytes(16).toString("hex")}`;
      assert.equal((await call("PUT", "/v1/mcp/quoter", { url: quoting.url, prefix_tools: false })).status, 201);
      set.front.credentials.set("quoter", { url: quoting.url, tokens: { access_token: token, token_type: "bearer" }, authorizedAt: Date.now(), expiresAt: null });
      assert.equal((await call("PUT", "/v1/agents/quoted", { mcp: [{ id: "quoter" }] })).status, 201);
      const transport = new StreamableHTTPClientTransport(new URL(`${set.balancer.url}/v1/agents/quoted/mcp`), { requestInit: { headers: { authorization: `Bearer ${set.front.token}` } } });
      const client = new Client({ name: "replicas-test", version: "1.0.0" });
      await client.connect(transport);
      const listings: string[] = [];
      for (let n = 0; n < 3; n++) {
        set.balancer.next = n;
        listings.push(JSON.stringify((await client.listTools()).tools));
      }
      assert.ok(quoting.authorizations.includes(`Bearer ${token}`), "the server received the credential (and quoted it)");
      assert.ok(JSON.parse(listings[0]!).length > 0);
      assert.equal(new Set(listings).size, 1, "every replica serves the same tools");
      const front = set.front;
      const kept = front.postgres
        ? await front.postgres.query<{ snapshot_json: string }>(front.storeArg, "SELECT snapshot_json FROM mcp_sessions")
        : (new Database(front.dbPath, { readonly: true }).prepare("SELECT snapshot_json FROM mcp_sessions").all() as Array<{ snapshot_json: string }>);
      assert.ok(kept.length > 0);
      for (const form of echoesOf(`Bearer ${token}`)) {
        assert.ok(!listings.some((l) => l.includes(form)), `a client received the token as ${JSON.stringify(form.slice(0, 12))}…`);
        assert.ok(!kept.some((k) => k.snapshot_json.includes(form)), "the store holds the token");
      }
      await client.close();
    } finally {
      await quoting.close();
    }
  });

  test("under a lock, a session continued on another replica refuses a withheld tool with the reason, as the replica that started it does", async () => {
    const authServer = await startAuthServer();
    const mcp = await startMcpServer({ tools: [annotatedTool("search"), annotatedTool("wipe")], oauth: { authServer } });
    servers.push(authServer, mcp);
    assert.deepEqual(await authorizeServed(set.front, "locked", { url: mcp.url }), { status: "authorized" });
    const listed = (await call("GET", "/v1/mcp/locked/tools")).body.tools as Array<{ name: string }>;
    const face = faceOf(listed.find((t) => t.name === "search")!);
    const entry = { connection: "locked", name: "search", digest: digestOf(face), ...(face.description !== undefined ? { description: face.description } : {}), ...(face.inputSchema !== undefined ? { input_schema: face.inputSchema } : {}), ...(face.annotations !== undefined ? { annotations: face.annotations } : {}) };
    const connections = (await call("GET", "/v1/mcp")).body.connections.map((c: { id: string; url: string; prefix_tools: boolean }) => ({ id: c.id, url: c.url, prefix_tools: c.prefix_tools }));
    const put = await call("PUT", "/v1/state", { connections, agents: [{ name: "locked", mcp: [{ id: "locked" }] }], prune: false, lock: { tools: [entry] } });
    assert.equal(put.status, 200, JSON.stringify(put.body));
    try {
      const useToken = await set.front.tokenFor("use");
      const client = new Client({ name: "replicas-lock-test", version: "1.0.0" });
      await client.connect(new StreamableHTTPClientTransport(new URL(`${set.balancer.url}/v1/agents/locked/mcp`), { requestInit: { headers: { authorization: `Bearer ${useToken}` } } }));
      assert.deepEqual((await client.listTools()).tools.map((t) => t.name), ["search"]);
      for (let n = 0; n < 3; n++) {
        set.balancer.next = n;
        await assert.rejects(client.callTool({ name: "wipe", arguments: {} }), (e: Error & { code?: number }) => e.code === -32602 && /`wipe` is withheld: not locked/.test(e.message), `replica ${n}`);
      }
      await client.close();
    } finally {
      // The lock holds for every agent of the set: gone for the tests after this one.
      assert.equal((await call("PUT", "/v1/state", { connections, agents: [], prune: false, lock: null })).status, 200);
    }
  });

  // One store: what the Inspector's session does across replicas (its requests on any of them,
  // the session found in the store by each) the SDK client's test above holds on each store. It
  // runs on Postgres here, the store of replicas on several machines, and on SQLite in agents.e2e,
  // against one process. Each of its runs is a Node 22 process (about a second of CPU).
  if (store === "postgres") {
    test("the MCP Inspector's CLI, whose session's requests the balancer spreads over the three, lists and calls the agent's tools", async () => {
      ensureInspector();
      const { mcp } = await protectedServer();
      assert.deepEqual(await authorizeServed(set.front, "inspected", { url: mcp.url }), { status: "authorized" });
      assert.equal((await call("PUT", "/v1/agents/viewer", { mcp: [{ id: "inspected" }] })).status, 201);
      const dir = mkdtempSync(path.join(tmpdir(), "subs-replicas-inspector-"));
      try {
        const http = ["--transport", "http", "--server-url", `${set.balancer.url}/v1/agents/viewer/mcp`, "--stored-auth-only", "--header", `Authorization: Bearer ${set.front.token}`];
        const before = set.balancer.served.length;
        const listed = await inspect([...http, "--method", "tools/list"], { cwd: dir, timeoutMs: 60_000 });
        assert.equal(listed.code, 0, listed.stderr);
        assert.deepEqual((listed.result as { tools: Array<{ name: string }> }).tools.map((t) => t.name), ["search"]);
        const called = await inspect([...http, "--method", "tools/call", "--tool-name", "search", "--tool-args-json", '{"via":"inspector"}'], { cwd: dir, timeoutMs: 60_000 });
        assert.equal(called.code, 0, called.stderr);
        assert.deepEqual((called.result as { content: unknown }).content, [{ type: "text", text: '{"via":"inspector"}' }]);
        assert.ok(new Set(set.balancer.served.slice(before)).size >= 2, "its requests reached more than one replica");
      } finally {
        rmSync(dir, { recursive: true, force: true });
      }
    });
  }

  // Last: it leaves one process. A consent outlives its processes when it is in the store alone, so
  // one process started after every one of the three stopped (not three again, 1.2 s of CPU less)
  // shows it; that any replica answers any step of a consent is the first test's.
  test("every process stopped while a consent is pending, and one started again: its redirect and poll still complete it", async () => {
    const { authServer, mcp } = await protectedServer();
    assert.equal((await call("PUT", "/v1/mcp/survivor", { url: mcp.url, prefix_tools: false })).status, 201);
    const { redirect, poll } = await on(2, () => startConsent("survivor"));
    await set.restartAll(1);
    assert.deepEqual(set.balancer.backends, [set.front.direct], "one process, new, serves");
    const landed = await visit(redirect);
    assert.equal(landed.status, 200, landed.text);
    assert.deepEqual((await call("GET", poll)).body, { status: "authorized" });
    assert.equal(authServer.counters.codeExchanges, 1);
    assert.equal((await call("GET", "/v1/mcp/survivor/tools")).status, 200);
  });
});
