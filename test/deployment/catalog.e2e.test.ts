// `--catalog` turned on after connections were declared: a real `subs deployment serve` holds an
// authorized connection, an agent naming it, an open session of that agent and a consent in
// progress; it restarts on the same store with a catalog that leaves the connection's url out.
// From then on the connection is refused wherever it would be used (the agent's sessions, its
// tools, a consent's start and its redirect, refresh, revocation), nothing reaches its server, the
// start-up log names it, and `subs mcp list` says why with the catalog. Its credential is kept: a
// restart without the catalog uses it again.
import assert from "node:assert/strict";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { after, before, describe, test } from "node:test";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { runCli } from "../support/cli.ts";
import { authorizeServed, callServed, startServedDeployment, type ServedDeployment } from "../support/deployment-serve.ts";
import { annotatedTool, startMcpServer, type RunningMcpServer } from "../support/mcp-server.ts";
import { startAuthServer, type RunningAuthServer } from "../support/oauth-server.ts";
import { projectsForThisFile } from "../support/projects.ts";

const project = projectsForThisFile("catalog");
const dataDirs: string[] = [];
after(() => dataDirs.forEach((d) => rmSync(d, { recursive: true, force: true })));

type Called = { content: Array<{ type: string; text: string }>; isError?: boolean };

/** One JSON-RPC request on an existing session of an agent's endpoint; the answer to it, from a JSON or an event-stream body. */
async function onSession(d: ServedDeployment, agent: string, token: string, sessionId: string, message: { id: number; method: string; params?: unknown }) {
  const res = await fetch(`${d.url}/v1/agents/${agent}/mcp`, {
    method: "POST",
    headers: { authorization: `Bearer ${token}`, "mcp-session-id": sessionId, "mcp-protocol-version": "2025-06-18", "content-type": "application/json", accept: "application/json, text/event-stream" },
    body: JSON.stringify({ jsonrpc: "2.0", ...message }),
    signal: AbortSignal.timeout(30_000),
  });
  const text = await res.text();
  assert.equal(res.status, 200, text);
  const bodies = res.headers.get("content-type")?.startsWith("text/event-stream")
    ? text.split("\n").filter((l) => l.startsWith("data:")).map((l) => JSON.parse(l.slice(5)))
    : [JSON.parse(text)];
  const answer = bodies.find((b) => b.id === message.id);
  assert.ok(answer, text);
  return answer as { result?: unknown; error?: { message: string } };
}

