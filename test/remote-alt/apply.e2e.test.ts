// `subs apply` against the second deployment implementation (written only from
// docs/deployment-protocol.md). The first test runs the built CLI (bin/subs.cjs) as a person does;
// the rest run the same `run()` in this process, where what is checked is the deployment's state
// and requests and what is printed, not the process (a tenth of the CPU: a child costs a Node
// start-up and the bundle's load per run).
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { withHarness as withFreshHarness, type Harness } from "./harness.ts";
import type { How } from "../support/cli.ts";

const withHarness = (fn: (h: Harness) => Promise<void>, options: Parameters<typeof withFreshHarness>[1] = {}, how: How = "in-process") =>
  withFreshHarness(fn, options, {}, how);

const file = (h: Harness, extra = "") => `[mcp.sentry]
url = "${h.mcp.url}"
oauth = { scopes = ["read", "write"] }

[mcp.linear]
url = "${h.other.url}"
prefix_tools = false

[agent.triage]
mcp = [{ id = "sentry", tools = { read_only = true, include = ["search_*", "get_*"] } }, "linear"]
tools = ["summarize"]
agents = ["support"]

[agent.support]
mcp = ["sentry"]
${extra}`;

/** Logs sentry in through the deployment, the browser (or in-process its opener) following the redirects. */
async function login(h: Harness, id = "sentry") {
  const result = await h.run(["mcp", "login", id]);
  assert.equal(result.code, 0, `login ${id} failed: ${result.stderr}`);
  assert.ok(h.dep.hasCredential(id), `the deployment should hold a credential for ${id} after login`);
}

