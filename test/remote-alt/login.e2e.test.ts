// `subs mcp login`, `mcp list`, `mcp tools` and `agent tools` against the second deployment
// implementation. The first test's login, `mcp tools` and `mcp list`, and the first `agent tools`
// (exit 4, one connection needing a login) run the built CLI (bin/subs.cjs) with the
// redirect-following $BROWSER, as a person does; the rest, the logins and `apply` that set up the
// `agent tools` test included, run the same `run()` in this process with an opener that follows the
// URL as that $BROWSER does, where what is checked is the deployment's state and what is printed,
// not the process (a tenth of the CPU: a child costs a Node start-up and the bundle's load per run,
// and its $BROWSER another).
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { startHarness, withHarness as withFreshHarness, type Harness } from "./harness.ts";
import type { How } from "../support/cli.ts";

const withHarness = (fn: (h: Harness) => Promise<void>, how: How = "in-process") => withFreshHarness(fn, {}, {}, how);

const file = (h: Harness) => `[mcp.sentry]
url = "${h.mcp.url}"

[mcp.other]
url = "${h.other.url}"
prefix_tools = false

[agent.triage]
mcp = [{ id = "sentry", tools = { read_only = true, include = ["search_*", "get_*"] } }, "other"]
tools = ["summarize"]
`;

