// `subs mcp call --args`: inline JSON, `-` for stdin, `@FILE` for a file.
import assert from "node:assert/strict";
import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { after, before, describe, it } from "node:test";
import { runCli, runInProcess } from "./support/cli.ts";
import { annotatedTool, startMcpServer, type RunningMcpServer } from "./support/mcp-server.ts";

describe("mcp call --args", () => {
  let server: RunningMcpServer;
  let cwd: string;
  const env = { ECHO_TOKEN: "static" };

  before(async () => {
    // The tool replies with the arguments it received, as JSON.
    server = await startMcpServer({ tools: [annotatedTool("echo")] });
    cwd = mkdtempSync(path.join(tmpdir(), "subs-call-args-"));
    writeFileSync(path.join(cwd, "substructure.toml"), `[mcp.echo]\nurl = "${server.url}"\nauth = { token_env = "ECHO_TOKEN" }\n`);
    writeFileSync(path.join(cwd, "args.json"), '{"from": "file", "n": [1, 2]}\n');
    writeFileSync(path.join(cwd, "list.json"), "[1, 2]\n");
  });
  after(() => server.close());

  it("- reads the arguments from stdin (end to end)", async () => {
    const r = await runCli(["mcp", "call", "echo", "echo", "--args", "-"], { cwd, env, input: '{"from": "stdin", "text": "a \\"quoted\\" word"}' });
    assert.equal(r.code, 0, r.stderr);
    assert.deepEqual(JSON.parse(r.stdout), { from: "stdin", text: 'a "quoted" word' });
  });

  it("@FILE reads them from a file, relative to the current directory", async () => {
    const r = await runInProcess(["mcp", "call", "echo", "echo", "--args", "@args.json"], { cwd, env });
    assert.equal(r.code, 0, r.stderr);
    assert.deepEqual(JSON.parse(r.stdout), { from: "file", n: [1, 2] });
  });

  it("what stdin or the file holds is checked as inline JSON is (exit 2), naming where it came from", async () => {
    const calls = () => server.requests.filter((m) => m === "tools/call").length;
    const before = calls();
    const notJson = await runInProcess(["mcp", "call", "echo", "echo", "--args", "-"], { cwd, env, readStdin: async () => "{nope" });
    assert.equal(notJson.code, 2);
    assert.match(notJson.stderr, /^error: stdin is not valid JSON/);
    const array = await runInProcess(["mcp", "call", "echo", "echo", "--args", "@list.json"], { cwd, env });
    assert.equal(array.code, 2);
    assert.match(array.stderr, /^error: list\.json must be a JSON object/);
    const missing = await runInProcess(["mcp", "call", "echo", "echo", "--args", "@absent.json"], { cwd, env });
    assert.equal(missing.code, 2);
    assert.match(missing.stderr, /^error: --args @absent\.json: cannot read absent\.json \(ENOENT\)/);
    assert.equal(calls(), before, "a call was made despite bad arguments");
  });
});
