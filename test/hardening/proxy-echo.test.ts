// `subs mcp proxy` in front of an upstream that quotes, verbatim, the Authorization header it
// received in every field it can fill: the initialize answer (server name, instructions), tools
// (title, description, schemas, annotations, _meta), results (text, structuredContent, _meta,
// isError), resources and templates, a resource's contents, prompts, completions, progress
// messages, log messages, errors (message, data), resource update notifications, and its own
// requests to the client (sampling, elicitation). The client receives every one of them, without
// the credential. The built CLI over stdio, each message the client receives checked as sent.
import assert from "node:assert/strict";
import { randomUUID } from "node:crypto";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { createServer, type IncomingMessage, type Server as HttpServer } from "node:http";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import path from "node:path";
import { after, before, describe, it } from "node:test";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
import { Server } from "@modelcontextprotocol/sdk/server/index.js";
import { StreamableHTTPServerTransport } from "@modelcontextprotocol/sdk/server/streamableHttp.js";
import {
  CallToolRequestSchema,
  CompleteRequestSchema,
  CreateMessageRequestSchema,
  CreateMessageResultSchema,
  ElicitRequestSchema,
  ElicitResultSchema,
  GetPromptRequestSchema,
  ListPromptsRequestSchema,
  ListResourcesRequestSchema,
  ListResourceTemplatesRequestSchema,
  ListToolsRequestSchema,
  LoggingMessageNotificationSchema,
  McpError,
  ReadResourceRequestSchema,
  ResourceUpdatedNotificationSchema,
  SubscribeRequestSchema,
  type JSONRPCMessage,
} from "@modelcontextprotocol/sdk/types.js";
import { BIN, ensureBuilt } from "../support/cli.ts";

const MCP_TOKEN = "echoed-SECRET-token-4f9a2b7c";
/** What the upstream writes before each quote: a field it filled, found in what the client got. */
const HEARD = "heard:";

