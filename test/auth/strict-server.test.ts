// Logins against authorization servers as strict as real ones: redirect_uri compared
// exactly (port included), every client and token forgotten on restart, `invalid_client` for an
// unknown client at every endpoint. Without flags, a second, a tenth and a post-restart login succeed.
import assert from "node:assert/strict";
import { createHash } from "node:crypto";
import { createServer, type Server } from "node:net";
import { test } from "node:test";
import { run } from "../../src/run.ts";
import { authorizationUrlOf } from "../support/browser.ts";
import { testContext } from "../support/cli.ts";
import { startAuthServer } from "../support/oauth-server.ts";
import { unusedPort } from "../support/ports.ts";
import { credential, environment, type Env } from "./harness.ts";
import { within } from "../support/wait.ts";

// Short enough that a regression (a wait for an error page nobody answers) fails fast.
const LOGIN = ["mcp", "login", "demo", "--timeout", "5"];

type ClientRow = { issuer: string; client_json: string };
const storedClients = (env: Env) => (env.db().prepare("SELECT * FROM subs_clients").all() as ClientRow[]).map((row) => JSON.parse(row.client_json) as { client_id: string; redirect_uris: string[] });

const portOf = (uri: string) => Number(new URL(uri).port);

async function occupy(port: number): Promise<Server> {
  const blocker = createServer();
  await new Promise<void>((resolve, reject) => {
    blocker.once("error", reject);
    blocker.listen(port, "127.0.0.1", resolve);
  });
  return blocker;
}


test("strict: ten logins against a server that compares redirect_uri exactly reuse one registration, on the port it registered", async () => {
  const env = await environment({ as: { exactRedirectUris: true } });
  try {
    for (let n = 1; n <= 10; n++) {
      const login = await env.subs(LOGIN);
      assert.equal(login.code, 0, `login ${n}: ${login.stderr}`);
    }
    assert.equal(env.as.counters.registrations, 1, "registered once over ten logins");
    assert.equal(env.as.counters.codeExchanges, 10);
    const [registered] = storedClients(env);
    assert.ok(registered);
    assert.equal(env.as.authorizations.length, 10);
    for (const a of env.as.authorizations) {
      assert.equal(a.client_id, registered.client_id);
      assert.equal(a.redirect_uri, registered.redirect_uris[0], "the exact registered redirect, port included");
    }
    assert.deepEqual(
      env.as.rejections.filter((r) => r.endpoint === "authorize" || r.error === "invalid_client"),
      [],
      "the browser was never shown an error page, and no request was refused for its client",
    );
    // The check that a reused registration is still known asks the revocation endpoint, never the
    // token endpoint with a made-up code (which a server, or the conformance suite, takes for a
    // PKCE failure).
    assert.deepEqual(env.as.rejections.filter((r) => r.endpoint === "token"), []);
  } finally {
    await env.close();
  }
});

test("strict: when the registered port is busy, the login registers anew on another port; later logins reuse that one", async () => {
  const env = await environment({ as: { exactRedirectUris: true } });
  let blocker: Server | undefined;
  try {
    assert.equal((await env.subs(LOGIN)).code, 0);
    const first = storedClients(env)[0]!;
    blocker = await occupy(portOf(first.redirect_uris[0]!));
    const busy = await env.subs(LOGIN);
    assert.equal(busy.code, 0, busy.stderr);
    assert.equal(env.as.counters.registrations, 2);
    const second = storedClients(env)[0]!;
    assert.notEqual(second.client_id, first.client_id);
    assert.notEqual(portOf(second.redirect_uris[0]!), portOf(first.redirect_uris[0]!));
    assert.equal(env.as.authorizations.at(-1)?.redirect_uri, second.redirect_uris[0]);
    await new Promise<void>((resolve) => blocker!.close(() => resolve()));
    blocker = undefined;
    assert.equal((await env.subs(LOGIN)).code, 0);
    assert.equal(env.as.counters.registrations, 2, "the new registration is the one reused");
    assert.equal(env.as.authorizations.at(-1)?.redirect_uri, second.redirect_uris[0]);
  } finally {
    if (blocker) blocker.close();
    await env.close();
  }
});

