// `subs mcp call` when the call fails: no success mark for a call that failed, and a tool name the
// server does not have named as such, with the names it has that come closest. Against both ways a
// server answers an unknown name: a tool error (older servers, the demo's) and a JSON-RPC -32602.
import assert from "node:assert/strict";
import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { after, before, describe, it } from "node:test";
import { runCli } from "./support/cli.ts";
import { onTerminal } from "./support/terminal.ts";
import { annotatedTool, startMcpServer, type RunningMcpServer } from "./support/mcp-server.ts";
import { startRichServer, type RichServer } from "./support/mcp-rich-server.ts";

const MARK_OK = "✔";
const MARK_FAILED = "✖";

describe("subs mcp call, failing", () => {
  let notes: RunningMcpServer;
  let rich: RichServer;
  let cwd: string;
  const env = { NOTES_TOKEN: "static-notes", MCP_TOKEN: "static-rich" };

  before(async () => {
    notes = await startMcpServer({ tools: [annotatedTool("search_notes"), annotatedTool("write_note"), annotatedTool("delete_note")] });
    rich = await startRichServer();
    cwd = mkdtempSync(path.join(tmpdir(), "subs-call-fail-"));
    writeFileSync(
      path.join(cwd, "substructure.toml"),
      `[mcp.notes]\nurl = "${notes.url}"\nauth = { token_env = "NOTES_TOKEN" }\n\n[mcp.rich]\nurl = "${rich.url}"\nauth = { token_env = "MCP_TOKEN" }\n`,
    );
  });
  after(async () => {
    await notes.close();
    await rich.close();
  });

  for (const [server, misspelt, meant] of [
    ["notes", "serch_notes", "search_notes"],
    ["rich", "ecoh", "echo"],
  ] as const) {
    it(`${server}: a name the server does not have is exit 1 (unknown_tool) naming the closest, never a success mark`, async () => {
      const r = await runCli(["mcp", "call", server, misspelt], { cwd, env });
      assert.equal(r.code, 1, r.stderr);
      assert.match(r.stderr, new RegExp(`${server} has no tool named ${misspelt}`));
      assert.match(r.stderr, new RegExp(`did you mean \`${meant}\``));
      assert.match(r.stderr, new RegExp(`subs mcp tools ${server}\` lists its \\d+ tools`));
      const json = await runCli(["mcp", "call", server, misspelt, "--json"], { cwd, env });
      assert.equal(json.code, 1);
      assert.equal((JSON.parse(json.stdout) as { error: { code: string } }).error.code, "unknown_tool");
      const seen = await onTerminal(["mcp", "call", server, misspelt], { cwd, env });
      assert.equal(seen.code, 1, seen.screen);
      assert.ok(!seen.screen.includes(MARK_OK) && seen.screen.includes(MARK_FAILED), seen.screen);
    });
  }

  it("a name with nothing close names only where the list is", async () => {
    const r = await runCli(["mcp", "call", "notes", "zzzzzzzz"], { cwd, env });
    assert.equal(r.code, 1);
    assert.doesNotMatch(r.stderr, /did you mean/);
    assert.match(r.stderr, /`subs mcp tools notes` lists its 3 tools/);
  });

  it("a tool that exists and reports an error: its result is shown, exit 1 (tool_error), no success mark", async () => {
    const r = await runCli(["mcp", "call", "rich", "tool_error"], { cwd, env });
    assert.equal(r.code, 1, r.stderr);
    assert.equal(r.stdout, "bad input\n");
    assert.match(r.stderr, /the tool tool_error reported an error/);
    const seen = await onTerminal(["mcp", "call", "rich", "tool_error"], { cwd, env });
    assert.equal(seen.code, 1, seen.screen);
    assert.ok(!seen.screen.includes(MARK_OK), seen.screen);
    assert.match(seen.screen, new RegExp(`${MARK_FAILED} tool_error on rich reported an error`));
  });

  it("a call that works still says it finished, on a terminal", async () => {
    const seen = await onTerminal(["mcp", "call", "rich", "echo", "--args", '{"a": 1}'], { cwd, env });
    assert.equal(seen.code, 0, seen.screen);
    assert.match(seen.screen, new RegExp(`${MARK_OK} echo on rich finished`));
  });
});
