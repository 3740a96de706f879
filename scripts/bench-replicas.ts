// The replicated deployment's rows of `npm run bench`: figures, with no target (on 2 cores the
// replicas, the database, the MCP server and the clients share the same CPUs).
// - Served tool calls per second through 1 replica and through 2 replicas on one Postgres
//   database, the same 32 calls in flight either way, spread evenly over the replicas' endpoints
//   (no balancer: each client talks to its replica). Rounds alternate; the median round counts.
//   A row's figure is wall ms per call (1000 / calls per second), so it reads like the other rows.
// - What the Postgres store adds to one served call at a time over the SQLite store (medians).
// The MCP server is bench-serve.ts's fastest one; the credential never expires, so no refresh is timed.
//   node --import tsx scripts/bench-replicas.ts        (also part of `npm run bench`)
import path from "node:path";
import { fileURLToPath } from "node:url";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { ensureBuilt } from "../test/support/cli.ts";
import { callServed, startServedDeployment, type ServedDeployment } from "../test/support/deployment-serve.ts";
import { startUpstream } from "./bench-deployment.ts";
import { median } from "./bench-fixture.ts";
import { timeCalls } from "./bench-serve.ts";
import type { BenchRow } from "./bench-docs.ts";

const IN_FLIGHT = 32;
/** Client sessions, whatever the replicas: each carries IN_FLIGHT / SESSIONS calls at a time. */
const SESSIONS = 4;
const ROUND_CALLS = 1000;
const ROUNDS = 5;
const ONE_AT_A_TIME = 600;

/** A deployment that serves the agent `bench` over `upstream`, holding a credential for it. */
async function prepare(d: ServedDeployment, upstream: string): Promise<void> {
  await callServed(d, "PUT", "/v1/mcp/up", { url: upstream, prefix_tools: true });
  d.credentials.set("up", { url: upstream, tokens: { access_token: "bench", token_type: "bearer" }, authorizedAt: Date.now(), expiresAt: null });
  await d.settled();
  await callServed(d, "PUT", "/v1/agents/bench", { mcp: [{ id: "up" }] });
}

async function connect(d: ServedDeployment, token: string): Promise<Client> {
  const client = new Client({ name: "bench-replicas", version: "1.0.0" });
  await client.connect(new StreamableHTTPClientTransport(new URL(`${d.url}/v1/agents/bench/mcp`), { requestInit: { headers: { authorization: `Bearer ${token}` } } }));
  return client;
}

/** Calls per second of `calls` calls spread over the sessions, IN_FLIGHT at a time in all. */
async function throughput(sessions: Client[], calls: number): Promise<number> {
  const start = process.hrtime.bigint();
  await Promise.all(sessions.map((s) => timeCalls(s, "up__echo", calls / sessions.length, IN_FLIGHT / sessions.length)));
  return calls / (Number(process.hrtime.bigint() - start) / 1e9);
}

export async function replicaBenchRows(print: (row: BenchRow) => void): Promise<BenchRow[]> {
  ensureBuilt();
  const upstream = await startUpstream();
  const started: ServedDeployment[] = [];
  try {
    const a = await startServedDeployment({ store: "postgres" });
    started.push(a);
    const b = await startServedDeployment({ dir: a.dir });
    started.push(b);
    const lite = await startServedDeployment();
    started.push(lite);
    await prepare(a, upstream.url);
    await prepare(lite, upstream.url);
    const use = await a.tokenFor("use");
    const one = await Promise.all(Array.from({ length: SESSIONS }, () => connect(a, use)));
    const two = await Promise.all(Array.from({ length: SESSIONS }, (_, i) => connect(i % 2 === 0 ? a : b, use)));
    // Warm every session and both replicas, then alternate so load on the machine affects both alike.
    await throughput(one, 200);
    await throughput(two, 200);
    const tput: { one: number[]; two: number[] } = { one: [], two: [] };
    for (let r = 0; r < ROUNDS; r++) {
      tput.one.push(await throughput(one, ROUND_CALLS));
      tput.two.push(await throughput(two, ROUND_CALLS));
    }

    const pgSession = one[0]!;
    const liteSession = await connect(lite, await lite.tokenFor("use"));
    await timeCalls(liteSession, "up__echo", 50, 1);
    const latency: { pg: number[]; lite: number[] } = { pg: [], lite: [] };
    for (let r = 0; r < ROUNDS; r++) {
      latency.pg.push(...(await timeCalls(pgSession, "up__echo", ONE_AT_A_TIME / ROUNDS, 1)));
      latency.lite.push(...(await timeCalls(liteSession, "up__echo", ONE_AT_A_TIME / ROUNDS, 1)));
    }
    await Promise.all([...one, ...two, liteSession].map((c) => c.close()));

    const perSecond = { one: median(tput.one), two: median(tput.two) };
    const ms = { pg: median(latency.pg), lite: median(latency.lite) };
    const oneName = `subs deployment serve: Postgres, 1 replica, ${IN_FLIGHT} calls in flight, wall ms per call (${perSecond.one.toFixed(0)} calls/s)`;
    const liteName = `subs deployment serve: SQLite, one call at a time, median`;
    const rows: BenchRow[] = [
      { name: oneName, ms: 1000 / perSecond.one, ratio: 1, against: oneName, target: null },
      { name: `subs deployment serve: Postgres, 2 replicas, ${IN_FLIGHT} calls in flight, wall ms per call (${perSecond.two.toFixed(0)} calls/s)`, ms: 1000 / perSecond.two, ratio: perSecond.one / perSecond.two, against: oneName, target: null },
      { name: liteName, ms: ms.lite, ratio: 1, against: liteName, target: null },
      { name: `subs deployment serve: Postgres, one call at a time, ms added over SQLite (median ${ms.pg.toFixed(2)} ms)`, ms: ms.pg - ms.lite, ratio: ms.pg / ms.lite, against: liteName, target: null },
    ];
    rows.forEach(print);
    return rows;
  } finally {
    const pg = started[0]?.postgres;
    for (const d of started.reverse()) await d.close();
    upstream.stop();
    // This process's Postgres (test/support/postgres.ts): stopped here, as no test file's after() will.
    await pg?.stop();
  }
}

if (process.argv[1] && path.resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  await replicaBenchRows((r) => console.log(`${r.name}: ${r.ms.toFixed(2)} ms, ${r.ratio.toFixed(2)} × ${r.against}`));
}
