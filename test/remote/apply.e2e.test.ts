// `subs apply` with [remote], end to end, against the test deployment
// (test/support/deployment/), which implements docs/deployment-protocol.md, the same deployment
// speaking only the requests of v1 (no PUT /v1/state), and a real `subs deployment serve`. Against
// the served deployment on SQLite (what users run), the first test (apply, then apply --json), the
// apply that removes (no terminal: applied without asking) and `subs mcp list` naming a refused
// connection run the built CLI (bin/subs.cjs) as a person does, as does `subs mcp login` refusing
// a poll_url; everything else, the same tests against the other deployments included, runs the
// same `run()` in this process, where what is checked is the deployment's requests and state and
// what is printed, not the process (a tenth of the CPU: a child costs a Node start-up and the
// bundle's load per run). The deployments themselves stay real processes.
import assert from "node:assert/strict";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { after, afterEach, before, beforeEach, describe, test } from "node:test";
import { runAs, runCli, runInProcess, type How } from "../support/cli.ts";
import { startDeployment, type RunningDeployment } from "../support/deployment/server.ts";
import { FEATURE_STORES, startServedDeployment } from "../support/deployment-serve.ts";
import { waitFor } from "../support/wait.ts";

const TOKEN = "deploy-api-token-SECRET";
/**
 * The same tests against a real `subs deployment serve` process on each of its stores, and the
 * reference as a v1-only deployment (what no real server is any more). The reference speaking v2
 * is left out: it ran the same CLI paths as the served process, which is what users run.
 */
const V1_ONLY = "reference, v1 only";
/**
 * The deployment whose tests run the built CLI where they do. What differs from one deployment to
 * another is what is sent and answered, which `run()` in-process does alike: against the others
 * the same runs are in-process.
 */
const CLI_ON = "subs deployment serve, sqlite";
const DEPLOYMENTS: Record<string, (catalog?: string[]) => Promise<RunningDeployment>> = {
  [V1_ONLY]: (catalog) => startDeployment({ token: TOKEN, protocol: "v1", ...(catalog ? { catalog } : {}) }),
  ...Object.fromEntries(FEATURE_STORES.map((store) => [`subs deployment serve, ${store}`, (catalog?: string[]) => startServedDeployment({ store, ...(catalog ? { catalog } : {}) })])),
};
// A renamed deployment would leave no test on the built CLI.
assert.ok(CLI_ON in DEPLOYMENTS, `no deployment named ${CLI_ON}`);
/** The API token the deployment accepts. */
const tokenOf = (deployment: RunningDeployment) => (deployment as { token?: string }).token ?? TOKEN;
const dirs: string[] = [];
after(() => dirs.forEach((d) => rmSync(d, { recursive: true, force: true })));

/** `cli`: every apply of this project runs the built CLI as a child, not `run()` in-process. */
function project(deployment: RunningDeployment, body: string, how: How = "in-process") {
  const dir = mkdtempSync(path.join(tmpdir(), "subs-remote-"));
  dirs.push(dir);
  const write = (text: string) => writeFileSync(path.join(dir, "substructure.toml"), `[remote]\nurl = "${deployment.url}"\n\n${text}`);
  write(body);
  const apply = (...args: string[]) => runAs(how, ["apply", ...args], { cwd: dir, env: { SUBSTRUCTURE_TOKEN: tokenOf(deployment) } });
  return { dir, write, apply };
}

let marks = 0;
/**
 * Resolves once the deployment's log holds every request answered so far. A served deployment logs
 * a request when its answer has ended, in that order (src/deployment/serve.ts), and the log reaches
 * this process through a pipe: a request of ours made now, once logged, has every earlier one
 * logged before it (the mark itself is taken out again). An apply in-process returns as soon as its
 * last answer has come, before the child's exit a built-CLI run waited for; "no write was sent"
 * read at once could miss one. The reference logs a request as it receives it.
 */
async function allLogged(deployment: RunningDeployment) {
  if (!("logs" in deployment)) return;
  const mark = `GET /v1/logged-${++marks}`;
  await (await fetch(`${deployment.url}/v1/logged-${marks}`)).body?.cancel();
  await waitFor(() => deployment.requests.includes(mark), () => `${mark} in the deployment's log (so far: ${deployment.requests.join(", ")})`);
  deployment.requests.splice(deployment.requests.indexOf(mark), 1);
}

