// `subs mcp login` and the use of its credential, in-process against a real test authorization
// server and a protected MCP server on loopback.
import assert from "node:assert/strict";
import { existsSync } from "node:fs";
import path from "node:path";
import { createServer } from "node:net";
import { PassThrough } from "node:stream";
import { test } from "node:test";
import { run } from "../../src/run.ts";
import { followAuthorization } from "../support/browser.ts";
import { startMcpServer } from "../support/mcp-server.ts";
import { startAuthServer } from "../support/oauth-server.ts";
import { connectionRefused, unusedPort } from "../support/ports.ts";
import { waitFor } from "../support/wait.ts";
import { testContext } from "../support/cli.ts";
import { credential, environment, leakedTokens, TOOLS } from "./harness.ts";


test("login: discovery, DCR as a native client, PKCE S256, resource, state and iss; the credential works and never shows", async () => {
  const env = await environment({ protect: { requiredScopes: ["files:read"] } });
  try {
    const login = await env.subs(["mcp", "login", "demo"]);
    assert.equal(login.code, 0, login.stderr);
    assert.match(login.stdout, /demo: authorized by http:\/\/127\.0\.0\.1:\d+\//);
    assert.match(login.stdout, /scopes: files:read/);
    assert.match(login.stdout, /expires in (59m|1h), refreshable/);
    assert.match(login.stdout, /2 tools offered/);

    const [authorization] = env.as.authorizations;
    assert.ok(authorization);
    assert.deepEqual(authorization.scopes, ["files:read"], "scope from the 401's WWW-Authenticate");
    assert.equal(authorization.resource, env.mcp.url, "resource (RFC 8707) in the authorization request");
    assert.deepEqual(env.as.tokenResources, [env.mcp.url], "resource in the token request");
    assert.match(authorization.redirect_uri, /^http:\/\/127\.0\.0\.1:\d+\/callback$/);
    assert.equal(env.as.registrationRequests[0]?.application_type, "native");
    assert.equal(env.as.registrationRequests[0]?.token_endpoint_auth_method, "none");

    const row = credential(env, "demo");
    assert.ok(row);
    assert.equal(row.url, env.mcp.url);
    assert.equal(row.issuer, env.as.issuer);
    assert.equal(row.resource, env.mcp.url);
    assert.ok(row.expires_at! > Date.now() + 3_000_000 && row.expires_at! <= Date.now() + 3_600_000, "absolute expiry in ms");
    assert.ok(row.refresh_token);

    const list = await env.subs(["mcp", "list", "--json"]);
    const [status] = JSON.parse(list.stdout);
    assert.equal(status.status, "authorized");
    assert.equal(status.usable, true);
    assert.deepEqual(status.scopes, ["files:read"]);

    const tools = await env.subs(["mcp", "tools", "demo", "--json"]);
    assert.equal(tools.code, 0, tools.stderr);
    const listed = JSON.parse(tools.stdout);
    assert.equal(listed.id, "demo");
    assert.deepEqual(
      listed.tools.map((t: { name: string }) => t.name),
      TOOLS.map((t) => t.name),
    );
    assert.deepEqual(listed.tools[0].annotations, { readOnlyHint: true });
    const table = await env.subs(["mcp", "tools", "demo"]);
    assert.match(table.stdout, /^search\tread-only\tsearch \(test tool\)$/m);

    const call = await env.subs(["mcp", "call", "demo", "echo", "--args", '{"q":"x"}']);
    assert.equal(call.code, 0, call.stderr);
    assert.equal(call.stdout, 'echo:{"q":"x"}\n');
    const callJson = await env.subs(["mcp", "call", "demo", "echo", "--json"]);
    assert.deepEqual(JSON.parse(callJson.stdout).content, [{ type: "text", text: "echo:{}" }]);
    assert.ok(env.mcp.authorizations.every((h) => h === `Bearer ${row.access_token}`), "the stored token is what the server received");

    const loginJson = await env.subs(["mcp", "login", "demo", "--json"]);
    const [result] = JSON.parse(loginJson.stdout);
    assert.equal(result.result, "authorized");
    assert.equal(result.tools, 2);
    assert.equal(env.as.counters.registrations, 1, "the registration is stored per issuer and reused");
    assert.deepEqual(leakedTokens(env), []);
  } finally {
    await env.close();
  }
});

test("login: scopes come from the resource's scopes_supported when the 401 names none; oauth.scopes, when set, exactly; offline_access only when the server lists it", async () => {
  const env = await environment({ protect: { scopesSupported: ["a", "b"] }, as: { scopesSupported: ["a", "b", "offline_access"] } });
  try {
    assert.equal((await env.subs(["mcp", "login", "demo"])).code, 0);
    assert.deepEqual(env.as.authorizations[0]?.scopes, ["a", "b", "offline_access"]);
    env.write(`[mcp.demo]\nurl = "${env.mcp.url}"\noauth = { scopes = ["a"] }\n`);
    assert.equal((await env.subs(["mcp", "login", "demo"])).code, 0);
    assert.deepEqual(env.as.authorizations[1]?.scopes, ["a", "offline_access"], "the file's scopes narrow the request; b is not added");
    env.as.set({ scopesSupported: ["a", "b"] });
    env.write(`[mcp.demo]\nurl = "${env.mcp.url}"\noauth = { scopes = ["offline_access", "extra"] }\n`);
    assert.equal((await env.subs(["mcp", "login", "demo"])).code, 0);
    assert.deepEqual(env.as.authorizations[2]?.scopes, ["extra"], "the file's scopes, offline_access dropped");
    env.write(`[mcp.demo]\nurl = "${env.mcp.url}"\noauth = { scopes = [] }\n`);
    assert.equal((await env.subs(["mcp", "login", "demo"])).code, 0);
    assert.deepEqual(env.as.authorizations[3]?.scopes, ["a", "b"], "an empty list names no scopes: chosen as if unset");
  } finally {
    await env.close();
  }
});

test("login: protected resource metadata from the path-aware, then the root well-known URL; OpenID discovery with a path issuer", async () => {
  for (const metadataAt of ["path", "root"] as const) {
    const env = await environment({ protect: { metadataAt, metadataInChallenge: false }, as: { discovery: "openid", issuerPath: "/tenant1" } });
    try {
      const login = await env.subs(["mcp", "login", "demo"]);
      assert.equal(login.code, 0, login.stderr);
      assert.equal(credential(env, "demo")?.issuer, env.as.issuer);
      assert.match(env.as.issuer, /\/tenant1$/);
    } finally {
      await env.close();
    }
  }
});

test("login: a response whose state does not match, or has none, is ignored (the wait goes on); its code is never redeemed and nothing is stored", async () => {
  for (const state of ["wrong", "absent"] as const) {
    const env = await environment({ as: { state } });
    try {
      const login = await env.subs(["mcp", "login", "demo", "--timeout", "2"]);
      assert.equal(login.code, 1);
      assert.match(login.stderr, /a response that is not for this login \(no `state`, or another one\) reached the loopback listener; ignored/);
      assert.match(login.stderr, /timed out after 2s/);
      assert.equal(env.as.counters.codeExchanges, 0, "the code is never redeemed");
      assert.equal(credential(env, "demo"), undefined);
    } finally {
      await env.close();
    }
  }
});

test("login: iss (RFC 9207) from another issuer is refused; a missing iss is refused only when the server advertises it", async () => {
  const cases = [
    { as: { iss: "wrong" as const }, ok: false },
    { as: { iss: "absent" as const, advertiseIss: true }, ok: false },
    { as: { iss: "absent" as const, advertiseIss: false }, ok: true },
    { as: { iss: "wrong" as const, advertiseIss: false }, ok: false },
  ];
  for (const c of cases) {
    const env = await environment({ as: c.as });
    try {
      const login = await env.subs(["mcp", "login", "demo"]);
      assert.equal(login.code, c.ok ? 0 : 1, `${JSON.stringify(c.as)}: ${login.stderr}`);
      if (!c.ok) {
        assert.match(login.stderr, /iss|issuer/);
        assert.equal(env.as.counters.codeExchanges, 0);
        assert.equal(credential(env, "demo"), undefined);
      }
    } finally {
      await env.close();
    }
  }
});

test("login: refuses metadata without S256, a non-https endpoint off loopback, and metadata naming another issuer", async () => {
  const cases = [
    { as: { codeChallengeMethods: null }, message: /S256/ },
    { as: { codeChallengeMethods: ["plain"] }, message: /S256/ },
    { as: { authorizationEndpoint: "http://auth.example.test/authorize" }, message: /not https/ },
    { as: { metadataIssuer: "http://127.0.0.1:9/elsewhere" }, message: /another issuer/ },
  ];
  for (const c of cases) {
    const env = await environment({ as: c.as });
    try {
      const login = await env.subs(["mcp", "login", "demo"]);
      assert.equal(login.code, 2, login.stderr);
      assert.match(login.stderr, c.message);
      assert.equal(env.as.counters.authorizations, 0, "nothing was sent to the authorization endpoint");
      assert.equal(env.as.counters.registrations, 0);
    } finally {
      await env.close();
    }
  }
});

test("login: consent denied ends in exit 1 with the server's reason", async () => {
  const env = await environment({ as: { consent: "deny" } });
  try {
    const login = await env.subs(["mcp", "login", "demo"]);
    assert.equal(login.code, 1);
    assert.match(login.stderr, /not granted \(access_denied/);
  } finally {
    await env.close();
  }
});

test("login: --port uses that port; a busy one is a usage error", async () => {
  const env = await environment();
  // Freed below and then listened on by subs: not a port the kernel hands out for port 0, which
  // another test's server could be given in between.
  const busy = await unusedPort();
  const blocker = createServer();
  await new Promise<void>((resolve) => blocker.listen(busy, "127.0.0.1", resolve));
  try {
    assert.equal((await env.subs(["mcp", "login", "demo"])).code, 0, "registered with a port the system chose");
    const login = await env.subs(["mcp", "login", "demo", "--port", String(busy)]);
    assert.equal(login.code, 2);
    assert.match(login.stderr, new RegExp(`port ${busy} on 127\\.0\\.0\\.1 is in use`));
    await new Promise<void>((resolve) => blocker.close(() => resolve()));
    const again = await env.subs(["mcp", "login", "demo", "--port", String(busy)]);
    assert.equal(again.code, 0, again.stderr);
    assert.equal(env.as.authorizations.at(-1)?.redirect_uri, `http://127.0.0.1:${busy}/callback`);
    assert.equal(env.as.counters.registrations, 2, "a registration for another port is replaced under --port");
    assert.deepEqual(env.as.registrationRequests.at(-1)?.redirect_uris, [`http://127.0.0.1:${busy}/callback`]);
    assert.equal((await env.subs(["mcp", "login", "demo", "--port", "http"])).code, 2);
  } finally {
    if (blocker.listening) blocker.close();
    await env.close();
  }
});

test("login: --timeout ends the wait with exit 1, closes the port and stores nothing", async () => {
  const env = await environment();
  try {
    const visited: string[] = [];
    const login = await env.subs(["mcp", "login", "demo", "--timeout", "0.3"], { openBrowser: async (url) => void visited.push(url) });
    assert.equal(login.code, 1);
    assert.match(login.stderr, /timed out/);
    assert.equal(credential(env, "demo"), undefined);
    // The browser is given a one-time link on the loopback listener itself.
    const redirect = new URL("/callback", visited[0]!);
    await assert.rejects(fetch(redirect), connectionRefused, "the loopback listener is closed");
  } finally {
    await env.close();
  }
});

test("login: --no-browser prints the URL and accepts the redirected URL pasted on a terminal", async () => {
  const env = await environment();
  try {
    const stdin = new PassThrough();
    const opened: string[] = [];
    const t = testContext({ cwd: env.dir, env: {}, terminalStdin: async () => stdin, openBrowser: async (url) => void opened.push(url) });
    const running = run(["mcp", "login", "demo", "--no-browser"], t.ctx);
    const url = await waitFor(() => /(http:\/\/\S+\/authorize\?\S+)/.exec(t.stderr())?.[1], () => `the authorization URL on stderr:\n${t.stderr()}`);
    // The "browser" is elsewhere: it gets the redirect but cannot reach the loopback.
    const consent = await fetch(url, { redirect: "manual" });
    stdin.write(`${consent.headers.get("location")}\n`);
    assert.equal(await running, 0, t.stderr());
    assert.deepEqual(opened, [], "no browser was opened");
    assert.match(t.stderr(), /paste the address/);
    assert.ok(credential(env, "demo"));
  } finally {
    await env.close();
  }
});

test("login: two ids on one URL keep separate credentials; the registration is shared per issuer", async () => {
  const env = await environment({ toml: (url) => `[mcp.work]\nurl = "${url}"\n\n[mcp.home]\nurl = "${url}"\n` });
  try {
    assert.equal((await env.subs(["mcp", "login", "work", "home"])).code, 0);
    const work = credential(env, "work");
    const home = credential(env, "home");
    assert.ok(work && home);
    assert.notEqual(work.access_token, home.access_token);
    assert.notEqual(work.refresh_token, home.refresh_token);
    assert.equal(env.as.counters.authorizations, 2, "each id consents on its own");
    assert.equal(env.as.counters.registrations, 1);
    assert.equal((await env.subs(["mcp", "tools", "home"])).code, 0);
    assert.equal(env.mcp.authorizations.at(-1), `Bearer ${home.access_token}`);
  } finally {
    await env.close();
  }
});

test("login: after the url changes, the old credential is never sent and the id needs login", async () => {
  const env = await environment();
  const other = await startMcpServer({ tools: TOOLS, oauth: { authServer: env.as } });
  try {
    assert.equal((await env.subs(["mcp", "login", "demo"])).code, 0);
    env.write(`[mcp.demo]\nurl = "${other.url}"\n`);
    const tools = await env.subs(["mcp", "tools", "demo"]);
    assert.equal(tools.code, 4);
    assert.match(tools.stderr, /url changed since login/);
    assert.match(tools.stderr, /subs mcp login demo/);
    assert.deepEqual(other.authorizations, [], "nothing reached the new url");
    const [status] = JSON.parse((await env.subs(["mcp", "list", "--json"])).stdout);
    assert.equal(status.status, "url_changed");
    assert.equal((await env.subs(["mcp", "login", "demo"])).code, 0);
    assert.equal(env.as.counters.revocations, 2, "the credential for the old url was revoked");
    assert.equal((await env.subs(["mcp", "tools", "demo"])).code, 0);
    assert.equal(other.authorizations.length > 0, true);
  } finally {
    await other.close();
    await env.close();
  }
});

test("login: a static connection needs no login; says so and warns when its variable is unset", async () => {
  const env = await environment({ toml: (url) => `[mcp.gh]\nurl = "${url}"\nauth = { token_env = "GH_TOKEN" }\n` });
  try {
    const unset = await env.subs(["mcp", "login", "gh"]);
    assert.equal(unset.code, 0);
    assert.match(unset.stderr, /static token from \$GH_TOKEN: there is nothing to log in/);
    assert.match(unset.stderr, /warning: \$GH_TOKEN is not set/);
    const set = await env.subs(["mcp", "login", "gh", "--json"], { env: { GH_TOKEN: "static-secret" } });
    assert.doesNotMatch(set.stderr, /warning/);
    assert.deepEqual(JSON.parse(set.stdout)[0], { id: "gh", result: "static", issuer: null, scopes: [], expires_at: null, refreshable: false, tools: null, token_env: "GH_TOKEN", token_env_set: true });
    assert.doesNotMatch(set.stdout + set.stderr, /static-secret/);
    assert.equal(env.as.counters.authorizations, 0);
  } finally {
    await env.close();
  }
});

test("login: unknown ids, no ids, and --all", async () => {
  const env = await environment({ toml: (url) => `[mcp.one]\nurl = "${url}"\n\n[mcp.two]\nurl = "${url}"\n\n[mcp.gh]\nurl = "${url}"\nauth = { token_env = "GH_TOKEN" }\n` });
  try {
    const unknown = await env.subs(["mcp", "login", "onw"]);
    assert.equal(unknown.code, 2);
    assert.match(unknown.stderr, /did you mean `one`/);
    assert.equal((await env.subs(["mcp", "login"])).code, 2);
    assert.equal((await env.subs(["mcp", "login", "one"])).code, 0);
    const all = await env.subs(["mcp", "login", "--all", "--json"]);
    assert.equal(all.code, 0, all.stderr);
    assert.deepEqual(
      JSON.parse(all.stdout).map((r: { id: string }) => r.id),
      ["two"],
      "only OAuth connections lacking a usable credential",
    );
    const again = await env.subs(["mcp", "login", "--all", "--json"]);
    assert.equal(again.code, 0, again.stderr);
    assert.deepEqual(JSON.parse(again.stdout), []);
    assert.match(again.stderr, /nothing to do/);
    assert.equal(env.as.counters.authorizations, 2, "no login beyond one and two");
  } finally {
    await env.close();
  }
});

test("login --all with only static tokens declared has nothing to do and creates no db", async () => {
  const env = await environment({ toml: (url) => `[mcp.gh]\nurl = "${url}"\nauth = { token_env = "GH_TOKEN" }\n` });
  try {
    const all = await env.subs(["mcp", "login", "--all"]);
    assert.equal(all.code, 0, all.stderr);
    assert.match(all.stderr, /nothing to do/);
    assert.equal(existsSync(path.join(env.dir, "substructure.db")), false);
  } finally {
    await env.close();
  }
});

test("login: pre-registered client with its secret from the environment; Client ID Metadata Document when supported", async () => {
  const pre = await environment({
    as: { preRegistered: [{ client_id: "subs-pre", client_secret: "pre-secret-value" }], tokenEndpointAuthMethods: ["client_secret_post"] },
    toml: (url) => `[mcp.demo]\nurl = "${url}"\noauth = { client_id = "subs-pre", client_secret_env = "PRE_SECRET" }\n`,
  });
  try {
    const missing = await pre.subs(["mcp", "login", "demo"]);
    assert.equal(missing.code, 2);
    assert.match(missing.stderr, /\$PRE_SECRET is not set/);
    const login = await pre.subs(["mcp", "login", "demo"], { env: { PRE_SECRET: "pre-secret-value" } });
    assert.equal(login.code, 0, login.stderr);
    assert.equal(pre.as.authorizations[0]?.client_id, "subs-pre");
    assert.equal(pre.as.counters.registrations, 0);
    const raw = pre.db().prepare("SELECT client_json FROM subs_credentials").get() as { client_json: string };
    assert.doesNotMatch(raw.client_json, /pre-secret-value/, "the secret stays in its variable");
  } finally {
    await pre.close();
  }
  const cimdUrl = "https://subs.example/oauth/client.json";
  const cimd = await environment({ as: { clientIdMetadataDocuments: true }, toml: (url) => `[mcp.demo]\nurl = "${url}"\noauth = { client_metadata_url = "${cimdUrl}" }\n` });
  try {
    assert.equal((await cimd.subs(["mcp", "login", "demo"])).code, 0);
    assert.equal(cimd.as.authorizations[0]?.client_id, cimdUrl);
    assert.equal(cimd.as.counters.registrations, 0);
  } finally {
    await cimd.close();
  }
});

test("tokens: refreshed before use when within a minute of expiry; a rejected refresh token ends in exit 4, never a loop", async () => {
  const env = await environment();
  try {
    assert.equal((await env.subs(["mcp", "login", "demo"])).code, 0);
    assert.equal(env.as.counters.refreshes, 0);
    // An hour-long token with 30 seconds left.
    const now = Date.now();
    env.db().prepare("UPDATE subs_credentials SET expires_at = ?, updated_at = ?").run(now + 30_000, now - 3_570_000);
    const before = credential(env, "demo")!;
    const tools = await env.subs(["mcp", "tools", "demo"]);
    assert.equal(tools.code, 0, tools.stderr);
    assert.equal(env.as.counters.refreshes, 1);
    const after = credential(env, "demo")!;
    assert.notEqual(after.access_token, before.access_token);
    assert.notEqual(after.refresh_token, before.refresh_token, "the rotated refresh token is stored");
    assert.equal(env.mcp.authorizations.at(-1), `Bearer ${after.access_token}`);

    env.as.revokeAllRefreshTokens();
    env.db().prepare("UPDATE subs_credentials SET expires_at = ?").run(Date.now() - 1000);
    const rejected = await env.subs(["mcp", "call", "demo", "echo"]);
    assert.equal(rejected.code, 4);
    assert.match(rejected.stderr, /rejected the refresh token/);
    assert.match(rejected.stderr, /run `subs mcp login demo`/);
    assert.equal(credential(env, "demo"), undefined, "the dead credential is gone");
    const again = await env.subs(["mcp", "call", "demo", "echo"]);
    assert.equal(again.code, 4);
    assert.equal(env.as.counters.rejectedRefreshes, 1, "no second attempt");
    assert.equal(env.as.counters.authorizations, 1, "no browser was opened to recover");
    assert.deepEqual(leakedTokens(env), []);
  } finally {
    await env.close();
  }
});

test("tokens: a 401 to a token the store thinks valid is answered by one refresh and one retry; a second 401 needs login", async () => {
  const env = await environment();
  try {
    assert.equal((await env.subs(["mcp", "login", "demo"])).code, 0);
    env.as.forgetAccessTokens();
    const tools = await env.subs(["mcp", "tools", "demo"]);
    assert.equal(tools.code, 0, tools.stderr);
    assert.equal(env.as.counters.refreshes, 1);
    assert.equal(env.mcp.authorizations.at(-1), `Bearer ${credential(env, "demo")!.access_token}`);

    env.as.set({ acceptAccessTokens: false });
    const call = await env.subs(["mcp", "call", "demo", "echo", "--json"]);
    assert.equal(call.code, 4);
    assert.equal(JSON.parse(call.stdout).error.code, "token_rejected");
    assert.match(call.stderr, /run `subs mcp login demo`/);
    assert.equal(env.as.counters.refreshes, 2, "one refresh per command, no loop");
    assert.equal(env.as.counters.authorizations, 1);
    assert.deepEqual(leakedTokens(env), []);
  } finally {
    await env.close();
  }
});

test("tokens: a 401 in the middle of a command (after connecting) is answered by one refresh and a retry", async () => {
  let rejectNextCall = false;
  const env = await environment({
    gate: (_req, res, body) => {
      if (rejectNextCall && (body as { method?: string })?.method === "tools/call") {
        rejectNextCall = false;
        res.writeHead(401, { "www-authenticate": 'Bearer error="invalid_token"', "content-type": "application/json" }).end("{}");
        return true;
      }
      return false;
    },
  });
  try {
    assert.equal((await env.subs(["mcp", "login", "demo"])).code, 0);
    rejectNextCall = true;
    const call = await env.subs(["mcp", "call", "demo", "echo", "--args", '{"k":2}']);
    assert.equal(call.code, 0, call.stderr);
    assert.equal(call.stdout, 'echo:{"k":2}\n');
    assert.equal(env.as.counters.refreshes, 1);
  } finally {
    await env.close();
  }
});

test("tokens: when the server moves to another authorization server, the old credential goes nowhere and login re-registers there", async () => {
  const env = await environment();
  const next = await startAuthServer();
  try {
    assert.equal((await env.subs(["mcp", "login", "demo"])).code, 0);
    const oldClient = env.as.authorizations[0]!.client_id;
    env.protect.authServer = next;
    const tools = await env.subs(["mcp", "tools", "demo", "--json"]);
    assert.equal(tools.code, 4);
    assert.equal(JSON.parse(tools.stdout).error.code, "issuer_changed");
    assert.match(tools.stderr, /now uses another authorization server/);
    assert.equal(env.as.counters.refreshes, 0, "nothing refreshed at the old server");
    assert.equal(next.counters.refreshes + next.counters.rejectedRefreshes, 0);

    const login = await env.subs(["mcp", "login", "demo"]);
    assert.equal(login.code, 0, login.stderr);
    assert.equal(next.counters.registrations, 1, "registered anew with the new server");
    assert.notEqual(next.authorizations[0]?.client_id, oldClient);
    assert.equal(credential(env, "demo")?.issuer, next.issuer);
    assert.equal((await env.subs(["mcp", "tools", "demo"])).code, 0);
  } finally {
    await next.close();
    await env.close();
  }
});

test("tokens: a 401 mid-command from a server that moved to another authorization server is not answered with a refresh", async () => {
  let reject = false;
  const env = await environment({
    gate: (_req, res, body) => {
      if (!reject || (body as { method?: string })?.method !== "tools/call") return false;
      res.writeHead(401, { "www-authenticate": 'Bearer error="invalid_token"', "content-type": "application/json" }).end("{}");
      return true;
    },
  });
  const next = await startAuthServer();
  try {
    assert.equal((await env.subs(["mcp", "login", "demo"])).code, 0);
    // The resource metadata names the new server; the old tokens still open the connection.
    env.protect.authServer = { issuer: next.issuer, verifier: env.as.verifier };
    reject = true;
    const call = await env.subs(["mcp", "call", "demo", "echo", "--json"]);
    assert.equal(call.code, 4);
    assert.equal(JSON.parse(call.stdout).error.code, "issuer_changed");
    assert.equal(env.as.counters.refreshes, 0);
  } finally {
    await next.close();
    await env.close();
  }
});

test("step-up: a 403 insufficient_scope re-authorizes once for the union of scopes, then stops", async () => {
  const env = await environment({ protect: { requiredScopes: ["files:read"], toolScopes: { echo: ["files:write"], search: ["admin"] } }, as: { grantableScopes: ["files:read", "files:write"] } });
  try {
    assert.equal((await env.subs(["mcp", "login", "demo"])).code, 0);
    const call = await env.subs(["mcp", "call", "demo", "echo", "--args", '{"n":1}'], { terminal: true });
    assert.equal(call.code, 0, call.stderr);
    assert.equal(call.stdout, 'echo:{"n":1}\n');
    assert.deepEqual(env.as.authorizations[1]?.scopes, ["files:read", "files:write"]);
    assert.equal(credential(env, "demo")?.scopes, "files:read files:write");

    const denied = await env.subs(["mcp", "call", "demo", "search"], { terminal: true });
    assert.equal(denied.code, 1);
    assert.match(denied.stderr, /still refuses for lack of scope/);
    assert.equal(env.as.counters.authorizations, 3, "exactly one more re-authorization");
  } finally {
    await env.close();
  }
});

test("looking never deletes: a commented-out section's credential survives every command but apply, unrevoked and unused, and works again once uncommented", async () => {
  const both = (url: string) => `[mcp.keep]\nurl = "${url}"\n\n[mcp.gone]\nurl = "${url}"\n\n[agent.a]\nmcp = ["keep"]\n`;
  const env = await environment({ toml: both });
  try {
    assert.equal((await env.subs(["mcp", "login", "keep", "gone"])).code, 0);
    const gone = credential(env, "gone")!;
    env.write(`[mcp.keep]\nurl = "${env.mcp.url}"\n\n# [mcp.gone]\n# url = "${env.mcp.url}"\n\n[agent.a]\nmcp = ["keep"]\n`);
    const sentBefore = env.mcp.authorizations.length;

    for (const argv of [
      ["mcp", "list"],
      ["mcp", "list", "--json"],
      ["mcp", "list", "--check"],
      ["mcp", "tools", "keep"],
      ["mcp", "call", "keep", "echo"],
      ["agent", "tools", "a"],
      ["mcp", "login", "keep"],
      ["mcp", "login", "--all"],
    ]) {
      const result = await env.subs(argv);
      assert.equal(result.code, 0, `${argv.join(" ")}: ${result.stderr}`);
      assert.doesNotMatch(result.stderr, /Deleted|Revoked/, argv.join(" "));
      assert.deepEqual(credential(env, "gone"), gone, `${argv.join(" ")} left gone's credential as it was`);
      assert.equal(env.as.counters.revocations, 0, `${argv.join(" ")} revoked nothing`);
    }
    // Nothing can name an undeclared id; its token was never sent.
    assert.ok(env.mcp.authorizations.slice(sentBefore).every((h) => h !== `Bearer ${gone.access_token}`));
    assert.equal((await env.subs(["mcp", "tools", "gone"])).code, 2, "not declared: a usage error, nothing sent");

    const list = await env.subs(["mcp", "list"]);
    assert.match(list.stdout, /^gone\thttp:\/\/127\.0\.0\.1:\d+\/mcp\toauth\tstored credential for an undeclared id · subs apply deletes it\t-$/m);
    const json = JSON.parse((await env.subs(["mcp", "list", "--json"])).stdout);
    assert.deepEqual(
      json.map((c: { id: string; status: string; usable: boolean }) => [c.id, c.status, c.usable]),
      [
        ["keep", "authorized", true],
        ["gone", "undeclared", false],
      ],
    );
    assert.equal(json[1].url, env.mcp.url, "the url it was issued for");
    assert.equal(json[1].issuer, env.as.issuer);
    assert.deepEqual(json[1].agents, []);
    const checked = JSON.parse((await env.subs(["mcp", "list", "--json", "--check"])).stdout);
    assert.deepEqual(checked.map((c: { id: string; check: unknown }) => [c.id, c.check === null]), [["keep", false], ["gone", true]], "undeclared ids are never probed");

    // Uncommented: the same credential works, with no new consent.
    const authorizations = env.as.counters.authorizations;
    env.write(both(env.mcp.url));
    const tools = await env.subs(["mcp", "tools", "gone"]);
    assert.equal(tools.code, 0, tools.stderr);
    assert.equal(env.mcp.authorizations.at(-1), `Bearer ${gone.access_token}`);
    assert.equal(env.as.counters.authorizations, authorizations, "no new browser consent");
    assert.equal(env.as.counters.revocations, 0);

    // Deleted again: `subs apply` deletes and revokes it.
    env.write(`[mcp.keep]\nurl = "${env.mcp.url}"\n`);
    const apply = await env.subs(["apply"]);
    assert.equal(apply.code, 0, apply.stderr);
    assert.match(apply.stderr, /Revoked the credential of gone/);
    assert.equal(credential(env, "gone"), undefined);
    assert.ok(credential(env, "keep"));
    assert.equal(env.as.counters.revocations, 2, "refresh and access token");
    await assert.rejects(env.as.verifier.verifyAccessToken(gone.access_token), { message: "unknown or revoked access token" });
    assert.deepEqual(JSON.parse((await env.subs(["mcp", "list", "--json"])).stdout).map((c: { id: string }) => c.id), ["keep"]);
  } finally {
    await env.close();
  }
});

test("purge: subs apply deletes an undeclared credential and revokes it", async () => {
  const env = await environment({ toml: (url) => `[mcp.keep]\nurl = "${url}"\n\n[mcp.gone]\nurl = "${url}"\n` });
  try {
    assert.equal((await env.subs(["mcp", "login", "keep", "gone"])).code, 0);
    env.write(`[mcp.keep]\nurl = "${env.mcp.url}"\n`);
    const apply = await env.subs(["apply"]);
    assert.equal(apply.code, 0, apply.stderr);
    assert.match(apply.stdout, /gone: deleted its credential/);
    assert.match(apply.stderr, /Revoked the credential of gone/);
    assert.equal(env.as.counters.revocations, 2);
    assert.equal(credential(env, "gone"), undefined);
    assert.ok(credential(env, "keep"));
  } finally {
    await env.close();
  }
});

test("login: a 401 with neither resource nor authorization server metadata means the 2025-03-26 default endpoints at the server's origin", async () => {
  const env = await environment({ protect: { metadataAt: "none", metadataInChallenge: false } });
  try {
    const login = await env.subs(["mcp", "login", "demo"]);
    assert.equal(login.code, 1);
    // This server has no /register at its origin: registration there fails before any browser opens.
    assert.match(login.stderr, new RegExp(`dynamic client registration at ${new URL(env.mcp.url).origin}/ failed \\(HTTP 404\\)`));
    assert.doesNotMatch(login.stderr, /Opening the browser/);
    assert.equal(env.as.counters.registrations, 0);
  } finally {
    await env.close();
  }
});

test("static token: sent as a bearer token; one the server rejects is exit 1, never a login", async () => {
  const env = await environment({ toml: (url) => `[mcp.oauth]\nurl = "${url}"\n\n[mcp.gh]\nurl = "${url}"\nauth = { token_env = "GH_TOKEN" }\n` });
  try {
    assert.equal((await env.subs(["mcp", "login", "oauth"])).code, 0);
    const token = credential(env, "oauth")!.access_token;
    const ok = await env.subs(["mcp", "call", "gh", "echo"], { env: { GH_TOKEN: token } });
    assert.equal(ok.code, 0, ok.stderr);
    assert.equal(env.mcp.authorizations.at(-1), `Bearer ${token}`);
    const bad = await env.subs(["mcp", "tools", "gh"], { env: { GH_TOKEN: "not-a-token" } });
    assert.equal(bad.code, 1);
    assert.match(bad.stderr, /rejected the token in \$GH_TOKEN/);
    assert.doesNotMatch(bad.stderr, /not-a-token/);
    const unset = await env.subs(["mcp", "tools", "gh"]);
    assert.equal(unset.code, 4);
    assert.equal(env.as.counters.authorizations, 1);
  } finally {
    await env.close();
  }
});

test("mcp tools/call: not logged in is exit 4; bad --args is exit 2", async () => {
  const env = await environment();
  try {
    const tools = await env.subs(["mcp", "tools", "demo"]);
    assert.equal(tools.code, 4);
    assert.match(tools.stderr, /demo: not logged in/);
    const call = await env.subs(["mcp", "call", "demo", "echo", "--args", "[1]"]);
    assert.equal(call.code, 2);
    const json = await env.subs(["mcp", "tools", "demo", "--json"]);
    assert.equal(JSON.parse(json.stdout).error.code, "needs_login");
    assert.equal((await env.subs(["mcp", "tools", "nope"])).code, 2);
  } finally {
    await env.close();
  }
});

test("login: a browser that is never used leaves nothing behind on interrupt", async () => {
  const env = await environment();
  try {
    const controller = new AbortController();
    const visited: string[] = [];
    const t = testContext({
      cwd: env.dir,
      env: {},
      signal: controller.signal,
      openBrowser: async (url) => {
        visited.push(url);
        setTimeout(() => controller.abort(), 20);
      },
    });
    assert.equal(await run(["mcp", "login", "demo"], t.ctx), 130);
    assert.equal(credential(env, "demo"), undefined);
    // The browser is given a one-time link on the loopback listener itself.
    const redirect = new URL("/callback", visited[0]!);
    await assert.rejects(fetch(redirect), connectionRefused);
    // The consent arriving late finds nobody listening.
    await assert.rejects(followAuthorization(visited[0]!), connectionRefused);
  } finally {
    await env.close();
  }
});


test("login of several ids: a failure part-way is said at once and the others are still tried; --json tells what was done and what failed; exit is the worst code", async () => {
  const env = await environment({
    toml: (url) => `[mcp.demo]\nurl = "${url}"\n[mcp.down]\nurl = "http://127.0.0.1:9/mcp"\n[mcp.gh]\nurl = "${url}"\nauth = { token_env = "GH_TOKEN" }\n[mcp.demo2]\nurl = "${url}"\n`,
  });
  try {
    const result = await env.subs(["mcp", "login", "demo", "down", "gh", "demo2", "--json"]);
    assert.equal(result.code, 1, result.stderr);
    const { error } = JSON.parse(result.stdout);
    assert.equal(error.code, "unreachable");
    assert.deepEqual(
      error.done.map((d: { id: string; result: string }) => [d.id, d.result]),
      [["demo", "authorized"], ["gh", "static"], ["demo2", "authorized"]],
    );
    assert.deepEqual(error.failed.map((f: { id: string; code: string }) => [f.id, f.code]), [["down", "unreachable"]]);
    assert.deepEqual(error.not_attempted, []);
    assert.match(error.message, /1 of 4 logins failed \(down\); the others are done/);
    // The person reads the failure when it happens, with its hint, and the summary at the end.
    assert.match(result.stderr, /✖ down: [^\n]+\n\s+hint: /);
    assert.ok(result.stderr.indexOf("✖ down") < result.stderr.lastIndexOf("1 of 4 logins failed"), result.stderr);
    assert.ok(credential(env, "demo") && credential(env, "demo2"), "the logins before and after the failure are done");
    // One id: the error object as before (its hint fits the failure), no progress fields added.
    const one = JSON.parse((await env.subs(["mcp", "login", "down", "--json"])).stdout).error;
    assert.deepEqual(Object.keys(one).sort(), ["code", "hint", "message"]);
    assert.equal(one.code, "unreachable");
    assert.deepEqual(leakedTokens(env), []);
  } finally {
    await env.close();
  }
});
