// The handshake `subs agent serve` and `subs mcp proxy` give over stdio before their server is
// built (src/serve/stdio.ts, src/serve/handshake.ts): the agent's answer is the one its server
// gives; the proxy sends its upstream's initialize by hand (src/serve/upstream-handshake.ts) and
// its server then takes that session over, or, for anything but the plain case, leaves it all to
// the SDK's client as before. In-process, with real loopback servers.
import assert from "node:assert/strict";
import { randomUUID } from "node:crypto";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { createServer, type IncomingMessage, type Server as HttpServer } from "node:http";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import path from "node:path";
import { PassThrough } from "node:stream";
import { after, before, describe, it } from "node:test";
import { InMemoryTransport } from "@modelcontextprotocol/sdk/inMemory.js";
import { Server } from "@modelcontextprotocol/sdk/server/index.js";
import { StreamableHTTPServerTransport } from "@modelcontextprotocol/sdk/server/streamableHttp.js";
import * as sdk from "@modelcontextprotocol/sdk/types.js";
import { ListToolsRequestSchema, type JSONRPCMessage } from "@modelcontextprotocol/sdk/types.js";
import { loadConfig } from "../src/config/load.ts";
import { silentReporter } from "../src/report.ts";
import { agentSessionFactory } from "../src/serve/agent-session.ts";
import { initializeParams, LATEST_PROTOCOL_VERSION, SUPPORTED_PROTOCOL_VERSIONS } from "../src/serve/handshake.ts";
import { proxySessionFactory } from "../src/serve/proxy-session.ts";
import { upstreamInitializeResult } from "../src/serve/upstream-handshake.ts";
import type { SessionFactory } from "../src/serve/session.ts";
import { serveStdio } from "../src/serve/stdio.ts";
import { testContext } from "./support/cli.ts";
import { annotatedTool, startMcpServer, type RunningMcpServer } from "./support/mcp-server.ts";
import { waitFor } from "./support/wait.ts";

it("the protocol revisions written out are the SDK's", () => {
  assert.equal(LATEST_PROTOCOL_VERSION, sdk.LATEST_PROTOCOL_VERSION);
  assert.deepEqual(SUPPORTED_PROTOCOL_VERSIONS, sdk.SUPPORTED_PROTOCOL_VERSIONS);
});

const initialize = (protocolVersion: string, id: number = 1) => ({
  jsonrpc: "2.0" as const,
  id,
  method: "initialize",
  params: { protocolVersion, capabilities: { roots: { listChanged: true } }, clientInfo: { name: "t", version: "1" } },
});

describe("subs agent serve", () => {
  let dir: string;
  let upstream: RunningMcpServer;
  before(async () => {
    dir = mkdtempSync(path.join(tmpdir(), "subs-handshake-agent-"));
    upstream = await startMcpServer({ tools: [annotatedTool("search")] });
    writeFileSync(path.join(dir, "substructure.toml"), `[mcp.up]\nurl = "${upstream.url}"\nauth = { token_env = "T" }\n\n[agent.bot]\nmcp = ["up"]\n`);
  });
  after(async () => {
    await upstream.close();
    rmSync(dir, { recursive: true, force: true });
  });

  it("answers initialize early exactly as its server does, for every revision a client may ask for", async () => {
    const { ctx } = testContext({ cwd: dir, env: { T: "token" } });
    const factory = agentSessionFactory(ctx, loadConfig({ env: ctx.env, cwd: dir }), "bot", { reporter: silentReporter, timeoutMs: 5000, requestTimeoutMs: 5000 });
    for (const version of [...SUPPORTED_PROTOCOL_VERSIONS, "2023-01-01", "2099-12-31"]) {
      const session = factory();
      const request = initialize(version);
      const early = await session.early!.initialize(request.params);
      const opened = await session.open();
      const [client, server] = InMemoryTransport.createLinkedPair();
      const answers: JSONRPCMessage[] = [];
      client.onmessage = (message) => void answers.push(message);
      await opened.server.connect(server);
      await client.start();
      await client.send(request);
      await waitFor(() => answers.length > 0, `the server's answer to an initialize asking for ${version}`, undefined, 5);
      assert.deepEqual({ result: early }, { result: (answers[0] as { result?: unknown }).result }, `asked for ${version}`);
      await opened.server.close();
      await opened.close();
    }
  });

  it("leaves an initialize without clientInfo.version, which the SDK's schema refuses, to its server", async () => {
    const { ctx } = testContext({ cwd: dir, env: { T: "token" } });
    const factory = agentSessionFactory(ctx, loadConfig({ env: ctx.env, cwd: dir }), "bot", { reporter: silentReporter, timeoutMs: 5000, requestTimeoutMs: 5000 });
    assert.equal(await factory().early!.initialize({ protocolVersion: LATEST_PROTOCOL_VERSION, capabilities: {}, clientInfo: { name: "t" } }), undefined);
  });
});

type Seen = { method: string; session: string | undefined; authorization: string | undefined };

