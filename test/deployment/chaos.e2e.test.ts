// kill -9 of one replica of three (one Postgres database, a round-robin balancer) while its refresh,
// a consent and 32 tool calls are in flight (ROUNDS times). What must hold each time: the
// consent completes on another replica, every call either succeeds or fails with an error a client
// retries (the balancer's 502 for the dead one, a dropped connection) and succeeds on retry, the
// credential is never lost, and no refresh token is refused. The kill lands in the one moment a
// kill can lose something: the authorization server has rotated the refresh token the replica
// sent and holds its answer until the replica is dead, so the new tokens die with it. Like Okta
// and Auth0, the server accepts a spent refresh token again for a short grace: the next replica
// retries the spent one (docs/deployment-server.md, "Several replicas"), and that must be the only
// reuse: each round checks that exactly the killed replica's token was presented twice, once.
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { authorizeServed, callServed } from "../support/deployment-serve.ts";
import { annotatedTool, startMcpServer, type RunningMcpServer } from "../support/mcp-server.ts";
import { startAuthServer, type RunningAuthServer } from "../support/oauth-server.ts";
import { startReplicas, type Replicas } from "../support/replicas.ts";
import { waitFor, within } from "../support/wait.ts";

// Each round kills the replica whose refresh is at the authorization server (its answer held until
// the kill), so one round finds a lost refresh token's retry going wrong. 1, where 3 ran (one kill
// of each replica; the replicas are the same program on one store, none of them special): with the
// refresh lock taken out of the Postgres store (replicas refresh at once with one token), or the
// grace set to 0, the first round failed; with ROUNDS at 1 the test failed each way, in round 0
// (the lock out: "a spent refresh token was presented again"; no grace: "a refresh token was
// refused"). (This test once ran 20 rounds whose kills only sometimes met a refresh, and counted
// a round as mid-refresh when none was.)
const ROUNDS = 1;
const IN_FLIGHT = 32;
const SESSIONS = 4;
// The balancer here has no health check: while the victim is down, a third of all attempts reach
// it and get a 502, so a call's chance of failing every attempt is (1/3)^ATTEMPTS. At 8 that was
// about one run in seventy (96 calls a run), seen once in a loaded run; at 16 it is one in
// hundreds of thousands of runs, and a call still has to succeed on a live replica.
const ATTEMPTS = 16;
const TTL_SECONDS = 4;
// A spent refresh token is accepted again for this long after its first use, long enough for a
// loaded machine to get from the rotation to another replica's retry. Its length hides nothing:
// every refresh the server answers is recorded, and each round checks that the only spent token
// presented was the killed replica's, presented once.
const GRACE_MS = 10_000;
// How long the victim's refresh may take to reach the authorization server.
const REFRESH_ARRIVES_WITHIN_MS = 20_000;
// A request whose connection died with its replica gets no answer: the client gives up on it after
// this long and retries, as MCP clients do with their request timeout (the SDK's default is 60 s).
const CALL_TIMEOUT_MS = 4_000;
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
type Called = { content: Array<{ type: string; text: string }>; isError?: boolean };

