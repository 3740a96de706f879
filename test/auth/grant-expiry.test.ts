// Credentials that warn before they die, on the local engine: the refresh token's expiry where the
// authorization server states it (refresh_token_expires_in, refresh_expires_in), kept across a
// refresh as the server family means it, `subs mcp list` warning within its window with the login
// to run, and a refresh rejected for good leaving the reason (made visible, no secret) until a new
// login. In-process throughout (test/support/cli.ts); the built CLI runs `mcp list` in
// test/deployment/grant-expiry.e2e.test.ts.
import assert from "node:assert/strict";
import { test } from "node:test";
import { grantLifetimeOf, refreshExpiryAfter } from "../../src/auth/grant-expiry.ts";
import { credential, environment, leakedTokens } from "./harness.ts";

const DAY = 86_400;

test("the lifetime a token answer states: either name, seconds as a number or digits; 0, negative, absurd or not a number is unknown", () => {
  assert.equal(grantLifetimeOf({ refresh_token_expires_in: 15_811_200 }), 15_811_200, "GitHub");
  assert.equal(grantLifetimeOf({ refresh_token_expires_in: "15811200" }), 15_811_200, "GitHub's older string form");
  assert.equal(grantLifetimeOf({ refresh_expires_in: 1800 }), 1800, "Keycloak");
  for (const value of [0, -5, 1e308, "soon", "", null, true, [], {}, Number.NaN]) {
    assert.equal(grantLifetimeOf({ refresh_token_expires_in: value }), null, JSON.stringify(value));
  }
  assert.equal(grantLifetimeOf({ refresh_expires_in: 0, refresh_token_expires_in: 60 }), 60);
  assert.equal(grantLifetimeOf({ access_token: "x" }), null, "absent");
  assert.equal(grantLifetimeOf("not an object"), null);
});

test("across a refresh: a stated lifetime holds from now; a new refresh token without one is unknown; a kept one keeps its expiry", () => {
  const now = 1_000_000;
  assert.equal(refreshExpiryAfter({ lifetimeSeconds: 60, rotated: true, previous: 5, now }), now + 60_000);
  assert.equal(refreshExpiryAfter({ lifetimeSeconds: 60, rotated: false, previous: 5, now }), now + 60_000, "Keycloak renews its idle timeout without rotating");
  assert.equal(refreshExpiryAfter({ lifetimeSeconds: null, rotated: true, previous: 5, now }), null);
  assert.equal(refreshExpiryAfter({ lifetimeSeconds: null, rotated: false, previous: 5, now }), 5);
  assert.equal(refreshExpiryAfter({ lifetimeSeconds: undefined, rotated: false, previous: null, now }), null);
});

test("local: the stated expiry is stored and listed; mcp list warns within the window with the login to run, and not outside it; a refresh keeps it as the server family means", async () => {
  let lifetime: number | undefined = 3 * DAY;
  const env = await environment({
    as: { tokenResponse: (t) => (lifetime === undefined ? t : { ...t, refresh_token_expires_in: lifetime }) },
  });
  try {
    assert.equal((await env.subs(["mcp", "login", "demo"])).code, 0);
    const stored = env.db().prepare("SELECT refresh_expires_at FROM subs_credentials WHERE id = 'demo'").get() as { refresh_expires_at: number };
    assert.ok(Math.abs(stored.refresh_expires_at - (Date.now() + 3 * DAY * 1000)) < 60_000, String(stored.refresh_expires_at));

    const listed = await env.subs(["mcp", "list"]);
    assert.equal(listed.code, 0, "a warning does not change the listing's exit code");
    assert.match(listed.stdout, /refresh token expires in [23]d/);
    assert.match(listed.stderr, /warning: demo: its refresh token expires in [23]d \(\d{4}-\d\d-\d\dT[^)]+\); run `subs mcp login demo` before then/);

    const json = await env.subs(["mcp", "list", "--json"]);
    const [entry] = JSON.parse(json.stdout) as Array<{ refresh_expires_at: string | null; lost: unknown }>;
    assert.equal(Date.parse(entry!.refresh_expires_at!), stored.refresh_expires_at);
    assert.equal(entry!.lost, null);
    assert.match(json.stderr, /its refresh token expires in/, "warnings are stderr's, with --json too");

    for (const [argv, extraEnv] of [
      [["mcp", "list", "--warn-within", "2d"], {}],
      [["mcp", "list"], { SUBS_WARN_WITHIN: "1d" }],
      [["mcp", "list", "--warn-within", "0"], { SUBS_WARN_WITHIN: "30d" }],
    ] as const) {
      const quiet = await env.subs([...argv], { env: extraEnv });
      assert.equal(quiet.code, 0, quiet.stderr);
      assert.doesNotMatch(quiet.stderr, /refresh token/, `${argv.join(" ")} ${JSON.stringify(extraEnv)}`);
    }
    const bad = await env.subs(["mcp", "list", "--warn-within", "soon"]);
    assert.equal(bad.code, 2);
    assert.match(bad.stderr, /--warn-within must be a duration/);

    // A rotation that states a new lifetime: the new one holds from now.
    lifetime = 30 * DAY;
    env.db().prepare("UPDATE subs_credentials SET expires_at = ?").run(Date.now() - 1000);
    assert.equal((await env.subs(["mcp", "tools", "demo"])).code, 0);
    const renewed = credential(env, "demo") as unknown as { refresh_expires_at: number };
    assert.ok(Math.abs(renewed.refresh_expires_at - (Date.now() + 30 * DAY * 1000)) < 60_000);
    assert.doesNotMatch((await env.subs(["mcp", "list"])).stderr, /refresh token/, "30 days away: no warning");

    // A rotation that states none: the new refresh token's lifetime is unknown.
    lifetime = undefined;
    env.db().prepare("UPDATE subs_credentials SET expires_at = ?").run(Date.now() - 1000);
    assert.equal((await env.subs(["mcp", "tools", "demo"])).code, 0);
    assert.equal((credential(env, "demo") as unknown as { refresh_expires_at: number | null }).refresh_expires_at, null);

    // A server that does not rotate keeps the refresh token, and with it its expiry.
    env.as.set({ rotateRefreshTokens: false });
    env.db().prepare("UPDATE subs_credentials SET expires_at = ?, refresh_expires_at = ?").run(Date.now() - 1000, Date.now() + DAY * 1000);
    assert.equal((await env.subs(["mcp", "tools", "demo"])).code, 0);
    assert.equal(env.as.counters.refreshes, 3);
    const kept = credential(env, "demo") as unknown as { refresh_expires_at: number };
    assert.ok(Math.abs(kept.refresh_expires_at - (Date.now() + DAY * 1000)) < 60_000);
    assert.deepEqual(leakedTokens(env), []);
  } finally {
    await env.close();
  }
});

