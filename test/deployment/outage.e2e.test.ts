// Postgres stopped for 10 s under traffic: two `subs deployment serve` processes on one database,
// SDK clients calling an agent's tools on both and reading /v1/mcp all along. While the database is
// down every answer is fast and says the store is unavailable (503 with Retry-After, or a tool
// error saying to retry), /readyz is 503; when it returns both processes serve again without a
// restart, on the sessions they already had and on new ones, with the credential they held.
// "Fast" is shown by counts and order, not by a figure a loaded machine can break: each loop of the
// traffic gets several answers within the outage, and what the test asks while the store is down
// is answered before it comes back (the answers would differ after).
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { authorizeServed, callServed, startServedDeployment, type ServedDeployment } from "../support/deployment-serve.ts";
import { waitFor, within } from "../support/wait.ts";
import { annotatedTool, startMcpServer, type RunningMcpServer } from "../support/mcp-server.ts";
import { startAuthServer, type RunningAuthServer } from "../support/oauth-server.ts";
import { ownPostgresForThisFile } from "../support/postgres.ts";

// Postgres is stopped and started here: a server of this file's own, not the run's shared one.
ownPostgresForThisFile();

type Called = { content: Array<{ type: string; text: string }>; isError?: boolean };
/** One request of the traffic: its loop, when it started and ended (ms since the epoch), and how it ended. */
type Outcome = { kind: "call" | "read"; loop: string; replica: number; start: number; end: number; ok: boolean; error?: string };

const OUTAGE_MS = 10_000;
/**
 * How long a loop of the traffic waits after a failure. 400 ms, where 100 ran: each loop then sends
 * a quarter as many requests into the outage, all refused alike, and the count below still tells
 * fast from slow. Tried: with every failing store query made to wait 2 s (src, not kept) and the
 * check that the store's absence was answered before it came back taken out, the count failed
 * ("reads on replica 0: 3 answered within the 10 s outage").
 */
const FAILURE_PAUSE_MS = 400;
/**
 * Answers each loop of the traffic gets within the outage, at least. One whose every request waited
 * out the pool's 2 s connect timeout would get at most 4 in 10 s (2.4 s a request with the pause),
 * one answered at once about 20.
 */
const ANSWERS_IN_OUTAGE = 5;
const STORE_DOWN = /store_unavailable|store does not answer/;
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

