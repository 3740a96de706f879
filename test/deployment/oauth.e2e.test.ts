// Server-side OAuth of a real `subs deployment serve` process against real authorization servers
// (test/support/oauth-server.ts) and protected MCP servers: the scopes it requests
// (docs/deployment-protocol.md section 4), a short-lived access token refreshed ahead of its
// expiry once however many requests need it, and a confidential pre-registered client whose
// secret the operator configures on the deployment (section 3.2).
import assert from "node:assert/strict";
import { chmodSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { after, before, describe, test } from "node:test";
import { authorizeServed, callServed, startServedDeployment, STORES, type ServedDeployment } from "../support/deployment-serve.ts";
import { annotatedTool, startMcpServer, type RunningMcpServer } from "../support/mcp-server.ts";
import { startAuthServer, type RunningAuthServer } from "../support/oauth-server.ts";

const CLIENT_SECRET = "team-app-secret-7c2e";

const call = (d: ServedDeployment, method: string, pathname: string, body?: unknown) => callServed(d, method, pathname, body);
const authorize = authorizeServed;

for (const store of STORES) describe(`server-side OAuth of subs deployment serve (${store})`, () => {
  const dir = mkdtempSync(path.join(tmpdir(), "subs-deploy-oauth-"));
  const secrets = path.join(dir, "client-secrets.json");
  let d: ServedDeployment;
  const servers: Array<RunningAuthServer | RunningMcpServer> = [];
  // The team app's authorization server: the one its secret was issued by, named beside it.
  let teamAuth: RunningAuthServer;
  before(async () => {
    // Refreshed ahead of expiry once half the lifetime is gone: 6 s leaves the call after the wait
    // 3 s before the refreshed token is due too (with 1 s, a loaded machine refreshed it twice).
    teamAuth = await startAuthServer({ dynamicRegistration: false, tokenEndpointAuthMethods: ["client_secret_post"], accessTokenTtlSeconds: 6 });
    servers.push(teamAuth);
    writeFileSync(secrets, JSON.stringify({ "team-app": { issuer: teamAuth.issuer, secret: CLIENT_SECRET } }), { mode: 0o600 });
    d = await startServedDeployment({ store, env: { SUBS_DEPLOYMENT_CLIENT_SECRETS: secrets } });
  });
  after(async () => {
    await d.close();
    for (const s of servers) await s.close();
    rmSync(dir, { recursive: true, force: true });
  });
  const protectedServer = async (authServer: RunningAuthServer, scopesSupported?: string[]) => {
    const mcp = await startMcpServer({ tools: [annotatedTool("search")], oauth: { authServer, ...(scopesSupported ? { scopesSupported } : {}) } });
    servers.push(mcp);
    return mcp;
  };

  test("oauth.scopes are requested exactly; unset, the resource metadata's scopes_supported; offline_access is never added", async () => {
    const authServer = await startAuthServer({ scopesSupported: ["read", "write", "offline_access"] });
    servers.push(authServer);
    const mcp = await protectedServer(authServer, ["read", "write"]);
    assert.deepEqual(await authorize(d, "scoped", { url: mcp.url, oauth: { scopes: ["write", "read"] } }), { status: "authorized" });
    assert.deepEqual(authServer.authorizations.at(-1)!.scopes, ["write", "read"]);
    assert.deepEqual(await authorize(d, "unscoped", { url: mcp.url }), { status: "authorized" });
    assert.deepEqual(authServer.authorizations.at(-1)!.scopes, ["read", "write"]);
  });

  test("a short-lived access token is used for its first half, then refreshed ahead of its expiry once for eight requests at once", async () => {
    // 10 s: three calls fit in its first half with room on a loaded machine.
    const authServer = await startAuthServer({ accessTokenTtlSeconds: 10 });
    servers.push(authServer);
    const mcp = await protectedServer(authServer);
    const authorizedAt = Date.now();
    assert.deepEqual(await authorize(d, "short", { url: mcp.url }), { status: "authorized" });
    for (let n = 0; n < 3; n++) assert.equal((await call(d, "GET", "/v1/mcp/short/tools")).status, 200);
    assert.ok(Date.now() - authorizedAt < 5000, "the first calls ran within the token's first half");
    assert.equal(authServer.counters.refreshes, 0, "a token in its first half is not refreshed");
    const firstToken = mcp.authorizations.at(-1);
    // Past its expiry: the deployment must not send it (the MCP server would answer 401).
    await new Promise((r) => setTimeout(r, Math.max(0, authorizedAt + 10_500 - Date.now())));
    const seen = mcp.authorizations.length;
    const answers = await Promise.all(Array.from({ length: 8 }, () => call(d, "GET", "/v1/mcp/short/tools")));
    assert.deepEqual(answers.map((a) => a.status), Array(8).fill(200));
    assert.equal(authServer.counters.refreshes, 1, "one refresh for every request that needed it");
    const after = mcp.authorizations.slice(seen);
    assert.ok(after.length > 0 && after.every((h) => h !== firstToken), "only the refreshed token reached the MCP server");
    const metrics = await fetch(`${d.url}/metrics`, { headers: { authorization: `Bearer ${d.token}` } }).then((r) => r.text());
    assert.match(metrics, /subs_deployment_refreshes_total\{outcome="refreshed"\} 1\n/);
  });

  test("a confidential pre-registered client: the operator's secret authenticates the code exchange and the refresh; subs never sends it", async () => {
    const authServer = teamAuth;
    authServer.set({ preRegistered: [{ client_id: "team-app", client_secret: CLIENT_SECRET, redirect_uris: [d.redirectUri] }] });
    authServer.restart();
    const mcp = await protectedServer(authServer);
    assert.deepEqual(await authorize(d, "confidential", { url: mcp.url, oauth: { client_id: "team-app" } }), { status: "authorized" });
    assert.equal(authServer.authorizations.at(-1)!.client_id, "team-app");
    await new Promise((r) => setTimeout(r, 3200));
    assert.equal((await call(d, "GET", "/v1/mcp/confidential/tools")).status, 200);
    assert.equal(authServer.counters.refreshes, 1);
    assert.deepEqual(authServer.rejections, []);
    const listed = JSON.stringify((await call(d, "GET", "/v1/mcp")).body);
    assert.ok(!listed.includes(CLIENT_SECRET));
    assert.ok(!d.logs.some((l) => JSON.stringify(l).includes(CLIENT_SECRET)), "the secret is never logged");
  });

  test("a client-secrets file others may read refuses to start, naming where it came from", async () => {
    const open = path.join(dir, "open.json");
    writeFileSync(open, "{}");
    chmodSync(open, 0o644);
    await assert.rejects(startServedDeployment({ store, env: { SUBS_DEPLOYMENT_CLIENT_SECRETS: open } }), /\$SUBS_DEPLOYMENT_CLIENT_SECRETS .*open\.json: others may read it/);
  });
});