/**
 * A stateful upstream (MCP Streamable HTTP with sessions, as the SDK's server keeps them): a
 * request of an unknown session is refused (404), one without a session that is not initialize
 * too (400). Answers as JSON, or as an event stream when `stream`. `refuse`: every request is
 * answered 401 (a token the server does not take).
 */
async function statefulUpstream(options: { stream?: boolean; refuse?: boolean } = {}) {
  const seen: Seen[] = [];
  const transports = new Map<string, StreamableHTTPServerTransport>();
  const http: HttpServer = createServer(async (req: IncomingMessage, res) => {
    const chunks: Buffer[] = [];
    for await (const chunk of req) chunks.push(chunk as Buffer);
    const body = chunks.length ? JSON.parse(Buffer.concat(chunks).toString("utf8")) : undefined;
    const session = req.headers["mcp-session-id"] as string | undefined;
    if (body?.method) seen.push({ method: body.method, session, authorization: req.headers.authorization });
    if (options.refuse) return void res.writeHead(401, { "www-authenticate": 'Bearer error="invalid_token"' }).end();
    let transport = session ? transports.get(session) : undefined;
    if (!transport) {
      if (session || body?.method !== "initialize") return void res.writeHead(session ? 404 : 400).end();
      const server = new Server({ name: "stateful", version: "2.0.0", title: "A stateful server" }, { capabilities: { tools: {}, logging: {} }, instructions: "use the tools" });
      server.setRequestHandler(ListToolsRequestSchema, async () => ({ tools: [{ name: "search", inputSchema: { type: "object" } }] }));
      const created = new StreamableHTTPServerTransport({
        sessionIdGenerator: () => randomUUID(),
        enableJsonResponse: !options.stream,
        onsessioninitialized: (id) => void transports.set(id, created),
      });
      await server.connect(created);
      transport = created;
    }
    await transport.handleRequest(req, res, body);
  });
  await new Promise<void>((resolve) => http.listen(0, "127.0.0.1", resolve));
  return {
    url: `http://127.0.0.1:${(http.address() as AddressInfo).port}/mcp`,
    seen,
    close: () =>
      new Promise<void>((resolve) => {
        http.closeAllConnections();
        http.close(() => resolve());
      }),
  };
}

/** serveStdio over streams of the test's own, with what the client receives parsed, and whether the session's server was built yet. */
function stdio(factory: SessionFactory, ctx: Omit<Parameters<typeof serveStdio>[0], "protocolStreams">) {
  const input = new PassThrough();
  const output = new PassThrough();
  const lines: Array<{ id?: number; result?: Record<string, unknown>; error?: { message: string } }> = [];
  const openedAfter: number[] = [];
  let buffered = "";
  output.on("data", (chunk: Buffer) => {
    buffered += chunk.toString("utf8");
    for (let n = buffered.indexOf("\n"); n >= 0; n = buffered.indexOf("\n")) {
      lines.push(JSON.parse(buffered.slice(0, n)));
      buffered = buffered.slice(n + 1);
    }
  });
  const watched: SessionFactory = () => {
    const session = factory();
    return { ...session, open: () => (openedAfter.push(lines.length), session.open()) };
  };
  const served = serveStdio({ ...ctx, protocolStreams: () => ({ input, output }) }, watched);
  const send = (...messages: object[]) => input.write(messages.map((m) => JSON.stringify(m)).join("\n") + "\n");
  const answer = async (id: number) => {
    const deadline = Date.now() + 10_000;
    for (;;) {
      const line = lines.find((l) => l.id === id);
      if (line) return line;
      assert.ok(Date.now() < deadline, `no answer to ${id} within 10 s`);
      await new Promise((r) => setTimeout(r, 5));
    }
  };
  return { served, send, answer, lines, openedAfter, end: () => input.end() };
}

