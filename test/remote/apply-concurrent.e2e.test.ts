// Two `subs apply` processes (the built CLI) with different files against one deployment at the
// same time: the deployment ends each round in exactly one file's state, never a mix
// (docs/deployment-protocol.md section 3.10, PUT /v1/state), and both applies succeed. The race is
// made, not hoped for: a proxy in front of the deployment holds each round's first two
// PUT /v1/state until both have arrived, so both plans are made from one revision and reach the
// deployment together; one is applied, the other refused (409 revision_changed), read again and
// applied on top. A round where the two did not meet fails.
import assert from "node:assert/strict";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { after, describe, test } from "node:test";
import { meetingPoint, startBalancer, type MeetingPoint } from "../support/balancer.ts";
import { runCli } from "../support/cli.ts";
import { startServedDeployment, STORES, type ServedDeployment } from "../support/deployment-serve.ts";

// Every round makes the race (the two PUT /v1/state meet at the deployment), so one round finds each
// of these, and did when it was tried: the store's revision check taken out (both applied, neither
// planned anew), Postgres's declarations lock taken out, the CLI not planning anew after a 409.
// One round, where 3 ran: each of those failed round 1 (the extra rounds only let either file win,
// which no assertion reads: every round checks the state is the file applied last, A or B); the 20
// rounds this test once ran without the meeting never checked that the two overlapped at all.
const ROUNDS = 1;
// How long the first PUT /v1/state of a round waits for the second before the round fails (both
// are sent within a process start and two GETs of each other).
const MEET_WITHIN_MS = 30_000;
const dirs: string[] = [];
after(() => dirs.forEach((d) => rmSync(d, { recursive: true, force: true })));

// The two files overlap: `shared` and `common` are in both (shared with another url), `bot` is in
// both with different connections, and each has a connection and an agent the other removes.
const FILE_A = `
[mcp.shared]
url = "https://a.example/shared"

[mcp.only_a]
url = "https://a.example/only"

[mcp.common]
url = "https://common.example/mcp"
prefix_tools = false

[agent.bot]
mcp = ["shared", "only_a"]

[agent.a_agent]
mcp = ["common", "only_a"]
`;
const FILE_B = `
[mcp.shared]
url = "https://b.example/shared"
oauth = { scopes = ["read"] }

[mcp.only_b]
url = "https://b.example/only"

[mcp.common]
url = "https://common.example/mcp"

[agent.bot]
mcp = ["only_b", { id = "shared", tools = { read_only = true } }]
tools = ["summarize"]

[agent.b_agent]
mcp = ["common", "only_b"]
agents = ["bot"]
`;
/** Each file's state as GET /v1/mcp and GET /v1/agents answer it, in the shape `state()` reads. */
const STATE_A = {
  connections: [
    { id: "common", url: "https://common.example/mcp", prefix_tools: false, oauth: null },
    { id: "only_a", url: "https://a.example/only", prefix_tools: true, oauth: null },
    { id: "shared", url: "https://a.example/shared", prefix_tools: true, oauth: null },
  ],
  agents: [
    { name: "a_agent", mcp: [{ id: "common" }, { id: "only_a" }], tools: [], agents: [] },
    { name: "bot", mcp: [{ id: "shared" }, { id: "only_a" }], tools: [], agents: [] },
  ],
};
const STATE_B = {
  connections: [
    { id: "common", url: "https://common.example/mcp", prefix_tools: true, oauth: null },
    { id: "only_b", url: "https://b.example/only", prefix_tools: true, oauth: null },
    { id: "shared", url: "https://b.example/shared", prefix_tools: true, oauth: { scopes: ["read"] } },
  ],
  agents: [
    { name: "b_agent", mcp: [{ id: "common" }, { id: "only_b" }], tools: [], agents: ["bot"] },
    { name: "bot", mcp: [{ id: "only_b" }, { id: "shared", tools: { read_only: true } }], tools: ["summarize"], agents: [] },
  ],
};

async function call(deployment: ServedDeployment, method: string, pathname: string, body?: unknown) {
  const res = await fetch(`${deployment.url}${pathname}`, {
    method,
    headers: { authorization: `Bearer ${deployment.token}`, ...(body === undefined ? {} : { "content-type": "application/json" }) },
    ...(body === undefined ? {} : { body: JSON.stringify(body) }),
  });
  const text = await res.text();
  if (res.status >= 400 && res.status !== 404) throw new Error(`${method} ${pathname}: ${res.status} ${text}`);
  return text ? JSON.parse(text) : undefined;
}

