// The reference deployment (test/support/deployment/server.ts) in catalog mode with a connection
// declared before its url left the catalog (put in its state directly, as a restart would find
// it): the protocol's `refused` and `catalog` (docs/deployment-protocol.md sections 2 and 3.1),
// its refusals, and what the real CLI shows of them.
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import { runCli } from "../support/cli.ts";
import { callServed } from "../support/deployment-serve.ts";
import { startDeployment, type RunningDeployment } from "../support/deployment/server.ts";
import { annotatedTool, startMcpServer, type RunningMcpServer } from "../support/mcp-server.ts";
import { startAuthServer, type RunningAuthServer } from "../support/oauth-server.ts";
import { projectsForThisFile } from "../support/projects.ts";

const TOKEN = "deploy-api-token-SECRET";
const project = projectsForThisFile("remote-catalog");

describe("the reference deployment in catalog mode, with a connection declared outside it", () => {
  let authServer: RunningAuthServer;
  let tracker: RunningMcpServer;
  let docs: RunningMcpServer;
  let deployment: RunningDeployment;
  let catalog: string[];
  let trackerHits = 0;
  let dir: string;

  const call = (method: string, pathname: string, body?: unknown) => callServed({ url: deployment.url, token: TOKEN }, method, pathname, body);
  const cli = (args: string[]) => runCli(args, { cwd: dir, env: { SUBSTRUCTURE_TOKEN: TOKEN } });

  before(async () => {
    authServer = await startAuthServer();
    tracker = await startMcpServer({ name: "tracker", tools: [annotatedTool("search_issues")], oauth: { authServer }, gate: () => (trackerHits++, false) });
    docs = await startMcpServer({ name: "docs", tools: [annotatedTool("read_page")] });
    catalog = [docs.url, "https://mcp.example.com/allowed"];
    deployment = await startDeployment({ token: TOKEN, catalog, pollInterval: 0.05 });
    deployment.connections.set("tracker", { id: "tracker", url: tracker.url, prefix_tools: true });
    deployment.credentials.set("tracker", { url: tracker.url, tokens: { access_token: "held-token", token_type: "bearer" }, authorizedAt: Date.now(), expiresAt: null });
    assert.equal((await call("PUT", "/v1/mcp/docs", { url: docs.url, prefix_tools: true })).status, 201);
    deployment.credentials.set("docs", { url: docs.url, tokens: { access_token: "docs-token", token_type: "bearer" }, authorizedAt: Date.now(), expiresAt: null });
    dir = project(`[remote]\nurl = "${deployment.url}"\n\n[mcp.tracker]\nurl = "${tracker.url}"\n\n[mcp.docs]\nurl = "${docs.url}"\n`);
  });
  after(async () => {
    await deployment?.close();
    await tracker?.close();
    await docs?.close();
    await authServer?.close();
  });

  test("GET /v1/mcp: `declared` with `refused`, and the catalog; its tools and a consent are 403 url_not_in_catalog with the catalog", async () => {
    const listed = await call("GET", "/v1/mcp");
    const byId = new Map<string, Record<string, unknown>>(listed.body.connections.map((c: { id: string }) => [c.id, c]));
    assert.equal(byId.get("tracker")!.status, "declared", "a client that does not know `refused` never reads it as usable");
    assert.equal(byId.get("tracker")!.authorized_at, undefined);
    assert.deepEqual(byId.get("tracker")!.refused, { error: "url_not_in_catalog", message: `tracker: ${tracker.url} is not in this deployment's catalog` });
    assert.equal(byId.get("docs")!.status, "authorized");
    assert.equal(byId.get("docs")!.refused, undefined);
    assert.deepEqual(listed.body.catalog, catalog);
    for (const [method, pathname] of [["GET", "/v1/mcp/tracker/tools"], ["POST", "/v1/mcp/tracker/authorizations"]] as const) {
      const refused = await call(method, pathname, method === "POST" ? {} : undefined);
      assert.equal(refused.status, 403, `${method} ${pathname}: ${JSON.stringify(refused.body)}`);
      assert.equal(refused.body.error, "url_not_in_catalog");
      assert.deepEqual(refused.body.catalog, catalog);
    }
    assert.equal(trackerHits, 0, "nothing was sent to the server outside the catalog");
  });

  test("`subs mcp list` (text, --json, --check) shows it refused with the catalog; `subs mcp tools` is refused with it", async () => {
    const json = await cli(["mcp", "list", "--json"]);
    assert.equal(json.code, 0, json.stderr);
    const [entry, other] = JSON.parse(json.stdout);
    assert.equal(entry.id, "tracker");
    assert.equal(entry.status, "refused");
    assert.equal(entry.usable, false);
    assert.deepEqual(entry.refused, { error: "url_not_in_catalog", message: `tracker: ${tracker.url} is not in this deployment's catalog`, catalog });
    assert.deepEqual([other.id, other.status, other.refused], ["docs", "authorized", null]);

    const text = await cli(["mcp", "list"]);
    assert.equal(text.code, 0, text.stderr);
    assert.match(text.stdout, /^tracker\t[^\t]+\trefused: url not in the deployment's catalog\t-$/m);
    assert.match(text.stderr, /^tracker: the deployment refuses to use it: its url is not in the deployment's catalog$/m);
    assert.ok(text.stderr.includes(`  allowed URLs:\n${catalog.map((u) => `    ${u}\n`).join("")}`), text.stderr);

    const checked = await cli(["mcp", "list", "--check", "--json"]);
    const [check] = JSON.parse(checked.stdout);
    assert.equal(check.check.error.code, "url_not_in_catalog");
    assert.equal(check.check.tools, null);
    assert.equal(checked.code, 1, "a refused connection fails the check");

    const tools = await cli(["mcp", "tools", "tracker"]);
    assert.equal(tools.code, 2, tools.stderr);
    assert.match(tools.stderr, /catalog/);
    for (const url of catalog) assert.ok(tools.stderr.includes(`  ${url}`), tools.stderr);
    assert.equal(trackerHits, 0, "nothing was sent to the server outside the catalog");
  });
});

test("without a catalog, `subs mcp list --json` entries carry `refused: null`", async () => {
  const deployment = await startDeployment({ token: TOKEN });
  try {
    deployment.connections.set("plain", { id: "plain", url: "https://mcp.example.com/plain", prefix_tools: true });
    const dir = project(`[remote]\nurl = "${deployment.url}"\n\n[mcp.plain]\nurl = "https://mcp.example.com/plain"\n`);
    const json = await runCli(["mcp", "list", "--json"], { cwd: dir, env: { SUBSTRUCTURE_TOKEN: TOKEN } });
    assert.equal(json.code, 0, json.stderr);
    assert.deepEqual(JSON.parse(json.stdout).map((e: { status: string; refused: unknown }) => [e.status, e.refused]), [["needs_login", null]]);
  } finally {
    await deployment.close();
  }
});