describe(`kill -9 one of three replicas on Postgres mid-refresh, mid-consent and mid-calls, ${ROUNDS} times`, () => {
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
      // Jittered, as clients back off: retries in step would meet the round-robin in step, and
      // the same one of them would reach the dead replica every time.
      await sleep(100 * attempt * (0.5 + Math.random()));
    }
  }

  test("each time: the consent completes elsewhere, every call succeeds on retry, no credential lost, only the lost refresh token reused, once", async (t) => {
    const refreshes: Array<{ token: string; grace: boolean; round: number }> = [];
    let holdRefresh: ((refresh: { token: string; grace: boolean }) => Promise<void> | undefined) | undefined;
    let round = -1;
    const authServer = await startAuthServer({
      accessTokenTtlSeconds: TTL_SECONDS,
      refreshReuseGraceMs: GRACE_MS,
      onRefresh: (refresh) => {
        refreshes.push({ ...refresh, round });
        return holdRefresh?.(refresh);
      },
    });
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

    for (round = 0; round < ROUNDS; round++) {
      const victim = round % 3;
      // Past half the token's life: the next call refreshes it.
      await sleep((TTL_SECONDS * 1000) / 2 + 200);
      const started = await retried(() => callServed(set.front, "POST", "/v1/mcp/notes/authorizations", {}), (r) => r.status === 201, errors);
      assert.equal(started.status, 201, JSON.stringify(started.body));
      const consent = await fetch(started.body.authorization_url, { redirect: "manual" });
      await consent.body?.cancel();
      const redirect = consent.headers.get("location")!;

      // The first call goes to the victim, which refreshes; the authorization server rotates the
      // refresh token and holds its answer until the victim is dead.
      let arrived!: () => void;
      const refreshArrived = new Promise<void>((resolve) => (arrived = resolve));
      let release!: () => void;
      const released = new Promise<void>((resolve) => (release = resolve));
      const releaseAnyway = setTimeout(release, REFRESH_ARRIVES_WITHIN_MS + 30_000);
      holdRefresh = () => {
        holdRefresh = undefined;
        arrived();
        return released;
      };
      const forwarded = set.balancer.served.length;
      set.balancer.next = victim;
      const calls = [call(round * IN_FLIGHT)];
      try {
        await within(refreshArrived, `round ${round}: a refresh to reach the authorization server`, REFRESH_ARRIVES_WITHIN_MS);
        // The other calls reach every replica and wait for that refresh (one per credential).
        for (let n = 1; n < IN_FLIGHT; n++) calls.push(call(round * IN_FLIGHT + n));
        await waitFor(() => set.balancer.served.length >= forwarded + IN_FLIGHT, `round ${round}: every call to reach a replica`, 20_000);
        await set.kill(victim);
      } finally {
        holdRefresh = undefined;
        release();
        clearTimeout(releaseAnyway);
      }
      // The redirect reaches whichever replica the balancer picks; the dead one is a 502, retried.
      const landed = await retried(async () => (await fetch(redirect)).status, (status) => status === 200, errors);
      assert.equal(landed, 200, `round ${round}: the consent's redirect`);
      const results = await Promise.allSettled(calls);
      // The victim's refresh spent its token and died with the new ones; another replica presented
      // the spent token once (the grace), and nothing else was presented twice.
      const mine = refreshes.filter((r) => r.round === round);
      assert.equal(authServer.counters.rejectedRefreshes, 0, `round ${round}: a refresh token was refused`);
      assert.ok(mine.length >= 2, `round ${round}: ${mine.length} refreshes, expected the victim's and a retry of its token`);
      assert.equal(mine[0]!.grace, false, `round ${round}: the victim's refresh presented a spent token`);
      assert.ok(mine[1]!.grace && mine[1]!.token === mine[0]!.token, `round ${round}: the refresh after the kill did not retry the token the victim spent`);
      assert.deepEqual(mine.slice(2).map((r) => r.grace), mine.slice(2).map(() => false), `round ${round}: a spent refresh token was presented again`);
      results.forEach((r, n) => {
        assert.equal(r.status, "fulfilled", `round ${round}, call ${n}: ${r.status === "rejected" ? r.reason : ""}`);
        assert.deepEqual(r.value.content, [{ type: "text", text: JSON.stringify({ n: round * IN_FLIGHT + n }) }], `round ${round}, call ${n}`);
      });
      const poll = new URL(started.body.poll_url, set.balancer.url).pathname;
      const outcome = await retried(() => callServed(set.front, "GET", poll), (r) => r.status === 200 && r.body.status !== "pending", errors);
      assert.equal(outcome.body.status, "authorized", `round ${round}: ${JSON.stringify(outcome.body)}`);
      await set.revive(victim);
    }
    // The credential is still the deployment's: a call after the last round, on every replica.
    for (let n = 0; n < 3; n++) {
      set.balancer.next = n;
      const listed = await callServed(set.front, "GET", "/v1/mcp/tracker/tools");
      assert.equal(listed.status, 200, JSON.stringify(listed.body));
    }
    t.diagnostic(`${authServer.counters.refreshes} refreshes (${authServer.counters.graceRefreshes} with a token a killed replica had spent), ${errors.length} retried requests`);
    assert.equal(authServer.counters.graceRefreshes, ROUNDS, "a spent refresh token was reused other than once after each kill");
    assert.ok(errors.length > 0, "the kills were felt: some requests had to be retried");
    for (const e of errors) assert.match(e, /502|backend unreachable|fetch failed|socket|ECONNRESET|terminated|other side closed|503|store_unavailable|Request timed out/i, e);
    for (const s of sessions) await s.close().catch(() => {});
  });
});
