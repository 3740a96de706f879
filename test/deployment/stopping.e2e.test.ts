// SIGTERM on one of two replicas behind a load balancer that sends a refused connection to the
// other: the tests' own balancer (whose turns a test can steer), and Debian's Caddy with the
// configuration docs/deployment-server.md gives, as written. A probe answered after SIGTERM is
// 503, every call in flight on the stopping replica finishes, its agents' GET streams end and their
// clients go on through the other replica, and it exits as soon as nothing is left in flight (its
// open GET streams are ended, not waited for until its drain limit cuts them).
import assert from "node:assert/strict";
import { connect } from "node:net";
import { after, before, describe, test } from "node:test";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { caddyAddress, startCaddy, type RunningCaddy } from "../support/caddy.ts";
import pg from "pg";
import { authorizeServed, callServed, startServedDeployment, type ServedDeployment } from "../support/deployment-serve.ts";
import { annotatedTool, startMcpServer, type RunningMcpServer } from "../support/mcp-server.ts";
import { startAuthServer, type RunningAuthServer } from "../support/oauth-server.ts";
import { startReplicas, type Replicas } from "../support/replicas.ts";
import { waitFor, within } from "../support/wait.ts";

/** As docs/deployment-server.md's two-replica check: 32 calls in flight when one replica stops. */
const CALLS = 32;
const CLIENTS = 4;
type Called = { content: Array<{ type: string; text: string }>; isError?: boolean };

/** An MCP server behind a test authorization server whose tool calls wait until `open()`. */
async function heldServer() {
  const authServer = await startAuthServer();
  let open!: () => void;
  const gate = new Promise<void>((resolve) => (open = resolve));
  const server = {
    authServer,
    held: 0,
    open,
    mcp: undefined as unknown as RunningMcpServer,
    async close() {
      open();
      await server.mcp.close();
      await authServer.close();
    },
  };
  server.mcp = await startMcpServer({
    tools: [annotatedTool("search")],
    oauth: { authServer },
    gate: async (_req, _res, body) => {
      if ((body as { method?: string } | undefined)?.method === "tools/call") {
        server.held++;
        await gate;
      }
      return false;
    },
  });
  return server;
}

const newClient = async (front: string, token: string) => {
  const client = new Client({ name: "stopping-test", version: "1.0.0" });
  await client.connect(new StreamableHTTPClientTransport(new URL(`${front}/v1/agents/triage/mcp`), { requestInit: { headers: { authorization: `Bearer ${token}` } } }));
  return client;
};

/** A replica's /metrics, read on its own address with its admin token. */
const metricsOf = (r: ServedDeployment, init: RequestInit = {}) => fetch(`${r.direct}/metrics`, { ...init, headers: { authorization: `Bearer ${r.token}` } }).then((res) => res.text());

const getsOn = (r: ServedDeployment) => r.logs.filter((l) => l.msg === "request" && l.method === "GET" && l.path === "/v1/agents/triage/mcp" && l.status === 200);

/**
 * With `clients` connected through the front: CALLS calls held at the MCP server, SIGTERM to
 * `victim`, the calls released. Asserts every call's answer, the exit and its "stopped" line, and
 * that each client then goes on; returns the "stopping" line.
 */
async function stopUnderCalls(server: Awaited<ReturnType<typeof heldServer>>, clients: Client[], victim: ServedDeployment, beforeStop: () => Promise<void> = async () => {}) {
  const calls = Array.from({ length: CALLS }, (_, n) => clients[n % clients.length]!.callTool({ name: "search", arguments: { n } }) as Promise<Called>);
  await waitFor(() => server.held === CALLS, () => `every call to reach the MCP server (${server.held} of ${CALLS})`);
  await beforeStop();
  const exited = victim.stop();
  const stopping = await waitFor(() => victim.logs.find((l) => l.msg === "stopping"), "the replica to say it is stopping");
  assert.ok((stopping.in_flight as number) > 0, "calls were in flight on it");
  server.open();
  const results = await within(Promise.allSettled(calls), "every call's answer");
  results.forEach((r, n) => {
    assert.equal(r.status, "fulfilled", `call ${n}: ${r.status === "rejected" ? r.reason : ""}`);
    assert.deepEqual(r.value.content, [{ type: "text", text: JSON.stringify({ n }) }], `call ${n}`);
  });
  assert.equal(await within(exited, "the replica to exit"), 0);
  const stopped = victim.logs.find((l) => l.msg === "stopped");
  assert.deepEqual([stopped?.unfinished, stopped?.cut], [0, undefined], JSON.stringify(stopped));
  // Every client goes on, through the replica left, which continues its session from the store.
  const again = await Promise.all(
    clients.map((c, n) =>
      (c.callTool({ name: "search", arguments: { n: 100 + n } }) as Promise<Called>).catch((error: Error) => {
        throw new Error(`client ${n} after the stop: ${error.message}`, { cause: error });
      }),
    ),
  );
  again.forEach((r, n) => assert.deepEqual(r.content, [{ type: "text", text: JSON.stringify({ n: 100 + n }) }], `client ${n} after the stop`));
  return stopping;
}