describe("subs apply against deployment-alt", () => {
  it("creates connections and agents, then reports no change, and --dry-run sends no write", () =>
    withHarness(async (h) => {
      h.write(file(h));

      const dry = await h.run(["apply", "--dry-run"]);
      assert.equal(dry.code, 0, dry.stderr);
      assert.match(dry.stdout, /\+ sentry/);
      assert.match(dry.stdout, /\+ triage/);
      assert.equal(h.writes(), 0, "--dry-run must send no write");
      assert.deepEqual((await h.api("GET", "/v1/mcp")).body, { connections: [] });

      const first = await h.run(["apply", "--json"]);
      assert.equal(first.code, 0, first.stderr);
      const plan = JSON.parse(first.stdout);
      assert.equal(plan.target, "remote");
      assert.equal(plan.changed, true);
      assert.deepEqual(plan.connections.map((c: any) => [c.id, c.action, c.applied]).sort(), [["linear", "add", true], ["sentry", "add", true]]);
      assert.deepEqual(plan.agents.map((a: any) => [a.name, a.action, a.applied]).sort(), [["support", "add", true], ["triage", "add", true]]);

      const connections = (await h.api("GET", "/v1/mcp")).body.connections;
      const sentry = connections.find((c: any) => c.id === "sentry");
      assert.equal(sentry.url, h.mcp.url);
      assert.equal(sentry.prefix_tools, true);
      assert.deepEqual(sentry.oauth?.scopes, ["read", "write"]);
      assert.equal(sentry.status, "declared");
      const linear = connections.find((c: any) => c.id === "linear");
      assert.equal(linear.prefix_tools, false);
      const agents = (await h.api("GET", "/v1/agents")).body.agents;
      const triage = agents.find((a: any) => a.name === "triage");
      assert.deepEqual(triage.mcp[0], { id: "sentry", tools: { read_only: true, include: ["search_*", "get_*"] } });
      assert.equal(triage.mcp[1].id, "linear");
      assert.deepEqual(triage.tools, ["summarize"]);
      assert.deepEqual(triage.agents, ["support"]);

      // Connections are PUT before agents (section 8), so no agent PUT ever met 409 unknown_connection.
      const puts = h.dep.requests.filter((r) => r.method === "PUT").map((r) => r.path);
      assert.ok(puts.indexOf("/v1/agents/triage") > puts.indexOf("/v1/mcp/linear"), `order: ${puts.join(", ")}`);

      const writes = h.writes();
      const second = await h.run(["apply"]);
      assert.equal(second.code, 0, second.stderr);
      assert.match(second.stderr, /Nothing to do/);
      assert.equal(h.writes(), writes, "a second apply must send no write");

      const secondJson = JSON.parse((await h.run(["apply", "--json"])).stdout);
      assert.equal(secondJson.changed, false);
      assert.ok(secondJson.connections.every((c: any) => c.action === "unchanged"));
    }, {}, "cli"));

  it("removing a [mcp.x] section deletes the declaration and its credential (revoked at the authorization server)", () =>
    withHarness(async (h) => {
      h.write(file(h));
      assert.equal((await h.run(["apply"])).code, 0);
      await login(h, "linear");
      assert.equal((await h.api("GET", "/v1/mcp")).body.connections.find((c: any) => c.id === "linear").status, "authorized");

      // Drop linear, and the agent that names it.
      h.write(`[mcp.sentry]\nurl = "${h.mcp.url}"\noauth = { scopes = ["read", "write"] }\n\n[agent.support]\nmcp = ["sentry"]\n`);
      const result = await h.run(["apply", "--json"]);
      assert.equal(result.code, 0, result.stderr);
      const plan = JSON.parse(result.stdout);
      const linear = plan.connections.find((c: any) => c.id === "linear");
      assert.equal(linear.action, "remove");
      assert.equal(linear.credential, "dropped");
      assert.equal(linear.credential_reason, "declaration_removed");
      assert.equal(plan.agents.find((a: any) => a.name === "triage").action, "remove");

      const ids = (await h.api("GET", "/v1/mcp")).body.connections.map((c: any) => c.id);
      assert.deepEqual(ids, ["sentry"]);
      assert.equal(h.dep.hasCredential("linear"), false, "the credential goes with the declaration");
      assert.ok(h.auth.counters.revocations > 0, "the deployment revokes the dropped tokens (section 5, SHOULD)");
      // Agents were deleted before the connection (section 8 step 3 before step 4).
      const deletes = h.dep.requests.filter((r) => r.method === "DELETE").map((r) => r.path);
      assert.deepEqual(deletes, ["/v1/agents/triage", "/v1/mcp/linear"]);
    }));

  it("changing a url drops the credential", () =>
    withHarness(async (h) => {
      h.write(file(h));
      assert.equal((await h.run(["apply"])).code, 0);
      await login(h);
      assert.equal((await h.run(["mcp", "tools", "sentry"])).code, 0);

      // Same MCP server, different bytes in the url: the document forbids normalizing, so it is a new url.
      const changedUrl = h.mcp.url.replace("127.0.0.1", "localhost");
      h.write(file(h).replace(`url = "${h.mcp.url}"`, `url = "${changedUrl}"`));
      const result = await h.run(["apply", "--json"]);
      assert.equal(result.code, 0, result.stderr);
      const sentry = JSON.parse(result.stdout).connections.find((c: any) => c.id === "sentry");
      assert.equal(sentry.action, "change");
      assert.deepEqual(sentry.changed, ["url"]);
      assert.equal(sentry.credential, "dropped");
      assert.equal(sentry.credential_reason, "url_changed");

      const held = (await h.api("GET", "/v1/mcp")).body.connections.find((c: any) => c.id === "sentry");
      assert.equal(held.url, changedUrl);
      assert.equal(held.status, "declared");
      assert.equal(h.dep.hasCredential("sentry"), false);
      const tools = await h.run(["mcp", "tools", "sentry"]);
      assert.equal(tools.code, 4, `tools after a url change need a login again: ${tools.stderr}`);
      assert.match(tools.stderr, /subs mcp login sentry/);
    }));

  it("refuses `auth` under [remote] before any request reaches the deployment", () =>
    withHarness(async (h) => {
      h.write(`[mcp.github]\nurl = "${h.mcp.url}"\nauth = { token_env = "GITHUB_TOKEN" }\n\n[mcp.linear]\nurl = "${h.other.url}"\noauth = { client_id = "abc", client_secret_env = "LINEAR_SECRET" }\n`);
      for (const argv of [["apply"], ["apply", "--dry-run"], ["mcp", "login", "github"]]) {
        const result = await h.run(argv, { GITHUB_TOKEN: "ghp_NOTSENT", LINEAR_SECRET: "shh" });
        assert.equal(result.code, 2, `${argv.join(" ")}: ${result.stderr}`);
        assert.match(result.stderr, /github/);
      }
      const apply = await h.run(["apply"]);
      assert.match(apply.stderr, /linear/, "every connection carrying a local-only field is named");
      assert.equal(h.dep.requests.length, 0, `no request may reach the deployment: ${JSON.stringify(h.dep.requests)}`);
      assert.ok(!h.outputs.join("").includes("ghp_NOTSENT"));
    }));

  it("a catalog deployment's refusal lists the allowed URLs", () =>
    withHarness(
      async (h) => {
        h.write(file(h));
        const result = await h.run(["apply", "--json"]);
        assert.equal(result.code, 2, result.stderr);
        const { error } = JSON.parse(result.stdout);
        assert.equal(error.code, "url_not_in_catalog");
        assert.deepEqual(error.catalog, [h.mcp.url, "https://mcp.example.com/allowed"]);
        assert.deepEqual(error.not_in_catalog, [{ id: "linear", url: h.other.url }]);
        // Agents come after connections (section 8): after the refusal none is attempted.
        assert.deepEqual(error.not_attempted.map((x: any) => x.id).sort(), ["support", "triage"]);
        assert.equal(h.dep.requests.filter((r) => r.path.startsWith("/v1/agents/")).length, 0);

        const human = await h.run(["apply"]);
        assert.equal(human.code, 2);
        assert.ok(human.stderr.includes(h.mcp.url) && human.stderr.includes("https://mcp.example.com/allowed"), human.stderr);
        // The refused connection was not declared.
        const ids = (await h.api("GET", "/v1/mcp")).body.connections.map((c: any) => c.id);
        assert.ok(!ids.includes("linear"));
      },
      (mcpUrl) => ({ catalog: [mcpUrl, "https://mcp.example.com/allowed"] }),
    ));

  it("a wrong deployment token is answered 401 and subs names the variable", () =>
    withHarness(async (h) => {
      h.write(file(h));
      const result = await h.run(["apply"], { ALT_DEPLOY_TOKEN: "not-the-token" });
      assert.equal(result.code === 0, false);
      assert.match(result.stderr, /ALT_DEPLOY_TOKEN/);
      assert.ok(h.dep.requests.length > 0 && h.dep.requests.every((r) => !r.authorized));
      assert.equal(h.writes(), 0);
    }));
});
