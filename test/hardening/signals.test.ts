// Faults: SIGINT, SIGTERM and SIGKILL during login, during refresh and during apply (local and
// remote). The real CLI runs as a child; the signal is sent at a known moment, found in its
// SUBS_DEBUG=1 log (each request is logged before it is sent). After it: the command failed
// clearly (SIGINT: exit 130, SIGTERM: 143, "Interrupted"), the db passes SQLite's integrity check and holds
// either the old or the new credential whole, and a rerun works.
// Every interrupted run is the built CLI (the process and its signal are the subject). What runs
// before it (the first login) and after it (the reruns, whose subject is what the interrupt left
// in the db and on the deployment) runs run() in this process, as a person's next command would
// find that state.
import assert from "node:assert/strict";
import { createServer, type Server } from "node:http";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import path from "node:path";
import { describe, test } from "node:test";
import Database from "better-sqlite3";
import { credential, environment, leakedTokens } from "../auth/harness.ts";
import { browserCommand } from "../support/browser.ts";
import { runAs, runCli, signalOnce, type ChildOptions, type RunResult } from "../support/cli.ts";
import { seedCredentials } from "../support/credentials.ts";
import { startDeployment } from "../support/deployment/server.ts";

type Signal = "SIGINT" | "SIGTERM" | "SIGKILL";
/** SIGINT (Ctrl-C) and SIGTERM (a CI job cancelled) stop a command cleanly; SIGKILL cannot be caught. */
const graceful = (signal: Signal) => signal !== "SIGKILL";
const NO_STACK = /\n\s+at .*:\d+:\d+\)?\n/;

/** Runs the CLI with SUBS_DEBUG=1 and sends `signal` once its stderr matches `at`. */
async function interrupted(argv: string[], options: ChildOptions & { at: RegExp; signal: Signal }): Promise<RunResult & { sent: boolean }> {
  const { onSpawn, state } = signalOnce(options.at, options.signal);
  const result = await runCli(argv, { ...options, env: { ...options.env, SUBS_DEBUG: "1" }, onSpawn });
  return { ...result, sent: state.sent };
}

/** A command before or after the interrupted one: run() in this process, HOME as the child's, consenting as $BROWSER's script does. */
const inProcess = (argv: string[], cwd: string, options: { env?: Record<string, string>; consents?: boolean } = {}) =>
  runAs("in-process", argv, { cwd, env: { HOME: cwd, ...options.env }, consents: options.consents ?? false });

function assertSignalled(result: RunResult & { sent: boolean }, signal: Signal) {
  assert.ok(result.sent, `the signal was sent at the marked moment:\n${result.stderr}`);
  if (graceful(signal)) {
    assert.equal(result.code, signal === "SIGINT" ? 130 : 143, result.stderr);
    assert.match(result.stderr, /Interrupted/);
    assert.doesNotMatch(result.stderr, NO_STACK);
  } else assert.equal(result.code, 128, "killed");
}

function integrity(dbPath: string) {
  const db = new Database(dbPath, { readonly: true });
  try {
    assert.equal(db.pragma("integrity_check", { simple: true }), "ok");
  } finally {
    db.close();
  }
}