test("strict: a registration the server forgot (restart) is found before the browser opens (RFC 7009 revocation of a token never issued: invalid_client); the same login registers anew", async () => {
  const env = await environment({ as: { exactRedirectUris: true } });
  try {
    assert.equal((await env.subs(LOGIN)).code, 0);
    const forgotten = storedClients(env)[0]!.client_id;
    env.as.restart();
    const login = await env.subs(LOGIN);
    assert.equal(login.code, 0, login.stderr);
    assert.equal(env.as.counters.registrations, 2, "one new registration in that login");
    assert.equal(env.as.authorizations.length, 2, "the forgotten client was never sent to the authorization endpoint");
    assert.notEqual(env.as.authorizations[1]!.client_id, forgotten);
    assert.deepEqual(
      env.as.rejections.filter((r) => r.endpoint === "authorize"),
      [],
      "no error page in the browser",
    );
    assert.ok(credential(env, "demo"));
    assert.equal((await env.subs(["mcp", "tools", "demo"])).code, 0, "the new credential works");
    assert.equal((await env.subs(LOGIN)).code, 0);
    assert.equal(env.as.counters.registrations, 2, "and its registration is reused");
  } finally {
    await env.close();
  }
});

test("strict: a server without revocation that checks the grant before the client: a reused registration's login times out, drops it, and the next login registers anew", async () => {
  const env = await environment({ as: { exactRedirectUris: true, checkFirst: "grant", revocation: false } });
  try {
    assert.equal((await env.subs(LOGIN)).code, 0);
    env.as.restart();
    const waited = await env.subs(["mcp", "login", "demo", "--timeout", "1"]);
    assert.equal(waited.code, 1);
    assert.match(waited.stderr, /timed out/);
    assert.match(waited.stderr, /registers anew/);
    assert.deepEqual(
      env.as.rejections.filter((r) => r.endpoint === "authorize").map((r) => r.error),
      ["invalid_client"],
      "the browser was shown the server's error page (a direct 400, no redirect)",
    );
    assert.deepEqual(storedClients(env), [], "the registration is dropped");
    const again = await env.subs(LOGIN);
    assert.equal(again.code, 0, again.stderr);
    assert.equal(env.as.counters.registrations, 2);
  } finally {
    await env.close();
  }
});

test("strict: a login that times out drops the registration only when it reused one", async () => {
  const env = await environment({ as: { exactRedirectUris: true } });
  try {
    const ignore = { openBrowser: async () => {} };
    assert.equal((await env.subs(["mcp", "login", "demo", "--timeout", "0.3"], ignore)).code, 1);
    assert.equal(storedClients(env).length, 1, "a registration made in this login is not suspect");
    assert.equal((await env.subs(LOGIN)).code, 0);
    assert.equal(env.as.counters.registrations, 1);
    // Nobody answers a login that reused it: dropped (the person may have seen an error page).
    assert.equal((await env.subs(["mcp", "login", "demo", "--timeout", "0.3"], ignore)).code, 1);
    assert.deepEqual(storedClients(env), []);
  } finally {
    await env.close();
  }
});

test("strict: Ctrl-C while waiting with a reused registration drops it (the person gave up on an error page)", async () => {
  const env = await environment({ as: { exactRedirectUris: true, checkFirst: "grant", revocation: false } });
  try {
    assert.equal((await env.subs(LOGIN)).code, 0);
    env.as.restart();
    const controller = new AbortController();
    const t = testContext({
      cwd: env.dir,
      signal: controller.signal,
      openBrowser: async (link) => {
        // The browser shows the server's error page; the person presses Ctrl-C.
        const page = await fetch(await authorizationUrlOf(link), { redirect: "manual" });
        await page.body?.cancel();
        assert.equal(page.status, 400);
        setTimeout(() => controller.abort(), 20);
      },
    });
    assert.equal(await run(LOGIN, t.ctx), 130, t.stderr());
    assert.deepEqual(storedClients(env), []);
    assert.equal((await env.subs(LOGIN)).code, 0);
    assert.equal(env.as.counters.registrations, 2);
  } finally {
    await env.close();
  }
});