describe("subs mcp login / list / tools / agent tools against deployment-alt", () => {
  it("login completes through the deployment; no token appears in any output or local file", () =>
    withHarness(async (h) => {
      h.write(file(h));
      const result = await h.run(["mcp", "login", "sentry", "--json"]);
      assert.equal(result.code, 0, result.stderr);
      const [entry] = JSON.parse(result.stdout);
      assert.equal(entry.id, "sentry");
      assert.equal(entry.result, "authorized");
      assert.equal(entry.target, "remote");
      assert.equal(entry.url, h.mcp.url);
      assert.ok(entry.authorized_at, "authorized_at comes from the deployment's Connection");

      // The sequence of section 4: GET (is it declared as the file says?), PUT, POST, the browser at
      // the deployment's callback, polls, GET.
      const seen = h.dep.requests.map((r) => `${r.method} ${r.path.replace(/authorizations\/[0-9a-f]+$/, "authorizations/ID")}`);
      // (The browser runs beside subs's polling, so the callback falls somewhere among the polls.)
      assert.deepEqual(seen.slice(0, 3), ["GET /v1/mcp", "PUT /v1/mcp/sentry", "POST /v1/mcp/sentry/authorizations"]);
      assert.ok(seen.indexOf("GET /oauth/callback") > 2, seen.join(", "));
      assert.ok(seen.lastIndexOf("GET /v1/authorizations/ID") > seen.indexOf("GET /oauth/callback"), seen.join(", "));
      assert.equal(seen.at(-1), "GET /v1/mcp");
      // The deployment is the OAuth client: the redirect went to its own callback, with PKCE and resource.
      assert.equal(h.auth.authorizations.length, 1);
      assert.equal(h.auth.authorizations[0]!.redirect_uri, `${h.dep.url}/oauth/callback`);
      assert.equal(h.auth.authorizations[0]!.resource, h.mcp.url);
      assert.equal(h.auth.counters.codeExchanges, 1);
      assert.ok(h.dep.hasCredential("sentry"));
      assert.equal((await h.api("GET", "/v1/mcp")).body.connections[0].status, "authorized");

      // Use the credential too, so every command has had a chance to leak it.
      assert.equal((await h.run(["mcp", "tools", "sentry", "--json"])).code, 0);
      // Once from the built CLI is enough for `mcp list`; its --json form in this process (all it
      // prints reaches the check below).
      assert.equal((await h.run(["mcp", "list", "--json"], {}, "in-process")).code, 0);
      assert.equal((await h.run(["mcp", "list"])).code, 0);

      const secrets = [...h.auth.issuedTokens(), ...h.dep.secretsSeen()];
      assert.ok(secrets.length >= 3, "tokens were issued");
      const output = h.outputs.join("\n");
      for (const secret of secrets) assert.ok(!output.includes(secret), "a token or code appeared in the CLI's output");
      for (const { file, text } of h.localFiles()) {
        for (const secret of secrets) assert.ok(!text.includes(secret), `a token or code was written to ${file}`);
      }
      // Nothing OAuth went into a local db: the deployment holds the credential.
      assert.ok(!h.localFiles().some((f) => f.file.endsWith(".db")), `local files: ${h.localFiles().map((f) => f.file).join(", ")}`);
    }, "cli"));

  it("a refused consent ends the login with failed / access_denied", () =>
    withHarness(async (h) => {
      h.write(file(h));
      h.auth.set({ consent: "deny" });
      const result = await h.run(["mcp", "login", "sentry"]);
      assert.equal(result.code, 1, result.stderr);
      assert.match(result.stderr, /access_denied|refused|denied/);
      assert.equal(h.dep.hasCredential("sentry"), false);
      assert.equal((await h.api("GET", "/v1/mcp")).body.connections[0].status, "declared");
    }));

  it("a login nobody completes ends `expired` when the deployment's expires_in passes", async () => {
    const h = await startHarness({ expiresIn: 1 }, {}, "in-process");
    try {
      h.write(file(h));
      const result = await h.run(["mcp", "login", "sentry"], { SUBS_TEST_BROWSER: "ignore" });
      assert.equal(result.code, 1, result.stderr);
      assert.match(result.stderr, /expire/i);
      assert.equal(h.dep.hasCredential("sentry"), false);
    } finally {
      await h.close();
    }
  });

  it("mcp list --json shows the deployment's view merged with the file", () =>
    withHarness(async (h) => {
      h.write(file(h));
      assert.equal((await h.run(["apply"])).code, 0);
      assert.equal((await h.run(["mcp", "login", "sentry"])).code, 0);
      // Only on the deployment, and a drifted prefix_tools.
      assert.equal((await h.api("PUT", "/v1/mcp/orphan", { url: "https://mcp.example.com/orphan", prefix_tools: true })).status, 201);
      assert.equal((await h.api("PUT", "/v1/mcp/other", { url: h.other.url, prefix_tools: true })).status, 200);

      const result = await h.run(["mcp", "list", "--json"]);
      assert.equal(result.code, 0, result.stderr);
      const list = JSON.parse(result.stdout);
      const byId = Object.fromEntries(list.map((e: any) => [e.id, e]));
      assert.deepEqual(Object.keys(byId).sort(), ["orphan", "other", "sentry"]);
      for (const e of list) assert.equal(e.target, "remote");

      assert.equal(byId.sentry.status, "authorized");
      assert.equal(byId.sentry.usable, true);
      assert.ok(byId.sentry.authorized_at);
      assert.deepEqual(byId.sentry.deployment, { url: h.mcp.url, prefix_tools: true, status: "authorized" });
      assert.deepEqual(byId.sentry.agents, ["triage"]);

      assert.equal(byId.other.status, "needs_login");
      assert.equal(byId.other.drift, "differs");
      assert.deepEqual(byId.other.differs, ["prefix_tools"]);

      assert.equal(byId.orphan.status, "not_in_file");
      assert.equal(byId.orphan.drift, "not_in_file");
      assert.equal(h.dep.requests.filter((r) => r.method === "GET" && r.path === "/v1/mcp").length > 0, true);
    }));

  it("mcp tools lists the MCP server's tools through the deployment; 409 not_authorized maps to exit 4", () =>
    withHarness(async (h) => {
      h.write(file(h));
      assert.equal((await h.run(["apply"])).code, 0);
      const before = await h.run(["mcp", "tools", "sentry"]);
      assert.equal(before.code, 4, before.stderr);
      assert.match(before.stderr, /subs mcp login sentry/);

      assert.equal((await h.run(["mcp", "login", "sentry"])).code, 0);
      const mcpCallsBefore = h.mcp.requests.filter((m) => m === "tools/list").length;
      const result = await h.run(["mcp", "tools", "sentry", "--json"]);
      assert.equal(result.code, 0, result.stderr);
      const body = JSON.parse(result.stdout);
      assert.equal(body.id, "sentry");
      assert.deepEqual(body.tools.map((t: any) => t.name), ["search_issues", "get_issue", "delete_issue"]);
      assert.deepEqual(body.tools[2].annotations, { destructiveHint: true }, "Tool objects pass through unchanged");
      assert.ok(h.dep.requests.some((r) => r.path === "/v1/mcp/sentry/tools"));
      assert.equal(h.mcp.requests.filter((m) => m === "tools/list").length, mcpCallsBefore + 1, "the deployment asked the MCP server");
      // The MCP server saw the deployment's token, never the deployment API token.
      assert.ok(h.mcp.authorizations.every((a) => a !== `Bearer ${h.dep.token}`));

      h.write(`${file(h)}\n[mcp.fresh]\nurl = "${h.other.url}"\n`);
      const undeclared = await h.run(["mcp", "tools", "fresh"]);
      assert.equal(undeclared.code, 1, `not declared on the deployment: ${undeclared.stderr}`);
    }));

  it("agent tools with [remote] takes each list from the deployment", () =>
    withHarness(async (h) => {
      h.write(file(h));
      // The set-up in this process; the first `agent tools` from the built CLI.
      assert.equal((await h.run(["apply"], {}, "in-process")).code, 0);
      assert.equal((await h.run(["mcp", "login", "sentry"], {}, "in-process")).code, 0);

      // `other` is declared but not authorized: unavailable, needing a login (exit 4).
      const partial = await h.run(["agent", "tools", "triage", "--json"]);
      assert.equal(partial.code, 4, partial.stderr);
      const p = JSON.parse(partial.stdout);
      assert.equal(p.target, "remote");
      assert.deepEqual(p.unavailable.map((u: any) => [u.connection, u.code]), [["other", "needs_login"]]);

      assert.equal((await h.run(["mcp", "login", "other"], {}, "in-process")).code, 0);
      const result = await h.run(["agent", "tools", "triage", "--json"], {}, "in-process");
      assert.equal(result.code, 0, result.stderr);
      const out = JSON.parse(result.stdout);
      assert.equal(out.target, "remote");
      assert.deepEqual(out.tools.map((t: any) => t.name), ["summarize", "sentry__search_issues", "sentry__get_issue", "other_tool"]);
      assert.deepEqual(out.filtered.map((f: any) => [f.tool, f.step]), [["delete_issue", "read_only"]]);
      assert.ok(h.dep.requests.some((r) => r.path === "/v1/mcp/other/tools"));
    }, "cli"));

  it("the deployment refreshes a refused access token itself; a rejected refresh makes the connection need a login", () =>
    withHarness(async (h) => {
      h.write(file(h));
      assert.equal((await h.run(["mcp", "login", "sentry"])).code, 0);

      h.auth.forgetAccessTokens();
      const refreshed = await h.run(["mcp", "tools", "sentry", "--json"]);
      assert.equal(refreshed.code, 0, refreshed.stderr);
      assert.equal(h.auth.counters.refreshes, 1);

      h.auth.forgetAccessTokens();
      h.auth.revokeAllRefreshTokens();
      const rejected = await h.run(["mcp", "tools", "sentry"]);
      assert.equal(rejected.code, 4, `409 not_authorized after invalid_grant (section 5): ${rejected.stderr}`);
      assert.match(rejected.stderr, /subs mcp login sentry/);
      assert.equal(h.dep.hasCredential("sentry"), false);
      const list = JSON.parse((await h.run(["mcp", "list", "--json"])).stdout);
      assert.equal(list.find((e: any) => e.id === "sentry").status, "needs_login");
    }));
});