describe("subs mcp proxy", () => {
  let dir: string;
  before(() => void (dir = mkdtempSync(path.join(tmpdir(), "subs-handshake-proxy-"))));
  after(() => rmSync(dir, { recursive: true, force: true }));

  const proxy = (url: string) => {
    writeFileSync(path.join(dir, "substructure.toml"), `[mcp.up]\nurl = "${url}"\nauth = { token_env = "T" }\n`);
    const t = testContext({ cwd: dir, env: { T: "token-SECRET-123" } });
    const config = loadConfig({ env: t.ctx.env, cwd: dir });
    const factory = proxySessionFactory(t.ctx, config, config.connections.find((c) => c.id === "up")!, { reporter: silentReporter });
    return { factory, ctx: t.ctx, stderr: t.stderr };
  };

  for (const stream of [false, true]) {
    it(`sends the upstream's initialize once, answers its client before building its server, which takes the session over (${stream ? "an event stream" : "JSON"})`, async () => {
      const upstream = await statefulUpstream({ stream });
      try {
        const p = proxy(upstream.url);
        const s = stdio(p.factory, { signal: p.ctx.signal, stderr: p.ctx.stderr });
        s.send(initialize("2025-06-18"), { jsonrpc: "2.0", method: "notifications/initialized" }, { jsonrpc: "2.0", id: 2, method: "tools/list" });
        const answer = await s.answer(1);
        assert.deepEqual(answer.result, {
          protocolVersion: "2025-06-18",
          capabilities: { tools: {}, logging: {} },
          serverInfo: { name: "stateful", version: "2.0.0", title: "A stateful server" },
          instructions: "use the tools",
        });
        assert.deepEqual((await s.answer(2)).result, { tools: [{ name: "search", inputSchema: { type: "object" } }] });
        s.end();
        await s.served;
        assert.deepEqual(s.openedAfter, [1], "the server was built once the initialize answer had been sent");
        assert.deepEqual(
          s.lines.map((l) => l.id),
          [1, 2],
          "nothing answered twice",
        );
        const session = upstream.seen[1]?.session;
        assert.ok(session, "the upstream opened a session at its initialize");
        assert.deepEqual(
          upstream.seen.filter((r) => r.method !== "notifications/cancelled"),
          [
            { method: "initialize", session: undefined, authorization: "Bearer token-SECRET-123" },
            { method: "notifications/initialized", session, authorization: "Bearer token-SECRET-123" },
            { method: "tools/list", session, authorization: "Bearer token-SECRET-123" },
          ],
        );
      } finally {
        await upstream.close();
      }
    });
  }

  it("an upstream that refuses the credential: the SDK's client tries again as before, and the client gets the same error", async () => {
    const upstream = await statefulUpstream({ refuse: true });
    try {
      const p = proxy(upstream.url);
      const s = stdio(p.factory, { signal: p.ctx.signal, stderr: p.ctx.stderr });
      s.send(initialize("2025-06-18"));
      const answer = await s.answer(1);
      assert.match(answer.error?.message ?? "", /up: the server rejected the token in \$T/);
      s.end();
      await s.served;
      assert.deepEqual(
        upstream.seen.map((r) => r.method),
        ["initialize", "initialize"],
        "by hand, then by the SDK's client",
      );
      assert.deepEqual(s.openedAfter, [0], "the server answered it");
    } finally {
      await upstream.close();
    }
  });
});

describe("the hand checks of the handshake", () => {
  // Each value a field may wrongly hold, and none at all.
  const WRONG = [undefined, null, true, 1, "x", [], {}, [{}]];
  const DROP = Symbol("drop");
  /** `base` with the field at `keyPath` set to `value` (or removed). */
  const withField = (base: Record<string, unknown>, keyPath: readonly string[], value: unknown): Record<string, unknown> => {
    const copy = structuredClone(base);
    let at: Record<string, unknown> = copy;
    for (const key of keyPath.slice(0, -1)) at = at[key] as Record<string, unknown>;
    if (value === DROP) delete at[keyPath.at(-1)!];
    else at[keyPath.at(-1)!] = value;
    return copy;
  };
  /**
   * The SDK's schema and the hand check agree wherever the check looks: each field it reads, set
   * to every wrong kind of value or removed, is refused by both or taken by both; and nothing the
   * SDK takes is refused (a valid client never misses the early answer).
   */
  const agree = (name: string, base: Record<string, unknown>, read: string[][], handTakes: (value: unknown) => boolean, sdkTakes: (value: unknown) => boolean) => {
    assert.ok(sdkTakes(base) && handTakes(base), `${name}: the valid value`);
    for (const keyPath of read) {
      for (const value of [...WRONG, DROP]) {
        const mutated = withField(base, keyPath, value);
        assert.equal(handTakes(mutated), sdkTakes(mutated), `${name}: ${keyPath.join(".")} = ${value === DROP ? "(none)" : JSON.stringify(value)}`);
      }
    }
    for (const extra of [{ more: 1 }, { _meta: {} }, { capabilities: { roots: { listChanged: true }, experimental: {} } }]) {
      const value = { ...base, ...extra };
      if (sdkTakes(value)) assert.ok(handTakes(value), `${name}: with ${JSON.stringify(extra)}`);
    }
    assert.equal(handTakes(null), false);
    assert.equal(handTakes([]), false);
  };

  it("initialize's params: as the SDK's schema has them, where the early answer reads them", () => {
    agree(
      "initialize params",
      { protocolVersion: "2025-06-18", capabilities: {}, clientInfo: { name: "c", version: "1" } },
      [["protocolVersion"], ["capabilities"], ["clientInfo"], ["clientInfo", "name"]],
      (value) => "params" in initializeParams(value),
      (value) => sdk.InitializeRequestParamsSchema.safeParse(value).success,
    );
  });

  it("the upstream's initialize result: as the SDK's schema has it, where the proxy reads it", () => {
    agree(
      "initialize result",
      { protocolVersion: "2025-06-18", capabilities: {}, serverInfo: { name: "s", version: "1" }, instructions: "i" },
      [["protocolVersion"], ["capabilities"], ["serverInfo"], ["serverInfo", "name"], ["serverInfo", "version"], ["instructions"]],
      (value) => upstreamInitializeResult(value) !== undefined,
      (value) => sdk.InitializeResultSchema.safeParse(value).success,
    );
  });
});
