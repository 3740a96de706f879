// End to end: the real CLI as child processes, $BROWSER set to a script that consents, as the
// conformance adapter and a person at a terminal run it. The built CLI (bin/subs.cjs) runs the
// first login (the db files it makes, a real $BROWSER) and one run of each command after it (what a
// real process prints, Node's own warnings included), the processes racing to refresh, and the
// Ctrl-C; the --json runs of the first test, the login before the race and the exact-redirect_uri
// logins run the same `run()` in this process, with an opener that follows the URL as the $BROWSER
// script does: what they check is what is printed and what the servers saw, not the process (a
// child costs a Node start-up and the bundle's load per run, and its $BROWSER another).
import assert from "node:assert/strict";
import { existsSync, readFileSync, statSync } from "node:fs";
import path from "node:path";
import { test } from "node:test";
import { runAs, runCli, signalOnce, type How, type RunResult } from "../support/cli.ts";
import { browserCommand } from "../support/browser.ts";
import { connectionRefused } from "../support/ports.ts";
import { credential, environment, leakedTokens } from "./harness.ts";

test("cli: login with $BROWSER, then tools and call; the db is 0600 and no token is ever printed", async () => {
  const env = await environment({ protect: { requiredScopes: ["files:read"] } });
  try {
    const cli = async (argv: string[], how: How = "cli") => {
      const result = await runAs(how, argv, { cwd: env.dir, consents: true });
      env.outputs.push(result.stdout, result.stderr);
      return result;
    };
    const login = await cli(["mcp", "login", "demo"]);
    assert.equal(login.code, 0, login.stderr);
    assert.match(login.stdout, /demo: authorized/);
    for (const suffix of ["", "-wal", "-shm"]) {
      const file = path.join(env.dir, `substructure.db${suffix}`);
      if (suffix === "" || existsSync(file)) assert.equal(statSync(file).mode & 0o777, 0o600, `substructure.db${suffix}`);
    }
    // Each command once from the built CLI; the --json forms in this process (their output is what
    // run() writes, all of which reaches the checks).
    const outputs: RunResult[] = [
      await cli(["mcp", "login", "demo", "--json"], "in-process"),
      await cli(["mcp", "tools", "demo"]),
      await cli(["mcp", "tools", "demo", "--json"], "in-process"),
      await cli(["mcp", "call", "demo", "echo", "--args", '{"x":1}']),
      await cli(["mcp", "call", "demo", "echo", "--json"], "in-process"),
      await cli(["mcp", "list"]),
      await cli(["mcp", "list", "--json"], "in-process"),
    ];
    for (const r of outputs) assert.equal(r.code, 0, r.stderr);
    assert.equal(outputs[3]!.stdout, 'echo:{"x":1}\n');
    assert.ok(env.as.issuedTokens().length >= 4);
    assert.deepEqual(leakedTokens(env), []);
  } finally {
    await env.close();
  }
});

test("cli: several processes racing to refresh a rotating refresh token refresh it exactly once", async () => {
  const env = await environment({ as: { refreshDelayMs: 200 } });
  try {
    // The login before the race in this process: the racers are the subject.
    const login = await runAs("in-process", ["mcp", "login", "demo"], { cwd: env.dir, consents: true });
    assert.equal(login.code, 0, login.stderr);
    env.db().prepare("UPDATE subs_credentials SET expires_at = ?").run(Date.now() - 1000);
    const results = await Promise.all(Array.from({ length: 4 }, () => runCli(["mcp", "tools", "demo", "--json"], { cwd: env.dir })));
    for (const r of results) assert.equal(r.code, 0, r.stderr);
    assert.equal(env.as.counters.refreshes, 1);
    assert.equal(env.as.counters.rejectedRefreshes, 0);
    const row = credential(env, "demo")!;
    assert.ok(row.expires_at! > Date.now());
    assert.ok(env.mcp.authorizations.slice(-4).every((h) => h === `Bearer ${row.access_token}`), "every process used the one refreshed token");
  } finally {
    await env.close();
  }
});

test("cli: Ctrl-C while waiting for consent exits 130, closes the port and stores nothing", async () => {
  const env = await environment();
  const log = path.join(env.dir, "browser.log");
  try {
    const result = await runCli(["mcp", "login", "demo"], {
      cwd: env.dir,
      env: { BROWSER: browserCommand(), SUBS_TEST_BROWSER: "ignore", SUBS_TEST_BROWSER_LOG: log },
      onSpawn: signalOnce("Waiting for consent").onSpawn,
    });
    assert.equal(result.code, 130, result.stderr);
    assert.match(result.stderr, /Interrupted/);
    assert.equal(credential(env, "demo"), undefined);
    const url = /(http:\/\/\S+\/authorize\?\S+)/.exec(result.stderr)?.[1];
    assert.ok(url);
    const redirect = new URL(new URL(url).searchParams.get("redirect_uri")!);
    await assert.rejects(fetch(redirect), connectionRefused, "the loopback port is closed");
    // The browser's argv held a one-time loopback link, never `state`.
    if (existsSync(log)) {
      const opened = readFileSync(log, "utf8");
      assert.match(opened, /^http:\/\/127\.0\.0\.1:\d+\/open\/[\w-]+\n$/);
      assert.doesNotMatch(opened, /state/);
    }
  } finally {
    await env.close();
  }
});

test("cli: against a server that compares redirect_uri exactly, a second login and one after the server forgot every client succeed without --port", async () => {
  const env = await environment({ as: { exactRedirectUris: true } });
  try {
    // In this process: what is checked is what the authorization server saw, not the process.
    const login = () => runAs("in-process", ["mcp", "login", "demo", "--timeout", "10"], { cwd: env.dir, consents: true });
    const first = await login();
    assert.equal(first.code, 0, first.stderr);
    const second = await login();
    assert.equal(second.code, 0, second.stderr);
    assert.equal(env.as.counters.registrations, 1, "the second login reused the registration");
    assert.equal(env.as.authorizations[1]!.redirect_uri, env.as.authorizations[0]!.redirect_uri, "on the port it registered");
    env.as.restart();
    const third = await login();
    assert.equal(third.code, 0, third.stderr);
    assert.equal(env.as.counters.registrations, 2, "the forgotten registration was replaced, once");
    assert.deepEqual(
      env.as.rejections.filter((r) => r.endpoint === "authorize"),
      [],
      "the browser never got an error page",
    );
    const tools = await runAs("in-process", ["mcp", "tools", "demo", "--json"], { cwd: env.dir });
    assert.equal(tools.code, 0, tools.stderr);
  } finally {
    await env.close();
  }
});
