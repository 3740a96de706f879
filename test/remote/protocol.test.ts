// The reference deployment (test/support/deployment/server.ts) against docs/deployment-protocol.md,
// for the rules `subs` itself never exercises: raw HTTP over loopback, with a real authorization
// server and MCP servers behind it. Section numbers are the document's.
import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { followAuthorization } from "../support/browser.ts";
import { startDeployment, type RunningDeployment } from "../support/deployment/server.ts";
import { annotatedTool, startMcpServer, type ProtectOptions, type RunningMcpServer } from "../support/mcp-server.ts";
import { startAuthServer, type RunningAuthServer } from "../support/oauth-server.ts";

const TOKEN = "deploy-api-token";
const TOOLS = [annotatedTool("a"), annotatedTool("b")];

let auth: RunningAuthServer;
/** The deployment's clock runs this far ahead of ours: tests move it instead of waiting. */
let skewMs = 0;
let dep: RunningDeployment;
const servers: Array<{ close(): Promise<void> }> = [];

before(async () => {
  auth = await startAuthServer();
  dep = await startDeployment({ token: TOKEN, pollInterval: 0.05, now: () => Date.now() + skewMs });
});
after(async () => {
  await Promise.all([dep.close(), auth.close(), ...servers.map((s) => s.close())]);
});

async function mcpServer(oauth: Partial<ProtectOptions> & { authServer?: RunningAuthServer } = {}): Promise<RunningMcpServer> {
  const server = await startMcpServer({ tools: TOOLS, oauth: { authServer: auth, ...oauth } });
  servers.push(server);
  return server;
}

async function call(method: string, path: string, body?: unknown, headers: Record<string, string> = {}) {
  const res = await fetch(new URL(path, dep.url), {
    method,
    redirect: "manual",
    headers: { authorization: `Bearer ${TOKEN}`, ...(body === undefined ? {} : { "content-type": "application/json" }), ...headers },
    ...(body === undefined ? {} : { body: typeof body === "string" ? body : JSON.stringify(body) }),
  });
  const text = await res.text();
  if (res.status !== 204) assert.match(res.headers.get("content-type") ?? "", /application\/json/, `${method} ${path}: answers other than 204 are JSON`);
  return { status: res.status, body: text ? JSON.parse(text) : undefined };
}

const declare = (id: string, url: string, oauth?: Record<string, unknown>) => call("PUT", `/v1/mcp/${id}`, { url, prefix_tools: true, ...(oauth ? { oauth } : {}) });
const poll = async (pollUrl: string) => (await call("GET", pollUrl)).body;
const statusOf = async (id: string) => (await call("GET", "/v1/mcp")).body.connections.find((c: { id: string }) => c.id === id)?.status;

async function start(id: string): Promise<{ authorization_url: string; poll_url: string }> {
  const started = await call("POST", `/v1/mcp/${id}/authorizations`, {});
  assert.equal(started.status, 201, JSON.stringify(started.body));
  return started.body;
}

/** The person consents; the authorization server's redirect back to the deployment, not yet followed. */
async function consentRedirect(authorizationUrl: string): Promise<string> {
  const consent = await fetch(authorizationUrl, { redirect: "manual" });
  await consent.body?.cancel();
  const location = consent.headers.get("location");
  assert.ok(location, `the authorization server answered ${consent.status} without a redirect`);
  return new URL(location, authorizationUrl).href;
}

async function deliver(callback: string): Promise<number> {
  const res = await fetch(callback, { redirect: "manual" });
  await res.body?.cancel();
  return res.status;
}

async function authorize(id: string) {
  const started = await start(id);
  assert.equal(await followAuthorization(started.authorization_url), 200);
  assert.deepEqual(await poll(started.poll_url), { status: "authorized" });
}