const FILE = `
[mcp.sentry]
url = "https://mcp.sentry.dev/mcp"

[mcp.linear]
url = "https://mcp.linear.app/mcp"
prefix_tools = false

[agent.support]
mcp = ["sentry"]

[agent.triage]
mcp = [{ id = "sentry", tools = { read_only = true } }, "linear"]
agents = ["support"]
`;

/** A credential as the deployment would hold one after consent (the login tests make real ones); written once this settles. */
async function authorize(deployment: RunningDeployment, id: string) {
  const url = deployment.connections.get(id)!.url;
  deployment.credentials.set(id, { url, tokens: { access_token: `at-${id}`, token_type: "bearer" }, authorizedAt: Date.now(), expiresAt: null });
  await (deployment as { settled?: () => Promise<void> }).settled?.();
}

/**
 * Empties a served deployment for the next test as a fresh one is (no declaration, agent or
 * credential: pruned, its credentials dropped with their declarations), and its request log.
 */
async function emptied(deployment: RunningDeployment) {
  const res = await fetch(`${deployment.url}/v1/state`, {
    method: "PUT",
    headers: { authorization: `Bearer ${tokenOf(deployment)}`, "content-type": "application/json" },
    body: JSON.stringify({ connections: [], agents: [], prune: true }),
  });
  assert.equal(res.status, 200, await res.text());
  assert.deepEqual([deployment.connections.size, deployment.agents.size, deployment.credentials.size], [0, 0, 0]);
  await allLogged(deployment);
  deployment.requests.length = 0;
}

