// `subs mcp list --check` end to end (product.md, "subs mcp list": "--check opts in to probing:
// every server at once, a short timeout each, reporting reachable / authorized / tool count"):
// the real CLI against loopback MCP servers, locally and through a deployment (the reference and
// a real `subs deployment serve`). The built CLI (bin/subs.cjs) runs, as a person does, the first
// check (every server at once, each kind of answer) and the [remote] check against the real
// `subs deployment serve`; the rest run the same `run()` in this process, where what is checked is
// the output and the exit code, not the process.
import assert from "node:assert/strict";
import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { after, before, describe, it } from "node:test";
import { environment as oauthEnvironment } from "./auth/harness.ts";
import { runAs, runCli, runInProcess } from "./support/cli.ts";
import { targets, type TargetDeployment } from "./support/deployment-targets.ts";
import { annotatedTool, startMcpServer, type RunningMcpServer } from "./support/mcp-server.ts";
import { refusedUrl } from "./support/ports.ts";

const MCP_TOKEN = "mcp-static-SECRET-value";
type Checked = { id: string; status: string; check?: { reachable: boolean | null; authorized: boolean; tools: number | null; error: { code: string; message: string; hint?: string } | null } };

function environment(toml: string): string {
  const dir = mkdtempSync(path.join(tmpdir(), "subs-check-"));
  writeFileSync(path.join(dir, "substructure.toml"), toml);
  return dir;
}