describe("reference deployment: requests it refuses", () => {
  it("section 1: a bad id or name is 400 invalid_request on every endpoint that has one, after percent-decoding", async () => {
    for (const [method, path, body] of [
      ["DELETE", "/v1/mcp/Bad"],
      ["POST", "/v1/mcp/a__b/authorizations", {}],
      ["GET", "/v1/mcp/a.b/tools"],
      ["DELETE", "/v1/agents/UP"],
      ["PUT", "/v1/agents/x%5F%5Fy", { mcp: [] }],
      ["PUT", "/v1/mcp/%41", { url: "https://a.example/mcp", prefix_tools: true }],
      ["DELETE", "/v1/mcp/%E0%A4%A"],
    ] as const) {
      const res = await call(method, path, body);
      assert.equal(res.status, 400, `${method} ${path}`);
      assert.equal(res.body.error, "invalid_request", `${method} ${path}`);
    }
    const decoded = await call("PUT", "/v1/mcp/%61", { url: "https://a.example/mcp", prefix_tools: true });
    assert.equal(decoded.status, 201);
    assert.equal(decoded.body.id, "a", "%61 is a");
    // An id in an agent's `mcp` follows the same rule: malformed, not merely undeclared.
    const agent = await call("PUT", "/v1/agents/ag", { mcp: [{ id: "a" }, { id: "Not-An-Id" }] });
    assert.equal(agent.status, 400);
    assert.equal(agent.body.error, "invalid_request");
    assert.equal((await call("DELETE", "/v1/mcp/a")).status, 204);
  });

  it("section 3.2: oauth.client_metadata_url must be an https URL", async () => {
    const refused = await declare("cimd", "https://a.example/mcp", { client_metadata_url: "http://client.example/metadata.json" });
    assert.equal(refused.status, 400);
    assert.equal(refused.body.error, "invalid_request");
    const accepted = await declare("cimd", "https://a.example/mcp", { client_metadata_url: "https://client.example/metadata.json" });
    assert.equal(accepted.status, 201);
    assert.deepEqual(accepted.body.oauth, { client_metadata_url: "https://client.example/metadata.json" });
    await call("DELETE", "/v1/mcp/cimd");
  });

  it("section 6: a body the parser refuses (too large, unknown charset) is 400 invalid_request", async () => {
    const large = await call("PUT", "/v1/mcp/big", { url: "https://a.example/mcp", prefix_tools: true, pad: "x".repeat(200_000) });
    assert.deepEqual([large.status, large.body.error], [400, "invalid_request"]);
    const charset = await call("PUT", "/v1/mcp/big", "{}", { "content-type": "application/json; charset=utf-7" });
    assert.deepEqual([charset.status, charset.body.error], [400, "invalid_request"]);
    assert.equal(await statusOf("big"), undefined, "nothing was declared");
  });
});

describe("reference deployment: starting an authorization (sections 3.4, 4)", () => {
  it("asks for the declaration's scopes exactly; else the challenge's; else scopes_supported; else none", async () => {
    const challenging = await mcpServer({ requiredScopes: ["read"], scopesSupported: ["a", "b"] });
    const listing = await mcpServer({ scopesSupported: ["a", "b"] });
    const plain = await mcpServer();
    const scopeOf = async (id: string, url: string, oauth?: Record<string, unknown>) => {
      await declare(id, url, oauth);
      return new URL((await start(id)).authorization_url).searchParams.get("scope");
    };
    assert.equal(await scopeOf("s-exact", challenging.url, { scopes: ["x", "y"] }), "x y");
    assert.equal(await scopeOf("s-challenge", challenging.url), "read");
    assert.equal(await scopeOf("s-empty", challenging.url, { scopes: [] }), "read", "[] names no scopes");
    assert.equal(await scopeOf("s-listed", listing.url), "a b");
    assert.equal(await scopeOf("s-none", plain.url), null);
  });

  it("uses a pre-registered client_id, else a Client ID Metadata Document the server accepts, else one registration per authorization server", async () => {
    const cimdServer = await startAuthServer({ clientIdMetadataDocuments: true });
    servers.push(cimdServer);
    const onCimd = await mcpServer({ authServer: cimdServer });
    const documentUrl = "https://client.example/deployment.json";
    const clientOf = async (id: string, url: string, oauth?: Record<string, unknown>) => {
      await declare(id, url, oauth);
      return new URL((await start(id)).authorization_url).searchParams.get("client_id");
    };
    assert.equal(await clientOf("c-doc", onCimd.url, { client_metadata_url: documentUrl }), documentUrl);
    assert.equal(await clientOf("c-both", onCimd.url, { client_id: "pre-1", client_metadata_url: documentUrl }), "pre-1", "client_id wins (section 3.2)");
    assert.equal(cimdServer.counters.registrations, 0);

    const one = await mcpServer();
    const two = await mcpServer();
    const registered = auth.counters.registrations;
    const first = await clientOf("c-one", one.url);
    assert.equal(await clientOf("c-two", two.url), first, "two MCP servers, one authorization server: one client");
    assert.equal(await clientOf("c-doc-unsupported", two.url, { client_metadata_url: documentUrl }), first, "the server does not take metadata documents");
    assert.ok(auth.counters.registrations - registered <= 1);
  });

  it("a start that fails (502) leaves the pending authorization as it was", async () => {
    const mcp = await mcpServer();
    await declare("keep", mcp.url);
    const pending = await start("keep");
    auth.set({ codeChallengeMethods: ["plain"] });
    try {
      const failed = await call("POST", "/v1/mcp/keep/authorizations", {});
      assert.deepEqual([failed.status, failed.body.error], [502, "upstream_error"]);
    } finally {
      auth.set({ codeChallengeMethods: ["S256"] });
    }
    assert.deepEqual(await poll(pending.poll_url), { status: "pending" });
    assert.equal(await followAuthorization(pending.authorization_url), 200);
    assert.deepEqual(await poll(pending.poll_url), { status: "authorized" });
  });
});

