// `subs agent serve` and `subs mcp proxy` driven by an MCP client this project did not write:
// the MCP Inspector's CLI mode
// (test/support/inspector.ts), on Node 22, starting the real built CLI (bin/subs.cjs, on the
// project's Node 20) over stdio, and connecting to it over Streamable HTTP with the bearer token
// from --token-file. Every assertion reads the Inspector's own JSON output (`--format json`).
import assert from "node:assert/strict";
import { spawn, type ChildProcess } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { after, before, describe, it } from "node:test";
import { BIN, ensureBuilt } from "./support/cli.ts";
import { ensureInspector, inspect, type Inspected } from "./support/inspector.ts";
import { RICH_TOOLS, startRichServer, type RichServer } from "./support/mcp-rich-server.ts";
import { within } from "./support/wait.ts";

const MCP_TOKEN = "third-party-SECRET-upstream-token";

type ListedTools = { tools: Array<{ name: string }> };
type CallResult = { content: Array<{ type: string; text?: string }>; structuredContent?: unknown; isError?: boolean };

/** What the Inspector starts over stdio: `subs ARGV` on this project's Node, with the upstream's token. */
function stdioTarget(dir: string, argv: string[]): string[] {
  return ["--cwd", dir, "-e", `MCP_TOKEN=${MCP_TOKEN}`, "--", process.execPath, BIN, ...argv];
}

function ok(r: Inspected): unknown {
  assert.equal(r.code, 0, `the Inspector failed (exit ${r.code}):\n${r.stderr}`);
  assert.ok(!r.stdout.includes(MCP_TOKEN) && !r.stderr.includes(MCP_TOKEN), "the upstream token never reaches the client or stderr");
  return r.result;
}

type Served = { child: ChildProcess; url: string; token: string; stderr: () => string; exited: Promise<number | null> };

