// A token answer with an absurd expires_in or an empty token is a one-line
// failure (exit 1, no stack trace) and nothing of it is stored, at login and at refresh.
import assert from "node:assert/strict";
import { test } from "node:test";
import type { OAuthTokens } from "@modelcontextprotocol/sdk/shared/auth.js";
import { credential, environment, leakedTokens } from "./harness.ts";

const absurd: Array<[name: string, rewrite: (t: OAuthTokens) => Record<string, unknown>, message: RegExp]> = [
  ["a negative expires_in", (t) => ({ ...t, expires_in: -3600 }), /an expires_in that is not a number of seconds between 0 and 315360000/],
  ["a zero expires_in", (t) => ({ ...t, expires_in: 0 }), /an expires_in that is not/],
  ["an expires_in of 1e308", (t) => ({ ...t, expires_in: 1e308 }), /an expires_in that is not/],
  ["an expires_in of eleven years and a half second", (t) => ({ ...t, expires_in: 11 * 365 * 86400 + 0.5 }), /an expires_in that is not/],
  ["an expires_in that is not a number", (t) => ({ ...t, expires_in: "soon" }), /./],
  ["an empty access_token", (t) => ({ ...t, access_token: "" }), /an empty or missing access_token/],
  ["an empty refresh_token", (t) => ({ ...t, refresh_token: "" }), /an empty refresh_token/],
  ["an empty access_token and a negative expires_in", (t) => ({ ...t, access_token: "", expires_in: -1 }), /an empty or missing access_token and an expires_in that is not/],
];

function oneLineFailure(result: { code: number; stderr: string; stdout: string }, message: RegExp) {
  assert.equal(result.code, 1, result.stderr);
  assert.match(result.stderr, message);
  assert.doesNotMatch(result.stderr, /^\s+at /m, "no stack trace");
  assert.doesNotMatch(result.stderr, /unexpected/);
  const errorLines = result.stderr.split("\n").filter((l) => l.startsWith("error:"));
  assert.equal(errorLines.length, 1, result.stderr);
}

test("login: an absurd token answer is refused in one line and nothing is stored", async () => {
  for (const [name, rewrite, message] of absurd) {
    const env = await environment({ as: { tokenResponse: (t, grant) => (grant === "authorization_code" ? rewrite(t) : t) } });
    try {
      const login = await env.subs(["mcp", "login", "demo"]);
      oneLineFailure(login, message);
      assert.equal(env.as.counters.codeExchanges, 1, name);
      assert.equal(credential(env, "demo"), undefined, `${name}: nothing stored`);
      assert.deepEqual(leakedTokens(env), [], name);
    } finally {
      await env.close();
    }
  }
});

test("refresh: an absurd token answer is refused in one line and the stored credential is left as it was", async () => {
  for (const [name, rewrite, message] of absurd.slice(0, 3).concat(absurd.slice(5, 7))) {
    const env = await environment({ as: { tokenResponse: (t, grant) => (grant === "refresh_token" ? rewrite(t) : t) } });
    try {
      assert.equal((await env.subs(["mcp", "login", "demo"])).code, 0);
      env.db().prepare("UPDATE subs_credentials SET expires_at = ?").run(Date.now() - 1000);
      const before = credential(env, "demo")!;
      const tools = await env.subs(["mcp", "tools", "demo"]);
      oneLineFailure(tools, message);
      assert.equal(env.as.counters.refreshes, 1, name);
      assert.deepEqual(credential(env, "demo"), before, `${name}: nothing stored`);
      assert.deepEqual(leakedTokens(env), [], name);
    } finally {
      await env.close();
    }
  }
});

test("a sane answer still works: a fractional expires_in under ten years, no refresh_token", async () => {
  const env = await environment({ as: { tokenResponse: (t) => ({ access_token: t.access_token, token_type: "bearer", expires_in: 3599.5 }) } });
  try {
    const login = await env.subs(["mcp", "login", "demo"]);
    assert.equal(login.code, 0, login.stderr);
    const row = credential(env, "demo")!;
    assert.equal(row.refresh_token, null);
    assert.ok(row.expires_at! > Date.now() + 3_500_000 && row.expires_at! < Date.now() + 3_600_000);
  } finally {
    await env.close();
  }
});
