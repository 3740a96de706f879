// `subs agent serve` end to end: driven by the MCP SDK's Client, as Claude Code or Cursor would, in
// front of real MCP servers on loopback (one down, one whose token is unset), and with a real OAuth
// server for the credential cases. The built CLI (bin/subs.cjs), spawned by the SDK's
// StdioClientTransport, serves the first test (what is served and left out, on stdout and stderr),
// the tests whose subject is the process (stdin closing, a piped stdin, SIGTERM and SIGINT), the
// one where a real $BROWSER would show a browser opened, and the 8 processes sharing one db. The
// rest run the same `run()` in this process, its stdin and stdout in-memory streams
// (serveInProcess): what they check is what is served and sent upstream, not the process (a child
// costs a Node start-up and the bundle's load per session).
import assert from "node:assert/strict";
import { randomUUID } from "node:crypto";
import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { setTimeout as sleep } from "node:timers/promises";
import { after, before, describe, it } from "node:test";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { Server } from "@modelcontextprotocol/sdk/server/index.js";
import { StreamableHTTPServerTransport } from "@modelcontextprotocol/sdk/server/streamableHttp.js";
import { CallToolRequestSchema, ListToolsRequestSchema, McpError, type Progress } from "@modelcontextprotocol/sdk/types.js";
import type { AgentToolsJson } from "../src/commands/agent/tools/run.ts";
import { environment, TOOLS as OAUTH_TOOLS, type Env } from "./auth/harness.ts";
import { runCli, runInProcess } from "./support/cli.ts";
import { annotatedTool, startMcpServer, type RunningMcpServer, type TestTool } from "./support/mcp-server.ts";
import { refusedUrl } from "./support/ports.ts";
import { runServeInProcess, serveInProcess, serveSession, type ClientSession, type ServeSession } from "./support/serve-client.ts";
import { waitFor, within } from "./support/wait.ts";

const MCP_TOKEN = "mcp-static-SECRET-value";