describe("a connection whose url the catalog left out, after a restart with --catalog", () => {
  // A short-lived token: by the time the catalog is on, it is due for a refresh that must not happen.
  let authServer: RunningAuthServer;
  let tracker: RunningMcpServer;
  let docs: RunningMcpServer;
  let trackerHits = 0;
  let catalog: string[];
  let dataDir: string;
  let d: ServedDeployment;
  let tokens: { use: string; read: string; apply: string };
  let sessionId: string;
  let pending: { authorization_url: string; poll_url: string };
  let callback: URL;
  let baseline: { hits: number; refreshes: number; codeExchanges: number; revocations: number };
  let dir: string;
  const cli = (args: string[], token = tokens.read) => runCli(args, { cwd: dir, env: { SUBSTRUCTURE_TOKEN: token } });

  before(async () => {
    authServer = await startAuthServer({ accessTokenTtlSeconds: 1 });
    tracker = await startMcpServer({ name: "tracker", tools: [annotatedTool("search_issues")], oauth: { authServer }, gate: () => (trackerHits++, false) });
    docs = await startMcpServer({ name: "docs", tools: [annotatedTool("read_page")] });
    catalog = [docs.url, "https://mcp.example.com/allowed"];
    dataDir = mkdtempSync(path.join(tmpdir(), "subs-catalog-"));
    dataDirs.push(dataDir);
    d = await startServedDeployment({ dir: dataDir });
    // Before the catalog: tracker authorized (and tracker2, a second account of the same server),
    // docs held with a static token, an agent naming both, a session of it, a consent under way.
    assert.deepEqual(await authorizeServed(d, "tracker", { url: tracker.url, prefix_tools: true }), { status: "authorized" });
    assert.deepEqual(await authorizeServed(d, "tracker2", { url: tracker.url, prefix_tools: true }), { status: "authorized" });
    assert.equal((await callServed(d, "PUT", "/v1/mcp/docs", { url: docs.url, prefix_tools: true })).status, 201);
    d.credentials.set("docs", { url: docs.url, tokens: { access_token: "docs-static-token", token_type: "bearer" }, authorizedAt: Date.now(), expiresAt: null });
    assert.equal((await callServed(d, "PUT", "/v1/agents/triage", { mcp: [{ id: "tracker" }, { id: "docs" }] })).status, 201);
    tokens = { use: await d.tokenFor("use"), read: await d.tokenFor("read"), apply: await d.tokenFor("apply") };
    const transport = new StreamableHTTPClientTransport(new URL(`${d.url}/v1/agents/triage/mcp`), { requestInit: { headers: { authorization: `Bearer ${tokens.use}` } } });
    const early = new Client({ name: "catalog-test", version: "1.0.0" });
    await early.connect(transport);
    sessionId = transport.sessionId!;
    assert.ok(sessionId);
    assert.deepEqual((await early.listTools()).tools.map((t) => t.name).sort(), ["docs__read_page", "tracker__search_issues"]);
    await early.close();
    const started = await callServed(d, "POST", "/v1/mcp/tracker/authorizations", {}, tokens.apply);
    assert.equal(started.status, 201);
    pending = started.body;
    // The authorization server allows at once and redirects to the deployment's callback, which is followed later.
    const redirect = await fetch(pending.authorization_url, { redirect: "manual" });
    await redirect.body?.cancel();
    callback = new URL(redirect.headers.get("location")!);
    assert.ok(callback.searchParams.get("code"));
    await d.close();
    // Past the 1 s token's lifetime: any use of tracker now would begin with a refresh.
    await new Promise((r) => setTimeout(r, 1200));
    baseline = { hits: trackerHits, refreshes: authServer.counters.refreshes, codeExchanges: authServer.counters.codeExchanges, revocations: authServer.counters.revocations };
    d = await startServedDeployment({ dir: dataDir, catalog });
    dir = project(`[remote]\nurl = "${d.url}"\n\n[mcp.tracker]\nurl = "${tracker.url}"\n\n[mcp.docs]\nurl = "${docs.url}"\n\n[agent.triage]\nmcp = ["tracker", "docs"]\n\n[agent.support]\nmcp = ["docs"]\n`);
  });
  after(async () => {
    await d?.close();
    await tracker?.close();
    await docs?.close();
    await authServer?.close();
  });

  test("the start-up log names the declared connections outside the catalog", () => {
    const warned = d.logs.find((l) => l.level === "warn" && Array.isArray(l.connections));
    assert.ok(warned, `no warning in ${JSON.stringify(d.logs)}`);
    assert.deepEqual(warned.connections, [
      { id: "tracker", url: tracker.url },
      { id: "tracker2", url: tracker.url },
    ]);
  });

  test("GET /v1/mcp: the connection is `declared` with `refused`, and the answer carries the catalog", async () => {
    const listed = await callServed(d, "GET", "/v1/mcp", undefined, tokens.read);
    assert.equal(listed.status, 200);
    const byId = new Map<string, Record<string, unknown>>(listed.body.connections.map((c: { id: string }) => [c.id, c]));
    assert.deepEqual(byId.get("tracker"), {
      id: "tracker",
      url: tracker.url,
      prefix_tools: true,
      status: "declared",
      refused: { error: "url_not_in_catalog", message: `tracker: ${tracker.url} is not in this deployment's catalog` },
    });
    assert.equal(byId.get("docs")!.status, "authorized");
    assert.equal(byId.get("docs")!.refused, undefined);
    assert.deepEqual(listed.body.catalog, catalog);
  });

  test("its tools and a new consent: 403 url_not_in_catalog with the catalog", async () => {
    const tools = await callServed(d, "GET", "/v1/mcp/tracker/tools", undefined, tokens.read);
    assert.equal(tools.status, 403, JSON.stringify(tools.body));
    assert.equal(tools.body.error, "url_not_in_catalog");
    assert.deepEqual(tools.body.catalog, catalog);
    const consent = await callServed(d, "POST", "/v1/mcp/tracker/authorizations", {}, tokens.apply);
    assert.equal(consent.status, 403, JSON.stringify(consent.body));
    assert.equal(consent.body.error, "url_not_in_catalog");
    assert.deepEqual(consent.body.catalog, catalog);
  });

  test("a consent started before the restart: its redirect exchanges no code, and its poll says why", async () => {
    const page = await fetch(`${d.url}${callback.pathname}${callback.search}`);
    await page.body?.cancel();
    assert.equal(page.status, 403);
    const polled = await callServed(d, "GET", new URL(pending.poll_url, d.url).pathname, undefined, tokens.read);
    assert.equal(polled.body.status, "failed");
    assert.equal(polled.body.error, "url_not_in_catalog");
  });

  test("a session started before the restart: a call of the connection's tool is a tool error saying why; the other connection still answers", async () => {
    const refused = await onSession(d, "triage", tokens.use, sessionId, { id: 11, method: "tools/call", params: { name: "tracker__search_issues", arguments: { q: "x" } } });
    const result = refused.result as Called;
    assert.equal(result.isError, true, JSON.stringify(refused));
    assert.match(result.content[0]!.text, /^tracker: .*its url is not in the deployment's catalog/);
    const answered = await onSession(d, "triage", tokens.use, sessionId, { id: 12, method: "tools/call", params: { name: "docs__read_page", arguments: { p: 1 } } });
    assert.deepEqual((answered.result as Called).content, [{ type: "text", text: '{"p":1}' }]);
  });

  test("a new session offers the other connection's tools alone", async () => {
    const fresh = new Client({ name: "catalog-test", version: "1.0.0" });
    await fresh.connect(new StreamableHTTPClientTransport(new URL(`${d.url}/v1/agents/triage/mcp`), { requestInit: { headers: { authorization: `Bearer ${tokens.use}` } } }));
    try {
      assert.deepEqual((await fresh.listTools()).tools.map((t) => t.name), ["docs__read_page"]);
    } finally {
      await fresh.close();
    }
    const said = d.logs.filter((l) => l.level === "warn" && l.agent === "triage").map((l) => String(l.msg));
    assert.ok(said.some((m) => /^tracker: .*its url is not in the deployment's catalog; this session serves none of tracker's tools/.test(m)), `the session says why: ${JSON.stringify(said)}`);
  });

  test("deleting a connection outside the catalog drops its credential without a revocation request", async () => {
    assert.equal((await callServed(d, "DELETE", "/v1/mcp/tracker2", undefined, tokens.apply)).status, 204);
    assert.equal(d.credentials.has("tracker2"), false);
    assert.equal(authServer.counters.revocations, baseline.revocations);
  });

  test("`subs mcp list`, text and --json: refused, with the catalog", async () => {
    const json = await cli(["mcp", "list", "--json"]);
    assert.equal(json.code, 0, json.stderr);
    const entries = new Map<string, Record<string, unknown>>(JSON.parse(json.stdout).map((e: { id: string }) => [e.id, e]));
    const entry = entries.get("tracker")!;
    assert.equal(entry.status, "refused");
    assert.equal(entry.usable, false);
    assert.deepEqual(entry.refused, { error: "url_not_in_catalog", message: `tracker: ${tracker.url} is not in this deployment's catalog`, catalog });
    assert.equal(entries.get("docs")!.status, "authorized");
    assert.equal(entries.get("docs")!.refused, null);
    const text = await cli(["mcp", "list"]);
    assert.equal(text.code, 0, text.stderr);
    assert.match(text.stdout, /^tracker\t[^\t]+\trefused: url not in the deployment's catalog\t/m);
    assert.match(text.stderr, /tracker: the deployment refuses to use it: its url is not in the deployment's catalog/);
    assert.match(text.stderr, /allowed URLs:\n {4}\S+\n {4}\S+\n/);
    for (const url of catalog) assert.ok(text.stderr.includes(`    ${url}\n`), text.stderr);
  });

  test("`subs mcp tools` and `subs mcp login` are refused with the catalog", async () => {
    const tools = await cli(["mcp", "tools", "tracker"]);
    assert.equal(tools.code, 2, tools.stderr);
    assert.match(tools.stderr, /tracker: .* is not in this deployment's catalog/);
    for (const url of catalog) assert.ok(tools.stderr.includes(url), tools.stderr);
    const login = await cli(["mcp", "login", "tracker", "--no-browser", "--timeout", "5"], tokens.apply);
    assert.equal(login.code, 2, login.stderr);
    assert.match(login.stderr, /catalog/);
    for (const url of catalog) assert.ok(login.stderr.includes(url), login.stderr);
  });

  test("`subs apply` of a change elsewhere names the unchanged declaration the deployment refuses", async () => {
    // The plan adds agent support; the deployment refuses the whole file for tracker, which is unchanged.
    const apply = await cli(["apply", "--json"], tokens.apply);
    assert.equal(apply.code, 2, apply.stderr);
    const error = JSON.parse(apply.stdout).error;
    assert.equal(error.code, "url_not_in_catalog");
    assert.deepEqual(error.not_in_catalog, [{ id: "tracker", url: tracker.url }]);
    assert.deepEqual(error.catalog, catalog);
  });

  test("nothing of all that reached the server or its authorization server: no request, no refresh of the expired token, no code exchange; the credential is kept", () => {
    assert.equal(trackerHits, baseline.hits, "a request reached the server outside the catalog");
    assert.deepEqual(
      { refreshes: authServer.counters.refreshes, codeExchanges: authServer.counters.codeExchanges, revocations: authServer.counters.revocations },
      { refreshes: baseline.refreshes, codeExchanges: baseline.codeExchanges, revocations: baseline.revocations },
    );
    assert.ok(d.credentials.has("tracker"), "the credential is kept");
  });

  test("restarted without the catalog, the kept credential serves again (refreshed first: it expired meanwhile)", async () => {
    await d.close();
    // The token the refresh issues lives an hour: with the 1 s lifetime it can expire again on a
    // loaded machine between the refresh and the requests it was for, and the deployment then
    // rightly answers 409 "refused the refreshed credential" (seen once, two suites at once).
    authServer.set({ refreshedAccessTokenTtlSeconds: 3600 });
    d = await startServedDeployment({ dir: dataDir });
    const back = await callServed(d, "GET", "/v1/mcp/tracker/tools", undefined, tokens.read);
    assert.equal(back.status, 200, JSON.stringify(back.body));
    assert.equal(authServer.counters.refreshes, baseline.refreshes + 1, "the expired token was refreshed once, now");
    assert.deepEqual(back.body.tools.map((t: { name: string }) => t.name), ["search_issues"]);
    const listed = await callServed(d, "GET", "/v1/mcp", undefined, tokens.read);
    assert.equal(listed.body.connections.find((c: { id: string }) => c.id === "tracker").status, "authorized");
    assert.equal(listed.body.catalog, undefined);
  });
});
