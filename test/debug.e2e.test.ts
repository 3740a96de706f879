// `--debug` shows every HTTP exchange subs makes — discovery, registration, the token
// request, refresh, revocation and the MCP transport — through ctx.fetch, with no token in it.
import assert from "node:assert/strict";
import { test } from "node:test";
import { browserCommand } from "./support/browser.ts";
import { runCli, type RunResult } from "./support/cli.ts";
import { credential, environment, leakedTokens } from "./auth/harness.ts";

const exchanges = (stderr: string) => [...stderr.matchAll(/^\[debug\] #\d+ → (\w+) (\S+)/gm)].map((m) => `${m[1]} ${new URL(m[2]!).pathname}`);

test("subs --debug mcp login / tools / a revocation: every exchange on stderr, no token", async () => {
  const env = await environment({ protect: { requiredScopes: ["files:read"] } });
  try {
    const cli = async (argv: string[], extra: Record<string, string> = {}): Promise<RunResult> => {
      const r = await runCli(argv, { cwd: env.dir, env: { BROWSER: browserCommand(), ...extra } });
      env.outputs.push(r.stdout, r.stderr);
      assert.equal(r.code, 0, r.stderr);
      return r;
    };
    const login = await cli(["--debug", "mcp", "login", "demo"]);
    const seen = exchanges(login.stderr);
    for (const expected of [
      "POST /mcp", // the unauthenticated probe (its 401 names the metadata)
      "GET /.well-known/oauth-protected-resource/mcp",
      "GET /.well-known/oauth-authorization-server",
      "POST /register",
      "POST /token",
    ]) {
      assert.ok(seen.includes(expected), `login shows ${expected}; saw ${seen.join(", ")}`);
    }
    assert.ok(seen.filter((e) => e === "POST /mcp").length >= 2, "the tool count after login goes through the MCP transport");
    assert.match(login.stderr, /\[debug\] #\d+ ← 401 /);
    assert.match(login.stderr, /code_verifier=\[redacted\]/);
    assert.match(login.stderr, /"access_token":"\[redacted\]"/);

    // Refresh: the stored token has expired, so `mcp tools` refreshes before connecting.
    env.db().prepare("UPDATE subs_credentials SET expires_at = ?").run(Date.now() - 1000);
    const tools = await cli(["mcp", "tools", "demo"], { SUBS_DEBUG: "1" });
    assert.match(tools.stderr, /→ POST http:\/\/127\.0\.0\.1:\d+\/token\n[\s\S]*grant_type=refresh_token&refresh_token=\[redacted\]/);
    assert.match(tools.stderr, /authorization: \[redacted\]/);
    assert.ok(exchanges(tools.stderr).includes("POST /mcp"));

    // Revocation: the section is gone, so `subs apply` deletes its credential and revokes it
    // (a login of another id leaves it alone).
    assert.ok(credential(env, "demo"));
    env.write(`[mcp.other]\nurl = "${env.mcp.url}"\n`);
    const other = await cli(["--debug", "mcp", "login", "other"]);
    assert.equal(other.code, 0, other.stderr);
    // (Its POST /revoke with a dummy token only asks whether the stored registration is still known.)
    assert.equal(env.as.counters.revocations, 0);
    assert.ok(credential(env, "demo"));
    const apply = await cli(["--debug", "apply"]);
    assert.ok(exchanges(apply.stderr).includes("POST /revoke"), exchanges(apply.stderr).join(", "));
    assert.match(apply.stderr, /token=\[redacted\]/);
    assert.ok(env.as.counters.revocations >= 1, "the revocation reached the authorization server");

    assert.deepEqual(leakedTokens(env), []);
  } finally {
    await env.close();
  }
});
