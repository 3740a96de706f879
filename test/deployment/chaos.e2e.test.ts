// kill -9 of one replica of three (one Postgres database, a round-robin balancer) while a refresh,
// a consent and 32 tool calls are in flight, 20 times. What must hold each time: the consent
// completes on another replica, every call either succeeds or fails with an error a client retries
// (the balancer's 502 for the dead one, a dropped connection) and succeeds on retry, the
// credential is never lost, and no refresh token is refused. The authorization server rotates
// refresh tokens with a short reuse grace, as Okta and Auth0 can: a replica killed after the
// server rotated the token but before it stored the new one leaves the old one usable a moment,
// and the next refresh retries (docs/deployment-server.md, "Several replicas").
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { authorizeServed, callServed } from "../support/deployment-serve.ts";
import { annotatedTool, startMcpServer, type RunningMcpServer } from "../support/mcp-server.ts";
import { startAuthServer, type RunningAuthServer } from "../support/oauth-server.ts";
import { startReplicas, type Replicas } from "../support/replicas.ts";

const ROUNDS = 20;
const IN_FLIGHT = 32;
const SESSIONS = 4;
const ATTEMPTS = 8;
const TTL_SECONDS = 4;
// A request whose connection died with its replica gets no answer: the client gives up on it after
// this long and retries, as MCP clients do with their request timeout (the SDK's default is 60 s).
const CALL_TIMEOUT_MS = 4_000;
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
type Called = { content: Array<{ type: string; text: string }>; isError?: boolean };

describe("kill -9 one of three replicas on Postgres mid-refresh, mid-consent and mid-calls, 20 times", () => {
  let set: Replicas;
  const servers: Array<RunningAuthServer | RunningMcpServer> = [];
  before(async () => {
    set = await startReplicas(3, { store: "postgres" });
  });
  after(async () => {
    await set.close();
    for (const s of servers) await s.close();
  });

  /** Retries what a client retries: the balancer's 502 and 503s, a connection dropped mid-answer. */
  async function retried<T>(what: () => Promise<T>, ok: (value: T) => boolean, errors: string[]): Promise<T> {
    for (let attempt = 1; ; attempt++) {
      try {
        const value = await what();
        if (ok(value) || attempt === ATTEMPTS) return value;
        errors.push(JSON.stringify(value).slice(0, 200));
      } catch (error) {
        const text = String((error as Error)?.message ?? error);
        errors.push(text.slice(0, 200));
        if (attempt === ATTEMPTS) throw error;
      }
      await sleep(100 * attempt);
    }
  }

  test("each time: the consent completes elsewhere, every call succeeds on retry, no credential lost, no refresh token refused", async (t) => {
    const authServer = await startAuthServer({ accessTokenTtlSeconds: TTL_SECONDS, refreshDelayMs: 300, refreshReuseGraceMs: 10_000 });
    const mcp = await startMcpServer({ tools: [annotatedTool("search")], oauth: { authServer } });
    const consentServer = await startAuthServer();
    const consentMcp = await startMcpServer({ tools: [annotatedTool("notes")], oauth: { authServer: consentServer } });
    servers.push(authServer, mcp, consentServer, consentMcp);
    assert.deepEqual(await authorizeServed(set.front, "tracker", { url: mcp.url, prefix_tools: true }), { status: "authorized" });
    assert.equal((await callServed(set.front, "PUT", "/v1/mcp/notes", { url: consentMcp.url, prefix_tools: true })).status, 201);
    assert.equal((await callServed(set.front, "PUT", "/v1/agents/ops", { mcp: [{ id: "tracker" }] })).status, 201);
    const useToken = await set.front.tokenFor("use");
    const errors: string[] = [];
    const sessions = await Promise.all(
      Array.from({ length: SESSIONS }, async () => {
        const client = new Client({ name: "chaos-test", version: "1.0.0" });
        await client.connect(new StreamableHTTPClientTransport(new URL(`${set.balancer.url}/v1/agents/ops/mcp`), { requestInit: { headers: { authorization: `Bearer ${useToken}` } } }));
        return client;
      }),
    );
    const call = (n: number) =>
      retried(
        () => sessions[n % SESSIONS]!.callTool({ name: "tracker__search", arguments: { n } }, undefined, { timeout: CALL_TIMEOUT_MS }) as Promise<Called>,
        (r) => r.isError === undefined,
        errors,
      );

    let killedDuringRefresh = 0;
    for (let round = 0; round < ROUNDS; round++) {
      // Past half the token's life: the next calls refresh it (300 ms at the server).
      await sleep((TTL_SECONDS * 1000) / 2 + 200);
      const refreshesBefore = authServer.counters.refreshes;
      const started = await retried(() => callServed(set.front, "POST", "/v1/mcp/notes/authorizations", {}), (r) => r.status === 201, errors);
      assert.equal(started.status, 201, JSON.stringify(started.body));
      const consent = await fetch(started.body.authorization_url, { redirect: "manual" });
      await consent.body?.cancel();
      const redirect = consent.headers.get("location")!;
      const calls = Array.from({ length: IN_FLIGHT }, (_, n) => call(round * IN_FLIGHT + n));
      await sleep(120);
      const victim = round % 3;
      if (authServer.counters.refreshes === refreshesBefore) killedDuringRefresh++;
      await set.kill(victim);
      // The redirect reaches whichever replica the balancer picks; the dead one is a 502, retried.
      const landed = await retried(async () => (await fetch(redirect)).status, (status) => status === 200, errors);
      assert.equal(landed, 200, `round ${round}: the consent's redirect`);
      const results = await Promise.all(calls);
      results.forEach((r, n) => assert.deepEqual(r.content, [{ type: "text", text: JSON.stringify({ n: round * IN_FLIGHT + n }) }], `round ${round}, call ${n}`));
      const poll = new URL(started.body.poll_url, set.balancer.url).pathname;
      const outcome = await retried(() => callServed(set.front, "GET", poll), (r) => r.status === 200 && r.body.status !== "pending", errors);
      assert.equal(outcome.body.status, "authorized", `round ${round}: ${JSON.stringify(outcome.body)}`);
      await set.revive(victim);
      assert.equal(authServer.counters.rejectedRefreshes, 0, `round ${round}: a refresh token was refused`);
    }
    // The credential is still the deployment's: a call after the last round, on every replica.
    for (let n = 0; n < 3; n++) {
      set.balancer.next = n;
      const listed = await callServed(set.front, "GET", "/v1/mcp/tracker/tools");
      assert.equal(listed.status, 200, JSON.stringify(listed.body));
    }
    t.diagnostic(`${authServer.counters.refreshes} refreshes (${authServer.counters.graceRefreshes} with a token a killed replica had spent), ${killedDuringRefresh} kills during a refresh, ${errors.length} retried requests`);
    assert.ok(authServer.counters.refreshes >= ROUNDS, `a refresh every round (${authServer.counters.refreshes})`);
    assert.ok(killedDuringRefresh > 0, "some kills landed while a refresh was at the server");
    assert.ok(errors.length > 0, "the kills were felt: some requests had to be retried");
    for (const e of errors) assert.match(e, /502|backend unreachable|fetch failed|socket|ECONNRESET|terminated|other side closed|503|store_unavailable|Request timed out/i, e);
    for (const s of sessions) await s.close().catch(() => {});
  });
});