describe("subs mcp list --check", () => {
  let ok: RunningMcpServer;
  let login: RunningMcpServer;
  let slow: RunningMcpServer;
  let downUrl: string;

  before(async () => {
    ok = await startMcpServer({ tools: [annotatedTool("search"), annotatedTool("get")] });
    // Answers every request 401: a server that wants a login subs does not have.
    login = await startMcpServer({
      tools: [],
      gate: (_req, res) => {
        res.writeHead(401, { "www-authenticate": "Bearer" }).end();
        return true;
      },
    });
    slow = await startMcpServer({ tools: [annotatedTool("late")], gate: () => new Promise<boolean>(() => {}) });
    downUrl = await refusedUrl();
  });
  after(() => Promise.all([ok.close(), login.close(), slow.close()]));

  it("reports reachable, authorized and the tool count of each; a server down or silent fails the check (exit 1)", async () => {
    const dir = environment(
      `[mcp.ok]\nurl = "${ok.url}"\nauth = { token_env = "MCP_TOKEN" }\n\n[mcp.login]\nurl = "${login.url}"\n\n` +
        `[mcp.down]\nurl = "${downUrl}"\nauth = { token_env = "MCP_TOKEN" }\n\n[mcp.slow]\nurl = "${slow.url}"\nauth = { token_env = "MCP_TOKEN" }\n`,
    );
    // 10 s, the time the silent server is waited for: the others must answer within it, and with
    // 1 s the one that answers failed as "no answer within 1s" on a 2-core machine running two
    // suites at once (the test's wait, not the server).
    const r = await runCli(["mcp", "list", "--check", "--timeout", "10", "--json"], { cwd: dir, env: { MCP_TOKEN } });
    assert.equal(r.code, 1, r.stderr);
    const byId = new Map((JSON.parse(r.stdout) as Checked[]).map((e) => [e.id, e.check]));
    assert.deepEqual(byId.get("ok"), { reachable: true, authorized: true, tools: 2, error: null });
    assert.deepEqual(byId.get("login"), { reachable: true, authorized: false, tools: null, error: { code: "needs_login", message: "login: not logged in", hint: "run `subs mcp login login`" } });
    assert.equal(byId.get("down")?.reachable, false);
    assert.equal(byId.get("down")?.authorized, false);
    assert.match(byId.get("down")?.error?.message ?? "", /^down: /);
    assert.equal(byId.get("slow")?.reachable, false);
    assert.equal(byId.get("slow")?.error?.code, "timeout");
    assert.doesNotMatch(r.stdout + r.stderr, /SECRET/);
  });

  it("exit 4 when the only problem is a login; exit 0 when every server lists its tools; the table gains a CHECK column", async () => {
    const both = environment(`[mcp.ok]\nurl = "${ok.url}"\nauth = { token_env = "MCP_TOKEN" }\n\n[mcp.login]\nurl = "${login.url}"\n`);
    const needsLogin = await runInProcess(["mcp", "list", "--check"], { cwd: both, env: { MCP_TOKEN } });
    assert.equal(needsLogin.code, 4, needsLogin.stderr);
    const fine = environment(`[mcp.ok]\nurl = "${ok.url}"\nauth = { token_env = "MCP_TOKEN" }\n`);
    const allGood = await runInProcess(["mcp", "list", "--check"], { cwd: fine, env: { MCP_TOKEN } });
    assert.equal(allGood.code, 0, allGood.stderr);
    assert.equal(allGood.stdout, `ok\t${ok.url}\tstatic\t$MCP_TOKEN set\t2 tools\t-\n`);
  });

  it("without --check nothing is sent to any server, and no entry has a check", async () => {
    const dir = environment(`[mcp.ok]\nurl = "${ok.url}"\nauth = { token_env = "MCP_TOKEN" }\n`);
    const before = ok.requests.length;
    const r = await runInProcess(["mcp", "list", "--json"], { cwd: dir, env: { MCP_TOKEN } });
    assert.equal(r.code, 0, r.stderr);
    assert.equal((JSON.parse(r.stdout) as Checked[])[0]!.check, undefined);
    assert.equal(ok.requests.length, before);
  });

  it("an unset token_env says to set the variable, on the row and on stderr, not to log in", async () => {
    const dir = environment(`[mcp.ok]\nurl = "${ok.url}"\nauth = { token_env = "MCP_TOKEN" }\n`);
    const r = await runInProcess(["mcp", "list", "--check"], { cwd: dir });
    assert.equal(r.code, 4, r.stderr);
    assert.equal(r.stdout, `ok\t${ok.url}\tstatic\t$MCP_TOKEN unset\treachable · set $MCP_TOKEN\t-\n`);
    assert.match(r.stderr, /^ok: \$MCP_TOKEN is not set\n  export MCP_TOKEN=…/m);
    assert.doesNotMatch(r.stdout + r.stderr, /log ?in/i);
    const json = await runInProcess(["mcp", "list", "--check", "--json"], { cwd: dir });
    assert.equal((JSON.parse(json.stdout) as Checked[])[0]!.check?.error?.code, "token_env_unset");
  });

  it("every failure gets a line on stderr naming its id, the reason and a next step", async () => {
    const broken = await startMcpServer({
      tools: [],
      gate: (_req, res) => {
        res.writeHead(500).end("boom");
        return true;
      },
    });
    try {
      const dir = environment(
        `[mcp.ok]\nurl = "${ok.url}"\nauth = { token_env = "MCP_TOKEN" }\n\n[mcp.login]\nurl = "${login.url}"\n\n` +
          `[mcp.down]\nurl = "${downUrl}"\n\n[mcp.broken]\nurl = "${broken.url}"\nauth = { token_env = "MCP_TOKEN" }\n`,
      );
      // No server here is silent: a longer wait costs nothing, and the one that answers has time to on a loaded machine.
      const r = await runInProcess(["mcp", "list", "--check", "--timeout", "10"], { cwd: dir, env: { MCP_TOKEN } });
      assert.equal(r.code, 1, r.stderr);
      const lines = r.stderr.split("\n");
      for (const id of ["login", "down", "broken"]) {
        const at = lines.findIndex((l) => l.startsWith(`${id}: `));
        assert.ok(at >= 0, `no line for ${id}: ${r.stderr}`);
        assert.match(lines[at + 1] ?? "", /^  \S/, `no next step for ${id}: ${r.stderr}`);
      }
      assert.ok(!lines.some((l) => l.startsWith("ok: ")), "a connection that listed its tools has nothing to explain");
      assert.match(r.stderr, /^login: not logged in\n  run `subs mcp login login`$/m);
      assert.match(r.stderr, /^down: cannot reach .*\n  check the url in the file and that the server is up$/m);
      assert.match(r.stderr, /^broken: .*HTTP 500.*\n  run `subs mcp tools broken --debug` to see every HTTP exchange/m);
      assert.doesNotMatch(r.stdout + r.stderr, /SECRET/);
    } finally {
      await broken.close();
    }
  });

  it("a --timeout that is not a positive number is a usage error (exit 2)", async () => {
    const dir = environment(`[mcp.ok]\nurl = "${ok.url}"\n`);
    const r = await runInProcess(["mcp", "list", "--check", "--timeout", "soon"], { cwd: dir });
    assert.equal(r.code, 2);
    assert.match(r.stderr, /--timeout must be a positive number of seconds/);
  });
});