/** Starts `subs ARGV --http 127.0.0.1:0 --token-file F` and waits for the endpoint it prints. */
async function serveHttp(dir: string, argv: string[], tokenFile: string): Promise<Served> {
  const child = spawn(process.execPath, [BIN, ...argv, "--http", "127.0.0.1:0", "--token-file", tokenFile], {
    cwd: dir,
    env: { PATH: process.env.PATH, HOME: dir, MCP_TOKEN },
    stdio: ["ignore", "pipe", "pipe"],
  });
  let stderr = "";
  child.stderr!.on("data", (d) => (stderr += d));
  const exited = new Promise<number | null>((resolve) => child.once("exit", (code) => resolve(code)));
  const deadline = Date.now() + 15_000;
  for (;;) {
    const match = /subs: serving MCP on (http:\/\/127\.0\.0\.1:\d+\/mcp)/.exec(stderr);
    if (match) return { child, url: match[1]!, token: readFileSync(path.join(dir, tokenFile), "utf8").trim(), stderr: () => stderr, exited };
    if (child.exitCode !== null || Date.now() > deadline) throw new Error(`no endpoint: exit ${child.exitCode}\n${stderr}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

describe("a third-party MCP client (the MCP Inspector CLI) through the built CLI", () => {
  let dir: string;
  let rich: RichServer;

  before(async () => {
    ensureInspector();
    ensureBuilt();
    dir = mkdtempSync(path.join(tmpdir(), "subs-inspector-"));
    rich = await startRichServer({ instructions: "Use echo to test." });
    writeFileSync(path.join(dir, "substructure.toml"), `[mcp.rich]\nurl = "${rich.url}"\nauth = { token_env = "MCP_TOKEN" }\n\n[agent.triage]\nmcp = ["rich"]\n`);
  });

  after(async () => {
    await rich?.close();
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  // Each launch of the Inspector costs about 1.2 s of CPU, and each over stdio a start of subs
  // too: a method is asked once for each command (agent serve, mcp proxy) where its answer is the
  // same over both transports. The tool list the Inspector reads is the one subs serves over
  // either: it is asked for over --http (the last two tests), and over stdio the tool is called
  // by the name that list holds.
  it("subs agent serve over stdio: tools/call by the prefixed name returns the upstream's answer", async () => {
    const called = ok(await inspect(["--method", "tools/call", "--tool-name", "rich__echo", "--tool-args-json", '{"text":"from the inspector"}', ...stdioTarget(dir, ["agent", "serve", "triage"])], { cwd: dir })) as CallResult;
    assert.deepEqual(called.content, [{ type: "text", text: '{"text":"from the inspector"}' }]);
    assert.deepEqual(called.structuredContent, { echoed: { text: "from the inspector" } });

    // The served name maps back to the upstream's own: the upstream ran `echo`.
    assert.ok(rich.events.includes("call echo"), rich.events.join(" | "));
  });

  // No launch of its own for `initialize`, `tools/list`, `prompts/list` or a tool's answer: every
  // launch below completes an initialize with the proxy first, the tool list and a structured
  // answer are asked for over --http below, tools/call over stdio is the two errors' launches, and
  // the prompt fetched is the one the upstream lists. What those answers hold (the upstream's
  // serverInfo and capabilities, its tools, its prompt list) the built proxy's own end-to-end test
  // asserts too (mcp-proxy.e2e.test.ts, "passes tools, resources …").
  it("subs mcp proxy over stdio: resources (both pages), a read, a prompt, and tool calls' errors as the upstream sent them", async () => {
    const target = stdioTarget(dir, ["mcp", "proxy", "rich"]);
    // The upstream answers two pages (cursor "page-2"); the Inspector follows the cursor through the proxy.
    const resources = ok(await inspect(["--method", "resources/list", ...target], { cwd: dir })) as { resources: Array<{ uri: string }> };
    assert.deepEqual(resources.resources.map((r) => r.uri), ["rich://doc/0", "rich://doc/1", "rich://doc/2"]);

    const read = ok(await inspect(["--method", "resources/read", "--uri", "rich://doc/1", ...target], { cwd: dir })) as { contents: unknown };
    assert.deepEqual(read.contents, [{ uri: "rich://doc/1", mimeType: "text/plain", text: "contents of rich://doc/1" }]);

    const prompt = ok(await inspect(["--method", "prompts/get", "--prompt-name", "greet", "--prompt-args", "who=Ada", ...target], { cwd: dir })) as { messages: unknown };
    assert.deepEqual(prompt.messages, [{ role: "user", content: { type: "text", text: "Hello, Ada!" } }]);

    // A tool error stays a result with isError (the Inspector exits 5 for it); a JSON-RPC error keeps its code and message.
    const toolError = await inspect(["--method", "tools/call", "--tool-name", "tool_error", ...target], { cwd: dir });
    assert.equal(toolError.code, 5, toolError.stderr);
    assert.deepEqual(toolError.result, { content: [{ type: "text", text: "bad input" }], isError: true });
    const failed = await inspect(["--method", "tools/call", "--tool-name", "fail", ...target], { cwd: dir });
    assert.notEqual(failed.code, 0);
    assert.equal(failed.error?.message, "MCP error -32042: the upstream failed on purpose", failed.stderr);
  });

  it("subs mcp proxy --http --token-file: the client with the bearer token lists and calls; without it, or with a wrong one, it is refused", async () => {
    const served = await serveHttp(dir, ["mcp", "proxy", "rich"], "proxy.token");
    try {
      const http = ["--transport", "http", "--server-url", served.url, "--stored-auth-only"];
      const bearer = ["--header", `Authorization: Bearer ${served.token}`];
      const listed = ok(await inspect([...http, ...bearer, "--method", "tools/list"], { cwd: dir })) as ListedTools;
      assert.deepEqual(listed.tools.map((t) => t.name), RICH_TOOLS.map((t) => t.name));
      const called = ok(await inspect([...http, ...bearer, "--method", "tools/call", "--tool-name", "echo", "--tool-args-json", '{"over":"http"}'], { cwd: dir })) as CallResult;
      assert.deepEqual(called.structuredContent, { echoed: { over: "http" } });

      for (const headers of [[], ["--header", "Authorization: Bearer not-the-token"]]) {
        const refused = await inspect([...http, ...headers, "--method", "tools/list"], { cwd: dir });
        assert.notEqual(refused.code, 0, `refused without the right token (${headers.join(" ") || "no header"})`);
        assert.equal(refused.result, undefined);
        assert.match(refused.error?.message ?? "", /Unauthorized/, refused.stderr);
      }
    } finally {
      served.child.kill("SIGTERM");
    }
    assert.equal(await within(served.exited, "the served subs to exit"), 0, served.stderr());
    assert.ok(!served.stderr().includes(MCP_TOKEN) && !served.stderr().includes(served.token), "no token on the server's stderr");
  });

  it("subs agent serve --http --token-file: the client with the bearer token sees the prefixed tools and a call runs upstream", async () => {
    const served = await serveHttp(dir, ["agent", "serve", "triage"], "serve.token");
    try {
      const http = ["--transport", "http", "--server-url", served.url, "--stored-auth-only", "--header", `Authorization: Bearer ${served.token}`];
      const listed = ok(await inspect([...http, "--method", "tools/list"], { cwd: dir })) as ListedTools;
      assert.deepEqual(listed.tools.map((t) => t.name).sort(), RICH_TOOLS.map((t) => `rich__${t.name}`).sort());
      const called = ok(await inspect([...http, "--method", "tools/call", "--tool-name", "rich__echo", "--tool-args-json", '{"via":"serve"}'], { cwd: dir })) as CallResult;
      assert.deepEqual(called.structuredContent, { echoed: { via: "serve" } });
    } finally {
      served.child.kill("SIGINT");
    }
    assert.equal(await within(served.exited, "the served subs to exit"), 0, served.stderr());
  });
});