for (const signal of ["SIGINT", "SIGTERM", "SIGKILL"] as const) {
  describe(`${signal}`, () => {
    test(`${signal} during login (waiting for consent): nothing stored, the port freed, a rerun logs in`, async () => {
      const env = await environment();
      try {
        // A browser the person has not consented in yet: `true` takes the URL and exits 0, as
        // browser.mjs with SUBS_TEST_BROWSER=ignore does, without a node process's start.
        const result = await interrupted(["mcp", "login", "demo"], {
          cwd: env.dir,
          env: { BROWSER: "true" },
          at: /Waiting for consent/,
          signal,
        });
        assertSignalled(result, signal);
        assert.equal(credential(env, "demo"), undefined);
        integrity(path.join(env.dir, "substructure.db"));
        const rerun = await inProcess(["mcp", "login", "demo"], env.dir, { consents: true });
        assert.equal(rerun.code, 0, rerun.stderr);
        assert.equal((await inProcess(["mcp", "tools", "demo"], env.dir)).code, 0);
        assert.deepEqual(leakedTokens(env), []);
      } finally {
        await env.close();
      }
    });

    test(`${signal} during login's token request: nothing stored, a rerun logs in`, async () => {
      const env = await environment({ as: { codeExchangeDelayMs: 400 } });
      try {
        const result = await interrupted(["mcp", "login", "demo"], { cwd: env.dir, env: { BROWSER: browserCommand() }, at: /→ POST \S+\/token/, signal });
        assertSignalled(result, signal);
        await new Promise((r) => setTimeout(r, 500)); // the server answers a request nobody waits for
        assert.equal(credential(env, "demo"), undefined);
        integrity(path.join(env.dir, "substructure.db"));
        env.as.set({ codeExchangeDelayMs: 0 });
        const rerun = await inProcess(["mcp", "login", "demo"], env.dir, { consents: true });
        assert.equal(rerun.code, 0, rerun.stderr);
        assert.ok(credential(env, "demo"));
        assert.deepEqual(leakedTokens(env), []);
      } finally {
        await env.close();
      }
    });

    test(`${signal} during a token refresh: the db holds the old or the new credential whole, never a lock; a rerun works or asks for login`, async () => {
      const env = await environment({ as: { refreshDelayMs: 400 } });
      try {
        assert.equal((await inProcess(["mcp", "login", "demo"], env.dir, { consents: true })).code, 0);
        env.db().prepare("UPDATE subs_credentials SET expires_at = ?").run(Date.now() - 1000);
        const before = credential(env, "demo")!;
        const result = await interrupted(["mcp", "tools", "demo"], { cwd: env.dir, at: /→ POST \S+\/token/, signal });
        assertSignalled(result, signal);
        await new Promise((r) => setTimeout(r, 500)); // the server finishes the rotation it started
        integrity(path.join(env.dir, "substructure.db"));
        const after = credential(env, "demo")!;
        assert.ok(after, "the credential is not lost to the interrupt");
        const whole = (after.access_token === before.access_token && after.refresh_token === before.refresh_token) || (after.access_token !== before.access_token && after.refresh_token !== before.refresh_token && after.expires_at! > Date.now());
        assert.ok(whole, "old or new, never half of each");
        // SIGINT and SIGTERM let the refresh in flight finish and be stored: the rotated token is kept.
        if (graceful(signal)) assert.notEqual(after.refresh_token, before.refresh_token, "the rotated refresh token was stored, not lost");
        const rerun = await inProcess(["mcp", "tools", "demo"], env.dir);
        if (graceful(signal)) assert.equal(rerun.code, 0, rerun.stderr);
        else {
          // Killed after the server rotated: the stored refresh token is dead. Clear message, exit 4, and a login heals it.
          assert.ok([0, 4].includes(rerun.code), rerun.stderr);
          if (rerun.code === 4) assert.match(rerun.stderr, /subs mcp login demo/);
        }
        assert.doesNotMatch(rerun.stderr, /locked/);
        assert.equal((await inProcess(["mcp", "login", "demo"], env.dir, { consents: true })).code, 0);
        assert.equal((await inProcess(["mcp", "tools", "demo"], env.dir)).code, 0);
        assert.deepEqual(leakedTokens(env), []);
      } finally {
        await env.close();
      }
    });

    test(`${signal} during a local apply (revoking a removed credential): the deletion stands, a rerun has nothing to do`, async () => {
      const dir = mkdtempSync(path.join(tmpdir(), "subs-signal-apply-"));
      // An authorization server whose revocation endpoint never answers.
      let origin = "";
      const server: Server = createServer((req, res) => {
        if (req.url === "/.well-known/oauth-authorization-server") {
          res.writeHead(200, { "content-type": "application/json" }).end(
            JSON.stringify({ issuer: `${origin}/`, authorization_endpoint: `${origin}/a`, token_endpoint: `${origin}/t`, revocation_endpoint: `${origin}/revoke`, response_types_supported: ["code"] }),
          );
        }
        // /revoke: no answer
      });
      await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
      origin = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
      try {
        writeFileSync(path.join(dir, "substructure.toml"), '[mcp.kept]\nurl = "https://kept.example/mcp"\n');
        const dbPath = path.join(dir, "substructure.db");
        await seedCredentials(dbPath, [
          { id: "kept", url: "https://kept.example/mcp" },
          { id: "gone", url: "https://gone.example/mcp", issuer: `${origin}/` },
        ]);
        const result = await interrupted(["apply"], { cwd: dir, at: /→ POST \S+\/revoke/, signal });
        assertSignalled(result, signal);
        integrity(dbPath);
        const db = new Database(dbPath, { readonly: true });
        const ids = (db.prepare("SELECT id FROM subs_credentials ORDER BY id").all() as { id: string }[]).map((r) => r.id);
        db.close();
        assert.deepEqual(ids, ["kept"], "the removed credential is deleted, the kept one kept");
        const rerun = await inProcess(["apply"], dir);
        assert.equal(rerun.code, 0, rerun.stderr);
        assert.match(rerun.stdout + rerun.stderr, /Nothing to do/);
        assert.ok(!readFileSync(path.join(dir, "substructure.toml"), "utf8").includes("SECRET"));
      } finally {
        server.closeAllConnections();
        server.close();
        rmSync(dir, { recursive: true, force: true });
      }
    });

    // The whole file in one PUT /v1/state, or (a deployment that speaks only v1) a PUT per object.
    for (const [protocol, put] of [["whole state", "/v1/state"], ["v1 only", "/v1/mcp/"]] as const)
    test(`${signal} during a remote apply (a PUT in flight, ${protocol}): a rerun converges, a third run has nothing to do`, async () => {
      const TOKEN = "deploy-api-token-SECRET";
      const deployment = await startDeployment({ token: TOKEN, ...(protocol === "v1 only" ? { protocol: "v1" as const } : {}) });
      const dir = mkdtempSync(path.join(tmpdir(), "subs-signal-remote-"));
      try {
        writeFileSync(
          path.join(dir, "substructure.toml"),
          `[remote]\nurl = "${deployment.url}"\n\n[mcp.sentry]\nurl = "https://mcp.sentry.dev/mcp"\n\n[mcp.linear]\nurl = "https://mcp.linear.app/mcp"\n\n[agent.support]\nmcp = ["sentry", "linear"]\n`,
        );
        deployment.fault({ path: put, method: "PUT", kind: "delay", ms: 400 });
        const env = { SUBSTRUCTURE_TOKEN: TOKEN };
        const result = await interrupted(["apply"], { cwd: dir, env, at: new RegExp(`→ PUT \\S+${put.replaceAll("/", "\\/")}`), signal });
        assertSignalled(result, signal);
        assert.ok(!result.stderr.includes(TOKEN) && !result.stdout.includes(TOKEN));
        await new Promise((r) => setTimeout(r, 500)); // the delayed PUT lands (or not) on the deployment
        const rerun = await inProcess(["apply"], dir, { env });
        assert.equal(rerun.code, 0, rerun.stderr);
        assert.deepEqual([...deployment.connections.keys()].sort(), ["linear", "sentry"]);
        deployment.requests.length = 0;
        const third = await inProcess(["apply", "--json"], dir, { env });
        assert.equal(third.code, 0, third.stderr);
        assert.equal(JSON.parse(third.stdout).changed, false);
        assert.deepEqual(deployment.requests.filter((r) => !r.startsWith("GET")), [], "nothing left to write");
      } finally {
        await deployment.close();
        rmSync(dir, { recursive: true, force: true });
      }
    });
  });
}