describe("subs agent serve (end to end, static tokens)", () => {
  let dir: string;
  let alpha: RunningMcpServer;
  let beta: RunningMcpServer;
  let gamma: RunningMcpServer;
  let alphaTools: TestTool[];
  const sessions: ClientSession[] = [];

  /** A session of `run()` in this process. */
  const serve = async (agent = "triage") => {
    const session = await serveInProcess(["agent", "serve", agent], { cwd: dir, env: { MCP_TOKEN } });
    sessions.push(session);
    return session;
  };
  /** A session of the built CLI, a child as a client starts it. */
  const serveCli = async (agent = "triage") => {
    const session = await serveSession(["agent", "serve", agent], { cwd: dir, env: { MCP_TOKEN } });
    sessions.push(session);
    return session;
  };

  before(async () => {
    dir = mkdtempSync(path.join(tmpdir(), "subs-agent-serve-"));
    alphaTools = [
      annotatedTool("search", { readOnlyHint: true }),
      { ...annotatedTool("echo"), reply: (args) => `echo:${JSON.stringify(args)}` },
      {
        ...annotatedTool("rich"),
        outputSchema: { type: "object", properties: { count: { type: "number" } }, required: ["count"] },
        result: (args) => ({ content: [{ type: "text", text: "two blocks" }, { type: "text", text: String(args.n) }], structuredContent: { count: Number(args.n) } }),
      },
      { ...annotatedTool("broken"), result: () => ({ content: [{ type: "text", text: "it broke" }], isError: true }) },
      { ...annotatedTool("slow"), work: { steps: 100, everyMs: 50, reports: true } },
      {
        ...annotatedTool("refuses"),
        result: () => {
          throw new McpError(-32602, "refuses: argument `q` is required", { field: "q" });
        },
      },
    ];
    alpha = await startMcpServer({ name: "alpha", tools: alphaTools });
    beta = await startMcpServer({ name: "beta", tools: [annotatedTool("search"), annotatedTool("beta_only")] });
    gamma = await startMcpServer({ name: "gamma", tools: [annotatedTool("ping")] });
    const down = { url: await refusedUrl() };
    writeFileSync(
      path.join(dir, "substructure.toml"),
      `
[mcp.alpha]
url = "${alpha.url}"
auth = { token_env = "MCP_TOKEN" }

[mcp.beta]
url = "${beta.url}"
auth = { token_env = "MCP_TOKEN" }
prefix_tools = false

[mcp.down]
url = "${down.url}"
auth = { token_env = "MCP_TOKEN" }

[mcp.locked]
url = "${beta.url}"
auth = { token_env = "LOCKED_TOKEN" }

[agent.helper]
mcp = ["beta"]

[mcp.gamma]
url = "${gamma.url}"
auth = { token_env = "MCP_TOKEN" }

[agent.pair]
mcp = ["alpha", "gamma"]

[agent.nothing]
mcp = ["locked"]

[agent.triage]
mcp = ["alpha", "beta", "down", "locked"]
tools = ["search"]
agents = ["helper"]
`,
    );
  });

  after(async () => {
    await Promise.all(sessions.map((s) => s.close().catch(() => {})));
    await Promise.all([alpha, beta, gamma].map((s) => s.close()));
    rmSync(dir, { recursive: true, force: true });
  });

  /**
   * A clock that slows down with the machine: alpha__slow (100 steps of 50 ms, 5 s on an idle
   * machine) on a session of its own, started now. "At once" is then an order, not a figure:
   * before it has ended, however loaded the machine.
   */
  const slowClock = async () => {
    const reference = await serve();
    let ended = false;
    let begun!: () => void;
    const started = new Promise<void>((r) => (begun = r));
    const done = () => void (ended = true);
    reference.client.callTool({ name: "alpha__slow", arguments: {} }, undefined, { onprogress: () => begun() }).then(done, done);
    await within(started, "the reference call's first step");
    return { ended: () => ended };
  };

  const noToken = (s: ClientSession) => {
    assert.deepEqual(s.errors, [], "stdout carried only JSON-RPC");
    assert.ok(!s.stderr().includes(MCP_TOKEN), "the token reached stderr");
    assert.ok(!s.received.some((m) => m.includes(MCP_TOKEN)), "the token reached the client");
  };

  it("serves exactly what `subs agent tools --json` lists, without declared tools and sub-agents; what is left out is reported on stderr and to the client", async () => {
    // What `agent tools` lists is the reference here, not its subject (test/agent-tools.e2e.test.ts).
    const listed = await runInProcess(["agent", "tools", "triage", "--json"], { cwd: dir, env: { HOME: dir, MCP_TOKEN } });
    const expected = (JSON.parse(listed.stdout) as AgentToolsJson).tools.filter((t) => t.kind === "connector");
    assert.deepEqual(
      expected.map((t) => t.name),
      ["alpha__search", "alpha__echo", "alpha__rich", "alpha__broken", "alpha__slow", "alpha__refuses", "beta_only"],
    );

    const s = await serveCli();
    const { tools } = await s.client.listTools();
    assert.deepEqual(
      tools.map((t) => [t.name, t.description, t.inputSchema, t.annotations ?? null]),
      expected.map((t) => [t.name, t.description, t.input_schema, t.annotations]),
    );
    assert.deepEqual(tools.find((t) => t.name === "alpha__rich")?.outputSchema, alphaTools[2]!.outputSchema);
    assert.deepEqual(s.client.getServerCapabilities()?.tools, { listChanged: false });

    const logs = s.logs.map((l) => [l.level, l.logger, l.data]);
    assert.deepEqual(
      logs.map(([level, logger]) => [level, logger]),
      [
        ["warning", "subs"],
        ["warning", "subs"],
        ["warning", "subs"],
      ],
    );
    const texts = logs.map(([, , data]) => String(data));
    assert.match(texts[0]!, /^down: cannot reach .*; this session serves none of down's tools; hint: check the url in the file and that the server is up$/);
    assert.match(texts[1]!, /^locked: \$LOCKED_TOKEN is not set; this session serves none of locked's tools; hint: export LOCKED_TOKEN=/);
    assert.equal(texts[2], "not served: beta's `search` would be `search`; the declared tool `search` keeps its name");
    for (const text of texts) assert.ok(s.stderr().includes(text), `stderr reports: ${text}\n${s.stderr()}`);
    assert.match(s.stderr(), /Serving agent `triage`: 7 tools from 2 of 4 connections\./);
    noToken(s);
  });

  it("runs calls on the connection, results unchanged: content, structuredContent, isError", async () => {
    const s = await serve();
    const direct = new Client({ name: "direct", version: "1.0.0" });
    await direct.connect(new StreamableHTTPClientTransport(new URL(alpha.url)));
    try {
      for (const [tool, args] of [
        ["echo", { q: "x", nested: { a: [1, 2] } }],
        ["rich", { n: 7 }],
        ["broken", {}],
      ] as const) {
        const served = await s.client.callTool({ name: `alpha__${tool}`, arguments: args });
        const upstream = await direct.callTool({ name: tool, arguments: args });
        assert.deepEqual(served, upstream, tool);
      }
      assert.deepEqual(await s.client.callTool({ name: "alpha__rich", arguments: { n: 3 } }), {
        content: [
          { type: "text", text: "two blocks" },
          { type: "text", text: "3" },
        ],
        structuredContent: { count: 3 },
      });
      assert.equal((await s.client.callTool({ name: "alpha__broken", arguments: {} })).isError, true);
      assert.deepEqual((await s.client.callTool({ name: "beta_only", arguments: { z: 1 } })).content, [{ type: "text", text: '{"z":1}' }]);
      // A JSON-RPC error from the upstream reaches the client as the upstream sent it.
      const rpcError = async (call: () => Promise<unknown>) => {
        const error = await call().then(() => undefined, (e: unknown) => e);
        assert.ok(error instanceof McpError, String(error));
        return { code: error.code, message: error.message, data: error.data };
      };
      const servedError = await rpcError(() => s.client.callTool({ name: "alpha__refuses", arguments: {} }));
      assert.deepEqual(servedError, await rpcError(() => direct.callTool({ name: "refuses", arguments: {} })));
      assert.equal(servedError.code, -32602);
      assert.deepEqual(servedError.data, { field: "q" });
    } finally {
      await direct.close();
    }
    noToken(s);
  });

  it("a name not served (unknown, declared, a sub-agent, a dropped one) is an MCP error, not a tool result", async () => {
    const s = await serve();
    for (const name of ["nope", "search", "helper", "alpha__nope", "echo"]) {
      await assert.rejects(
        () => s.client.callTool({ name, arguments: {} }),
        // The session's unreachable connections are named, with what to do (a tool of theirs may be the one asked for).
        (error: unknown) =>
          error instanceof McpError &&
          error.code === -32602 &&
          error.message === `MCP error -32602: Unknown tool: ${name} (not served in this session: down: cannot reach http://127.0.0.1:2 (ECONNREFUSED); check the url in the file and that the server is up; locked: $LOCKED_TOKEN is not set; export LOCKED_TOKEN=… (the token locked authenticates with))`,
        name,
      );
    }
    // The session goes on.
    assert.equal((await s.client.callTool({ name: "alpha__echo", arguments: {} })).isError, undefined);
  });

  it("fetches once per session: an upstream's new tool is not served mid-session; a new session serves it", async () => {
    const s = await serve();
    const first = (await s.client.listTools()).tools.map((t) => t.name);
    const lists = () => alpha.requests.filter((m) => m === "tools/list").length;
    const listsBefore = lists();
    alphaTools.push(annotatedTool("fresh"));
    try {
      assert.deepEqual((await s.client.listTools()).tools.map((t) => t.name), first);
      await assert.rejects(() => s.client.callTool({ name: "alpha__fresh", arguments: {} }), McpError);
      assert.equal(lists(), listsBefore, "tools/list answered from the snapshot, upstream not asked again");
      const next = await serve();
      assert.deepEqual((await next.client.listTools()).tools.map((t) => t.name), [...first.filter((n) => n.startsWith("alpha__")), "alpha__fresh", "beta_only"]);
      assert.deepEqual((await next.client.callTool({ name: "alpha__fresh", arguments: { a: 1 } })).content, [{ type: "text", text: '{"a":1}' }]);
    } finally {
      alphaTools.pop();
    }
  });

  it("passes progress back under the client's token and a cancellation on to the upstream", async () => {
    const s = await serve();
    const progress: Progress[] = [];
    const controller = new AbortController();
    const cancelled = () => alpha.requests.filter((m) => m === "notifications/cancelled").length;
    const cancelledBefore = cancelled();
    await assert.rejects(() =>
      s.client.callTool({ name: "alpha__slow", arguments: {} }, undefined, {
        signal: controller.signal,
        onprogress: (p) => {
          progress.push(p);
          if (progress.length === 3) controller.abort(new Error("the user stopped it"));
        },
      }),
    );
    assert.deepEqual(progress, [1, 2, 3].map((n) => ({ progress: n, total: 100, message: `step ${n}` })));
    await waitFor(() => cancelled() > cancelledBefore, "the upstream to be told the request is cancelled");
    assert.equal(cancelled(), cancelledBefore + 1, "the upstream was told once");
    // The session still serves calls.
    assert.deepEqual((await s.client.callTool({ name: "alpha__echo", arguments: {} })).content, [{ type: "text", text: "echo:{}" }]);
  });

  it("a call in progress holds up no other; a server gone mid-session answers its calls with a tool error, and the others still work", async () => {
    const s = await serve("pair");
    const slow = s.client.callTool({ name: "alpha__slow", arguments: {} });
    let slowEnded = false;
    const ended = () => void (slowEnded = true);
    slow.then(ended, ended);
    assert.deepEqual((await s.client.callTool({ name: "gamma__ping", arguments: { x: 1 } })).content, [{ type: "text", text: '{"x":1}' }]);
    assert.equal(slowEnded, false, "answered while alpha__slow still runs");
    await gamma.close();
    // One turn of the event loop, in which the server serving in this process reads the end of its
    // kept-alive connection to gamma, as a serving process has read it by the time the client's
    // next request comes through its stdin: the call then meets a server that is gone, not a
    // connection it is closing (src/http/mcp-fetch.ts).
    await new Promise((resolve) => setImmediate(resolve));
    const gone = await s.client.callTool({ name: "gamma__ping", arguments: {} });
    assert.equal(gone.isError, true);
    assert.match((gone.content as Array<{ text: string }>)[0]!.text, /^gamma: cannot reach http:\/\/127\.0\.0\.1:\d+/);
    assert.deepEqual((await s.client.callTool({ name: "alpha__echo", arguments: {} })).content, [{ type: "text", text: "echo:{}" }]);
    assert.equal((await slow).isError, undefined);
    noToken(s);
  });

  it("ends cleanly and at once when the client closes stdin", async () => {
    const s = await serveCli();
    await s.client.listTools();
    const clock = await slowClock();
    s.child.stdin!.end();
    const { code, signal } = await within(s.exited, "the server to end once stdin closed");
    assert.equal(signal, null);
    assert.equal(code, 0, s.stderr());
    assert.equal(clock.ended(), false, "ended before a 5 s call on another session");
  });

  it("a client that writes its requests and closes stdin still gets every answer, then the server ends (exit 0)", async () => {
    const lines = [
      { jsonrpc: "2.0", id: 1, method: "initialize", params: { protocolVersion: "2025-06-18", capabilities: {}, clientInfo: { name: "pipe", version: "1" } } },
      { jsonrpc: "2.0", method: "notifications/initialized" },
      { jsonrpc: "2.0", id: 2, method: "tools/call", params: { name: "alpha__echo", arguments: { piped: true } } },
      { jsonrpc: "2.0", id: 3, method: "tools/call", params: { name: "nope", arguments: {} } },
    ];
    const r = await runCli(["agent", "serve", "triage"], { cwd: dir, env: { MCP_TOKEN }, input: lines.map((l) => JSON.stringify(l)).join("\n") + "\n" });
    assert.equal(r.code, 0, r.stderr);
    const out = r.stdout.trimEnd().split("\n").map((l) => JSON.parse(l) as { id?: number; method?: string; result?: unknown; error?: { code: number } });
    const byId = new Map(out.filter((m) => m.id !== undefined).map((m) => [m.id, m]));
    assert.deepEqual([...byId.keys()].sort(), [1, 2, 3]);
    assert.deepEqual(byId.get(2)!.result, { content: [{ type: "text", text: 'echo:{"piped":true}' }] });
    assert.equal(byId.get(3)!.error?.code, -32602);
    assert.equal(out[0]!.id, 1, "the initialize answer comes first");
    // Everything else on stdout is protocol too: the log messages of what was left out.
    assert.ok(out.filter((m) => m.id === undefined).every((m) => m.method === "notifications/message"));
  });

  it("the initialize answer comes first even when what is left out is known at once", async () => {
    const lines = [
      { jsonrpc: "2.0", id: 1, method: "initialize", params: { protocolVersion: "2025-06-18", capabilities: {}, clientInfo: { name: "pipe", version: "1" } } },
      { jsonrpc: "2.0", method: "notifications/initialized" },
      { jsonrpc: "2.0", id: 2, method: "tools/list" },
    ];
    const r = await runServeInProcess(["agent", "serve", "nothing"], { cwd: dir, input: lines.map((l) => JSON.stringify(l)).join("\n") + "\n" });
    assert.equal(r.code, 0, r.stderr);
    const out = r.stdout.trimEnd().split("\n").map((l) => JSON.parse(l) as { id?: number; method?: string; result?: unknown });
    assert.deepEqual(
      out.map((m) => m.id ?? m.method),
      [1, "notifications/message", 2],
    );
    assert.deepEqual(out[2]!.result, { tools: [] });
  });

  it("ends cleanly (exit 0) and at once on SIGTERM and on SIGINT, mid-call too", async () => {
    for (const sig of ["SIGTERM", "SIGINT"] as const) {
      const s = await serveCli();
      await s.client.listTools();
      const clock = await slowClock();
      let working!: () => void;
      const upstream = new Promise<void>((r) => (working = r));
      const call = s.client.callTool({ name: "alpha__slow", arguments: {} }, undefined, { onprogress: () => working() }).catch((error: unknown) => error);
      await within(upstream, "the call's first step upstream");
      s.child.kill(sig);
      const { code, signal } = await within(s.exited, `the server to end on ${sig}`);
      assert.equal(signal, null, sig);
      assert.equal(code, 0, `${sig}: ${s.stderr()}`);
      assert.equal(clock.ended(), false, `${sig}: ended mid-call, before a 5 s call on another session would`);
      assert.ok((await call) instanceof Error, "the call in flight ends with the server");
      assert.ok(!s.stderr().includes("Interrupted"), s.stderr());
    }
  });

  it("with [remote]: exit 2, the deployment runs the calls; nothing on stdout", async () => {
    const remote = mkdtempSync(path.join(tmpdir(), "subs-agent-serve-remote-"));
    try {
      writeFileSync(path.join(remote, "substructure.toml"), `[remote]\nurl = "https://deploy.example"\n\n[mcp.a]\nurl = "https://a.example/mcp"\n\n[agent.triage]\nmcp = ["a"]\n`);
      const r = await runServeInProcess(["agent", "serve", "triage"], { cwd: remote });
      assert.equal(r.code, 2, r.stderr);
      assert.equal(r.stdout, "");
      assert.match(r.stderr, /error: subs agent serve works only without \[remote\]: with \[remote\], the deployment holds the credentials and runs the agent's tool calls/);
    } finally {
      rmSync(remote, { recursive: true, force: true });
    }
  });

  it("an unknown agent: exit 2 with a suggestion, before anything is served", async () => {
    const r = await runServeInProcess(["agent", "serve", "triag"], { cwd: dir, env: { MCP_TOKEN } });
    assert.equal(r.code, 2);
    assert.equal(r.stdout, "");
    assert.match(r.stderr, /no agent `triag`.*\n.*did you mean `triage`\?/);
  });
});

/**
 * An MCP server with sessions (MCP Streamable HTTP, "Session Management"), as most real ones are:
 * `forget()` ends every session, as a restart or an idle timeout does, and a request with an
 * unknown session id is answered 404.
 */
async function startSessionServer() {
  const sessions = new Map<string, StreamableHTTPServerTransport>();
  const stats = { started: 0, calls: 0 };
  const http = createServer(async (req, res) => {
    const chunks: Buffer[] = [];
    for await (const chunk of req) chunks.push(chunk as Buffer);
    const body = chunks.length > 0 ? JSON.parse(Buffer.concat(chunks).toString("utf8")) : undefined;
    const id = req.headers["mcp-session-id"];
    if (typeof id === "string") {
      const transport = sessions.get(id);
      if (!transport) return void res.writeHead(404, { "content-type": "application/json" }).end(JSON.stringify({ jsonrpc: "2.0", id: null, error: { code: -32001, message: "Session not found" } }));
      return void (await transport.handleRequest(req, res, body));
    }
    const transport: StreamableHTTPServerTransport = new StreamableHTTPServerTransport({
      sessionIdGenerator: () => randomUUID(),
      enableJsonResponse: true,
      onsessioninitialized: (sid) => void sessions.set(sid, transport),
    });
    const server = new Server({ name: "sessions", version: "1.0.0" }, { capabilities: { tools: {} } });
    server.setRequestHandler(ListToolsRequestSchema, async () => ({ tools: [{ name: "whoami", inputSchema: { type: "object" } }] }));
    server.setRequestHandler(CallToolRequestSchema, async () => {
      stats.calls++;
      return { content: [{ type: "text", text: `session ${transport.sessionId}` }] };
    });
    stats.started++;
    await server.connect(transport);
    await transport.handleRequest(req, res, body);
  });
  await new Promise<void>((resolve) => http.listen(0, "127.0.0.1", resolve));
  return {
    url: `http://127.0.0.1:${(http.address() as AddressInfo).port}/mcp`,
    stats,
    forget: () => sessions.clear(),
    close: () => new Promise<void>((resolve) => (http.closeAllConnections(), http.close(() => resolve()))),
  };
}

describe("subs agent serve (end to end, an upstream with sessions)", () => {
  it("a session the upstream ended (404) is replaced by a new one and the call sent again, once", async () => {
    const upstream = await startSessionServer();
    const dir = mkdtempSync(path.join(tmpdir(), "subs-agent-serve-sessions-"));
    let s: ClientSession | undefined;
    try {
      writeFileSync(path.join(dir, "substructure.toml"), `[mcp.keep]\nurl = "${upstream.url}"\nauth = { token_env = "MCP_TOKEN" }\n\n[agent.bot]\nmcp = ["keep"]\n`);
      s = await serveInProcess(["agent", "serve", "bot"], { cwd: dir, env: { MCP_TOKEN } });
      const text = async () => {
        const result = await s!.client.callTool({ name: "keep__whoami", arguments: {} });
        assert.equal(result.isError, undefined, JSON.stringify(result) + "\nSTDERR:" + s!.stderr());
        return (result.content as Array<{ text: string }>)[0]!.text;
      };
      const first = await text();
      assert.equal(await text(), first, "calls share the upstream session");
      assert.equal(upstream.stats.started, 1);
      upstream.forget();
      const calls = upstream.stats.calls;
      const [a, b] = await Promise.all([text(), text()]);
      assert.notEqual(a, first);
      assert.equal(a, b, "both calls that found the session ended went to one new session");
      assert.equal(upstream.stats.started, 2);
      assert.equal(upstream.stats.calls - calls, 2, "each call ran once");
      // The same recovery as `subs mcp proxy` (src/serve/upstream.ts), which says so once on stderr.
      assert.equal(s.stderr().match(/keep: the server ended its session; starting a new one/g)?.length, 1, s.stderr());
    } finally {
      await s?.close();
      await upstream.close();
      rmSync(dir, { recursive: true, force: true });
    }
  });
});

describe("subs agent serve (end to end, OAuth credentials)", () => {
  const agentToml = (url: string) => `[mcp.demo]\nurl = "${url}"\n\n[agent.bot]\nmcp = ["demo"]\n`;

  const leaks = (env: Env, sessions: ClientSession[]) => {
    const seen = sessions.flatMap((s) => [s.stderr(), ...s.received]).join("\n");
    return env.as.issuedTokens().filter((token) => seen.includes(token));
  };

  it("a connection not logged in is left out at the start and reported with `subs mcp login <id>`; nothing waits for a browser", { timeout: 30_000 }, async () => {
    const env = await environment({ toml: agentToml });
    let s: ClientSession | undefined;
    try {
      s = await serveInProcess(["agent", "serve", "bot"], { cwd: env.dir });
      assert.deepEqual((await s.client.listTools()).tools, []);
      assert.deepEqual(
        s.logs.map((l) => l.data),
        ["demo: not logged in; this session serves none of demo's tools; hint: run `subs mcp login demo`"],
      );
      assert.match(s.stderr(), /warning: demo: not logged in; this session serves none of demo's tools; hint: run `subs mcp login demo`/);
      assert.equal(env.as.counters.authorizations, 0);
      await assert.rejects(() => s!.client.callTool({ name: "demo__echo", arguments: {} }), McpError);
    } finally {
      await s?.close();
      await env.close();
    }
  });

  it("an access token that expires mid-session is refreshed before a call, with no failed call", { timeout: 30_000 }, async () => {
    const env = await environment({ as: { accessTokenTtlSeconds: 2 }, toml: agentToml });
    const sessions: ClientSession[] = [];
    try {
      assert.equal((await env.subs(["mcp", "login", "demo"])).code, 0);
      const s = await serveInProcess(["agent", "serve", "bot"], { cwd: env.dir });
      sessions.push(s);
      assert.deepEqual((await s.client.listTools()).tools.map((t) => t.name), OAUTH_TOOLS.map((t) => `demo__${t.name}`));
      const refreshes = env.as.counters.refreshes;
      for (let n = 0; n < 4; n++) {
        const result = await s.client.callTool({ name: "demo__echo", arguments: { n } });
        assert.deepEqual(result.content, [{ type: "text", text: `echo:{"n":${n}}` }], `call ${n}: ${JSON.stringify(result)}`);
        await sleep(1100);
      }
      assert.ok(env.as.counters.refreshes - refreshes >= 1, "the token was refreshed mid-session");
      assert.equal(env.as.counters.rejectedRefreshes, 0);
      // Each refresh stored: the db holds the newest token.
      const row = env.db().prepare("SELECT access_token FROM subs_credentials WHERE id = 'demo'").get() as { access_token: string };
      assert.equal(env.mcp.authorizations.at(-1), `Bearer ${row.access_token}`);
      assert.deepEqual(leaks(env, sessions), []);
    } finally {
      await Promise.all(sessions.map((s) => s.close()));
      await env.close();
    }
  });

  it("a 401 to a token the store thinks valid: one refresh and the same call again, which succeeds", { timeout: 30_000 }, async () => {
    const env = await environment({ toml: agentToml });
    const sessions: ClientSession[] = [];
    try {
      assert.equal((await env.subs(["mcp", "login", "demo"])).code, 0);
      const s = await serveInProcess(["agent", "serve", "bot"], { cwd: env.dir });
      sessions.push(s);
      await s.client.listTools();
      env.as.forgetAccessTokens(); // a restarted server: the token answers 401 before its expiry
      const refreshes = env.as.counters.refreshes;
      const calls = env.mcp.requests.filter((m) => m === "tools/call").length;
      const result = await s.client.callTool({ name: "demo__echo", arguments: { a: 1 } });
      assert.deepEqual(result.content, [{ type: "text", text: 'echo:{"a":1}' }], JSON.stringify(result));
      assert.equal(env.as.counters.refreshes - refreshes, 1);
      assert.equal(env.mcp.requests.filter((m) => m === "tools/call").length - calls, 1, "the rejected request never reached the tool");
      assert.deepEqual(leaks(env, sessions), []);
    } finally {
      await Promise.all(sessions.map((s) => s.close()));
      await env.close();
    }
  });

  it("a connection that needs a login answers the call with a tool error naming `subs mcp login <id>`; no browser is opened", { timeout: 30_000 }, async () => {
    const env = await environment({ toml: agentToml });
    const sessions: ServeSession[] = [];
    try {
      assert.equal((await env.subs(["mcp", "login", "demo"])).code, 0);
      const authorizations = env.as.counters.authorizations;
      // $BROWSER would record any attempt to open one.
      const opened = path.join(env.dir, "opened.txt");
      const s = await serveSession(["agent", "serve", "bot"], { cwd: env.dir, env: { BROWSER: `sh -c 'echo "$0" >> ${opened}'` } });
      sessions.push(s);
      await s.client.listTools();
      env.as.revokeAllRefreshTokens();
      env.as.forgetAccessTokens();
      const result = await s.client.callTool({ name: "demo__echo", arguments: {} });
      assert.equal(result.isError, true);
      const text = (result.content as Array<{ text: string }>)[0]!.text;
      assert.match(text, /^demo: the authorization server rejected the refresh token .*run `subs mcp login demo`/);
      assert.equal(env.as.counters.authorizations, authorizations, "no authorization was started");
      assert.throws(() => rmSync(opened), /ENOENT/, "no browser was opened");
      // The session goes on: the next call says the same, without a second refresh attempt at a dead grant.
      const again = await s.client.callTool({ name: "demo__echo", arguments: {} });
      assert.equal(again.isError, true);
      assert.match((again.content as Array<{ text: string }>)[0]!.text, /subs mcp login demo/);
      assert.deepEqual(leaks(env, sessions), []);
    } finally {
      await Promise.all(sessions.map((s) => s.close()));
      await env.close();
    }
  });

  it("8 serve processes on one db and a rotating refresh token: every call succeeds, no refresh token is used twice", { timeout: 90_000 }, async () => {
    // A 4 s token: with 2 s, on a machine at load 6 to 13, two runs in three had seven of the eight
    // processes begin with "the server rejected the stored credential" (their start outlasting
    // the token got at login and the one refreshed then, which a token of minutes never does).
    const env = await environment({ as: { accessTokenTtlSeconds: 4, refreshDelayMs: 150 }, toml: agentToml });
    const sessions: ServeSession[] = [];
    try {
      assert.equal((await env.subs(["mcp", "login", "demo"])).code, 0);
      sessions.push(...(await Promise.all(Array.from({ length: 8 }, () => serveSession(["agent", "serve", "bot"], { cwd: env.dir })))));
      const refreshes = env.as.counters.refreshes;
      const started = Date.now();
      const failures: string[] = [];
      let calls = 0;
      // A fixed number of calls, each process spread over at least 8 s (two lifetimes of the token),
      // however slow a loaded machine makes them: the bounds below follow the time they took.
      await Promise.all(
        sessions.map(async (s, n) => {
          for (let i = 0; i < 20; i++) {
            const result = await s.client.callTool({ name: "demo__echo", arguments: { n } });
            calls++;
            if (result.isError || JSON.stringify(result.content) !== JSON.stringify([{ type: "text", text: `echo:{"n":${n}}` }])) failures.push(JSON.stringify(result));
            await sleep(400);
          }
        }),
      );
      const seconds = (Date.now() - started) / 1000;
      assert.deepEqual(failures, []);
      assert.equal(calls, 160);
      assert.equal(env.as.counters.rejectedRefreshes, 0, "no process used a refresh token another had rotated");
      const rotated = env.as.counters.refreshes - refreshes;
      // The 4 s token is refreshed in its second half: about one refresh every two seconds for all
      // eight processes together, never one per process.
      assert.ok(rotated >= 2 && rotated <= Math.ceil(seconds) + 2, `${rotated} refreshes in ${seconds.toFixed(1)} s`);
      assert.deepEqual(leaks(env, sessions), []);
    } finally {
      await Promise.all(sessions.map((s) => s.close()));
      await env.close();
    }
  });
});