test("local: a refresh rejected for good leaves the reason, made visible and without the echoed token, until a new login", async () => {
  // A hostile server: an escape sequence that would recolour the terminal, and the refresh token it was sent.
  let reject = true;
  const env = await environment({ as: { refreshRejection: (token) => (reject ? `grant revoked \u001b[31mRED\u001b[0m for ${token}` : undefined) } });
  try {
    assert.equal((await env.subs(["mcp", "login", "demo"])).code, 0);
    const refreshToken = credential(env, "demo")!.refresh_token!;
    env.db().prepare("UPDATE subs_credentials SET expires_at = ?").run(Date.now() - 1000);
    const tools = await env.subs(["mcp", "tools", "demo"]);
    assert.equal(tools.code, 4, tools.stderr);
    assert.equal(credential(env, "demo"), undefined, "the dead credential is deleted");

    const lost = env.db().prepare("SELECT * FROM subs_lost_credentials").all() as Array<{ id: string; reason: string; message: string }>;
    assert.deepEqual(lost.map((l) => [l.id, l.reason]), [["demo", "refresh_rejected"]]);
    assert.ok(!lost[0]!.message.includes(refreshToken), "the echoed refresh token is not kept");
    assert.ok(!lost[0]!.message.includes("\u001b"), "the escape sequence is made visible");
    assert.match(lost[0]!.message, /invalid_grant: grant revoked \\x1b\[31mRED/);

    const listed = await env.subs(["mcp", "list"]);
    assert.equal(listed.code, 0);
    assert.match(listed.stdout, /needs login: refresh rejected \(invalid_grant: grant revoked \\x1b\[31mRED.*\) · subs mcp login demo/);
    assert.ok(!listed.stdout.includes("\u001b[31m"), listed.stdout);
    const [entry] = JSON.parse((await env.subs(["mcp", "list", "--json"])).stdout) as Array<{ status: string; usable: boolean; lost: { reason: string; message: string; lost_at: string } | null }>;
    assert.equal(entry!.status, "needs_login");
    assert.equal(entry!.usable, false);
    assert.equal(entry!.lost?.reason, "refresh_rejected");
    assert.ok(!JSON.stringify(entry).includes(refreshToken));
    assert.ok(Date.parse(entry!.lost!.lost_at) <= Date.now());

    reject = false;
    assert.equal((await env.subs(["mcp", "login", "demo"])).code, 0);
    assert.deepEqual(env.db().prepare("SELECT * FROM subs_lost_credentials").all(), [], "a new login clears it");
    const [after] = JSON.parse((await env.subs(["mcp", "list", "--json"])).stdout) as Array<{ status: string; lost: unknown }>;
    assert.deepEqual([after!.status, after!.lost], ["authorized", null]);
    assert.deepEqual(leakedTokens(env), []);
  } finally {
    await env.close();
  }
});
