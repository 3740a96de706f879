// Server-side OAuth (docs/deployment-protocol.md sections 3.4 to 3.6, 4 and 5), each rule run
// against the reference deployment (test/support/deployment/server.ts) and a real `subs deployment
// serve` process on both stores (src/deployment/oauth.ts implements every rule again, and its store
// keeps each consent and credential): real authorization servers (test/support/oauth-server.ts)
// and protected MCP servers on loopback, raw HTTP to the deployment. A rule decided before anything
// is stored runs on the reference and SQLite only; one the store carries out runs on Postgres too.
// Then what only `subs deployment serve` does: refreshing ahead of expiry once for many requests, an
// operator's confidential client, its own checks of what servers answer. Section numbers are the
// protocol document's.
import assert from "node:assert/strict";
import { chmodSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import type { IncomingMessage } from "node:http";
import { tmpdir } from "node:os";
import path from "node:path";
import { after, before, describe, test } from "node:test";
import Database from "better-sqlite3";
import { followAuthorization } from "../support/browser.ts";
import { startServedDeployment, STORES } from "../support/deployment-serve.ts";
import { targets, type TargetDeployment } from "../support/deployment-targets.ts";
import { startHostileServer } from "../support/hostile-oauth.ts";
import { annotatedTool, startMcpServer, type ProtectOptions, type RunningMcpServer } from "../support/mcp-server.ts";
import { startAuthServer, type AuthServerOptions, type RunningAuthServer } from "../support/oauth-server.ts";
import { within } from "../support/wait.ts";

const CLIENT_SECRET = "team-app-secret-7c2e";
const TOOLS = [annotatedTool("a"), annotatedTool("b")];

/**
 * Holds the authorization server's next code exchange open: `inside()` resolves once the
 * deployment is in it, `release()` lets it finish. What the test does between the two happens
 * during the exchange, on any machine however loaded.
 */
function holdNextExchange(server: RunningAuthServer) {
  let entered!: () => void;
  let release!: () => void;
  const inside = new Promise<void>((r) => (entered = r));
  const released = new Promise<void>((r) => (release = r));
  server.set({
    codeExchangeHold: async () => {
      server.set({ codeExchangeHold: undefined });
      entered();
      await released;
    },
  });
  return { inside: () => within(inside, "the deployment's code exchange", 30_000), release };
}

for (const target of targets(STORES)) describe(`server-side OAuth: ${target.name}`, () => {
  /**
   * A rule whose outcome no store changes (decided before anything is stored, or within one
   * process) runs on the reference and SQLite; Postgres runs those the store carries out.
   */
  const storeIndifferent = target.kind !== "postgres";
  const dir = mkdtempSync(path.join(tmpdir(), "subs-deploy-oauth-"));
  const secrets = path.join(dir, "client-secrets.json");
  let d: TargetDeployment;
  let auth: RunningAuthServer;
  // The team app's authorization server: the one its secret was issued by, named beside it.
  let teamAuth: RunningAuthServer;
  const servers: Array<{ close(): Promise<void> }> = [];

  before(async () => {
    auth = await startAuthServer();
    teamAuth = await startAuthServer({ dynamicRegistration: false, tokenEndpointAuthMethods: ["client_secret_post"] });
    servers.push(auth, teamAuth);
    writeFileSync(secrets, JSON.stringify({ "team-app": { issuer: teamAuth.issuer, secret: CLIENT_SECRET } }), { mode: 0o600 });
    d = await target.start({ pollInterval: 0.05, env: { SUBS_DEPLOYMENT_CLIENT_SECRETS: secrets } });
  });
  after(async () => {
    await d.close();
    for (const s of servers) await s.close();
    rmSync(dir, { recursive: true, force: true });
  });

  const authServer = async (options: AuthServerOptions = {}) => {
    const server = await startAuthServer(options);
    servers.push(server);
    return server;
  };
  /** A protected MCP server; `sent`: the Authorization header of every request it received, the ones it refused included. */
  const mcpServer = async (oauth: Partial<ProtectOptions> & { authServer?: RunningAuthServer } = {}): Promise<RunningMcpServer & { sent: string[] }> => {
    const sent: string[] = [];
    const record = (req: IncomingMessage) => {
      if (req.headers.authorization) sent.push(req.headers.authorization);
      return false;
    };
    const server = await startMcpServer({ tools: TOOLS, gate: record, oauth: { authServer: auth, ...oauth } });
    servers.push(server);
    return Object.assign(server, { sent });
  };
  const poll = async (pollUrl: string) => (await d.call("GET", new URL(pollUrl, d.url).pathname)).body;
  const statusOf = async (id: string) => (await d.call("GET", "/v1/mcp")).body.connections.find((c: { id: string }) => c.id === id)?.status;
  async function start(id: string): Promise<{ authorization_url: string; poll_url: string }> {
    const started = await d.call("POST", `/v1/mcp/${id}/authorizations`, {});
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
  /** What a poll says, as [status, error]. */
  const ended = async (pollUrl: string) => {
    const outcome = await poll(pollUrl);
    return [outcome.status, outcome.error];
  };

  describe("starting a consent (sections 3.2, 3.4, 4)", () => {
    if (storeIndifferent) {
      test("section 3.2: oauth.client_metadata_url must be an https URL", async () => {
        const refused = await d.call("PUT", "/v1/mcp/cimd", { url: "https://a.example/mcp", prefix_tools: true, oauth: { client_metadata_url: "http://client.example/metadata.json" } });
        assert.deepEqual([refused.status, refused.body.error], [400, "invalid_request"]);
        assert.equal(d.connections.has("cimd"), false, "nothing was declared");
        const accepted = await d.call("PUT", "/v1/mcp/cimd", { url: "https://a.example/mcp", prefix_tools: true, oauth: { client_metadata_url: "https://client.example/metadata.json" } });
        assert.equal(accepted.status, 201);
        assert.deepEqual(accepted.body.oauth, { client_metadata_url: "https://client.example/metadata.json" });
        assert.equal((await d.call("DELETE", "/v1/mcp/cimd")).status, 204);
      });

      test("asks for the declaration's scopes exactly; else the challenge's; else scopes_supported; else none; never offline_access", async () => {
        // An authorization server that lists offline_access: a local login adds it, a deployment does not.
        const listsOffline = await authServer({ scopesSupported: ["read", "a", "b", "offline_access"] });
        const challenging = await mcpServer({ authServer: listsOffline, requiredScopes: ["read"], scopesSupported: ["a", "b"] });
        const listing = await mcpServer({ authServer: listsOffline, scopesSupported: ["a", "b"] });
        const plain = await mcpServer({ authServer: listsOffline });
        const scopeOf = async (id: string, url: string, oauth?: Record<string, unknown>) => {
          await d.declare(id, url, oauth ? { oauth } : {});
          return new URL((await start(id)).authorization_url).searchParams.get("scope");
        };
        assert.equal(await scopeOf("s-exact", challenging.url, { scopes: ["y", "x"] }), "y x");
        assert.equal(await scopeOf("s-challenge", challenging.url), "read");
        assert.equal(await scopeOf("s-empty", challenging.url, { scopes: [] }), "read", "[] names no scopes");
        assert.equal(await scopeOf("s-listed", listing.url), "a b");
        assert.equal(await scopeOf("s-none", plain.url), null);
        // The consent itself asks for them: the authorization server saw exactly those.
        const started = await start("s-listed");
        assert.equal(await followAuthorization(started.authorization_url), 200);
        assert.deepEqual(listsOffline.authorizations.at(-1)!.scopes, ["a", "b"]);
      });
    }

    test("the client: a pre-registered client_id, else a Client ID Metadata Document the server accepts, else one registration per authorization server, reused", async () => {
      const cimdServer = await authServer({ clientIdMetadataDocuments: true });
      const onCimd = await mcpServer({ authServer: cimdServer });
      const documentUrl = "https://client.example/deployment.json";
      const clientOf = async (id: string, url: string, oauth?: Record<string, unknown>) => {
        await d.declare(id, url, oauth ? { oauth } : {});
        return new URL((await start(id)).authorization_url).searchParams.get("client_id");
      };
      assert.equal(await clientOf("c-doc", onCimd.url, { client_metadata_url: documentUrl }), documentUrl);
      assert.equal(await clientOf("c-both", onCimd.url, { client_id: "pre-1", client_metadata_url: documentUrl }), "pre-1", "client_id wins (section 3.2)");
      assert.equal(cimdServer.counters.registrations, 0);

      const registering = await authServer();
      const one = await mcpServer({ authServer: registering });
      const two = await mcpServer({ authServer: registering });
      const first = await clientOf("c-one", one.url);
      assert.equal(await clientOf("c-two", two.url), first, "two MCP servers, one authorization server: one client");
      assert.equal(await clientOf("c-doc-unsupported", two.url, { client_metadata_url: documentUrl }), first, "the server does not take metadata documents");
      assert.equal(registering.counters.registrations, 1);
      assert.deepEqual(registering.registrationRequests[0]!.redirect_uris, [d.redirectUri], "registered with the deployment's own redirect URI");
      // The registered client completes a consent with that redirect URI.
      const started = await start("c-two");
      assert.equal(await followAuthorization(started.authorization_url), 200);
      assert.deepEqual(await poll(started.poll_url), { status: "authorized" });
      assert.equal(registering.authorizations.at(-1)!.redirect_uri, d.redirectUri);
    });

    test("a start that fails (502) leaves the pending consent as it was; one that succeeds supersedes it", async () => {
      const mcp = await mcpServer();
      await d.declare("keep", mcp.url);
      const pending = await start("keep");
      auth.set({ codeChallengeMethods: ["plain"] });
      try {
        const failed = await d.call("POST", "/v1/mcp/keep/authorizations", {});
        assert.deepEqual([failed.status, failed.body.error], [502, "upstream_error"]);
      } finally {
        auth.set({ codeChallengeMethods: ["S256"] });
      }
      assert.deepEqual(await poll(pending.poll_url), { status: "pending" });
      const newer = await start("keep");
      assert.deepEqual(await ended(pending.poll_url), ["failed", "superseded"]);
      assert.equal(await followAuthorization(pending.authorization_url), 400, "the superseded consent's redirect is refused");
      assert.equal(d.credentials.has("keep"), false);
      assert.equal(await followAuthorization(newer.authorization_url), 200);
      assert.deepEqual(await poll(newer.poll_url), { status: "authorized" });
    });
  });

  describe("the redirect URI (section 3.5)", () => {
    test("a callback whose state is missing or matches no consent is 400 and changes nothing; its code is not exchanged", async () => {
      const mcp = await mcpServer();
      await d.declare("forged", mcp.url);
      const started = await start("forged");
      const callback = new URL(await consentRedirect(started.authorization_url));
      const exchanges = auth.counters.codeExchanges;
      const withoutState = new URL(callback);
      withoutState.searchParams.delete("state");
      const otherState = new URL(callback);
      otherState.searchParams.set("state", "a-state-this-deployment-never-sent");
      for (const forged of [withoutState, otherState]) assert.equal(await deliver(forged.href), 400, forged.search);
      const unknown = await d.call("GET", "/v1/authorizations/no-such-authorization");
      assert.deepEqual([unknown.status, unknown.body.error], [404, "not_found"]);
      assert.equal(auth.counters.codeExchanges, exchanges, "no code was exchanged");
      assert.deepEqual(await poll(started.poll_url), { status: "pending" });
      assert.equal(await deliver(callback.href), 200, "the real redirect still completes it");
      assert.deepEqual(await poll(started.poll_url), { status: "authorized" });
    });

    test("an authorization whose expires_in has passed refuses its callback; the code is not exchanged", async () => {
      const short = await target.start({ pollInterval: 0.05, authorizationTtl: 0.3 });
      try {
        const mcp = await mcpServer();
        const call = (method: string, pathname: string, body?: unknown) => short.call(method, pathname, body);
        await short.declare("late", mcp.url);
        const started = (await call("POST", "/v1/mcp/late/authorizations", {})).body;
        // Longer than its 0.3 s on any machine: a wait only ever runs long.
        await new Promise((r) => setTimeout(r, 500));
        const callback = await consentRedirect(started.authorization_url);
        const exchanges = auth.counters.codeExchanges;
        assert.equal(await deliver(callback), 400);
        assert.equal((await call("GET", new URL(started.poll_url, short.url).pathname)).body.status, "expired");
        assert.equal(auth.counters.codeExchanges, exchanges);
        assert.equal(short.credentials.has("late"), false);
      } finally {
        await short.close();
      }
    });

    test("one code per authorization: a second callback while the first is exchanged is refused, and a late one", async () => {
      const mcp = await mcpServer();
      await d.declare("twice", mcp.url);
      const started = await start("twice");
      const callback = await consentRedirect(started.authorization_url);
      const exchanges = auth.counters.codeExchanges;
      const hold = holdNextExchange(auth);
      let first: Promise<number> | undefined;
      try {
        first = deliver(callback);
        await hold.inside();
        assert.equal(await deliver(callback), 400, "the same redirect again, during the exchange");
      } finally {
        hold.release();
      }
      assert.equal(await first, 200);
      assert.deepEqual(await poll(started.poll_url), { status: "authorized" });
      assert.equal(auth.counters.codeExchanges, exchanges + 1);
      assert.equal(await deliver(callback), 400, "a late callback changes nothing");
      assert.deepEqual(await poll(started.poll_url), { status: "authorized" });
    });

    test("RFC 9207: a wrong iss, or none where the server promises one, fails it with upstream_error naming both issuers; the code is not exchanged", async () => {
      const issAuth = await authServer();
      const mcp = await mcpServer({ authServer: issAuth });
      await d.declare("iss", mcp.url);
      issAuth.set({ iss: "wrong" });
      const wrong = await start("iss");
      assert.equal(await followAuthorization(wrong.authorization_url), 400);
      const outcome = await poll(wrong.poll_url);
      assert.deepEqual([outcome.status, outcome.error], ["failed", "upstream_error"]);
      assert.ok(outcome.message.includes("https://attacker.example/") && outcome.message.includes(issAuth.issuer), `the message names both issuers: ${outcome.message}`);

      issAuth.set({ iss: "absent", advertiseIss: true });
      const missing = await start("iss");
      assert.equal(await followAuthorization(missing.authorization_url), 400);
      assert.deepEqual(await ended(missing.poll_url), ["failed", "upstream_error"]);
      assert.equal(issAuth.counters.codeExchanges, 0);
      assert.equal(d.credentials.has("iss"), false);

      // A server that does not say it sends one: none is needed.
      issAuth.set({ iss: "absent", advertiseIss: false });
      await authorize("iss");
    });

    if (storeIndifferent) {
      test("an error the authorization server redirects with ends it failed with that code; one outside RFC 6749's characters reads invalid_error_code; no escape reaches the poll", async () => {
        const mcp = await mcpServer();
        await d.declare("refused", mcp.url);
        const errorRedirect = async (error: string, description: string) => {
          const started = await start("refused");
          const state = new URL(started.authorization_url).searchParams.get("state")!;
          const callback = new URL(d.redirectUri);
          for (const [k, v] of Object.entries({ error, error_description: description, state })) callback.searchParams.set(k, v);
          assert.equal(await deliver(callback.href), 200);
          return poll(started.poll_url);
        };
        const scoped = await errorRedirect("invalid_scope", "no such scope");
        assert.deepEqual([scoped.status, scoped.error], ["failed", "invalid_scope"]);
        const odd = await errorRedirect("access denied\n", "denied \u001b[2J now");
        assert.deepEqual([odd.status, odd.error], ["failed", "invalid_error_code"]);
        assert.ok(odd.message.includes("denied") && !odd.message.includes("\u001b"), JSON.stringify(odd));
        assert.equal(d.credentials.has("refused"), false);
      });
    }

    test("a connection deleted, or moved to another url, while its code is exchanged gets no credential", async () => {
      const mcp = await mcpServer();
      for (const change of ["DELETE", "a new url"] as const) {
        await d.declare("gone", mcp.url);
        const started = await start("gone");
        const callback = await consentRedirect(started.authorization_url);
        const hold = holdNextExchange(auth);
        let delivered: Promise<number> | undefined;
        try {
          delivered = deliver(callback);
          await hold.inside();
          if (change === "DELETE") assert.equal((await d.call("DELETE", "/v1/mcp/gone")).status, 204);
          else await d.declare("gone", `${mcp.url}?moved=1`);
        } finally {
          hold.release();
        }
        assert.equal(await delivered, 409, change);
        assert.deepEqual(await ended(started.poll_url), ["failed", "connection_changed"], change);
        assert.equal(d.credentials.has("gone"), false, change);
      }
      await d.declare("gone", mcp.url);
      assert.equal(await statusOf("gone"), "declared");
    });

    test("a connection deleted, or moved to another url, before its redirect arrives: its consent ends at once with connection_changed, and its code is not exchanged", async () => {
      const mcp = await mcpServer();
      for (const change of ["DELETE", "a new url"] as const) {
        await d.declare("early", mcp.url);
        const started = await start("early");
        const callback = await consentRedirect(started.authorization_url);
        if (change === "DELETE") assert.equal((await d.call("DELETE", "/v1/mcp/early")).status, 204);
        else await d.declare("early", `${mcp.url}?moved=1`);
        assert.deepEqual(await ended(started.poll_url), ["failed", "connection_changed"], change);
        const exchanges = auth.counters.codeExchanges;
        assert.notEqual(await deliver(callback), 200, change);
        assert.equal(auth.counters.codeExchanges, exchanges, change);
        assert.equal(d.credentials.has("early"), false, change);
      }
    });

    test("a consent superseded while its code is exchanged stores nothing; the newer one completes", async () => {
      const mcp = await mcpServer();
      await d.declare("raced", mcp.url);
      const older = await start("raced");
      const callback = await consentRedirect(older.authorization_url);
      const hold = holdNextExchange(auth);
      let delivered: Promise<number> | undefined;
      let newer: { authorization_url: string; poll_url: string };
      try {
        delivered = deliver(callback);
        await hold.inside();
        newer = await start("raced");
      } finally {
        hold.release();
      }
      assert.equal(await delivered, 409);
      assert.deepEqual(await ended(older.poll_url), ["failed", "superseded"]);
      assert.equal(d.credentials.has("raced"), false, "the superseded consent's tokens were not stored");
      assert.equal(await followAuthorization(newer.authorization_url), 200);
      assert.deepEqual(await poll(newer.poll_url), { status: "authorized" });
    });

    test("RFC 8707: the resource is the MCP server's, in the authorization request, the code exchange and each refresh", async () => {
      const own = await authServer();
      const mcp = await mcpServer({ authServer: own });
      await d.declare("resource", mcp.url);
      await authorize("resource");
      assert.equal(own.authorizations.at(-1)!.resource, mcp.url);
      own.forgetAccessTokens();
      assert.equal((await d.call("GET", "/v1/mcp/resource/tools")).status, 200);
      assert.equal(own.counters.refreshes, 1);
      assert.deepEqual(own.tokenResources, [mcp.url, mcp.url], "the code exchange, then the refresh");
    });
  });

  describe("tools with the credential it holds (section 3.6)", () => {
    test("a refused access token is refreshed once and the request retried", async () => {
      const mcp = await mcpServer();
      await d.declare("refresh", mcp.url);
      await authorize("refresh");
      auth.forgetAccessTokens();
      const refreshes = auth.counters.refreshes;
      const tools = await d.call("GET", "/v1/mcp/refresh/tools");
      assert.equal(tools.status, 200, JSON.stringify(tools.body));
      assert.deepEqual(tools.body.tools.map((t: { name: string }) => t.name), ["a", "b"]);
      assert.equal(auth.counters.refreshes, refreshes + 1);
      assert.equal(await statusOf("refresh"), "authorized");
    });

    if (storeIndifferent) {
      test("an access token past its expiry is refreshed before it is used: the expired one is never sent", async () => {
        const brief = await authServer({ accessTokenTtlSeconds: 1, refreshedAccessTokenTtlSeconds: 3600 });
        const mcp = await mcpServer({ authServer: brief });
        await d.declare("expiring", mcp.url);
        await authorize("expiring");
        const [expired] = brief.issuedTokens();
        // Past its 1 s on any machine: a wait only ever runs long. The refreshed token lives an hour:
        // one of 1 s could expire again before a loaded machine sends it (a second 401, then 409).
        await new Promise((r) => setTimeout(r, 1100));
        assert.equal((await d.call("GET", "/v1/mcp/expiring/tools")).status, 200);
        assert.equal(brief.counters.refreshes, 1);
        assert.ok(mcp.sent.length > 0 && !mcp.sent.includes(`Bearer ${expired}`), "the expired token was never sent");
      });
    }

    test("a refresh refused with invalid_grant deletes the credential: 409 not_authorized, then declared", async () => {
      const mcp = await mcpServer();
      await d.declare("revoked", mcp.url);
      await authorize("revoked");
      auth.forgetAccessTokens();
      auth.revokeAllRefreshTokens();
      const rejected = auth.counters.rejectedRefreshes;
      const tools = await d.call("GET", "/v1/mcp/revoked/tools");
      assert.deepEqual([tools.status, tools.body.error], [409, "not_authorized"]);
      assert.match(tools.body.message, /run `subs mcp login revoked`/);
      assert.equal(auth.counters.rejectedRefreshes, rejected + 1, "it tried to refresh");
      assert.equal(await statusOf("revoked"), "declared");
      assert.equal(d.credentials.has("revoked"), false);
    });

    test("a 401 with the refreshed token too is 409 not_authorized, after one refresh; the credential is deleted", async () => {
      const mcp = await mcpServer();
      await d.declare("refused", mcp.url);
      await authorize("refused");
      const refreshes = auth.counters.refreshes;
      auth.set({ acceptAccessTokens: false });
      try {
        const tools = await d.call("GET", "/v1/mcp/refused/tools");
        assert.deepEqual([tools.status, tools.body.error], [409, "not_authorized"]);
      } finally {
        auth.set({ acceptAccessTokens: true });
      }
      assert.equal(auth.counters.refreshes, refreshes + 1);
      assert.equal(await statusOf("refused"), "declared", "neither usable nor refreshable: deleted (section 3.6)");
      assert.equal(d.credentials.has("refused"), false);
    });

    test("no refresh token: a 401 is 409 not_authorized and deletes the credential, with no refresh tried", async () => {
      const noRefresh = await authServer({ refreshTokens: false });
      const mcp = await mcpServer({ authServer: noRefresh });
      await d.declare("single", mcp.url);
      await authorize("single");
      noRefresh.forgetAccessTokens();
      const tools = await d.call("GET", "/v1/mcp/single/tools");
      assert.deepEqual([tools.status, tools.body.error], [409, "not_authorized"]);
      assert.deepEqual([noRefresh.counters.refreshes, noRefresh.counters.rejectedRefreshes], [0, 0]);
      assert.equal(await statusOf("single"), "declared");
    });

    if (storeIndifferent) {
      test("403 insufficient_scope is 409 not_authorized naming the scope; the credential is kept", async () => {
        const mcp = await mcpServer({ requiredScopes: ["read"] });
        await d.declare("narrow", mcp.url, { oauth: { scopes: ["other"] } });
        await authorize("narrow");
        const tools = await d.call("GET", "/v1/mcp/narrow/tools");
        assert.deepEqual([tools.status, tools.body.error], [409, "not_authorized"]);
        assert.match(tools.body.message, /\bread\b/);
        assert.equal(await statusOf("narrow"), "authorized");
        assert.ok(d.credentials.has("narrow"));
      });

      test("a refresh answered with no new refresh token keeps the one it had (RFC 6749 section 6)", async () => {
        const unrotated = await authServer({ rotateRefreshTokens: false });
        const mcp = await mcpServer({ authServer: unrotated });
        await d.declare("kept", mcp.url);
        await authorize("kept");
        for (let n = 1; n <= 2; n++) {
          unrotated.forgetAccessTokens();
          const tools = await d.call("GET", "/v1/mcp/kept/tools");
          assert.equal(tools.status, 200, `refresh ${n}: ${JSON.stringify(tools.body)}`);
          assert.equal(unrotated.counters.refreshes, n);
        }
      });

      test("a refresh that fails otherwise (an answer that is no token response) is 502 upstream_error; the credential is kept", async () => {
        const broken = await authServer();
        const mcp = await mcpServer({ authServer: broken });
        await d.declare("flaky", mcp.url);
        await authorize("flaky");
        broken.set({ tokenResponse: (tokens, grant) => (grant === "refresh_token" ? { token_type: "Bearer" } : tokens) });
        broken.forgetAccessTokens();
        const tools = await d.call("GET", "/v1/mcp/flaky/tools");
        assert.deepEqual([tools.status, tools.body.error], [502, "upstream_error"]);
        assert.equal(await statusOf("flaky"), "authorized", "a server failing now says nothing of the credential");
      });

      test("a credential held for another url than the declaration's is never sent: 409 not_authorized", async () => {
        const mcp = await mcpServer();
        const other = `${mcp.url}?other=1`;
        await d.declare("mismatch", other);
        await d.hold("mismatch", { url: other, tokens: { access_token: "at-for-another-url", token_type: "Bearer" }, authorizedAt: Date.now(), expiresAt: null });
        // The declaration's url changed without its credential going, as no request can do (a PUT
        // drops it): a store edited by hand, or by a version that forgot to.
        if (d.served) {
          const db = new Database(d.served.dbPath);
          try {
            db.prepare("UPDATE connections SET url = ? WHERE id = ?").run(mcp.url, "mismatch");
          } finally {
            db.close();
          }
        } else d.connections.set("mismatch", { ...d.connections.get("mismatch")!, url: mcp.url });
        assert.ok(d.credentials.has("mismatch"), "the credential for the other url is held");
        const tools = await d.call("GET", "/v1/mcp/mismatch/tools");
        assert.deepEqual([tools.status, tools.body.error], [409, "not_authorized"]);
        assert.deepEqual(mcp.sent, [], "nothing was sent to the server");
        assert.equal(await statusOf("mismatch"), "declared");
      });
    }

    test("when the MCP server's metadata names another authorization server, the credential is deleted and no token goes out", async () => {
      const moved = await authServer();
      const protect: ProtectOptions = { authServer: auth };
      const mcp = await startMcpServer({ tools: TOOLS, oauth: protect });
      servers.push(mcp);
      await d.declare("migrated", mcp.url);
      await authorize("migrated");
      const refreshes = auth.counters.refreshes;
      protect.authServer = moved;
      const tools = await d.call("GET", "/v1/mcp/migrated/tools");
      assert.deepEqual([tools.status, tools.body.error], [409, "not_authorized"]);
      assert.equal(d.credentials.has("migrated"), false);
      assert.equal(await statusOf("migrated"), "declared");
      assert.equal(auth.counters.refreshes, refreshes, "not refreshed where it came from");
      assert.deepEqual([moved.counters.refreshes, moved.counters.rejectedRefreshes, moved.counters.registrations], [0, 0, 0], "nothing sent to the new one");
    });
  });

  describe("what happens to a credential (section 5)", () => {
    test("a DELETE and a url change revoke both tokens where they were issued (RFC 7009); a revocation endpoint that is down fails nothing", async () => {
      const issuing = await authServer();
      const mcp = await mcpServer({ authServer: issuing });
      await d.declare("deleted", mcp.url);
      await authorize("deleted");
      assert.equal((await d.call("DELETE", "/v1/mcp/deleted")).status, 204);
      assert.equal(issuing.counters.revocations, 2, "the refresh token and the access token");

      await d.declare("moved", mcp.url);
      await authorize("moved");
      await d.declare("moved", `${mcp.url}?moved=1`);
      assert.equal(issuing.counters.revocations, 4);
      assert.equal(d.credentials.has("moved"), false);

      const down = await startAuthServer();
      const onDown = await mcpServer({ authServer: down });
      await d.declare("orphan", onDown.url);
      await authorize("orphan");
      await down.close();
      assert.equal((await d.call("DELETE", "/v1/mcp/orphan")).status, 204);
      assert.equal(d.credentials.has("orphan"), false);
    });
  });

  if (target.kind !== "reference") describe("what subs deployment serve does beyond the protocol", () => {
    /** The process's count of refreshes that stored new tokens (GET /metrics). */
    const refreshedMetric = async () => {
      const text = await fetch(`${d.url}/metrics`, { headers: { authorization: `Bearer ${d.token}` } }).then((r) => r.text());
      return Number(/^subs_deployment_refreshes_total\{outcome="refreshed"\} (\d+)$/m.exec(text)?.[1] ?? 0);
    };

    // One process's requests share one refresh in memory; across processes the store's lock does
    // (test/deployment/replicas.e2e.test.ts, on both stores).
    // Two tokens, so that no check rests on how fast a loaded machine runs: one of 50 s, whose first
    // 25 s hold authorize and three calls with room (a margin of a full minute would refresh it at
    // once), and one of 2 s, waited past, whose refresh issues a token of an hour (so eight calls
    // however slow cannot find the new one due as well).
    // The MCP server takes longer to answer than the token lives, as on a machine too loaded to
    // deliver a request within a short lifetime: both tokens have expired when they are checked.
    if (storeIndifferent) test("a refreshed token refused because it expired on its way is no rejected grant: 503 unavailable, the credential kept", async () => {
      const brief = await authServer({ accessTokenTtlSeconds: 1 });
      const slow = await startMcpServer({ tools: TOOLS, delayMs: 1_500, oauth: { authServer: brief } });
      servers.push(slow);
      await d.declare("slow", slow.url);
      await authorize("slow");
      const tools = await d.call("GET", "/v1/mcp/slow/tools");
      assert.deepEqual([tools.status, tools.body.error], [503, "unavailable"], JSON.stringify(tools.body));
      assert.match(tools.body.message, /expired on the way; retry/);
      assert.ok(brief.counters.refreshes >= 1, "the refused token was refreshed first");
      assert.equal(await statusOf("slow"), "authorized", "the grant is not given up over a late request");
    });

    if (storeIndifferent) test("a short-lived access token is used for its first half, then refreshed ahead of its expiry once for eight requests at once", async () => {
      const halfLived = await authServer({ accessTokenTtlSeconds: 50 });
      const half = await mcpServer({ authServer: halfLived });
      const authorizedAt = Date.now();
      await d.declare("half", half.url);
      await authorize("half");
      for (let n = 0; n < 3; n++) assert.equal((await d.call("GET", "/v1/mcp/half/tools")).status, 200);
      assert.ok(Date.now() - authorizedAt < 25_000, "the first calls ran within the token's first half");
      assert.equal(halfLived.counters.refreshes, 0, "a token in its first half is not refreshed");

      const shortLived = await authServer({ accessTokenTtlSeconds: 2, refreshedAccessTokenTtlSeconds: 3600 });
      const mcp = await mcpServer({ authServer: shortLived });
      await d.declare("short", mcp.url);
      await authorize("short");
      const issued = shortLived.issuedTokens().filter((t) => t.startsWith("at-"));
      assert.equal(issued.length, 1, "the code exchange issued one access token");
      const firstToken = `Bearer ${issued[0]}`;
      // Past its expiry: the deployment must not send it (the MCP server would answer 401).
      await new Promise((r) => setTimeout(r, 2_500));
      const seen = mcp.sent.length;
      const refreshedBefore = await refreshedMetric();
      const answers = await Promise.all(Array.from({ length: 8 }, () => d.call("GET", "/v1/mcp/short/tools")));
      assert.deepEqual(answers.map((a) => a.status), Array(8).fill(200));
      assert.equal(shortLived.counters.refreshes, 1, "one refresh for every request that needed it");
      const later = mcp.sent.slice(seen);
      assert.ok(later.length > 0 && later.every((h) => h !== firstToken), "only the refreshed token reached the MCP server");
      assert.equal(await refreshedMetric(), refreshedBefore + 1, "the metric counts it once");
    });

    test("a confidential pre-registered client: the operator's secret authenticates the code exchange and the refresh; subs never sends it", async () => {
      teamAuth.set({ preRegistered: [{ client_id: "team-app", client_secret: CLIENT_SECRET, redirect_uris: [d.redirectUri] }] });
      teamAuth.restart();
      const mcp = await mcpServer({ authServer: teamAuth });
      await d.declare("confidential", mcp.url, { oauth: { client_id: "team-app" } });
      await authorize("confidential");
      assert.equal(teamAuth.authorizations.at(-1)!.client_id, "team-app");
      teamAuth.forgetAccessTokens();
      assert.equal((await d.call("GET", "/v1/mcp/confidential/tools")).status, 200);
      assert.equal(teamAuth.counters.refreshes, 1);
      assert.deepEqual(teamAuth.rejections, []);
      const listed = JSON.stringify((await d.call("GET", "/v1/mcp")).body);
      assert.ok(!listed.includes(CLIENT_SECRET));
      assert.ok(!d.served!.logs.some((l) => JSON.stringify(l).includes(CLIENT_SECRET)), "the secret is never logged");
    });

    if (storeIndifferent) {
      test("a client-secrets file others may read refuses to start, naming where it came from", async () => {
        const open = path.join(dir, "open.json");
        writeFileSync(open, "{}");
        chmodSync(open, 0o644);
        await assert.rejects(startServedDeployment({ store: "sqlite", env: { SUBS_DEPLOYMENT_CLIENT_SECRETS: open } }), /\$SUBS_DEPLOYMENT_CLIENT_SECRETS .*open\.json: others may read it/);
      });

      test("a server that asks for no credential needs no consent: 502 upstream_error saying so, nothing pending", async () => {
        const open = await startMcpServer({ tools: TOOLS });
        servers.push(open);
        await d.declare("open", open.url);
        const started = await d.call("POST", "/v1/mcp/open/authorizations", {});
        assert.deepEqual([started.status, started.body.error], [502, "upstream_error"]);
        assert.match(started.body.message, /asks for no credential; it needs no authorization/);
      });

      test("its registration: the deployment's redirect URI, both grants, and the strongest client authentication the server offers", async () => {
        const methodOf = async (id: string, methods: string[]) => {
          const server = await authServer({ tokenEndpointAuthMethods: methods });
          await d.declare(id, (await mcpServer({ authServer: server })).url);
          await start(id);
          const [request] = server.registrationRequests;
          assert.deepEqual([request!.redirect_uris, request!.grant_types, request!.response_types], [[d.redirectUri], ["authorization_code", "refresh_token"], ["code"]]);
          return request!.token_endpoint_auth_method;
        };
        assert.equal(await methodOf("m-basic", ["client_secret_post", "client_secret_basic", "none"]), "client_secret_basic");
        assert.equal(await methodOf("m-post", ["none", "client_secret_post"]), "client_secret_post");
        assert.equal(await methodOf("m-none", ["none"]), "none");
      });

      test("a registration whose client secret has expired is made again; one that has not is reused", async () => {
        const hostile = await startHostileServer();
        servers.push(hostile);
        let expiresAt = Math.floor(Date.now() / 1000) - 60;
        hostile.set({ register: () => ({ status: 201, type: "application/json", body: JSON.stringify({ client_id: `c-${expiresAt}`, client_secret: "s", client_secret_expires_at: expiresAt, redirect_uris: [d.redirectUri] }) }) });
        await d.declare("expiring-client", hostile.url);
        const registrations = () => hostile.requests.filter((r) => r.path === "/register").length;
        await start("expiring-client");
        await start("expiring-client");
        assert.equal(registrations(), 2, "an expired client secret is not used");
        expiresAt = Math.floor(Date.now() / 1000) + 3600;
        await start("expiring-client");
        await start("expiring-client");
        assert.equal(registrations(), 3, "one valid for an hour is reused");
      });

      test("the redirect URI's page is never cached and sends no Referer: its URL holds the code and the state", async () => {
        const mcp = await mcpServer();
        await d.declare("page", mcp.url);
        const started = await start("page");
        const res = await fetch(await consentRedirect(started.authorization_url), { redirect: "manual" });
        assert.equal(res.status, 200);
        assert.match(await res.text(), /Authorized\. You can close this window\./);
        assert.equal(res.headers.get("cache-control"), "no-store");
        assert.equal(res.headers.get("referrer-policy"), "no-referrer");
      });

      test("token answers are checked before anything is stored: an empty access token fails the consent, an absurd expires_in fails the refresh and keeps the credential", async () => {
        const careless = await authServer();
        const mcp = await mcpServer({ authServer: careless });
        await d.declare("careless", mcp.url);
        careless.set({ tokenResponse: (tokens) => ({ ...tokens, access_token: "" }) });
        const started = await start("careless");
        assert.equal(await followAuthorization(started.authorization_url), 502);
        const failed = await poll(started.poll_url);
        assert.deepEqual([failed.status, failed.error], ["failed", "token_exchange_failed"]);
        assert.match(failed.message, /an empty or missing access_token/);
        assert.equal(d.credentials.has("careless"), false);

        careless.set({ tokenResponse: undefined });
        await authorize("careless");
        careless.set({ tokenResponse: (tokens, grant) => (grant === "refresh_token" ? { ...tokens, expires_in: -1 } : tokens) });
        careless.forgetAccessTokens();
        const tools = await d.call("GET", "/v1/mcp/careless/tools");
        assert.deepEqual([tools.status, tools.body.error], [502, "upstream_error"]);
        assert.match(tools.body.message, /an expires_in that is not a number of seconds/);
        assert.equal(await statusOf("careless"), "authorized");
      });

      test("a refresh refused with invalid_client (a server that forgot its client) deletes the credential: 409 not_authorized", async () => {
        const forgetful = await authServer();
        const mcp = await mcpServer({ authServer: forgetful });
        await d.declare("forgotten", mcp.url);
        await authorize("forgotten");
        forgetful.restart();
        const tools = await d.call("GET", "/v1/mcp/forgotten/tools");
        assert.deepEqual([tools.status, tools.body.error], [409, "not_authorized"]);
        assert.deepEqual(forgetful.rejections.map((r) => [r.endpoint, r.error]), [["token", "invalid_client"]]);
        assert.equal(await statusOf("forgotten"), "declared");
      });
    }
  });
});