describe("Postgres down for 10 s under traffic on two replicas", () => {
  let authServer: RunningAuthServer;
  let mcp: RunningMcpServer;
  const replicas: ServedDeployment[] = [];
  let useToken: string;
  let readToken: string;
  // A call to `held` waits upstream until released, then is refused 401: the deployment must then
  // go to its store (a refresh) in the middle of the call.
  let held: { seen: () => void; release: Promise<void> } | undefined;

  const client = async (d: ServedDeployment) => {
    const c = new Client({ name: "outage-test", version: "1.0.0" });
    await c.connect(new StreamableHTTPClientTransport(new URL(`${d.url}/v1/agents/ops/mcp`), { requestInit: { headers: { authorization: `Bearer ${useToken}` } } }));
    return c;
  };

  before(async () => {
    authServer = await startAuthServer();
    mcp = await startMcpServer({
      tools: [annotatedTool("search"), annotatedTool("held")],
      oauth: { authServer },
      gate: async (_req, res, body) => {
        const message = body as { method?: string; params?: { name?: string } } | undefined;
        if (message?.method !== "tools/call" || message.params?.name !== "held" || !held) return false;
        held.seen();
        await held.release;
        res.writeHead(401, { "www-authenticate": 'Bearer error="invalid_token"' }).end();
        return true;
      },
    });
    const first = await startServedDeployment({ store: "postgres" });
    replicas.push(first);
    // The same database and key: a second replica.
    replicas.push(await startServedDeployment({ dir: first.dir }));
    useToken = await first.tokenFor("use");
    readToken = await first.tokenFor("read");
    assert.deepEqual(await authorizeServed(first, "tracker", { url: mcp.url, prefix_tools: false }), { status: "authorized" });
    assert.equal((await callServed(first, "PUT", "/v1/agents/ops", { mcp: [{ id: "tracker" }] })).status, 201);
  });
  after(async () => {
    for (const d of replicas.reverse()) await d.close();
    await mcp.close();
    await authServer.close();
  });

  test("/readyz 503 and fast, clear 503s and tool errors on both; both recover without a restart, same sessions and new, same credential", async () => {
    const pg = replicas[0]!.postgres!;
    const sessions = await Promise.all(replicas.flatMap((d) => [client(d), client(d)]));
    const replicaOf = (n: number) => Math.floor(n / 2);
    const issuedBefore = authServer.issuedTokens().length;
    for (const c of sessions) {
      const result = (await c.callTool({ name: "search", arguments: { q: "warm" } })) as Called;
      assert.equal(result.isError, undefined, JSON.stringify(result));
    }
    const sentBefore = new Set(mcp.authorizations);
    assert.equal(sentBefore.size, 1, "one access token sent so far");

    // Traffic until told to stop: a call loop per session, a read loop per replica.
    const outcomes: Outcome[] = [];
    let running = true;
    // When the database stopped, when it was started again, when both replicas were ready again.
    let down = Infinity;
    let up = Infinity;
    let recovered = Infinity;
    /** The requests under way, by when they started: what the failure names when one never ends. */
    const underWay = new Map<number, string>();
    let requests = 0;
    const record = async (kind: Outcome["kind"], loop: string, replica: number, run: () => Promise<string | undefined>) => {
      const start = Date.now();
      const key = requests++;
      underWay.set(key, `${kind} on replica ${replica}, started ${start - down} ms after the store went down`);
      // The SDK's StreamableHTTPError carries the HTTP status as its code.
      const error = await run().catch((e: Error & { code?: unknown }) => `${String(e.code ?? "-")} ${e.message}`);
      underWay.delete(key);
      outcomes.push({ kind, loop, replica, start, end: Date.now(), ok: error === undefined, ...(error === undefined ? {} : { error }) });
      // Failures come back fast; do not spin on them.
      if (error !== undefined) await sleep(FAILURE_PAUSE_MS);
    };
    const callLoop = async (c: Client, n: number) => {
      for (let i = 0; running; i++) {
        await record("call", `calls of session ${n}`, replicaOf(n), async () => {
          const result = (await c.callTool({ name: "search", arguments: { q: `${n}-${i}` } })) as Called;
          if (result.isError) return `tool error: ${result.content[0]?.text}`;
          assert.deepEqual(result.content, [{ type: "text", text: JSON.stringify({ q: `${n}-${i}` }) }], "the answer to this call, not another's");
          return undefined;
        });
      }
    };
    const readLoop = async (d: ServedDeployment, n: number) => {
      for (; running; ) {
        await record("read", `reads on replica ${n}`, n, async () => {
          const res = await fetch(`${d.url}/v1/mcp`, { headers: { authorization: `Bearer ${readToken}` } });
          const body = (await res.json()) as { error?: string; message?: string; connections?: Array<{ id: string; status: string }> };
          if (res.status === 200) {
            assert.deepEqual(body.connections?.map((c) => [c.id, c.status]), [["tracker", "authorized"]]);
            return undefined;
          }
          return `${res.status} ${res.headers.get("retry-after") ?? "-"} ${JSON.stringify(body)}`;
        });
      }
    };
    const traffic = Promise.all([...sessions.map(callLoop), ...replicas.map(readLoop)]);
    try {
      await sleep(1000);

      // A call already upstream when the database goes: its 401 needs the store (a refresh).
      let seen!: () => void;
      const upstream = new Promise<void>((r) => (seen = r));
      let release!: () => void;
      held = { seen: () => seen(), release: new Promise<void>((r) => (release = r)) };
      const heldCall = sessions[0]!.callTool({ name: "held", arguments: {} }).then(
        (r) => r as Called,
        (e: Error) => e,
      );
      await upstream;

      await pg.stop();
      down = Date.now();
      // The store comes back OUTAGE_MS later, whatever the checks below are doing: each is answered
      // as only a deployment without its store answers, so none waited for it to come back.
      const restarted = sleep(OUTAGE_MS).then(async () => {
        up = Date.now();
        await pg.start();
      });
      try {
        release();
        const heldResult = await heldCall;
        held = undefined;
        assert.ok(!(heldResult instanceof Error), `a tool error, not a failed request: ${heldResult instanceof Error ? heldResult.message : ""}`);
        assert.equal(heldResult.isError, true, JSON.stringify(heldResult));
        assert.equal(heldResult.content[0]!.text, "the deployment's store does not answer; retry in a few seconds");

        for (const d of replicas) {
          // A request that gets no answer at all names why, and what the replica said meanwhile.
          const res = await fetch(`${d.url}/readyz`).catch((e: Error) => {
            throw new Error(`GET /readyz on ${d.url} got no answer (${e.message}: ${String((e.cause as Error | undefined)?.message ?? e.cause)}); the replica's stderr:\n${d.stderr()}`);
          });
          assert.deepEqual([res.status, await res.json()], [503, { error: "unavailable", message: "the store does not answer" }]);
          assert.equal(res.headers.get("retry-after"), "2");
        }
        // A new session while the store is down: refused at once, with the reason.
        for (const d of replicas) {
          const refused = await client(d).then(
            () => undefined,
            (e: Error & { code?: unknown }) => e,
          );
          assert.ok(refused instanceof Error, "no session starts without the store");
          assert.equal(refused.code, 503);
          assert.match(refused.message, STORE_DOWN);
        }
        assert.equal(up, Infinity, "every check above was answered before the store came back");
      } finally {
        await restarted;
      }

      for (const d of replicas) {
        const ready = await waitFor(async () => {
          const res = await fetch(`${d.url}/readyz`);
          return res.status === 200 && res;
        }, "/readyz to say ready again once Postgres is back");
        assert.deepEqual(await ready.json(), { status: "ready" });
      }
      recovered = Date.now();
      const callsAfter = (replica: number) => outcomes.filter((o) => o.start >= recovered && o.replica === replica && o.kind === "call").length;
      await waitFor(() => callsAfter(0) >= 2 && callsAfter(1) >= 2, () => `two calls on each replica after recovery (${callsAfter(0)}, ${callsAfter(1)})`);
    } finally {
      running = false;
    }
    await within(traffic, () => `every request of the traffic to end; under way: ${[...underWay.values()].join("; ")}`);

    // Every failure said the store was unavailable.
    for (const o of outcomes) {
      if (o.ok) continue;
      const said = o.kind === "read" ? /^503 2 \{"error":"store_unavailable","message":"the deployment's store does not answer; retry in a few seconds"\}$/.test(o.error!) : (o.error!.startsWith("503 ") && STORE_DOWN.test(o.error!)) || o.error === "tool error: the deployment's store does not answer; retry in a few seconds";
      if (said) continue;
      // What the replica said meanwhile, but for what went well and the reads refused as expected
      // (a request is logged as it ends: one never answered is not).
      const d = replicas[o.replica]!;
      const usual = (l: Record<string, unknown>) => (l.msg === "request" && (Number(l.status) < 400 || l.path === "/v1/mcp")) || (l.msg === "audit" && l.outcome === "ok");
      const meanwhile = d.logs.filter((l) => Date.parse(String(l.time)) >= o.start - 1000 && Date.parse(String(l.time)) <= o.end && !usual(l)).slice(-40);
      assert.fail(
        `${o.loop} on replica ${o.replica}: ${o.error} (from ${o.start - down} to ${o.end - down} ms after the store went down; up again at ${up - down} ms, ready at ${recovered - down} ms)\n` +
          `replica ${o.replica}'s log meanwhile:\n${meanwhile.map((l) => JSON.stringify(l)).join("\n")}\nits stderr:\n${d.stderr().slice(-4000)}`,
      );
    }
    // Nothing answered while the database was down, on either replica, and every loop was answered
    // again and again meanwhile; everything after it came back.
    const during = outcomes.filter((o) => o.start >= down && o.end <= up);
    for (const loop of new Set(outcomes.map((o) => o.loop))) {
      const these = during.filter((o) => o.loop === loop);
      assert.ok(these.length >= ANSWERS_IN_OUTAGE, `${loop}: ${these.length} answered within the ${OUTAGE_MS / 1000} s outage`);
      assert.ok(these.every((o) => !o.ok), `${loop}: none succeeded without the store`);
    }
    const afterwards = outcomes.filter((o) => o.start >= recovered);
    for (const replica of [0, 1]) assert.ok(afterwards.filter((o) => o.replica === replica && o.kind === "call").length >= 2, `calls on replica ${replica} after recovery`);
    assert.deepEqual(afterwards.filter((o) => !o.ok), [], "everything after recovery succeeds");

    // The same sessions, and new ones, on both replicas; with the credential held before.
    const fresh = await Promise.all(replicas.map(client));
    for (const c of [...sessions, ...fresh]) {
      const result = (await c.callTool({ name: "search", arguments: { q: "after" } })) as Called;
      assert.deepEqual(result, { content: [{ type: "text", text: '{"q":"after"}' }] });
    }
    assert.deepEqual(new Set(mcp.authorizations.slice(-sessions.length - fresh.length)), sentBefore, "the access token held before the outage");
    const issuedAfter = authServer.issuedTokens().length;
    // The refresh token held before the outage still works (the server rotates them and refuses a
    // reused one): an access token it no longer honours is refreshed, and the call goes through.
    authServer.forgetAccessTokens();
    const refreshed = (await sessions[1]!.callTool({ name: "search", arguments: { q: "refreshed" } })) as Called;
    assert.deepEqual(refreshed, { content: [{ type: "text", text: '{"q":"refreshed"}' }] }, "the credential survived the outage");
    assert.equal(issuedAfter, issuedBefore, "no token was issued during the outage: no refresh token was spent");
    for (const d of replicas) {
      const listed = await callServed(d, "GET", "/v1/mcp", undefined, readToken);
      assert.deepEqual([listed.status, listed.body.connections.map((c: { status: string }) => c.status)], [200, ["authorized"]]);
    }
    await Promise.all([...sessions, ...fresh].map((c) => c.close()));
    const logged = JSON.stringify(replicas.flatMap((d) => d.logs)) + replicas.map((d) => d.stderr()).join("");
    assert.ok(!logged.includes(pg.password), "the database password is in no log line");
  });
});
