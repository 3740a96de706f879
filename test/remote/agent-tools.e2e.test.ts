// `subs agent tools` with [remote]: the lists come from the deployment's `GET /v1/mcp/{id}/tools`
// (the reference, and a real `subs deployment serve`) and go through the same rules as locally, as
// they do for `subs lock`. A deployment slow to answer is the reference's alone: a real server
// injects no delay.
import assert from "node:assert/strict";
import { existsSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { after, before, describe, it } from "node:test";
import type { AgentToolsJson } from "../../src/commands/agent/tools/run.ts";
import { runCli } from "../support/cli.ts";
import { targets, type TargetDeployment } from "../support/deployment-targets.ts";
import { annotatedTool, startMcpServer, type RunningMcpServer } from "../support/mcp-server.ts";

for (const target of targets()) describe(`subs agent tools with [remote] (${target.name})`, () => {
  let deployment: TargetDeployment;
  let alpha: RunningMcpServer;
  let beta: RunningMcpServer;
  let dir: string;
  const run = (args: string[], token = deployment.token) => runCli(["agent", "tools", ...args], { cwd: dir, env: { SUBSTRUCTURE_TOKEN: token } });

  before(async () => {
    deployment = await target.start();
    alpha = await startMcpServer({ tools: [annotatedTool("search", { readOnlyHint: true }), annotatedTool("rm")] });
    beta = await startMcpServer({ tools: [annotatedTool("search")] });
    dir = mkdtempSync(path.join(tmpdir(), "subs-agent-remote-"));
    writeFileSync(
      path.join(dir, "substructure.toml"),
      `[remote]\nurl = "${deployment.url}"\n\n[mcp.alpha]\nurl = "${alpha.url}"\nprefix_tools = false\n\n[mcp.beta]\nurl = "${beta.url}"\nprefix_tools = false\n\n` +
        `[mcp.gamma]\nurl = "${beta.url}"\n\n[mcp.fresh]\nurl = "${beta.url}"\n\n` +
        `[agent.x]\nmcp = ["alpha", "beta", { id = "gamma", tools = { read_only = true } }, "fresh"]\n`,
    );
    // Declared and authorized on the deployment directly: the login flow has its own tests.
    const declared = { alpha: alpha.url, beta: beta.url, gamma: beta.url, fresh: beta.url };
    for (const [id, url] of Object.entries(declared)) await deployment.declare(id, url, { prefix_tools: id === "gamma" || id === "fresh" });
    for (const id of ["alpha", "beta", "gamma"] as const) {
      await deployment.hold(id, { url: declared[id], tokens: { access_token: "at", token_type: "Bearer" }, authorizedAt: Date.now(), expiresAt: null });
    }
  });

  after(async () => {
    await Promise.all([deployment.close(), alpha.close(), beta.close()]);
    rmSync(dir, { recursive: true, force: true });
  });

  it("resolves the deployment's lists by the same rules; an unauthorized connection needs login (exit 4)", async () => {
    const r = await run(["x", "--json"]);
    assert.equal(r.code, 4, r.stderr);
    const out = JSON.parse(r.stdout) as AgentToolsJson;
    assert.equal(out.target, "remote");
    assert.deepEqual(
      out.tools.map((t) => t.name),
      ["rm"],
    );
    assert.deepEqual(
      out.dropped.map((d) => [d.name, d.connection, d.reason]),
      [
        ["search", "alpha", "connector_tool"],
        ["search", "beta", "connector_tool"],
      ],
    );
    assert.deepEqual(
      out.filtered.map((f) => [f.connection, f.tool, f.step, f.value]),
      [["gamma", "search", "read_only", null]],
    );
    assert.deepEqual(
      out.unavailable.map((u) => [u.connection, u.code, u.hint]),
      [["fresh", "needs_login", "run `subs mcp login fresh`"]],
    );
    assert.ok(!r.stdout.includes(deployment.token) && !r.stderr.includes(deployment.token));
  });

  it("subs lock lists through the deployment too: a connection that needs login there fails it (exit 4), and nothing is written", async () => {
    const r = await runCli(["lock", "--yes", "--json"], { cwd: dir, env: { SUBSTRUCTURE_TOKEN: deployment.token } });
    assert.equal(r.code, 4, r.stderr);
    assert.equal(JSON.parse(r.stdout).error.hint, "run `subs mcp login fresh`");
    assert.doesNotMatch(r.stderr, /does not enforce/, "the deployment enforces the lock `subs apply` sends it");
    assert.equal(existsSync(path.join(dir, "substructure.lock")), false);
  });

  it("a rejected deployment token is one error for the command, not one per connection (exit 1)", async () => {
    const r = await run(["x", "--json"], "wrong-token");
    assert.equal(r.code, 1);
    assert.match(r.stderr, /rejected the credential in \$SUBSTRUCTURE_TOKEN/);
    assert.equal(JSON.parse(r.stdout).error.code, "unauthorized");
  });

  if (target.kind === "reference") it("a connection the deployment is slow to list times out on its own; the others are kept", async () => {
    deployment.fault({ path: "/v1/mcp/beta/tools", kind: "delay", ms: 5_000 });
    try {
      const r = await run(["x", "--json", "--timeout", "2"]);
      const out = JSON.parse(r.stdout) as AgentToolsJson;
      assert.equal(r.code, 1, r.stderr);
      assert.deepEqual(
        out.unavailable.map((u) => [u.connection, u.code]),
        [
          ["beta", "timeout"],
          ["fresh", "needs_login"],
        ],
      );
      assert.deepEqual(
        out.tools.map((t) => t.name),
        ["search", "rm"],
      );
    } finally {
      deployment.clearFaults();
    }
  });
});