describe("SIGTERM on one of two replicas behind the tests' balancer (SQLite)", () => {
  let set: Replicas;
  let server: Awaited<ReturnType<typeof heldServer>>;
  before(async () => {
    set = await startReplicas(2, { store: "sqlite" }, { retryRefused: true });
    server = await heldServer();
  });
  after(async () => {
    await server?.close();
    await set?.close();
  });

  test(`${CALLS} calls in flight: each answered; a probe says 503 at once; every GET stream on it ends and its client goes on elsewhere; it exits with nothing cut`, async () => {
    assert.deepEqual(await authorizeServed(set.front, "tracker", { url: server.mcp.url }), { status: "authorized" });
    assert.equal((await callServed(set.front, "PUT", "/v1/agents/triage", { mcp: [{ id: "tracker" }] })).status, 201);
    const useToken = await set.front.tokenFor("use");
    // One client after the other, each starting on replica 0 (initialize → 0, initialized → 1, its
    // GET stream → 0): the replica that will stop holds every GET stream.
    const clients: Client[] = [];
    for (let n = 0; n < CLIENTS; n++) {
      set.balancer.next = 0;
      const forwarded = set.balancer.served.length;
      clients.push(await newClient(set.balancer.url, useToken));
      await waitFor(() => set.balancer.served.length >= forwarded + 3, `client ${n}'s GET stream to be forwarded`);
      assert.deepEqual(set.balancer.served.slice(forwarded), [0, 1, 0], `client ${n}: initialize, initialized, GET`);
    }
    const victim = set.replicas[0]!;
    // A probe mid-request when SIGTERM comes: its connection is not idle, so it is answered.
    const probe = connect(Number(new URL(victim.direct).port), "127.0.0.1");
    let probeAnswer = "";
    probe.on("data", (d) => (probeAnswer += d));
    const probeClosed = new Promise((resolve) => probe.on("close", resolve));
    let getsBefore = 0;
    await stopUnderCalls(server, clients, victim, async () => {
      await new Promise((resolve) => probe.write("GET /readyz HTTP/1.1\r\nHost: 127.0.0.1\r\n", resolve));
      getsBefore = getsOn(victim).length;
      // Once SIGTERM has come (stopUnderCalls waits for its "stopping" line before it lets the calls go on), the probe's request ends.
      void waitFor(() => victim.logs.some((l) => l.msg === "stopping"), "the replica to say it is stopping").then(() => probe.end("\r\n"));
    });
    await within(probeClosed, "the probe's answer");
    assert.match(probeAnswer, /^HTTP\/1\.1 503 /);
    assert.match(probeAnswer, /"message":"stopping: finishing the requests in flight"/);
    assert.match(probeAnswer, /\r\nconnection: close\r\n/i, "an answer while stopping closes its connection");
    // Its GET streams ended cleanly during the drain (each logged at its close), not cut at its limit.
    assert.equal(getsOn(victim).length - getsBefore, CLIENTS, "every GET stream on the stopping replica ended");
    // Each answer to a token names it in the log, though an answer (a stream's above all) can
    // close before its handler's promise has said which token it served.
    const unnamed = set.replicas.flatMap((r) => r.logs).filter((l) => l.msg === "request" && String(l.path).startsWith("/v1/") && Number(l.status) < 400 && typeof l.token !== "string");
    assert.deepEqual(unnamed, [], "an answer to a token logged without it");
    for (const c of clients) await c.close().catch(() => {});
  });
});