/** A stateful upstream that puts `heard:<the Authorization header of the request>` in every field. */
async function echoingUpstream(): Promise<{ url: string; close: () => Promise<void> }> {
  const sessions = new Map<string, StreamableHTTPServerTransport>();
  const newSession = (initial: string) => {
    const quote = (heard: string | string[] | undefined) => `${HEARD}${String(heard)}`;
    const server = new Server(
      { name: `echo ${quote(initial)}`, title: quote(initial), version: quote(initial) },
      { capabilities: { tools: {}, resources: { subscribe: true }, prompts: {}, completions: {}, logging: {} }, instructions: quote(initial) },
    );
    const heard = (extra: { requestInfo?: { headers: IncomingMessage["headers"] } }) => quote(extra.requestInfo?.headers.authorization);
    server.setRequestHandler(ListToolsRequestSchema, async (_request, extra) => ({
      tools: [
        {
          name: "quote",
          title: heard(extra),
          description: heard(extra),
          inputSchema: { type: "object", description: heard(extra), properties: { q: { type: "string", description: heard(extra), default: heard(extra) } } },
          outputSchema: { type: "object", description: heard(extra), properties: { said: { type: "string" } } },
          annotations: { title: heard(extra) },
          _meta: { said: heard(extra) },
        },
      ],
    }));
    server.setRequestHandler(CallToolRequestSchema, async (request, extra) => {
      const said = heard(extra);
      switch (request.params.name) {
        case "quote": {
          const token = request.params._meta?.progressToken;
          if (token !== undefined) await extra.sendNotification({ method: "notifications/progress", params: { progressToken: token, progress: 1, total: 2, message: said } });
          await server.sendLoggingMessage({ level: "error", logger: said, data: { said, nested: [said] } }, extra.sessionId);
          return {
            content: [
              { type: "text", text: said },
              { type: "resource_link", uri: "echo://doc", name: said, description: said },
              { type: "resource", resource: { uri: "echo://doc", text: said } },
            ],
            structuredContent: { said },
            _meta: { said },
          };
        }
        case "fails":
          return { content: [{ type: "text", text: said }], isError: true };
        case "throws":
          throw new McpError(-32042, said, { said });
        case "asks": {
          const sampled = await extra.sendRequest(
            { method: "sampling/createMessage", params: { messages: [{ role: "user", content: { type: "text", text: said } }], systemPrompt: said, maxTokens: 10, metadata: { said } } },
            CreateMessageResultSchema,
          );
          const elicited = await extra.sendRequest({ method: "elicitation/create", params: { mode: "form", message: said, requestedSchema: { type: "object", properties: { name: { type: "string", description: said } } } } }, ElicitResultSchema);
          return { content: [{ type: "text", text: `asked: ${sampled.model} ${elicited.action}` }] };
        }
        default:
          throw new McpError(-32602, `unknown tool ${request.params.name}`);
      }
    });
    server.setRequestHandler(ListResourcesRequestSchema, async (_request, extra) => ({ resources: [{ uri: "echo://doc", name: heard(extra), description: heard(extra), title: heard(extra) }], nextCursor: heard(extra) }));
    server.setRequestHandler(ListResourceTemplatesRequestSchema, async (_request, extra) => ({ resourceTemplates: [{ uriTemplate: "echo://{x}", name: heard(extra), description: heard(extra) }] }));
    server.setRequestHandler(ReadResourceRequestSchema, async (request, extra) => ({ contents: [{ uri: request.params.uri, text: heard(extra), _meta: { said: heard(extra) } }] }));
    server.setRequestHandler(SubscribeRequestSchema, async (request, extra) => {
      await server.sendResourceUpdated({ uri: `${request.params.uri}#${heard(extra)}` });
      return {};
    });
    server.setRequestHandler(ListPromptsRequestSchema, async (_request, extra) => ({ prompts: [{ name: "p", description: heard(extra), arguments: [{ name: "a", description: heard(extra) }] }] }));
    server.setRequestHandler(GetPromptRequestSchema, async (_request, extra) => ({ description: heard(extra), messages: [{ role: "assistant", content: { type: "text", text: heard(extra) } }] }));
    server.setRequestHandler(CompleteRequestSchema, async (_request, extra) => ({ completion: { values: [heard(extra)], total: 1 } }));
    return server;
  };
  const http: HttpServer = createServer(async (req, res) => {
    try {
      let body: unknown;
      if (req.method === "POST") {
        const chunks: Buffer[] = [];
        for await (const chunk of req) chunks.push(chunk as Buffer);
        body = JSON.parse(Buffer.concat(chunks).toString("utf8"));
      }
      const id = req.headers["mcp-session-id"];
      const known = typeof id === "string" ? sessions.get(id) : undefined;
      if (known) return await known.handleRequest(req, res, body);
      if (id !== undefined) return void res.writeHead(404).end();
      const transport: StreamableHTTPServerTransport = new StreamableHTTPServerTransport({ sessionIdGenerator: () => randomUUID(), onsessioninitialized: (sid) => void sessions.set(sid, transport) });
      await newSession(String(req.headers.authorization)).connect(transport);
      await transport.handleRequest(req, res, body);
    } catch (error) {
      if (!res.headersSent) res.writeHead(500).end(String(error));
    }
  });
  await new Promise<void>((resolve) => http.listen(0, "127.0.0.1", resolve));
  return {
    url: `http://127.0.0.1:${(http.address() as AddressInfo).port}/mcp`,
    close: async () => {
      for (const transport of sessions.values()) await transport.close().catch(() => {});
      http.closeAllConnections();
      await new Promise((resolve) => http.close(resolve));
    },
  };
}