/** The deployment's declarations as its API answers them, sorted, without credential fields. */
async function state(deployment: ServedDeployment) {
  const { connections } = await call(deployment, "GET", "/v1/mcp");
  const { agents } = await call(deployment, "GET", "/v1/agents");
  const byKey = <T>(key: (x: T) => string) => (a: T, b: T) => (key(a) < key(b) ? -1 : 1);
  return {
    connections: (connections as Array<Record<string, unknown>>)
      .map((c) => ({ id: c.id, url: c.url, prefix_tools: c.prefix_tools, oauth: c.oauth && Object.keys(c.oauth).length ? c.oauth : null }))
      .sort(byKey((c) => String(c.id))),
    agents: (agents as Array<Record<string, unknown>>).map((a) => ({ name: a.name, mcp: a.mcp, tools: a.tools ?? [], agents: a.agents ?? [] })).sort(byKey((a) => String(a.name))),
  };
}

/**
 * A third state both files change: every round starts from it, so both applies have work to do
 * (deleting `old`, which an agent names) and their requests can interleave.
 */
async function reset(deployment: ServedDeployment) {
  const now = await state(deployment);
  for (const a of now.agents) await call(deployment, "DELETE", `/v1/agents/${a.name}`);
  for (const c of now.connections) await call(deployment, "DELETE", `/v1/mcp/${c.id}`);
  await call(deployment, "PUT", "/v1/mcp/old", { url: "https://old.example/mcp", prefix_tools: true });
  await call(deployment, "PUT", "/v1/mcp/shared", { url: "https://old.example/shared", prefix_tools: true });
  await call(deployment, "PUT", "/v1/agents/bot", { mcp: [{ id: "old" }, { id: "shared" }] });
  await call(deployment, "PUT", "/v1/agents/old_agent", { mcp: [{ id: "old" }] });
}

function project(url: string, deployment: ServedDeployment, body: string) {
  const dir = mkdtempSync(path.join(tmpdir(), "subs-race-"));
  dirs.push(dir);
  writeFileSync(path.join(dir, "substructure.toml"), `[remote]\nurl = "${url}"\n${body}`);
  return () => runCli(["apply", "--json"], { cwd: dir, env: { SUBSTRUCTURE_TOKEN: deployment.token }, timeoutMs: 60_000 });
}

// The real server on each store, which is what carries out PUT /v1/state's revision check; the
// reference deployment (test/support/deployment/server.ts) is a stand-in whose own race this does
// not need to prove (the tests of it keep what only it can do: faults, the v1-only protocol).
const DEPLOYMENTS: Record<string, () => Promise<ServedDeployment>> = Object.fromEntries(STORES.map((store) => [`subs deployment serve, ${store}`, () => startServedDeployment({ store })]));

for (const [kind, start] of Object.entries(DEPLOYMENTS)) {
  describe(`concurrent subs apply (${kind})`, () => {
    test(`two applies whose PUT /v1/state meet end in one file's state, never a mix (${ROUNDS} round${ROUNDS === 1 ? "" : "s"})`, async (t) => {
      const deployment = await start();
      let point: MeetingPoint | undefined;
      const proxy = await startBalancer([deployment.url], { hold: (req) => point?.hold(req) });
      try {
        const applyA = project(proxy.url, deployment, FILE_A);
        const applyB = project(proxy.url, deployment, FILE_B);
        const ended: string[] = [];
        for (let round = 1; round <= ROUNDS; round++) {
          await reset(deployment);
          point = meetingPoint((req) => req.method === "PUT" && req.url === "/v1/state", MEET_WITHIN_MS);
          const [a, b] = await Promise.all([applyA(), applyB()]).finally(() => point!.end());
          assert.equal(a.code, 0, `round ${round}, file A: ${a.stderr}`);
          assert.equal(b.code, 0, `round ${round}, file B: ${b.stderr}`);
          assert.ok(point.met, `round ${round}: the two applies' PUT /v1/state did not meet within ${MEET_WITHIN_MS / 1000} s (${point.arrived} arrived)`);
          // Both plans were made from the revision the reset left: exactly one was refused and
          // planned anew, once, and its second plan, made from the other's state, is what holds.
          const replans = [a, b].map((r) => (r.stderr.match(/planning anew/g) ?? []).length);
          assert.deepEqual([...replans].sort(), [0, 1], `round ${round}: planned anew ${replans.join(" and ")} times (A, B); one of two plans from one revision must be refused\nA: ${a.stderr}\nB: ${b.stderr}`);
          assert.equal(point.arrived, 3, `round ${round}: PUT /v1/state sent ${point.arrived} times`);
          const last = replans[0] === 1 ? "A" : "B";
          const now = await state(deployment);
          const which = JSON.stringify(now) === JSON.stringify(STATE_A) ? "A" : JSON.stringify(now) === JSON.stringify(STATE_B) ? "B" : undefined;
          assert.ok(which, `round ${round}: a mix of both files: ${JSON.stringify(now)}`);
          assert.equal(which, last, `round ${round}: the state of the apply that was applied first, not of the one applied on top of it`);
          ended.push(which);
        }
        t.diagnostic(`ended in A ${ended.filter((w) => w === "A").length} times, in B ${ended.filter((w) => w === "B").length} times`);
      } finally {
        point = undefined;
        await proxy.close();
        await deployment.close();
      }
    });
  });
}