describe("reference deployment: the redirect URI (section 3.5)", () => {
  it("an authorization whose expires_in has passed refuses its callback; the code is not exchanged", async () => {
    const mcp = await mcpServer();
    await declare("late", mcp.url);
    const started = await start("late");
    const callback = await consentRedirect(started.authorization_url);
    const exchanges = auth.counters.codeExchanges;
    skewMs += 601_000;
    assert.equal(await deliver(callback), 400);
    assert.equal((await poll(started.poll_url)).status, "expired");
    assert.equal(auth.counters.codeExchanges, exchanges);
    assert.equal(dep.credentials.has("late"), false);
  });

  it("one code per authorization: a second callback, even during the first one's exchange, is refused", async () => {
    const mcp = await mcpServer();
    await declare("twice", mcp.url);
    const started = await start("twice");
    const callback = await consentRedirect(started.authorization_url);
    const exchanges = auth.counters.codeExchanges;
    auth.set({ codeExchangeDelayMs: 300 });
    try {
      const statuses = await Promise.all([deliver(callback), deliver(callback)]);
      assert.deepEqual(statuses.sort(), [200, 400]);
    } finally {
      auth.set({ codeExchangeDelayMs: 0 });
    }
    assert.deepEqual(await poll(started.poll_url), { status: "authorized" });
    assert.equal(auth.counters.codeExchanges, exchanges + 1);
    assert.equal(await deliver(callback), 400, "a late callback changes nothing");
    assert.deepEqual(await poll(started.poll_url), { status: "authorized" });
  });

  it("RFC 9207: a wrong iss, or none where the server promises one, fails it with upstream_error; the code is not exchanged", async () => {
    const mcp = await mcpServer();
    await declare("iss", mcp.url);
    const exchanges = auth.counters.codeExchanges;
    try {
      auth.set({ iss: "wrong" });
      const wrong = await start("iss");
      assert.equal(await followAuthorization(wrong.authorization_url), 400);
      const outcome = await poll(wrong.poll_url);
      assert.deepEqual([outcome.status, outcome.error], ["failed", "upstream_error"]);
      assert.ok(outcome.message.includes("https://attacker.example/") && outcome.message.includes(auth.issuer), "the message names both issuers");

      auth.set({ iss: "absent", advertiseIss: true });
      const missing = await start("iss");
      assert.equal(await followAuthorization(missing.authorization_url), 400);
      assert.equal((await poll(missing.poll_url)).error, "upstream_error");
      assert.equal(auth.counters.codeExchanges, exchanges);

      auth.set({ iss: "absent", advertiseIss: false });
      await authorize("iss");
    } finally {
      auth.set({ iss: "correct", advertiseIss: true });
    }
  });

  it("a connection deleted while its code is exchanged gets no credential", async () => {
    const mcp = await mcpServer();
    await declare("gone", mcp.url);
    const started = await start("gone");
    const callback = await consentRedirect(started.authorization_url);
    auth.set({ codeExchangeDelayMs: 300 });
    try {
      const delivered = deliver(callback);
      assert.equal((await call("DELETE", "/v1/mcp/gone")).status, 204);
      assert.notEqual(await delivered, 200);
    } finally {
      auth.set({ codeExchangeDelayMs: 0 });
    }
    assert.deepEqual([(await poll(started.poll_url)).status, (await poll(started.poll_url)).error], ["failed", "connection_changed"]);
    assert.equal(dep.credentials.has("gone"), false);
    await declare("gone", mcp.url);
    assert.equal(await statusOf("gone"), "declared");
  });
});

