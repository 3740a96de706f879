// A real `subs deployment serve` against the servers its own users can make it talk to: a team
// member with an `apply` token declares a server whose metadata, registration and token answers
// are theirs to choose (test/support/hostile-oauth.ts), and a `read` token reads what comes back.
// Each test fails on a deployment that sends a client secret to any server naming its client_id,
// quotes a foreign body or echo back to its caller, reaches its own host's other services, or
// scrubs its log with values a server chose (SECURITY.md, "The deployment").
import assert from "node:assert/strict";
import { randomBytes } from "node:crypto";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { after, before, describe, test } from "node:test";
import { callServed, startServedDeployment, type ServedDeployment } from "../support/deployment-serve.ts";
import { startHostileServer, startInternalService, type HostileServer } from "../support/hostile-oauth.ts";
import { echoesOf, startQuotingServer, type QuotingServer } from "../support/mcp-quoting-server.ts";
import { startAuthServer, type RunningAuthServer } from "../support/oauth-server.ts";

const TEAM_SECRET = `team-app-secret-${randomBytes(12).toString("hex")}`;
const ADMIN_PAGE = `admin console; root password: hunter2-${randomBytes(8).toString("hex")}`;

/** Every form a client secret crosses the wire in: as it is, form-encoded, and inside HTTP Basic. */
const secretForms = (clientId: string, secret: string) => [secret, encodeURIComponent(secret), Buffer.from(`${clientId}:${secret}`).toString("base64"), Buffer.from(`${encodeURIComponent(clientId)}:${encodeURIComponent(secret)}`).toString("base64")];

/** A request sent to the process itself, whatever public URL it names. */
const callDirect = (d: ServedDeployment, method: string, pathname: string, body?: unknown) => callServed({ url: d.direct, token: d.token }, method, pathname, body);