describe("SIGTERM on one of two replicas on Postgres behind Caddy, configured as docs/deployment-server.md writes it", () => {
  let set: Replicas;
  let caddy: RunningCaddy;
  let server: Awaited<ReturnType<typeof heldServer>>;
  before(async () => {
    const url = await caddyAddress();
    set = await startReplicas(2, { store: "postgres", env: { SUBS_DEPLOYMENT_PUBLIC_URL: url } });
    caddy = await startCaddy(url, set.replicas.map((r) => new URL(r.direct).host));
    server = await heldServer();
  });
  after(async () => {
    await server?.close();
    await caddy?.close();
    await set?.close();
  });

  test(`${CALLS} calls in flight: every one answered, the replica exits with nothing cut, and every client goes on through the other`, async () => {
    assert.equal(set.front.url, caddy.url, "the replicas' public URL is Caddy's");
    assert.deepEqual(await authorizeServed(set.front, "tracker", { url: server.mcp.url }), { status: "authorized" });
    assert.equal((await callServed(set.front, "PUT", "/v1/agents/triage", { mcp: [{ id: "tracker" }] })).status, 201);
    const useToken = await set.front.tokenFor("use");
    const clients = await Promise.all(Array.from({ length: CLIENTS }, () => newClient(caddy.url, useToken)));
    try {
      // Caddy probes /readyz every 2 s (health_interval); a replica probed twice knows it is behind
      // a balancer that probes, and on SIGTERM serves on until a probe has been answered 503.
      const victim = set.replicas[0]!;
      const probes = async () => {
        return Number(/subs_deployment_http_requests_total\{method="GET",route="\/readyz",status="200"\} (\d+)/.exec(await metricsOf(victim))?.[1] ?? 0);
      };
      await waitFor(async () => (await probes()) >= 2, "Caddy to probe the replica's /readyz twice", undefined, 250);
      try {
        await stopUnderCalls(server, clients, victim);
      } catch (error) {
        // What Caddy said of its upstreams (a 502's cause: a refused dial, a reset; a 503's "no
        // upstreams available": its health checker's "HTTP request failed" or "status code out of
        // tolerances") and each replica's count of /readyz answers by status and time (a probe
        // answered 200 is not logged, and one answered after Caddy's 2 s health_timeout still
        // counts as 200).
        const said = caddy.log().split("\n").filter((line) => /error|health|502|refused|reset|EOF/i.test(line)).slice(-15);
        const probed = await Promise.all(
          set.replicas.map(async (r, n) => {
            const metrics = await metricsOf(r, { signal: AbortSignal.timeout(5_000) }).catch((e: Error) => `(no answer: ${e.message})`);
            return metrics.split("\n").filter((line) => line.includes('route="/readyz"') || line.startsWith("(")).map((line) => `replica ${n}: ${line}`);
          }),
        );
        throw new Error(`${(error as Error).message}\nCaddy said:\n${said.join("\n")}\nThe replicas' /readyz answers:\n${probed.flat().join("\n")}`, { cause: error });
      }
      assert.ok(set.replicas[0]!.logs.some((l) => l.msg === "out of rotation"), "the replica waited for a probe to say 503 before refusing connections");
    } finally {
      for (const c of clients) await c.close().catch(() => {});
    }
  });
});

describe("a probe whose store query is still running when SIGTERM comes (Postgres)", () => {
  let d: ServedDeployment | undefined;
  after(async () => void (await d?.stop()));

  test("is answered 503, not the 200 its store query found, and only that answer takes the replica out of rotation", async () => {
    d = await startServedDeployment({ store: "postgres" });
    const readyz = `${d.direct}/readyz`;
    // Probed twice: the replica knows a balancer probes it, and on SIGTERM waits for a 503 answer.
    for (let n = 0; n < 2; n++) assert.equal((await fetch(readyz)).status, 200);
    // The next probe's store query waits on a lock held here, until the replica is stopping (the
    // wait is read in pg_locks for this database's table: other files share the server).
    const holder = new pg.Client({ connectionString: d.storeArg });
    await holder.connect();
    try {
      await holder.query("BEGIN");
      await holder.query("LOCK TABLE api_tokens IN ACCESS EXCLUSIVE MODE");
      const answer = fetch(readyz).then(async (res) => ({ status: res.status, body: await res.text() }));
      await waitFor(async () => Number((await holder.query("SELECT count(*) AS n FROM pg_locks WHERE NOT granted AND database = (SELECT oid FROM pg_database WHERE datname = current_database()) AND relation = 'api_tokens'::regclass")).rows[0].n) > 0, "the probe's store query to wait for the lock", undefined, 50);
      const exited = d.stop();
      await waitFor(() => d!.logs.find((l) => l.msg === "stopping"), "the replica to say it is stopping");
      await holder.query("ROLLBACK");
      const { status, body } = await within(answer, "the probe's answer");
      assert.deepEqual([status, JSON.parse(body)], [503, { error: "unavailable", message: "stopping: finishing the requests in flight" }]);
      assert.equal(await within(exited, "the replica to exit"), 0);
      const order = d.logs.filter((l) => ["stopping", "out of rotation", "no readiness probe came", "stopped"].includes(String(l.msg)) || l.path === "/readyz").map((l) => (l.path ? `${l.path} ${l.status}` : l.msg));
      assert.deepEqual(order, ["stopping", "/readyz 503", "out of rotation", "stopped"]);
    } finally {
      await holder.end().catch(() => {});
    }
  });
});
