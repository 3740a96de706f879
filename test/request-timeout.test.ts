// `--request-timeout` of `subs mcp tools` and `subs mcp call`: how long one MCP request may go
// unanswered. The MCP SDK's own limit is 60 s, which a long tool or a slow server can need more
// than; a tool that reports progress is working, and each report restarts the wait.
import assert from "node:assert/strict";
import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { after, before, describe, it } from "node:test";
import { runCli, runInProcess } from "./support/cli.ts";
import { annotatedTool, startMcpServer, type RunningMcpServer } from "./support/mcp-server.ts";

describe("--request-timeout (mcp tools, mcp call)", () => {
  let working: RunningMcpServer;
  let slow: RunningMcpServer;
  let cwd: string;
  const env = { SLOW_TOKEN: "static-token" };

  before(async () => {
    working = await startMcpServer({
      tools: [
        // 4 × 400 ms: 1.6 s in all, never more than 0.4 s between two progress reports.
        { ...annotatedTool("silent_job"), work: { steps: 4, everyMs: 400, reports: false }, reply: () => "silent done" },
        { ...annotatedTool("reporting_job"), work: { steps: 4, everyMs: 400, reports: true }, reply: () => "reporting done" },
      ],
    });
    slow = await startMcpServer({ tools: [annotatedTool("search")], delayMs: 1500 });
    cwd = mkdtempSync(path.join(tmpdir(), "subs-request-timeout-"));
    writeFileSync(
      path.join(cwd, "substructure.toml"),
      [working, slow].map((s, n) => `[mcp.${n === 0 ? "working" : "slow"}]\nurl = "${s.url}"\nauth = { token_env = "SLOW_TOKEN" }\n`).join("\n"),
    );
  });
  after(async () => {
    await working.close();
    await slow.close();
  });

  it("a tool that says nothing for longer than --request-timeout fails (exit 1), naming the flag", async () => {
    const r = await runInProcess(["mcp", "call", "working", "silent_job", "--request-timeout", "1"], { cwd, env });
    assert.equal(r.code, 1, r.stderr);
    assert.equal(r.stdout, "");
    assert.match(r.stderr, /working: http:\/\/127\.0\.0\.1:\d+ gave no answer within 1s/);
    assert.match(r.stderr, /--request-timeout SECONDS/);
  });

  it("given longer, the same tool finishes", async () => {
    const r = await runInProcess(["mcp", "call", "working", "silent_job", "--request-timeout", "5"], { cwd, env });
    assert.equal(r.code, 0, r.stderr);
    assert.equal(r.stdout, "silent done\n");
  });

  it("progress reports restart the wait: a 1.6 s tool reporting every 0.4 s finishes within --request-timeout 1", async () => {
    const r = await runInProcess(["mcp", "call", "working", "reporting_job", "--request-timeout", "1"], { cwd, env });
    assert.equal(r.code, 0, r.stderr);
    assert.equal(r.stdout, "reporting done\n");
  });

  it("mcp tools: a server slower than --request-timeout fails with the same hint; given longer it lists", async () => {
    const short = await runInProcess(["mcp", "tools", "slow", "--request-timeout", "1", "--json"], { cwd, env });
    assert.equal(short.code, 1, short.stderr);
    // With --json the error is the document on stdout (docs/exit-codes.md, "Errors with `--json`").
    const { error } = JSON.parse(short.stdout);
    assert.equal(error.code, "timeout");
    assert.match(error.message, /^slow: http:\/\/127\.0\.0\.1:\d+ gave no answer within 1s$/);
    assert.match(error.hint, /--request-timeout SECONDS/);
    const long = await runInProcess(["mcp", "tools", "slow", "--request-timeout", "4", "--json"], { cwd, env });
    assert.equal(long.code, 0, long.stderr);
    assert.deepEqual(JSON.parse(long.stdout).tools.map((t: { name: string }) => t.name), ["search"]);
  });

  it("a value that is not a positive number of seconds is a usage error (exit 2), end to end", async () => {
    for (const argv of [["mcp", "call", "working", "silent_job"], ["mcp", "tools", "working"]]) {
      const r = await runCli([...argv, "--request-timeout", "0"], { cwd, env });
      assert.equal(r.code, 2, r.stderr);
      assert.match(r.stderr, /--request-timeout must be a positive number of seconds, not "0"/);
    }
  });
});

describe("progressText", () => {
  it("words a progress notification: count of total, then the message's first line", async () => {
    const { progressText } = await import("../src/commands/mcp/call/run.ts");
    assert.equal(progressText({ progress: 3, total: 10, message: "indexing\nmore" }), "3/10 indexing");
    assert.equal(progressText({ progress: 40 }), "40");
    assert.equal(progressText({ progress: 2, total: 0 }), "2");
  });
});