/** Polls an authorization to its end, within a bounded time. */
async function outcome(d: ServedDeployment, pollUrl: string): Promise<{ status: string; error?: string; message?: string }> {
  const poll = new URL(pollUrl, d.direct).pathname;
  const deadline = Date.now() + 60_000;
  for (;;) {
    const { body } = await callDirect(d, "GET", poll);
    if (body.status !== "pending") return body;
    if (Date.now() > deadline) throw new Error(`${poll} still pending after 60 s`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

describe("subs deployment serve against the servers its users declare", () => {
  const dir = mkdtempSync(path.join(tmpdir(), "subs-hostile-"));
  let d: ServedDeployment;
  let hostile: HostileServer;
  /** Its own authorization server, whose registration nothing before has reused. */
  let logBreaker: HostileServer;
  let quoting: QuotingServer;
  let teamAuth: RunningAuthServer;
  let internal: Awaited<ReturnType<typeof startInternalService>>;
  let readToken: string;

  before(async () => {
    hostile = await startHostileServer();
    logBreaker = await startHostileServer();
    quoting = await startQuotingServer();
    teamAuth = await startAuthServer({ dynamicRegistration: false });
    internal = await startInternalService(ADMIN_PAGE);
    const secrets = path.join(dir, "client-secrets.json");
    writeFileSync(secrets, JSON.stringify({ "team-app": { issuer: teamAuth.issuer, secret: TEAM_SECRET } }), { mode: 0o600 });
    // What the operator lets it reach on its own host: the servers under test, and not the
    // internal service on another port of the same address.
    const allowed = [hostile.port, logBreaker.port, new URL(quoting.url).port, new URL(teamAuth.url).port].map((port) => `127.0.0.1:${port}`).join(",");
    d = await startServedDeployment({ env: { SUBS_DEPLOYMENT_CLIENT_SECRETS: secrets, SUBS_DEPLOYMENT_ALLOW_PRIVATE: allowed } });
    readToken = await d.tokenFor("read");
  });
  after(async () => {
    await d.close();
    for (const s of [hostile, logBreaker, quoting, teamAuth, internal]) await s.close();
    rmSync(dir, { recursive: true, force: true });
  });

  test("the team app's client secret goes only to the server that issued it: a declaration naming its client_id at another server gets a clear refusal, and that server receives no form of the secret", async () => {
    assert.equal((await callServed(d, "PUT", "/v1/mcp/lookalike", { url: hostile.url, prefix_tools: false, oauth: { client_id: "team-app" } })).status, 201);
    const seen = hostile.requests.length;
    const started = await callServed(d, "POST", "/v1/mcp/lookalike/authorizations", {});
    if (started.status === 201) {
      // What an attacker then does: answer the deployment's redirect URI itself, so that it
      // exchanges a code at the attacker's token endpoint.
      const state = new URL(started.body.authorization_url).searchParams.get("state");
      await (await fetch(`${d.direct}/oauth/callback?code=attacker-code&state=${encodeURIComponent(state ?? "")}`)).text();
      await outcome(d, started.body.poll_url);
    }
    const received = JSON.stringify(hostile.requests.slice(seen));
    for (const form of secretForms("team-app", TEAM_SECRET)) assert.ok(!received.includes(form), `the other server received the team app's secret (${form.slice(0, 10)}…)`);
    assert.equal(started.status, 403, JSON.stringify(started.body));
    assert.equal(started.body.error, "client_secret_elsewhere");
    assert.match(started.body.message, /secret of client team-app/);
    assert.ok(started.body.message.includes(teamAuth.issuer), "it names the server the secret belongs to");
    assert.ok(!JSON.stringify(started.body).includes(TEAM_SECRET));
    assert.ok(!JSON.stringify(d.logs).includes(TEAM_SECRET), "nor is it logged");
  });

  test("a registration endpoint on the deployment's own host, on a port the operator did not allow, is never reached: a clear refusal, nothing of the page", async () => {
    hostile.set({ registrationEndpoint: `${internal.url}/register` });
    try {
      assert.equal((await callServed(d, "PUT", "/v1/mcp/inward", { url: hostile.url, prefix_tools: false })).status, 201);
      const started = await callServed(d, "POST", "/v1/mcp/inward/authorizations", {});
      assert.equal(internal.requests, 0, "the internal service was sent a request");
      assert.equal(started.status, 403, JSON.stringify(started.body));
      assert.equal(started.body.error, "address_not_allowed", "its own rule, not a server's failure: not retried");
      assert.ok(started.body.message.includes(`127.0.0.1:${internal.port} is a loopback, private or special-use address, which this deployment does not reach; an operator may allow it with --allow-private`), started.body.message);
      assert.ok(!JSON.stringify(started.body).includes("hunter2"));
    } finally {
      hostile.set({ registrationEndpoint: undefined });
    }
  });

  test("a foreign answer's body is never read back to the caller: a registration endpoint's HTML error is its status alone", async () => {
    hostile.set({ register: () => ({ status: 400, type: "text/html", body: `<h1>${ADMIN_PAGE}</h1>\u001b]8;;https://evil.example\u0007click\u001b]8;;\u0007` }) });
    try {
      assert.equal((await callServed(d, "PUT", "/v1/mcp/paged", { url: hostile.url, prefix_tools: false })).status, 201);
      const started = await callServed(d, "POST", "/v1/mcp/paged/authorizations", {});
      assert.equal(started.status, 502);
      assert.equal(started.body.error, "upstream_error");
      assert.match(started.body.message, /HTTP 400$/);
      assert.ok(!started.body.message.includes("hunter2") && !started.body.message.includes("\u001b"), started.body.message);
    } finally {
      hostile.set({ register: undefined });
    }
  });

  test("a consent's poll result says what failed without what the token endpoint echoed: not the code, the verifier, the client secret or the state, and no escape sequence", async () => {
    const issued = `hostile-issued-secret-${randomBytes(10).toString("hex")}`;
    hostile.set({
      register: () => ({ status: 201, type: "application/json", body: JSON.stringify({ client_id: "echoed-client", client_secret: issued, redirect_uris: [d.redirectUri] }) }),
      // Everything it was sent, in its error_description, as a careless server answers.
      token: (r) => ({ status: 400, type: "application/json", body: JSON.stringify({ error: "invalid_grant", error_description: `\u001b[31mrejected: ${r.body} with ${r.headers.authorization ?? "no header"}` }) }),
    });
    try {
      assert.equal((await callServed(d, "PUT", "/v1/mcp/echoing", { url: hostile.url, prefix_tools: false })).status, 201);
      const started = await callServed(d, "POST", "/v1/mcp/echoing/authorizations", {});
      assert.equal(started.status, 201, JSON.stringify(started.body));
      const state = new URL(started.body.authorization_url).searchParams.get("state")!;
      const code = `the-code-${randomBytes(10).toString("hex")}`;
      await (await fetch(`${d.direct}/oauth/callback?code=${code}&state=${encodeURIComponent(state)}`)).text();
      const result = await outcome(d, started.body.poll_url);
      const exchange = hostile.requests.findLast((r) => r.path === "/token")!;
      const verifier = new URLSearchParams(exchange.body).get("code_verifier")!;
      assert.ok(verifier.length >= 43 && exchange.body.includes(code), "the token endpoint was sent the code and the verifier");
      assert.equal(result.status, "failed");
      assert.equal(result.error, "token_exchange_failed");
      assert.match(result.message!, /^invalid_grant: /);
      for (const value of [code, verifier, ...secretForms("echoed-client", issued), state, "\u001b"]) {
        assert.ok(!JSON.stringify(result).includes(value), `the poll result quotes ${JSON.stringify(value.slice(0, 12))}…`);
      }

      // The redirect's own error_description is whoever called it: the same summary.
      const again = await callServed(d, "POST", "/v1/mcp/echoing/authorizations", {});
      const state2 = new URL(again.body.authorization_url).searchParams.get("state")!;
      await (await fetch(`${d.direct}/oauth/callback?error=access%20denied%0A&error_description=${encodeURIComponent(`denied \u001b[2J for ${state2}`)}&state=${encodeURIComponent(state2)}`)).text();
      const denied = await outcome(d, again.body.poll_url);
      assert.equal(denied.status, "failed");
      assert.equal(denied.error, "invalid_error_code", "an error code outside RFC 6749's characters is not passed on");
      assert.ok(!JSON.stringify(denied).includes(state2) && !denied.message!.includes("\u001b"), JSON.stringify(denied));
    } finally {
      hostile.set({ register: undefined, token: undefined });
    }
  });

  test("a token endpoint that redirects the code exchange to another origin is not followed: the code, the verifier and the client secret reach no other server", async () => {
    const issued = `redirected-client-secret-${randomBytes(10).toString("hex")}`;
    // Another origin the deployment may reach (another allowed port): only the redirect rule keeps
    // the exchange from it. A 307 keeps the method and the body, the code and verifier with them.
    const elsewhere = logBreaker;
    hostile.set({
      register: () => ({ status: 201, type: "application/json", body: JSON.stringify({ client_id: "redirected-client", client_secret: issued, redirect_uris: [d.redirectUri] }) }),
      token: () => ({ status: 307, headers: { location: `${elsewhere.origin}/token` }, body: "" }),
    });
    try {
      assert.equal((await callServed(d, "PUT", "/v1/mcp/redirecting", { url: hostile.url, prefix_tools: false })).status, 201);
      const started = await callServed(d, "POST", "/v1/mcp/redirecting/authorizations", {});
      assert.equal(started.status, 201, JSON.stringify(started.body));
      const state = new URL(started.body.authorization_url).searchParams.get("state")!;
      const code = `the-code-${randomBytes(10).toString("hex")}`;
      const seen = elsewhere.requests.length;
      await (await fetch(`${d.direct}/oauth/callback?code=${code}&state=${encodeURIComponent(state)}`)).text();
      const result = await outcome(d, started.body.poll_url);
      assert.ok(hostile.requests.some((r) => r.path === "/token" && r.body.includes(code)), "the token endpoint was sent the code");
      assert.deepEqual(elsewhere.requests.slice(seen).map((r) => `${r.method} ${r.path}`), [], "the other origin was sent nothing");
      assert.deepEqual([result.status, result.error], ["failed", "token_exchange_failed"]);
      assert.match(result.message!, /redirected to another origin .*refusing to follow/);
      assert.equal((await callServed(d, "GET", "/v1/mcp")).body.connections.find((c: { id: string }) => c.id === "redirecting")?.status, "declared");
    } finally {
      hostile.set({ register: undefined, token: undefined });
    }
  });

  test("GET /v1/mcp/{id}/tools with a read token: the access token a server quotes in its tools, or in an error, is scrubbed from the answer", async () => {
    const token = `held-${randomBytes(16).toString("hex")}`;
    assert.equal((await callServed(d, "PUT", "/v1/mcp/quoter", { url: quoting.url, prefix_tools: false })).status, 201);
    d.credentials.set("quoter", { url: quoting.url, tokens: { access_token: token, token_type: "bearer" }, authorizedAt: Date.now(), expiresAt: null });
    await d.settled();
    const listed = await callServed(d, "GET", "/v1/mcp/quoter/tools", undefined, readToken);
    assert.equal(listed.status, 200, JSON.stringify(listed.body).slice(0, 300));
    assert.ok(listed.body.tools.length > 0);
    assert.ok(quoting.authorizations.includes(`Bearer ${token}`), "the server was sent the token, and quoted it");
    const text = JSON.stringify(listed.body);
    for (const form of echoesOf(`Bearer ${token}`)) assert.ok(!text.includes(form), `the read token's answer holds the access token as ${JSON.stringify(form.slice(0, 12))}…`);

    const other = `held-${randomBytes(16).toString("hex")}`;
    assert.equal((await callServed(d, "PUT", "/v1/mcp/failing", { url: hostile.url, prefix_tools: false })).status, 201);
    d.credentials.set("failing", { url: hostile.url, tokens: { access_token: other, token_type: "bearer" }, authorizedAt: Date.now(), expiresAt: null });
    await d.settled();
    const failed = await callServed(d, "GET", "/v1/mcp/failing/tools", undefined, readToken);
    assert.equal(failed.status, 502);
    assert.ok(hostile.requests.some((r) => r.headers.authorization === `Bearer ${other}`), "the server was sent the token");
    assert.match(failed.body.message, /HTTP 500$/);
    assert.ok(!JSON.stringify(failed.body).includes(other));
  });

  test("GET /v1/mcp/{id}/tools with a read token: a refresh token the server quotes (its authorization server issued it) is scrubbed too, though it was never sent there", async () => {
    const access = `held-${randomBytes(16).toString("hex")}`;
    const refresh = `refresh-${randomBytes(16).toString("hex")}`;
    // Just enough MCP over plain JSON: an initialize answer, then a tool list quoting the refresh token.
    hostile.set({
      mcp: (r) => {
        if (r.method !== "POST") return { status: 405, body: "" };
        const message = JSON.parse(r.body) as { id?: number; method: string };
        if (message.id === undefined) return { status: 202, body: "" };
        const result =
          message.method === "initialize"
            ? { protocolVersion: "2025-06-18", capabilities: { tools: {} }, serverInfo: { name: "quoting-refresh", version: "1" } }
            : { tools: [{ name: "leak", description: `refresh with ${refresh}`, inputSchema: { type: "object" } }] };
        return { status: 200, type: "application/json", body: JSON.stringify({ jsonrpc: "2.0", id: message.id, result }) };
      },
    });
    try {
      assert.equal((await callServed(d, "PUT", "/v1/mcp/refresh-quoter", { url: hostile.url, prefix_tools: false })).status, 201);
      d.credentials.set("refresh-quoter", { url: hostile.url, tokens: { access_token: access, refresh_token: refresh, token_type: "bearer" }, authorizedAt: Date.now(), expiresAt: null });
      await d.settled();
      const listed = await callServed(d, "GET", "/v1/mcp/refresh-quoter/tools", undefined, readToken);
      assert.equal(listed.status, 200, JSON.stringify(listed.body).slice(0, 300));
      assert.deepEqual(listed.body.tools.map((t: { name: string }) => t.name), ["leak"], "the server's list came back");
      assert.ok(!hostile.requests.some((r) => JSON.stringify(r).includes(refresh)), "the refresh token was never sent to the MCP server");
      assert.ok(!JSON.stringify(listed.body).includes(refresh), `the read token's answer holds the refresh token: ${listed.body.tools[0]?.description}`);
    } finally {
      hostile.set({ mcp: undefined });
    }
  });

  test("what a server returns never chooses what the log hides: a registration issuing {\"time\":\" and /v1/mcp leaves every later log line JSON, its path whole", async () => {
    logBreaker.set({ register: () => ({ status: 201, type: "application/json", body: JSON.stringify({ client_id: "log-breaker", client_secret: '{"time":"', registration_access_token: "/v1/mcp", access_token: '"level":"info"', redirect_uris: [d.redirectUri] }) }) });
    {
      assert.equal((await callServed(d, "PUT", "/v1/mcp/breaker", { url: logBreaker.url, prefix_tools: false })).status, 201);
      assert.equal((await callServed(d, "POST", "/v1/mcp/breaker/authorizations", {})).status, 201);
      assert.ok(logBreaker.requests.some((r) => r.path === "/register"), "it registered there, and was issued those values");
      const before = d.logs.length;
      for (let n = 0; n < 3; n++) assert.equal((await callServed(d, "GET", "/v1/mcp", undefined, readToken)).status, 200);
      // The log is read as the process writes it; a line it wrote after the requests ended is there within a bound.
      const deadline = Date.now() + 10_000;
      const listed = () => d.logs.slice(before).filter((l) => l.msg === "request" && l.path === "/v1/mcp");
      while (listed().length < 3 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 50));
      assert.equal(listed().length, 3, "each request's log line is JSON with its path");
      assert.ok(listed().every((l) => typeof l.time === "string" && l.level === "info"));
    }
  });
});

describe("subs deployment serve with a public URL: the host's own addresses are out of reach unless the operator allows them", () => {
  let d: ServedDeployment;
  let hostile: HostileServer;
  before(async () => {
    hostile = await startHostileServer();
    d = await startServedDeployment({ env: { SUBS_DEPLOYMENT_PUBLIC_URL: "https://subs.example.test" } });
  });
  after(async () => {
    await d.close();
    await hostile.close();
  });

  test("a declared server on loopback, by address or by a name that resolves there, is never sent a request", async () => {
    for (const [id, url] of [
      ["by-address", hostile.url],
      ["by-name", `http://localhost:${hostile.port}/mcp`],
    ] as const) {
      assert.equal((await callDirect(d, "PUT", `/v1/mcp/${id}`, { url, prefix_tools: false })).status, 201);
      const started = await callDirect(d, "POST", `/v1/mcp/${id}/authorizations`, {});
      assert.equal(started.status, 403, `${id}: ${JSON.stringify(started.body)}`);
      assert.equal(started.body.error, "address_not_allowed");
      assert.match(started.body.message, /(127\.0\.0\.1|localhost):\d+( \(127\.0\.0\.1\))? is a loopback, private or special-use address, which this deployment does not reach/);
    }
    assert.equal(hostile.requests.length, 0, "the server on the deployment's host was reached");
  });

  test("an allow list that is not one refuses to start, naming the setting and the entry", async () => {
    await assert.rejects(startServedDeployment({ env: { SUBS_DEPLOYMENT_ALLOW_PRIVATE: "127.0.0.1:8080,intranet" } }), /\$SUBS_DEPLOYMENT_ALLOW_PRIVATE: "intranet" is not an address or a CIDR block/);
  });
});

describe("the client-secrets file", () => {
  test("a secret that names no server it was issued by refuses to start, without printing the secret", async () => {
    const dir = mkdtempSync(path.join(tmpdir(), "subs-hostile-secrets-"));
    try {
      const file = path.join(dir, "client-secrets.json");
      writeFileSync(file, JSON.stringify({ "team-app": TEAM_SECRET }), { mode: 0o600 });
      const error = await startServedDeployment({ env: { SUBS_DEPLOYMENT_CLIENT_SECRETS: file } }).then(
        async (d) => (await d.close(), undefined),
        (e: Error) => e,
      );
      assert.ok(error, "it started");
      assert.match(error.message, /"team-app"\): must name the authorization server that issued the secret/);
      assert.match(error.message, /"issuer": "https:\/\/<authorization server>"/);
      assert.ok(!error.message.includes(TEAM_SECRET));
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
