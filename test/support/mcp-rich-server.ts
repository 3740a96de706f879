// A stateful MCP server on loopback with every feature a proxy must carry: tools with
// progress, cancellation, errors and a changing list; resources (paged), templates and
// subscriptions; prompts; completions; logging; and tools that ask the client (sampling,
// elicitation, roots) and that cancel what they asked. Streamable HTTP with sessions, as most real
// servers run, so the server can send on its own stream (GET) and the client's answers to its
// requests reach the session that asked. Built from the SDK's low-level server.
import { randomUUID } from "node:crypto";
import { createServer, type IncomingMessage, type Server as HttpServer, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { Server } from "@modelcontextprotocol/sdk/server/index.js";
import { StreamableHTTPServerTransport } from "@modelcontextprotocol/sdk/server/streamableHttp.js";
import {
  CallToolRequestSchema,
  CompleteRequestSchema,
  CreateMessageResultSchema,
  ElicitResultSchema,
  ErrorCode,
  GetPromptRequestSchema,
  ListPromptsRequestSchema,
  ListResourcesRequestSchema,
  ListResourceTemplatesRequestSchema,
  ListRootsResultSchema,
  ListToolsRequestSchema,
  McpError,
  ReadResourceRequestSchema,
  RootsListChangedNotificationSchema,
  SetLevelRequestSchema,
  SubscribeRequestSchema,
  UnsubscribeRequestSchema,
  type Tool,
} from "@modelcontextprotocol/sdk/types.js";
import { oauthGate, type ProtectOptions } from "./mcp-server.ts";

export type RichServerOptions = { oauth?: ProtectOptions; instructions?: string };

export type RichServer = {
  url: string;
  /** What the server saw, in order: methods, cancellations, progress from the client, log levels. */
  events: string[];
  /** Authorization headers of every HTTP request that reached the MCP handler. */
  authorizations: string[];
  /** How many HTTP requests the OAuth gate answered 401 (a missing, expired or unknown token). */
  readonly unauthorized: number;
  /** POSTs still open: received, and their answer (an SSE stream for a request) not yet ended or dropped. */
  readonly openPosts: number;
  /** Sends notifications/resources/updated for `uri` to every session subscribed to it. */
  touch(uri: string): Promise<void>;
  /** Ends every session, as a restarted server has: their ids then answer 404. */
  endSessions(): Promise<void>;
  /** Waits until `events` holds an entry matching `pattern`. */
  seen(pattern: RegExp, timeoutMs?: number): Promise<string>;
  close(): Promise<void>;
};

const tool = (name: string, description: string): Tool => ({ name, description, inputSchema: { type: "object", properties: {} } });

export const RICH_TOOLS: Tool[] = [
  tool("echo", "returns its arguments as JSON text and as structuredContent"),
  tool("slow", "works 20 steps of 100 ms, reporting progress; stops when cancelled"),
  tool("fail", "answers a JSON-RPC error with code -32042 and data"),
  tool("tool_error", "answers a result with isError: true"),
  tool("ask_sampling", "asks the client for a sampling/createMessage, with a progress token"),
  tool("ask_elicitation", "asks the client for elicitation/create"),
  tool("ask_roots", "asks the client for roots/list"),
  tool("ask_then_cancel", "asks the client for elicitation/create and cancels it after 300 ms"),
  tool("log", "sends a logging message at level warning (quoting the Authorization header it received when `quote`)"),
  tool("add_tool", "adds a tool named `added` and sends tools/list_changed"),
  tool("quote_credential", "answers an error quoting the Authorization header it received"),
  tool("hang", "never answers; stops when cancelled, as the SDK does, without an answer"),
];

export async function startRichServer(options: RichServerOptions = {}): Promise<RichServer> {
  const events: string[] = [];
  const authorizations: string[] = [];
  let unauthorized = 0;
  let openPosts = 0;
  const waiters: Array<() => void> = [];
  const record = (event: string) => {
    events.push(event);
    for (const wake of waiters.splice(0)) wake();
  };
  const sessions = new Map<string, { transport: StreamableHTTPServerTransport; server: Server; subscriptions: Set<string> }>();
  let extraTool = false;
  let protect: ((req: IncomingMessage, res: ServerResponse, body: unknown) => Promise<boolean>) | undefined;

  const newSession = () => {
    const subscriptions = new Set<string>();
    const server = new Server(
      { name: "rich-upstream", version: "2.3.4" },
      {
        capabilities: { tools: { listChanged: true }, resources: { subscribe: true, listChanged: true }, prompts: { listChanged: true }, completions: {}, logging: {} },
        ...(options.instructions ? { instructions: options.instructions } : {}),
      },
    );
    server.setRequestHandler(ListToolsRequestSchema, async () => ({ tools: [...RICH_TOOLS, ...(extraTool ? [tool("added", "added mid-session")] : [])] }));
    server.setRequestHandler(CallToolRequestSchema, async (request, extra) => {
      const args = (request.params.arguments ?? {}) as Record<string, unknown>;
      record(`call ${request.params.name}`);
      switch (request.params.name) {
        case "echo":
          return { content: [{ type: "text", text: JSON.stringify(args) }], structuredContent: { echoed: args }, _meta: { "example.com/trace": "t-1" } };
        case "slow": {
          const token = request.params._meta?.progressToken;
          record(`slow token ${typeof token}`);
          for (let step = 1; step <= 20; step++) {
            await new Promise((r) => setTimeout(r, 100));
            if (extra.signal.aborted) {
              record(`slow cancelled: ${String(extra.signal.reason)}`);
              return { content: [{ type: "text", text: "cancelled" }] };
            }
            if (token !== undefined) await extra.sendNotification({ method: "notifications/progress", params: { progressToken: token, progress: step, total: 20, message: `step ${step}` } });
          }
          return { content: [{ type: "text", text: "done" }] };
        }
        case "fail":
          throw new McpError(-32042, "the upstream failed on purpose", { reason: "test", retry: false });
        case "tool_error":
          return { content: [{ type: "text", text: "bad input" }], isError: true };
        case "ask_sampling": {
          const progress: number[] = [];
          const answer = await extra.sendRequest(
            { method: "sampling/createMessage", params: { messages: [{ role: "user", content: { type: "text", text: "say hi" } }], maxTokens: 10 } },
            CreateMessageResultSchema,
            { onprogress: (p) => progress.push(p.progress) },
          );
          const text = answer.content.type === "text" ? answer.content.text : "?";
          return { content: [{ type: "text", text: `sampled: ${text}; progress seen: ${progress.join(",")}` }] };
        }
        case "ask_elicitation": {
          const answer = await extra.sendRequest(
            { method: "elicitation/create", params: { mode: "form", message: "your name?", requestedSchema: { type: "object", properties: { name: { type: "string" } } } } },
            ElicitResultSchema,
          );
          return { content: [{ type: "text", text: `elicited: ${answer.action} ${JSON.stringify(answer.content ?? {})}` }] };
        }
        case "ask_roots": {
          const answer = await extra.sendRequest({ method: "roots/list" }, ListRootsResultSchema);
          return { content: [{ type: "text", text: `roots: ${answer.roots.map((r) => r.uri).join(",")}` }] };
        }
        case "ask_then_cancel": {
          try {
            await extra.sendRequest(
              { method: "elicitation/create", params: { mode: "form", message: "never mind", requestedSchema: { type: "object", properties: {} } } },
              ElicitResultSchema,
              { signal: AbortSignal.timeout(300) },
            );
            return { content: [{ type: "text", text: "answered" }] };
          } catch (error) {
            return { content: [{ type: "text", text: `gave up: ${(error as Error).name}` }] };
          }
        }
        case "log":
          await server.sendLoggingMessage(
            { level: "warning", logger: "rich", data: { said: args.text ?? "hello", ...(args.quote ? { heard: extra.requestInfo?.headers.authorization } : {}) } },
            extra.sessionId,
          );
          return { content: [{ type: "text", text: "logged" }] };
        case "add_tool":
          extraTool = true;
          for (const s of sessions.values()) await s.server.sendToolListChanged();
          return { content: [{ type: "text", text: "added" }] };
        case "hang":
          await new Promise((resolve) => extra.signal.addEventListener("abort", resolve, { once: true }));
          record("hang cancelled");
          return { content: [{ type: "text", text: "cancelled" }] };
        case "quote_credential":
          throw new McpError(ErrorCode.InvalidRequest, `you sent ${extra.requestInfo?.headers.authorization ?? "nothing"}`, { header: extra.requestInfo?.headers.authorization });
        default:
          throw new McpError(ErrorCode.InvalidParams, `unknown tool ${request.params.name}`);
      }
    });
    const allResources = Array.from({ length: 3 }, (_, n) => ({ uri: `rich://doc/${n}`, name: `doc ${n}`, mimeType: "text/plain" }));
    server.setRequestHandler(ListResourcesRequestSchema, async (request) => {
      // Two pages: the cursor is the server's own opaque word.
      if (request.params?.cursor === "page-2") return { resources: allResources.slice(2) };
      if (request.params?.cursor !== undefined) throw new McpError(ErrorCode.InvalidParams, `bad cursor ${request.params.cursor}`);
      return { resources: allResources.slice(0, 2), nextCursor: "page-2" };
    });
    server.setRequestHandler(ListResourceTemplatesRequestSchema, async () => ({ resourceTemplates: [{ uriTemplate: "rich://doc/{n}", name: "doc by number" }] }));
    server.setRequestHandler(ReadResourceRequestSchema, async (request) => {
      const uri = request.params.uri;
      if (!uri.startsWith("rich://doc/")) throw new McpError(-32002, "Resource not found", { uri });
      return { contents: [{ uri, mimeType: "text/plain", text: `contents of ${uri}` }] };
    });
    server.setRequestHandler(SubscribeRequestSchema, async (request) => {
      subscriptions.add(request.params.uri);
      record(`subscribe ${request.params.uri}`);
      return {};
    });
    server.setRequestHandler(UnsubscribeRequestSchema, async (request) => {
      subscriptions.delete(request.params.uri);
      record(`unsubscribe ${request.params.uri}`);
      return {};
    });
    server.setRequestHandler(ListPromptsRequestSchema, async () => ({ prompts: [{ name: "greet", description: "a greeting", arguments: [{ name: "who", required: true }] }] }));
    server.setRequestHandler(GetPromptRequestSchema, async (request) => {
      if (request.params.name !== "greet") throw new McpError(ErrorCode.InvalidParams, `no prompt ${request.params.name}`);
      return { description: "a greeting", messages: [{ role: "user", content: { type: "text", text: `Hello, ${request.params.arguments?.who ?? "you"}!` } }] };
    });
    server.setRequestHandler(CompleteRequestSchema, async (request) => {
      const prefix = request.params.argument.value;
      const values = ["alice", "albert", "bob"].filter((v) => v.startsWith(prefix));
      return { completion: { values, total: values.length, hasMore: false } };
    });
    server.setRequestHandler(SetLevelRequestSchema, async (request) => {
      record(`setLevel ${request.params.level}`);
      return {};
    });
    server.setNotificationHandler(RootsListChangedNotificationSchema, async () => record("roots changed"));
    return { server, subscriptions };
  };

  const http: HttpServer = createServer(async (req, res) => {
    if (req.method === "POST") {
      openPosts++;
      res.once("close", () => openPosts--);
    }
    try {
      let body: unknown;
      if (req.method === "POST") {
        const chunks: Buffer[] = [];
        for await (const chunk of req) chunks.push(chunk as Buffer);
        const text = Buffer.concat(chunks).toString("utf8");
        body = text ? JSON.parse(text) : undefined;
      }
      if (protect && (await protect(req, res, body))) {
        if (res.statusCode === 401) unauthorized++;
        return;
      }
      if (!req.url?.startsWith("/mcp")) {
        res.writeHead(404).end();
        return;
      }
      if (req.headers.authorization) authorizations.push(req.headers.authorization);
      if (req.method !== "POST") record(`HTTP ${req.method}`);
      for (const message of Array.isArray(body) ? body : [body]) {
        const m = message as { method?: string; params?: { requestId?: unknown; progressToken?: unknown; progress?: unknown } } | undefined;
        if (m?.method === "notifications/cancelled") record(`cancelled ${String(m.params?.requestId)}`);
        else if (m?.method === "notifications/progress") record(`client progress ${String(m.params?.progress)} token ${typeof m.params?.progressToken}`);
        else if (m?.method) record(m.method);
      }
      const sessionId = req.headers["mcp-session-id"];
      const existing = typeof sessionId === "string" ? sessions.get(sessionId) : undefined;
      if (existing) {
        await existing.transport.handleRequest(req, res, body);
        return;
      }
      if (sessionId !== undefined || req.method !== "POST") {
        res.writeHead(404, { "content-type": "application/json" }).end(JSON.stringify({ jsonrpc: "2.0", error: { code: -32001, message: "Session not found" }, id: null }));
        return;
      }
      const { server, subscriptions } = newSession();
      const transport: StreamableHTTPServerTransport = new StreamableHTTPServerTransport({
        sessionIdGenerator: () => randomUUID(),
        onsessioninitialized: (id) => {
          sessions.set(id, { transport, server, subscriptions });
        },
      });
      transport.onclose = () => {
        if (transport.sessionId) sessions.delete(transport.sessionId);
      };
      await server.connect(transport);
      await transport.handleRequest(req, res, body);
    } catch (error) {
      if (!res.headersSent) res.writeHead(500).end(String(error));
    }
  });
  await new Promise<void>((resolve) => http.listen(0, "127.0.0.1", resolve));
  const { port } = http.address() as AddressInfo;
  const url = `http://127.0.0.1:${port}/mcp`;
  if (options.oauth) protect = oauthGate(url, options.oauth);
  return {
    url,
    events,
    authorizations,
    get unauthorized() {
      return unauthorized;
    },
    get openPosts() {
      return openPosts;
    },
    async touch(uri) {
      for (const s of sessions.values()) if (s.subscriptions.has(uri)) await s.server.sendResourceUpdated({ uri });
    },
    async endSessions() {
      const ending = [...sessions.values()];
      sessions.clear();
      for (const s of ending) await s.transport.close().catch(() => {});
    },
    seen(pattern, timeoutMs = 5000) {
      const deadline = Date.now() + timeoutMs;
      return new Promise((resolve, reject) => {
        const check = () => {
          const hit = events.find((e) => pattern.test(e));
          if (hit !== undefined) return resolve(hit);
          if (Date.now() > deadline) return reject(new Error(`never saw ${pattern}; saw: ${events.join(" | ")}`));
          waiters.push(check);
          setTimeout(check, Math.max(0, Math.min(100, deadline - Date.now()))).unref();
        };
        check();
      });
    },
    close: async () => {
      for (const s of sessions.values()) await s.transport.close().catch(() => {});
      await new Promise<void>((resolve) => {
        http.closeAllConnections();
        http.close(() => resolve());
      });
    },
  };
}