for (const [kind, start] of Object.entries(DEPLOYMENTS)) describe(`subs apply with [remote] (${kind})`, () => {
  // A served deployment (a process, ~0.6 s of CPU to start) is started once for these tests and
  // emptied before each: each test's apply prunes what its file does not name, so one test's
  // leftovers would be its plan. The reference (in this process, nothing to start) is fresh for each.
  const served = kind !== V1_ONLY;
  let deployment: RunningDeployment;
  before(async () => {
    if (served) deployment = await start();
  });
  after(() => (served ? deployment.close() : undefined));
  beforeEach(async () => {
    if (served) await emptied(deployment);
    else deployment = await start();
  });
  afterEach(() => (served ? undefined : deployment.close()));
  const how: How = kind === CLI_ON ? "cli" : "in-process";

  test("first apply creates; a second reports no change and sends no write", async () => {
    const p = project(deployment, FILE, how);
    const first = await p.apply();
    assert.equal(first.code, 0, first.stderr);
    assert.match(first.stdout, /\+ sentry/);
    assert.match(first.stdout, /\+ support/);
    assert.match(first.stdout, /4 to add, 0 to change, 0 to remove, 0 unchanged/);
    // The plan is on stdout; the summary on stderr, as every apply summary is, local or remote.
    assert.match(first.stderr, /^Applied 4 changes to http:\/\/127\.0\.0\.1:\d+\/\.$/m);
    assert.doesNotMatch(first.stdout, /Applied/);
    assert.deepEqual([...deployment.connections.keys()].sort(), ["linear", "sentry"]);
    assert.equal(deployment.connections.get("linear")!.prefix_tools, false);
    assert.deepEqual(deployment.agents.get("triage")!.mcp, [{ id: "sentry", tools: { read_only: true } }, { id: "linear" }]);

    // A served deployment logs a request after answering it: the first apply's write, waited for
    // before the log is emptied, cannot arrive late and pass for a write of the second.
    await waitFor(() => deployment.requests.includes("PUT /v1/state"), () => `the first apply's PUT /v1/state in the deployment's log (so far: ${deployment.requests.join(", ")})`);
    deployment.requests.length = 0;
    const second = await p.apply("--json");
    // With src/backend/deployment.ts made to send PUT /v1/state for a plan without changes, this
    // test failed against each deployment; without this wait, the in-process run against Postgres
    // passed, its log not yet holding the write.
    await allLogged(deployment);
    assert.equal(second.code, 0, second.stderr);
    const json = JSON.parse(second.stdout);
    assert.equal(json.changed, false);
    assert.deepEqual(json.connections.map((c: { action: string }) => c.action), ["unchanged", "unchanged"]);
    assert.deepEqual(json.agents.map((a: { action: string }) => a.action), ["unchanged", "unchanged"]);
    assert.deepEqual(deployment.requests.filter((r) => !r.startsWith("GET")), []);
    assert.doesNotMatch(first.stdout + first.stderr + second.stdout + second.stderr, /SECRET/);
  });

  test("removing a section deletes the declaration and its credential; agents go first", async () => {
    const p = project(deployment, FILE);
    assert.equal((await p.apply()).code, 0);
    await authorize(deployment, "linear");
    p.write(`[mcp.sentry]\nurl = "https://mcp.sentry.dev/mcp"\n\n[agent.support]\nmcp = ["sentry"]\n`);
    // A served deployment logs a request after answering it, so the first apply's write may reach
    // its log after the apply returned: waited for before the log is emptied.
    await waitFor(() => deployment.requests.includes("PUT /v1/state"), () => `the first apply's PUT /v1/state in the deployment's log (so far: ${deployment.requests.join(", ")})`);
    deployment.requests.length = 0;
    const result = await runAs(how, ["apply"], { cwd: p.dir, env: { SUBSTRUCTURE_TOKEN: tokenOf(deployment) } });
    assert.equal(result.code, 0, result.stderr);
    assert.match(result.stdout, /- linear .*credential dropped: declaration removed/);
    assert.match(result.stdout, /- triage/);
    // Without a terminal (a child's pipes, as in CI; in-process, a context with no TTY) a plan that
    // removes is applied without asking.
    assert.doesNotMatch(result.stderr, /Apply\?/);
    assert.equal(deployment.connections.has("linear"), false);
    assert.equal(deployment.credentials.has("linear"), false);
    assert.equal(deployment.agents.has("triage"), false);
    await allLogged(deployment);
    const writes = deployment.requests.filter((r) => !r.startsWith("GET"));
    // One request for the whole file; a deployment without it answers 404 and gets the v1
    // requests in the safe order: the agent naming linear is deleted before linear itself.
    if (kind === V1_ONLY) assert.deepEqual(writes, ["PUT /v1/state", "DELETE /v1/agents/triage", "DELETE /v1/mcp/linear"]);
    else assert.deepEqual(writes, ["PUT /v1/state"]);
  });

  test("changing a url drops the credential; changing prefix_tools keeps it", async () => {
    const p = project(deployment, FILE);
    assert.equal((await p.apply()).code, 0);
    await authorize(deployment, "sentry");
    await authorize(deployment, "linear");
    p.write(FILE.replace("https://mcp.sentry.dev/mcp", "https://mcp.sentry.example/mcp").replace("prefix_tools = false", "prefix_tools = true"));
    const dry = await p.apply("--dry-run", "--json");
    assert.equal(dry.code, 0, dry.stderr);
    const plan = JSON.parse(dry.stdout);
    const byId = Object.fromEntries(plan.connections.map((c: { id: string }) => [c.id, c]));
    assert.deepEqual([byId.sentry.action, byId.sentry.changed, byId.sentry.credential, byId.sentry.credential_reason], ["change", ["url"], "dropped", "url_changed"]);
    assert.deepEqual([byId.linear.action, byId.linear.changed, byId.linear.credential], ["change", ["prefix_tools"], "kept"]);

    const result = await p.apply();
    assert.equal(result.code, 0, result.stderr);
    assert.match(result.stdout, /~ sentry .*url https:\/\/mcp\.sentry\.dev\/mcp → https:\/\/mcp\.sentry\.example\/mcp.*credential dropped: url changed/);
    assert.match(result.stdout, /~ linear .*prefix_tools changed; credential kept/);
    assert.equal(deployment.credentials.has("sentry"), false);
    assert.equal(deployment.credentials.has("linear"), true);
  });

  test("--dry-run prints the plan and changes nothing", async () => {
    const p = project(deployment, FILE);
    const result = await p.apply("--dry-run");
    assert.equal(result.code, 0, result.stderr);
    assert.match(result.stdout, /\+ sentry/);
    assert.match(result.stderr, /Dry run: nothing was changed/);
    assert.equal(deployment.connections.size, 0);
    assert.equal(deployment.agents.size, 0);
    await allLogged(deployment);
    assert.deepEqual(deployment.requests.filter((r) => !r.startsWith("GET")), []);
  });

  test("`auth` and `oauth.client_secret_env` are refused, each named, before any request", async () => {
    const p = project(
      deployment,
      `[mcp.github]\nurl = "https://api.githubcopilot.com/mcp/"\nauth = { token_env = "GITHUB_TOKEN" }\n\n[mcp.linear]\nurl = "https://mcp.linear.app/mcp"\noauth = { client_id = "abc", client_secret_env = "LINEAR_SECRET" }\n\n[mcp.sentry]\nurl = "https://mcp.sentry.dev/mcp"\n`,
    );
    const result = await p.apply();
    assert.equal(result.code, 2);
    assert.match(result.stderr, /substructure\.toml:6:1: \[mcp\.github\] has `auth`/);
    assert.match(result.stderr, /substructure\.toml:10:\d+: \[mcp\.linear\] has `oauth\.client_secret_env`/);
    assert.match(result.stderr, /remove `auth` and authorize on the deployment instead/);
    await allLogged(deployment);
    assert.deepEqual(deployment.requests, []);
    const json = await p.apply("--json");
    assert.equal(JSON.parse(json.stdout).error.code, "local_only_auth");
    await allLogged(deployment);
    assert.deepEqual(deployment.requests, []);
    // The commands that only look say so too, instead of a bare "not applied · subs apply".
    const list = await runAs(how, ["mcp", "list"], { cwd: p.dir, env: { SUBSTRUCTURE_TOKEN: tokenOf(deployment) } });
    assert.equal(list.code, 0, list.stderr);
    assert.match(list.stderr, /warning: substructure\.toml:6:1: \[mcp\.github\] has `auth`/);
    assert.match(list.stderr, /warning: substructure\.toml:10:\d+: \[mcp\.linear\] has `oauth\.client_secret_env`/);
    assert.match(list.stderr, /`subs apply` and `subs mcp login` refuse such a connection while \[remote\] is set/);
    p.write(`[mcp.sentry]\nurl = "https://mcp.sentry.dev/mcp"\n`);
    const none = await runInProcess(["mcp", "list"], { cwd: p.dir, env: { SUBSTRUCTURE_TOKEN: tokenOf(deployment) } });
    assert.equal(none.code, 0, none.stderr);
    assert.doesNotMatch(none.stderr, /warning/);
  });

  test("a missing or rejected API token names the variable", async () => {
    const p = project(deployment, FILE);
    const unset = await runInProcess(["apply"], { cwd: p.dir });
    assert.equal(unset.code, 2);
    assert.match(unset.stderr, /\$SUBSTRUCTURE_TOKEN is not set/);
    await allLogged(deployment);
    assert.deepEqual(deployment.requests, []);
    const wrong = await runInProcess(["apply"], { cwd: p.dir, env: { SUBSTRUCTURE_TOKEN: "wrong" } });
    assert.equal(wrong.code, 1);
    assert.match(wrong.stderr, /rejected the credential in \$SUBSTRUCTURE_TOKEN/);
    assert.match(wrong.stderr, /set SUBSTRUCTURE_TOKEN to a valid API token/);
  });
});