test("strict: a server that forgets the client between consent and the token request: the registration is dropped, and the next login registers anew", async () => {
  const env = await environment({ as: { exactRedirectUris: true } });
  try {
    assert.equal((await env.subs(LOGIN)).code, 0);
    const restartingBrowser = async (link: string) => {
      const consent = await fetch(await authorizationUrlOf(link), { redirect: "manual" });
      await consent.body?.cancel();
      env.as.restart();
      const callback = await fetch(consent.headers.get("location")!, { redirect: "manual" });
      await callback.body?.cancel();
    };
    const login = await env.subs(LOGIN, { openBrowser: restartingBrowser });
    assert.equal(login.code, 1);
    assert.match(login.stderr, /no longer accepts subs' registration \(invalid_client/);
    assert.match(login.stderr, /run `subs mcp login demo` again/);
    assert.deepEqual(storedClients(env), []);
    assert.equal((await env.subs(LOGIN)).code, 0);
    assert.equal(env.as.counters.registrations, 2);
  } finally {
    await env.close();
  }
});

test("strict: a refresh rejected with invalid_client drops the registration too; one rejected with invalid_grant keeps it", async () => {
  const env = await environment({ as: { exactRedirectUris: true } });
  const expire = () => env.db().prepare("UPDATE subs_credentials SET expires_at = ?").run(Date.now() - 1000);
  try {
    assert.equal((await env.subs(LOGIN)).code, 0);
    env.as.revokeAllRefreshTokens();
    expire();
    const grant = await env.subs(["mcp", "tools", "demo"]);
    assert.equal(grant.code, 4);
    assert.match(grant.stderr, /rejected the refresh token \(invalid_grant/);
    assert.equal(storedClients(env).length, 1, "the client is fine; only the grant is dead");

    assert.equal((await env.subs(LOGIN)).code, 0);
    assert.equal(env.as.counters.registrations, 1);
    env.as.restart();
    expire();
    const client = await env.subs(["mcp", "tools", "demo"]);
    assert.equal(client.code, 4);
    assert.match(client.stderr, /no longer accepts subs' registration \(invalid_client/);
    assert.match(client.stderr, /run `subs mcp login demo`/);
    assert.equal(credential(env, "demo"), undefined);
    assert.deepEqual(storedClients(env), []);
    const again = await env.subs(LOGIN);
    assert.equal(again.code, 0, again.stderr);
    assert.equal(env.as.counters.registrations, 2);
  } finally {
    await env.close();
  }
});

test("strict: --port reuses the registration for that port, and a later login without --port listens on it again", async () => {
  const env = await environment({ as: { exactRedirectUris: true } });
  try {
    const port = await unusedPort();
    assert.equal((await env.subs([...LOGIN, "--port", String(port)])).code, 0);
    assert.equal((await env.subs([...LOGIN, "--port", String(port)])).code, 0);
    assert.equal((await env.subs(LOGIN)).code, 0);
    assert.equal(env.as.counters.registrations, 1);
    assert.ok(env.as.authorizations.every((a) => a.redirect_uri === `http://127.0.0.1:${port}/callback`));
  } finally {
    await env.close();
  }
});

test("strict: a pre-registered client with a fixed redirect keeps working under --port, and nothing is registered", async () => {
  const port = await unusedPort();
  const env = await environment({
    as: { exactRedirectUris: true, preRegistered: [{ client_id: "subs-fixed", redirect_uris: [`http://127.0.0.1:${port}/callback`] }] },
    toml: (url) => `[mcp.demo]\nurl = "${url}"\noauth = { client_id = "subs-fixed" }\n`,
  });
  try {
    for (let n = 0; n < 2; n++) {
      const login = await env.subs([...LOGIN, "--port", String(port)]);
      assert.equal(login.code, 0, login.stderr);
    }
    env.as.restart();
    assert.equal((await env.subs([...LOGIN, "--port", String(port)])).code, 0, "a configured client survives a restart");
    assert.equal(env.as.counters.registrations, 0);
    assert.deepEqual(storedClients(env), []);
  } finally {
    await env.close();
  }
});

test("strict: a denial redirected without state is the person's refusal (access_denied), at once; the registration is kept", async () => {
  const env = await environment({ as: { exactRedirectUris: true, stateOnErrors: false } });
  try {
    assert.equal((await env.subs(LOGIN)).code, 0);
    env.as.set({ consent: "deny" });
    // Not a wait for the timeout: that would end in another error, and far later than the test waits.
    const denied = await within(env.subs(["mcp", "login", "demo", "--timeout", "600", "--json"]), "the denial to end the login at once");
    assert.equal(denied.code, 1);
    assert.match(denied.stderr, /authorization was not granted \(access_denied/);
    assert.equal(JSON.parse(denied.stdout).error.code, "access_denied");
    assert.equal(storedClients(env).length, 1);
    env.as.set({ consent: "allow" });
    assert.equal((await env.subs(LOGIN)).code, 0);
    assert.equal(env.as.counters.registrations, 1);
  } finally {
    await env.close();
  }
});

test("strict: after a restart, apply's revocation of a deleted section's credential gets invalid_client; it is deleted anyway, and the next login registers anew", async () => {
  const env = await environment({ as: { exactRedirectUris: true }, toml: (url) => `[mcp.demo]\nurl = "${url}"\n\n[mcp.gone]\nurl = "${url}"\n` });
  try {
    assert.equal((await env.subs(["mcp", "login", "demo", "gone", "--timeout", "5"])).code, 0);
    assert.equal(env.as.counters.registrations, 1, "two ids, one issuer, one registration");
    env.as.restart();
    env.write(`[mcp.demo]\nurl = "${env.mcp.url}"\n`);
    const apply = await env.subs(["apply"]);
    assert.equal(apply.code, 0, apply.stderr);
    assert.equal(credential(env, "gone"), undefined);
    assert.doesNotMatch(apply.stderr, /Revoked the credential of gone/);
    assert.ok(env.as.rejections.some((r) => r.endpoint === "revoke" && r.error === "invalid_client"));
    const login = await env.subs(LOGIN);
    assert.equal(login.code, 0, login.stderr);
    assert.equal(env.as.counters.registrations, 2);
  } finally {
    await env.close();
  }
});

// The test server itself: what the tests above rely on, shown at the wire.
test("strict test server: exact redirect_uri at the authorization and token endpoints, invalid_client everywhere after a restart, error redirects without state", async () => {
  const as = await startAuthServer({ exactRedirectUris: true, stateOnErrors: false, consent: "deny" });
  try {
    const registered = "http://127.0.0.1:4711/callback";
    const verifier = "v".repeat(43);
    const challenge = createHash("sha256").update(verifier).digest("base64url");
    const reg = await fetch(`${as.url}/register`, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify({ redirect_uris: [registered], token_endpoint_auth_method: "none" }) });
    const { client_id } = (await reg.json()) as { client_id: string };
    const authorize = (redirect: string) =>
      fetch(`${as.url}/authorize?${new URLSearchParams({ response_type: "code", client_id, redirect_uri: redirect, code_challenge: challenge, code_challenge_method: "S256", state: "s" })}`, { redirect: "manual" });
    const otherPort = await authorize("http://127.0.0.1:4712/callback");
    assert.equal(otherPort.status, 400, "another loopback port is not accepted, and not redirected to");
    assert.deepEqual(await otherPort.json(), { error: "invalid_request", error_description: "Unregistered redirect_uri" });
    const denied = await authorize(registered);
    assert.equal(denied.status, 302);
    const location = new URL(denied.headers.get("location")!);
    assert.equal(location.searchParams.get("error"), "access_denied");
    assert.equal(location.searchParams.has("state"), false);

    // A code issued for another port (the SDK's any-port rule), redeemed once the server is strict.
    as.set({ exactRedirectUris: false, consent: "allow" });
    const issued = new URL((await authorize("http://127.0.0.1:4713/callback")).headers.get("location")!);
    as.set({ exactRedirectUris: true });
    const token = (body: Record<string, string>) => fetch(`${as.url}/token`, { method: "POST", body: new URLSearchParams(body) });
    const redeemed = await token({ grant_type: "authorization_code", client_id, code: issued.searchParams.get("code")!, code_verifier: verifier, redirect_uri: "http://127.0.0.1:4713/callback" });
    assert.equal(redeemed.status, 400);
    assert.deepEqual(await redeemed.json(), { error: "invalid_grant", error_description: "Unregistered redirect_uri" });

    as.restart();
    assert.equal((await authorize(registered)).status, 400);
    assert.equal((await token({ grant_type: "refresh_token", client_id, refresh_token: "rt" })).status, 400);
    const revoke = await fetch(`${as.url}/revoke`, { method: "POST", body: new URLSearchParams({ client_id, token: "t" }) });
    assert.equal(revoke.status, 400);
    assert.deepEqual(
      as.rejections.slice(-3).map((r) => [r.endpoint, r.error, r.client_id]),
      [
        ["authorize", "invalid_client", client_id],
        ["token", "invalid_client", client_id],
        ["revoke", "invalid_client", client_id],
      ],
    );
  } finally {
    await as.close();
  }
});