describe("reference deployment: tools with the credential it holds (section 3.6)", () => {
  it("a refused access token is refreshed once and the request retried", async () => {
    const mcp = await mcpServer();
    await declare("refresh", mcp.url);
    await authorize("refresh");
    auth.forgetAccessTokens();
    const refreshes = auth.counters.refreshes;
    const tools = await call("GET", "/v1/mcp/refresh/tools");
    assert.equal(tools.status, 200, JSON.stringify(tools.body));
    assert.deepEqual(tools.body.tools.map((t: { name: string }) => t.name), ["a", "b"]);
    assert.equal(auth.counters.refreshes, refreshes + 1);
    assert.equal(await statusOf("refresh"), "authorized");
  });

  it("an expired access token is refreshed before it is used", async () => {
    const mcp = await mcpServer();
    await declare("expiring", mcp.url);
    await authorize("expiring");
    const before = dep.credentials.get("expiring")!.tokens.access_token;
    const refreshes = auth.counters.refreshes;
    skewMs += 3_601_000; // past expires_in (3600 s)
    assert.equal((await call("GET", "/v1/mcp/expiring/tools")).status, 200);
    assert.equal(auth.counters.refreshes, refreshes + 1);
    assert.ok(!mcp.authorizations.includes(`Bearer ${before}`), "the expired token was never sent");
  });

  it("a refresh refused with invalid_grant deletes the credential: 409 not_authorized, then declared", async () => {
    const mcp = await mcpServer();
    await declare("revoked", mcp.url);
    await authorize("revoked");
    auth.forgetAccessTokens();
    auth.revokeAllRefreshTokens();
    const rejected = auth.counters.rejectedRefreshes;
    const tools = await call("GET", "/v1/mcp/revoked/tools");
    assert.deepEqual([tools.status, tools.body.error], [409, "not_authorized"]);
    assert.equal(auth.counters.rejectedRefreshes, rejected + 1, "it tried to refresh");
    assert.equal(await statusOf("revoked"), "declared");
  });

  it("a 401 with the refreshed token too is 409 not_authorized, after one refresh", async () => {
    const mcp = await mcpServer();
    await declare("refused", mcp.url);
    await authorize("refused");
    const refreshes = auth.counters.refreshes;
    auth.set({ acceptAccessTokens: false });
    try {
      const tools = await call("GET", "/v1/mcp/refused/tools");
      assert.deepEqual([tools.status, tools.body.error], [409, "not_authorized"]);
    } finally {
      auth.set({ acceptAccessTokens: true });
    }
    assert.equal(auth.counters.refreshes, refreshes + 1);
  });

  it("403 insufficient_scope is 409 not_authorized naming the scope; the credential is kept", async () => {
    const mcp = await mcpServer({ requiredScopes: ["read"] });
    await declare("narrow", mcp.url, { scopes: ["other"] });
    await authorize("narrow");
    const tools = await call("GET", "/v1/mcp/narrow/tools");
    assert.deepEqual([tools.status, tools.body.error], [409, "not_authorized"]);
    assert.match(tools.body.message, /\bread\b/);
    assert.equal(await statusOf("narrow"), "authorized");
    assert.ok(dep.credentials.has("narrow"));
  });

  it("when the MCP server's metadata names another authorization server, the credential is deleted and no token goes out", async () => {
    const moved = await startAuthServer();
    servers.push(moved);
    const protect: ProtectOptions = { authServer: auth };
    const mcp = await startMcpServer({ tools: TOOLS, oauth: protect });
    servers.push(mcp);
    await declare("migrated", mcp.url);
    await authorize("migrated");
    const refreshes = auth.counters.refreshes;
    protect.authServer = moved;
    const tools = await call("GET", "/v1/mcp/migrated/tools");
    assert.deepEqual([tools.status, tools.body.error], [409, "not_authorized"]);
    assert.equal(dep.credentials.has("migrated"), false);
    assert.equal(await statusOf("migrated"), "declared");
    assert.equal(auth.counters.refreshes, refreshes, "not refreshed where it came from");
    assert.deepEqual([moved.counters.refreshes, moved.counters.rejectedRefreshes, moved.counters.registrations], [0, 0, 0], "nothing sent to the new one");
  });
});