for (const [kind, start] of Object.entries(DEPLOYMENTS)) describe(`subs apply against a catalog deployment (${kind})`, () => {
  test("a url outside the catalog is refused and the allowed URLs are printed", async () => {
    const catalog = ["https://mcp.sentry.dev/mcp", "https://mcp.notion.com/mcp"];
    const deployment = await start(catalog);
    try {
      const p = project(deployment, FILE);
      const result = await p.apply();
      assert.equal(result.code, 2, result.stderr);
      assert.match(result.stderr, /not in the deployment's catalog: linear \(https:\/\/mcp\.linear\.app\/mcp\)/);
      for (const url of catalog) assert.ok(result.stderr.includes(`  ${url}`), result.stderr);
      const json = JSON.parse((await p.apply("--json")).stdout);
      assert.equal(json.error.code, "url_not_in_catalog");
      assert.deepEqual(json.error.catalog, catalog);
      assert.deepEqual(json.error.not_in_catalog, [{ id: "linear", url: "https://mcp.linear.app/mcp" }]);
      assert.equal(deployment.connections.has("linear"), false);
      if (kind === V1_ONLY) {
        // Step by step, what came before the refusal stays applied (docs/remote.md).
        assert.equal(deployment.connections.has("sentry"), true);
      } else {
        // The whole file in one request: refused as a whole, nothing was changed.
        assert.match(result.stderr, /nothing was changed: the deployment refused the whole plan/);
        assert.equal(deployment.connections.size, 0);
        assert.deepEqual(json.error.applied, []);
      }
    } finally {
      await deployment.close();
    }
  });
});

describe("subs apply when a v1-only deployment fails", () => {
  let deployment: RunningDeployment;
  beforeEach(async () => {
    deployment = await startDeployment({ token: TOKEN, protocol: "v1" });
  });
  afterEach(() => deployment.close());

  test("500s and dropped connections are retried, and the apply completes", async () => {
    const p = project(deployment, FILE);
    deployment.fault({ method: "GET", path: "/v1/mcp", kind: "status", status: 500, times: 1 });
    deployment.fault({ method: "PUT", path: "/v1/mcp/linear", kind: "drop", times: 1 });
    // The answer is lost after the deployment applied the change: the retried PUT is idempotent.
    deployment.fault({ method: "PUT", path: "/v1/agents/triage", kind: "drop_after", times: 1 });
    deployment.fault({ method: "PUT", path: "/v1/agents/support", kind: "status", status: 503, times: 2 });
    const result = await p.apply();
    assert.equal(result.code, 0, result.stderr);
    assert.match(result.stderr, /retrying/);
    assert.deepEqual([...deployment.connections.keys()].sort(), ["linear", "sentry"]);
    assert.deepEqual([...deployment.agents.keys()].sort(), ["support", "triage"]);
    const again = await p.apply("--json");
    assert.equal(JSON.parse(again.stdout).changed, false);
  });

  test("a failure part-way reports what was and was not applied; a rerun converges", async () => {
    const p = project(deployment, FILE);
    deployment.fault({ method: "PUT", path: "/v1/agents/", kind: "status", status: 500, times: 100 });
    const result = await p.apply("--json");
    assert.equal(result.code, 1, result.stderr);
    const error = JSON.parse(result.stdout).error;
    assert.equal(error.code, "apply_incomplete");
    assert.deepEqual(error.applied.map((s: { id: string }) => s.id).sort(), ["linear", "sentry"]);
    // Steps of one phase run side by side: each agent PUT either failed or was not started.
    assert.ok(error.failed.length >= 1);
    assert.ok(error.failed.every((s: { kind: string; code: string }) => s.kind === "agent" && s.code === "internal_error"));
    assert.equal(error.failed.length + error.not_attempted.length, 2);
    assert.match(result.stderr, /apply stopped part-way: 2 of 4 changes applied/);

    const text = await p.apply();
    assert.equal(text.code, 1);
    // The report is the summary of this apply: on stderr, as every apply summary is.
    assert.match(text.stderr, /Applied 0 of 2 changes:\n(  (failed|not attempted) +add agent \w+\n){2}/);
    assert.doesNotMatch(text.stdout, /Applied/);

    deployment.clearFaults();
    const rerun = await p.apply();
    assert.equal(rerun.code, 0, rerun.stderr);
    assert.match(rerun.stdout, /2 to add, 0 to change, 0 to remove, 2 unchanged/);
    assert.deepEqual([...deployment.agents.keys()].sort(), ["support", "triage"]);
  });

  test("an unreachable deployment is reported after retries", async () => {
    const p = project(deployment, FILE);
    deployment.fault({ path: "/v1/", kind: "drop", times: 100 });
    const result = await p.apply();
    assert.equal(result.code, 1);
    assert.match(result.stderr, /cannot reach the deployment at http:\/\/127\.0\.0\.1:\d+ .*4 attempts/);
    // Both reads run in parallel; the first to use up its 4 attempts ends the command, so the
    // other may not have sent its last one yet (under load this varied: a flaky count).
    const attempts = (request: string) => deployment.requests.filter((r) => r === request).length;
    assert.equal(Math.max(attempts("GET /v1/mcp"), attempts("GET /v1/agents")), 4);
    assert.ok(attempts("GET /v1/mcp") <= 4 && attempts("GET /v1/agents") <= 4);
  });
});

describe("subs apply when the one request of the whole file fails", () => {
  let deployment: RunningDeployment;
  beforeEach(async () => {
    deployment = await startDeployment({ token: TOKEN });
  });
  afterEach(() => deployment.close());

  test("a 500 and a lost answer are retried: the request is the whole state, so a repeat is safe", async () => {
    const p = project(deployment, FILE);
    deployment.fault({ method: "PUT", path: "/v1/state", kind: "status", status: 500, times: 1 });
    // Applied, but the answer is lost: the retry finds everything done and changes nothing more.
    deployment.fault({ method: "PUT", path: "/v1/state", kind: "drop_after", times: 1 });
    const result = await p.apply();
    assert.equal(result.code, 0, result.stderr);
    assert.match(result.stderr, /PUT \/v1\/state: 500 internal_error; retrying/);
    assert.deepEqual(deployment.requests.filter((r) => !r.startsWith("GET")), ["PUT /v1/state", "PUT /v1/state", "PUT /v1/state"]);
    assert.match(result.stderr, /^Applied 4 changes to /m);
    assert.deepEqual([...deployment.connections.keys()].sort(), ["linear", "sentry"]);
    assert.deepEqual([...deployment.agents.keys()].sort(), ["support", "triage"]);
  });

  test("when it fails, the report says nothing or everything was applied, never a part", async () => {
    const p = project(deployment, FILE);
    assert.equal((await p.apply()).code, 0);
    p.write(FILE.replace("https://mcp.linear.app/mcp", "https://mcp.linear.example/mcp").replace(`agents = ["support"]\n`, ""));
    deployment.fault({ method: "PUT", path: "/v1/state", kind: "status", status: 500, times: 100 });
    deployment.requests.length = 0;
    const result = await p.apply("--json");
    assert.equal(result.code, 1, result.stderr);
    const error = JSON.parse(result.stdout).error;
    assert.equal(error.code, "apply_incomplete");
    assert.deepEqual(error.applied, []);
    assert.deepEqual(error.not_attempted, []);
    assert.deepEqual(error.failed.map((s: { id: string; code: string }) => [s.id, s.code]), [["linear", "internal_error"], ["triage", "internal_error"]]);
    assert.match(result.stderr, /apply failed: the 2 changes were sent in one request, which the deployment applies entirely or not at all/);
    // No v1 request was tried instead: a deployment that has PUT /v1/state is never sent a part.
    assert.deepEqual(deployment.requests.filter((r) => !r.startsWith("GET")), Array(4).fill("PUT /v1/state"));
    assert.equal(deployment.connections.get("linear")!.url, "https://mcp.linear.app/mcp");
    assert.deepEqual(deployment.agents.get("triage")!.agents, ["support"]);

    const text = await p.apply();
    assert.equal(text.code, 1);
    assert.match(text.stderr, /Applied 0 of 2 changes:\n  failed +change connection linear\n  failed +change agent triage\n/);

    deployment.clearFaults();
    const rerun = await p.apply();
    assert.equal(rerun.code, 0, rerun.stderr);
    assert.match(rerun.stdout, /0 to add, 2 to change, 0 to remove, 2 unchanged/);
    assert.equal(deployment.connections.get("linear")!.url, "https://mcp.linear.example/mcp");
  });
});

describe("subs apply when the deployment changes between the read and the write", () => {
  let deployment: RunningDeployment;
  beforeEach(async () => {
    deployment = await startDeployment({ token: TOKEN });
  });
  afterEach(() => deployment.close());

  const put = (pathname: string, body: unknown) =>
    fetch(`${deployment.url}${pathname}`, { method: "PUT", headers: { authorization: `Bearer ${TOKEN}`, "content-type": "application/json" }, body: JSON.stringify(body) });

  test("409 revision_changed: nothing was changed; subs reads again, plans anew and applies, saying so", async () => {
    const p = project(deployment, FILE);
    // The PUT is held; meanwhile someone else declares a connection the plan did not see.
    let release!: () => void;
    deployment.fault({ method: "PUT", path: "/v1/state", kind: "delay", until: new Promise<void>((r) => (release = r)), times: 1 });
    const running = p.apply();
    await waitFor(() => deployment.requests.includes("PUT /v1/state"), () => `subs apply's PUT /v1/state (requests so far: ${deployment.requests.join(", ")})`);
    assert.equal((await put("/v1/mcp/other", { url: "https://other.example/mcp", prefix_tools: true })).status, 201);
    release();
    const result = await running;
    assert.equal(result.code, 0, result.stderr);
    assert.match(result.stderr, /the deployment changed after it was read \(another apply at the same time\?\); nothing was changed; reading it again and planning anew \(attempt 2 of 3\)/);
    // Both plans are printed; the second, which removes `other`, is the one carried out.
    const plans = result.stdout.split("Plan for ").slice(1);
    assert.equal(plans.length, 2);
    assert.match(plans[1]!, /- other +https:\/\/other\.example\/mcp; not in the file/);
    assert.deepEqual(deployment.requests.filter((r) => r === "PUT /v1/state").length, 2);
    assert.deepEqual([...deployment.connections.keys()].sort(), ["linear", "sentry"]);
  });

  test("two reads of different revisions are made again before anything is planned", async () => {
    const p = project(deployment, FILE);
    // A write landed between the two reads: the lists are of two revisions.
    deployment.fault({ method: "GET", path: "/v1/agents", kind: "body", body: { agents: [], revision: "elsewhere" }, times: 1 });
    const result = await p.apply();
    assert.equal(result.code, 0, result.stderr);
    assert.equal(deployment.requests.filter((r) => r === "GET /v1/agents").length, 2);
    assert.equal(deployment.requests.filter((r) => r === "GET /v1/mcp").length, 2);
    assert.deepEqual(deployment.requests.filter((r) => !r.startsWith("GET")), ["PUT /v1/state"]);
  });

  test("405 to PUT /v1/state, as 404: the deployment lacks it, and gets the requests of v1", async () => {
    const p = project(deployment, FILE);
    deployment.fault({ method: "PUT", path: "/v1/state", kind: "status", status: 405, times: 1 });
    const result = await p.apply();
    assert.equal(result.code, 0, result.stderr);
    const writes = deployment.requests.filter((r) => !r.startsWith("GET"));
    assert.equal(writes[0], "PUT /v1/state");
    assert.deepEqual(writes.slice(1).sort(), ["PUT /v1/agents/support", "PUT /v1/agents/triage", "PUT /v1/mcp/linear", "PUT /v1/mcp/sentry"]);
    assert.deepEqual([...deployment.agents.keys()].sort(), ["support", "triage"]);
  });

  test("a deployment that keeps changing: after 3 plans subs stops, and nothing was changed", async () => {
    const p = project(deployment, FILE);
    deployment.fault({ method: "PUT", path: "/v1/state", kind: "body", status: 409, body: { error: "revision_changed", message: "moved on" }, times: 3 });
    const result = await p.apply("--json");
    assert.equal(result.code, 1, result.stderr);
    const error = JSON.parse(result.stdout).error;
    assert.equal(error.code, "revision_changed");
    assert.match(error.message, /changed while subs applied, 3 times .*nothing was changed/);
    assert.equal((result.stderr.match(/reading it again and planning anew/g) ?? []).length, 2);
    assert.equal(deployment.connections.size, 0);
  });
});

describe("answers that break the protocol", () => {
  let deployment: RunningDeployment;
  beforeEach(async () => {
    deployment = await startDeployment({ token: TOKEN });
  });
  afterEach(() => deployment.close());

  test("a body that does not match the protocol is an error, not an empty deployment", async () => {
    const p = project(deployment, FILE);
    deployment.fault({ method: "GET", path: "/v1/mcp", kind: "body", body: { connections: [{ id: "x", url: 7 }] }, times: 1 });
    const result = await p.apply();
    assert.equal(result.code, 1);
    assert.match(result.stderr, /answered GET \/v1\/mcp with an unexpected body \(connections\.0\.url:/);
    assert.deepEqual(deployment.requests.filter((r) => !r.startsWith("GET")), []);
  });

  test("a poll_url on another origin is refused: the API token is never sent there", async () => {
    const dir = mkdtempSync(path.join(tmpdir(), "subs-remote-"));
    dirs.push(dir);
    writeFileSync(path.join(dir, "substructure.toml"), `[remote]\nurl = "${deployment.url}"\n\n[mcp.a]\nurl = "https://a.example/mcp"\n`);
    deployment.fault({
      method: "POST",
      path: "/v1/mcp/a/authorizations",
      kind: "body",
      status: 201,
      body: { authorization_url: "https://as.example/authorize", poll_url: "https://evil.example/poll", interval: 1, expires_in: 60 },
    });
    const result = await runCli(["mcp", "login", "a", "--no-browser"], { cwd: dir, env: { SUBSTRUCTURE_TOKEN: TOKEN } });
    assert.equal(result.code, 1);
    assert.match(result.stderr, /poll_url on another origin \(https:\/\/evil\.example\)/);
    assert.doesNotMatch(result.stderr, /as\.example\/authorize/, "nothing is opened or printed for a refused answer");
  });
});
