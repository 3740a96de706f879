// SIGTERM on one of two replicas behind a balancer that sends a refused connection to the other,
// as the Caddy and nginx configurations of docs/deployment-server.md do: a probe answered after it
// is 503, every call in flight on it finishes, its agents' GET streams end and their clients go on
// through the other replica, and it exits as soon as nothing is left in flight (its open GET
// streams are ended, not waited for until its drain limit cuts them).
import assert from "node:assert/strict";
import { connect } from "node:net";
import { after, before, describe, test } from "node:test";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { authorizeServed, callServed } from "../support/deployment-serve.ts";
import { annotatedTool, startMcpServer, type RunningMcpServer } from "../support/mcp-server.ts";
import { startAuthServer, type RunningAuthServer } from "../support/oauth-server.ts";
import { startReplicas, type Replicas } from "../support/replicas.ts";
import { waitFor, within } from "../support/wait.ts";

/** As docs/deployment-server.md's two-replica check: 32 calls in flight when one replica stops. */
const CALLS = 32;
const CLIENTS = 4;
type Called = { content: Array<{ type: string; text: string }>; isError?: boolean };

describe("SIGTERM on one of two replicas behind a balancer (SQLite)", () => {
  let set: Replicas;
  let authServer: RunningAuthServer;
  let mcp: RunningMcpServer;
  /** Calls the MCP server holds until `open()`. */
  let held = 0;
  let open!: () => void;
  const gate = new Promise<void>((resolve) => (open = resolve));
  before(async () => {
    set = await startReplicas(2, { store: "sqlite" }, { retryRefused: true });
    authServer = await startAuthServer();
    mcp = await startMcpServer({
      tools: [annotatedTool("search")],
      oauth: { authServer },
      gate: async (_req, _res, body) => {
        if ((body as { method?: string } | undefined)?.method === "tools/call") {
          held++;
          await gate;
        }
        return false;
      },
    });
  });
  after(async () => {
    open();
    await set.close();
    await mcp.close();
    await authServer.close();
  });

  test(`${CALLS} calls in flight: each answered; probes say 503 at once; GET streams end and continue on the other replica; the process exits with nothing cut`, async () => {
    assert.deepEqual(await authorizeServed(set.front, "tracker", { url: mcp.url }), { status: "authorized" });
    assert.equal((await callServed(set.front, "PUT", "/v1/agents/triage", { mcp: [{ id: "tracker" }] })).status, 201);
    const useToken = await set.front.tokenFor("use");
    // One client after the other, each starting on replica 0 (initialize → 0, initialized → 1, its
    // GET stream → 0): the replica that will stop holds every GET stream.
    const clients: Client[] = [];
    for (let n = 0; n < CLIENTS; n++) {
      const client = new Client({ name: "stopping-test", version: "1.0.0" });
      set.balancer.next = 0;
      const forwarded = set.balancer.served.length;
      await client.connect(new StreamableHTTPClientTransport(new URL(`${set.balancer.url}/v1/agents/triage/mcp`), { requestInit: { headers: { authorization: `Bearer ${useToken}` } } }));
      await waitFor(() => set.balancer.served.length >= forwarded + 3, `client ${n}'s GET stream to be forwarded`);
      assert.deepEqual(set.balancer.served.slice(forwarded), [0, 1, 0], `client ${n}: initialize, initialized, GET`);
      clients.push(client);
    }
    const [victim] = set.replicas as [(typeof set.replicas)[0]];
    const getsOn = (r: typeof victim) => r.logs.filter((l) => l.msg === "request" && l.method === "GET" && l.path === "/v1/agents/triage/mcp" && l.status === 200);

    const calls = Array.from({ length: CALLS }, (_, n) => clients[n % CLIENTS]!.callTool({ name: "search", arguments: { n } }) as Promise<Called>);
    await waitFor(() => held === CALLS, () => `every call to reach the MCP server (${held} of ${CALLS})`);
    // A probe mid-request when SIGTERM comes: its connection is not idle, so it is answered.
    const probe = connect(Number(new URL(victim.direct).port), "127.0.0.1");
    let probeAnswer = "";
    probe.on("data", (d) => (probeAnswer += d));
    const probeClosed = new Promise((resolve) => probe.on("close", resolve));
    await new Promise((resolve) => probe.write("GET /readyz HTTP/1.1\r\nHost: 127.0.0.1\r\n", resolve));
    const getsBefore = getsOn(victim).length;

    const exited = victim.stop();
    const stopping = await waitFor(() => victim.logs.find((l) => l.msg === "stopping"), "the replica to say it is stopping");
    assert.ok((stopping.in_flight as number) > 0, "calls were in flight on it");
    probe.end("\r\n");
    await within(probeClosed, "the probe's answer");
    assert.match(probeAnswer, /^HTTP\/1\.1 503 /);
    assert.match(probeAnswer, /"message":"stopping: finishing the requests in flight"/);
    assert.match(probeAnswer, /\r\nconnection: close\r\n/i, "an answer while stopping closes its connection");

    open();
    const results = await within(Promise.allSettled(calls), "every call's answer");
    results.forEach((r, n) => {
      assert.equal(r.status, "fulfilled", `call ${n}: ${r.status === "rejected" ? r.reason : ""}`);
      assert.deepEqual(r.value.content, [{ type: "text", text: JSON.stringify({ n }) }], `call ${n}`);
    });
    assert.equal(await within(exited, "the replica to exit"), 0);
    const stopped = victim.logs.find((l) => l.msg === "stopped");
    assert.deepEqual([stopped?.unfinished, stopped?.cut], [0, undefined], JSON.stringify(stopped));
    // Its GET streams ended cleanly during the drain (each logged at its close), not cut at its limit.
    assert.equal(getsOn(victim).length - getsBefore, CLIENTS, "every GET stream on the stopping replica ended");

    // Every client goes on, through the replica left: its session continued from the store.
    const again = await Promise.all(clients.map((c, n) => c.callTool({ name: "search", arguments: { n: 100 + n } }) as Promise<Called>));
    again.forEach((r, n) => assert.deepEqual(r.content, [{ type: "text", text: JSON.stringify({ n: 100 + n }) }]));
    for (const c of clients) await c.close().catch(() => {});
  });
});
