// Issue 7, "Concurrency": 8 processes logging in, refreshing and applying at once on one db (and
// 8 remote applies at once on one deployment). No
// credential is lost or corrupted, and a rotating refresh token is refreshed at most once per
// rotation at the authorization server (the others wait on the db's write lock, then use the
// token the first one stored: src/auth/refresh.ts).
import assert from "node:assert/strict";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { test } from "node:test";
import Database from "better-sqlite3";
import { environment, leakedTokens, type Env, type Row } from "../auth/harness.ts";
import { browserCommand } from "../support/browser.ts";
import { runCli, type RunResult } from "../support/cli.ts";
import { startDeployment } from "../support/deployment/server.ts";

const IDS = ["a1", "a2", "a3", "a4", "a5", "a6", "a7", "a8"];
const toml = (url: string, ids: string[]) => ids.map((id) => `[mcp.${id}]\nurl = "${url}"\n`).join("\n");

function rows(env: Env): Row[] {
  const db = new Database(path.join(env.dir, "substructure.db"), { readonly: true });
  try {
    assert.equal(db.pragma("integrity_check", { simple: true }), "ok");
    return db.prepare("SELECT * FROM subs_credentials ORDER BY id").all() as Row[];
  } finally {
    db.close();
  }
}

function allOk(results: RunResult[], what: string) {
  results.forEach((r, i) => assert.equal(r.code, 0, `${what} #${i}: ${r.stderr}`));
}

test("8 processes at once on one db: logins, refreshes and applies lose or corrupt nothing; one refresh per rotation", { timeout: 120_000 }, async () => {
  const env = await environment({ as: { refreshDelayMs: 200 }, toml: (url) => toml(url, IDS) });
  const cli = (argv: string[]) => runCli(argv, { cwd: env.dir, env: { BROWSER: browserCommand() }, timeoutMs: 60_000 });
  const expire = (ids: string[]) => {
    const db = new Database(path.join(env.dir, "substructure.db"));
    const update = db.prepare("UPDATE subs_credentials SET expires_at = ? WHERE id = ?");
    for (const id of ids) update.run(Date.now() - 1000, id);
    db.close();
  };
  try {
    // 1. Eight logins at once, one id each, into a db none of them has created yet.
    allOk(await Promise.all(IDS.map((id) => cli(["mcp", "login", id]))), "login");
    const logged = rows(env);
    assert.deepEqual(logged.map((r) => r.id), IDS);
    assert.equal(new Set(logged.map((r) => r.access_token)).size, 8, "each id has its own credential");
    assert.equal(env.as.counters.codeExchanges, 8);

    // 2. Eight refreshes at once: four processes on each of two expired credentials.
    expire(["a1", "a2"]);
    const before = env.as.counters.refreshes;
    allOk(await Promise.all(["a1", "a1", "a1", "a1", "a2", "a2", "a2", "a2"].map((id) => cli(["mcp", "tools", id, "--json"]))), "refresh");
    assert.equal(env.as.counters.refreshes - before, 2, "exactly one refresh per rotated token");
    assert.equal(env.as.counters.rejectedRefreshes, 0, "no process used a refresh token another had rotated");
    const refreshed = rows(env);
    for (const id of ["a1", "a2"]) {
      const row = refreshed.find((r) => r.id === id)!;
      assert.ok(row.expires_at! > Date.now());
      assert.notEqual(row.refresh_token, logged.find((r) => r.id === id)!.refresh_token);
    }

    // 3. Everything at once: three applies removing a7 and a8, three processes refreshing a3, two re-logins of a4.
    env.write(toml(env.mcp.url, IDS.slice(0, 6)));
    expire(["a3"]);
    const beforeMixed = env.as.counters.refreshes;
    const mixed = await Promise.all([
      cli(["apply"]),
      cli(["apply", "--json"]),
      cli(["apply"]),
      cli(["mcp", "tools", "a3"]),
      cli(["mcp", "tools", "a3", "--json"]),
      cli(["mcp", "call", "a3", "echo"]),
      cli(["mcp", "login", "a4"]),
      cli(["mcp", "login", "a4", "--json"]),
    ]);
    allOk(mixed, "mixed");
    // Only the applies delete a7 and a8 (issue 15); at most one refresh of a3.
    assert.equal(env.as.counters.refreshes - beforeMixed, 1);
    assert.equal(env.as.counters.rejectedRefreshes, 0);
    const final = rows(env);
    assert.deepEqual(final.map((r) => r.id), IDS.slice(0, 6), "a7 and a8 deleted, nothing else lost");

    // Every remaining credential is usable; the ones the mixed run touched work at the server.
    const list = JSON.parse((await cli(["mcp", "list", "--json"])).stdout) as Array<{ id: string; status: string }>;
    assert.deepEqual(list.map((c) => [c.id, c.status]), IDS.slice(0, 6).map((id) => [id, "authorized"]));
    allOk(await Promise.all(["a3", "a4", "a5"].map((id) => cli(["mcp", "tools", id]))), "tools");
    assert.deepEqual(leakedTokens(env), []);
  } finally {
    await env.close();
  }
});

test("8 remote applies at once converge: the deployment ends as the file says, and a next run has nothing to write", { timeout: 60_000 }, async () => {
  const TOKEN = "deploy-api-token-SECRET";
  const deployment = await startDeployment({ token: TOKEN });
  const dir = mkdtempSync(path.join(tmpdir(), "subs-concurrent-remote-"));
  try {
    const connections = IDS.map((id) => `[mcp.${id}]\nurl = "https://${id}.example/mcp"\n`).join("\n");
    writeFileSync(path.join(dir, "substructure.toml"), `[remote]\nurl = "${deployment.url}"\n\n${connections}\n[agent.all]\nmcp = [${IDS.map((id) => `"${id}"`).join(", ")}]\n`);
    const apply = (...args: string[]) => runCli(["apply", ...args], { cwd: dir, env: { SUBSTRUCTURE_TOKEN: TOKEN }, timeoutMs: 60_000 });
    const results = await Promise.all(IDS.map(() => apply("--json")));
    allOk(results, "apply");
    assert.deepEqual([...deployment.connections.keys()].sort(), IDS);
    assert.deepEqual(deployment.agents.get("all")!.mcp.map((m: { id: string }) => m.id), IDS);
    deployment.requests.length = 0;
    const next = await apply("--json");
    assert.equal(next.code, 0, next.stderr);
    assert.equal(JSON.parse(next.stdout).changed, false);
    assert.deepEqual(deployment.requests.filter((r) => !r.startsWith("GET")), []);
    for (const r of [...results, next]) assert.ok(!r.stdout.includes(TOKEN) && !r.stderr.includes(TOKEN));
  } finally {
    await deployment.close();
    rmSync(dir, { recursive: true, force: true });
  }
});