describe("subs mcp proxy: an upstream quoting the credential in every field", () => {
  let dir: string;
  let upstream: Awaited<ReturnType<typeof echoingUpstream>>;

  before(async () => {
    dir = mkdtempSync(path.join(tmpdir(), "subs-proxy-echo-"));
    upstream = await echoingUpstream();
    writeFileSync(path.join(dir, "substructure.toml"), `[mcp.echo]\nurl = "${upstream.url}"\nauth = { token_env = "MCP_TOKEN" }\n`);
  });

  after(async () => {
    await upstream.close();
    rmSync(dir, { recursive: true, force: true });
  });

  it("every message the client receives (answers, errors, notifications, the upstream's requests) carries the field, never the token", async () => {
    ensureBuilt();
    const transport = new StdioClientTransport({ command: process.execPath, args: [BIN, "mcp", "proxy", "echo"], cwd: dir, env: { PATH: process.env.PATH ?? "/usr/bin:/bin", HOME: dir, MCP_TOKEN }, stderr: "pipe" });
    let stderr = "";
    transport.stderr?.on("data", (d) => (stderr += d));
    const received: string[] = [];
    const client = new Client({ name: "echo-test", version: "1.0.0" }, { capabilities: { sampling: {}, elicitation: { form: {} } } });
    client.setRequestHandler(CreateMessageRequestSchema, async () => ({ role: "assistant", content: { type: "text", text: "ok" }, model: "m" }));
    client.setRequestHandler(ElicitRequestSchema, async () => ({ action: "decline" }));
    const logs: unknown[] = [];
    const updates: string[] = [];
    client.setNotificationHandler(LoggingMessageNotificationSchema, (n) => void logs.push(n.params));
    client.setNotificationHandler(ResourceUpdatedNotificationSchema, (n) => void updates.push(n.params.uri));
    // Every message as the client's transport delivers it, before the SDK's schemas drop anything.
    let deliver: ((message: JSONRPCMessage) => void) | undefined;
    Object.defineProperty(transport, "onmessage", {
      get: () => (deliver ? (message: JSONRPCMessage) => (received.push(JSON.stringify(message)), deliver!(message)) : undefined),
      set: (handler) => (deliver = handler),
      configurable: true,
    });
    await client.connect(transport);
    try {
      await client.listTools();
      // The SDK's client may drop a report that arrives with the result; the raw message is checked below.
      await client.callTool({ name: "quote", arguments: { q: "x" } }, undefined, { onprogress: () => {} });
      await client.callTool({ name: "fails" });
      await assert.rejects(client.callTool({ name: "throws" }), (error: McpError) => error.code === -32042 && error.message.includes(HEARD) && !error.message.includes(MCP_TOKEN));
      await client.callTool({ name: "asks" });
      await client.listResources();
      await client.listResourceTemplates();
      await client.readResource({ uri: "echo://doc" });
      await client.subscribeResource({ uri: "echo://doc" });
      await client.listPrompts();
      await client.getPrompt({ name: "p", arguments: { a: "x" } });
      await client.complete({ ref: { type: "ref/prompt", name: "p" }, argument: { name: "a", value: "" } });
      for (let n = 0; n < 100 && (logs.length === 0 || updates.length === 0); n++) await new Promise((r) => setTimeout(r, 20));

      // Each kind of message arrived, with the upstream's field in it.
      const kinds: Array<[string, (m: string) => boolean]> = [
        ["the initialize answer", (m) => m.includes('"serverInfo"') && m.includes('"instructions"')],
        ["tools/list", (m) => m.includes('"tools"') && m.includes('"inputSchema"')],
        ["a tool result", (m) => m.includes('"structuredContent"')],
        ["a progress report", (m) => m.includes('"notifications/progress"')],
        ["a log message", (m) => m.includes('"notifications/message"')],
        ["a tool error", (m) => m.includes('"isError":true')],
        ["a JSON-RPC error", (m) => m.includes('"code":-32042')],
        ["a sampling request", (m) => m.includes('"sampling/createMessage"')],
        ["an elicitation request", (m) => m.includes('"elicitation/create"')],
        ["resources/list", (m) => m.includes('"resources"') && m.includes('"nextCursor"')],
        ["resources/templates/list", (m) => m.includes('"resourceTemplates"')],
        ["resources/read", (m) => m.includes('"contents"')],
        ["a resource update", (m) => m.includes('"notifications/resources/updated"')],
        ["prompts/list", (m) => m.includes('"prompts"')],
        ["prompts/get", (m) => m.includes('"messages"') && m.includes('"assistant"')],
        ["completion/complete", (m) => m.includes('"completion"')],
      ];
      for (const [kind, is] of kinds) {
        const messages = received.filter(is);
        assert.ok(messages.length > 0, `${kind} never reached the client`);
        assert.ok(messages.some((m) => m.includes(HEARD)), `${kind}: the upstream's field is missing:\n${messages.join("\n")}`);
      }
      assert.ok(received.some((m) => m.includes('"notifications/progress"') && m.includes(`"message":"${HEARD}`)), "the progress message");
      // The credential, the header it came in and its encoded forms in a URL: in none of them.
      for (const secret of [MCP_TOKEN, `Bearer ${MCP_TOKEN}`, encodeURIComponent(`Bearer ${MCP_TOKEN}`)]) {
        for (const message of received) assert.ok(!message.includes(secret), `the token reached the client: ${message.slice(0, 300)}`);
      }
      assert.ok(!stderr.includes(MCP_TOKEN), "nor stderr");
    } finally {
      await client.close();
    }
  });
});