describe("subs mcp list --check after a rejected refresh", () => {
  it("explains it on stderr, and the row says needs login, never authorized beside it", async () => {
    const env = await oauthEnvironment();
    try {
      const expireAndRevoke = () => {
        env.as.revokeAllRefreshTokens();
        env.db().prepare("UPDATE subs_credentials SET expires_at = ?").run(Date.now() - 1000);
      };
      assert.equal((await env.subs(["mcp", "login", "demo"])).code, 0);
      expireAndRevoke();
      const human = await runInProcess(["mcp", "list", "--check"], { cwd: env.dir });
      assert.equal(human.code, 4, human.stderr);
      // The row says why, from the record the rejected refresh left (docs/commands.md, "subs mcp list").
      assert.equal(human.stdout, `demo\t${env.mcp.url}\toauth\tneeds login: refresh rejected (invalid_grant: refresh token is invalid, used or revoked) · subs mcp login demo\treachable · needs login\t-\n`);
      assert.match(human.stderr, /^demo: the authorization server rejected the refresh token \(.*invalid_grant.*\)\n  run `subs mcp login demo`$/m);
      const after = await runInProcess(["mcp", "list", "--json"], { cwd: env.dir });
      assert.equal(JSON.parse(after.stdout)[0].status, "needs_login", "the plain listing agrees with the check");
      assert.equal(JSON.parse(after.stdout)[0].lost.reason, "refresh_rejected");

      assert.equal((await env.subs(["mcp", "login", "demo"])).code, 0);
      expireAndRevoke();
      const json = await runInProcess(["mcp", "list", "--check", "--json"], { cwd: env.dir });
      assert.equal(json.code, 4, json.stderr);
      const [entry] = JSON.parse(json.stdout) as Array<Checked & { usable: boolean }>;
      assert.deepEqual([entry!.status, entry!.usable], ["needs_login", false]);
      assert.equal(entry!.check?.authorized, false);
      assert.equal(entry!.check?.error?.code, "needs_login");
      assert.match(entry!.check?.error?.message ?? "", /^demo: the authorization server rejected the refresh token/);
      assert.match(json.stderr, /^demo: the authorization server rejected the refresh token/m);
      assert.equal(env.as.counters.rejectedRefreshes, 2, "one refresh per check, no retry");
    } finally {
      await env.close();
    }
  });
});

for (const target of targets()) describe(`subs mcp list --check with [remote] (${target.name})`, () => {
  let deployment: TargetDeployment;
  let server: RunningMcpServer;
  before(async () => {
    deployment = await target.start();
    server = await startMcpServer({ tools: [annotatedTool("search"), annotatedTool("get"), annotatedTool("rm")] });
  });
  after(() => Promise.all([deployment.close(), server.close()]));

  it("the deployment lists each authorized connection's tools; one it holds no credential for needs a login (exit 4)", async () => {
    const dir = environment(`[remote]\nurl = "${deployment.url}"\n\n[mcp.held]\nurl = "${server.url}"\n\n[mcp.fresh]\nurl = "${server.url}"\n`);
    for (const id of ["held", "fresh"]) await deployment.declare(id, server.url);
    await deployment.hold("held", { url: server.url, tokens: { access_token: "at-SECRET", token_type: "Bearer" }, authorizedAt: Date.now(), expiresAt: null });
    // The built CLI against the real `subs deployment serve`; run() in-process against the reference.
    const how = target.kind === "reference" ? "in-process" : "cli";
    const r = await runAs(how, ["mcp", "list", "--check", "--json"], { cwd: dir, env: { SUBSTRUCTURE_TOKEN: deployment.token } });
    assert.equal(r.code, 4, r.stderr);
    const byId = new Map((JSON.parse(r.stdout) as Checked[]).map((e) => [e.id, e.check]));
    assert.deepEqual(byId.get("held"), { reachable: true, authorized: true, tools: 3, error: null });
    assert.equal(byId.get("fresh")?.authorized, false);
    assert.equal(byId.get("fresh")?.reachable, null, "the deployment says nothing about a server it holds no credential for");
    assert.equal(byId.get("fresh")?.error?.code, "needs_login");
    assert.ok(server.authorizations.includes("Bearer at-SECRET"), "the deployment listed them with its credential");
    const seen = await deployment.seen();
    assert.ok(seen.includes("GET /v1/mcp/held/tools"));
    assert.ok(!seen.includes("GET /v1/mcp/fresh/tools"), "nothing to ask for a connection without a credential");
    assert.doesNotMatch(r.stdout + r.stderr, /SECRET/);
    assert.ok(!(r.stdout + r.stderr).includes(deployment.token));
  });
});
