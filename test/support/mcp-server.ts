// A real MCP server on loopback for tests, built from the SDK's server pieces. Stateless
// Streamable HTTP: a fresh Server per request, like a horizontally scaled deployment.
import { createServer, type IncomingMessage, type Server as HttpServer, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { Server } from "@modelcontextprotocol/sdk/server/index.js";
import { StreamableHTTPServerTransport } from "@modelcontextprotocol/sdk/server/streamableHttp.js";
import { CallToolRequestSchema, ListToolsRequestSchema, type CallToolResult, type Tool } from "@modelcontextprotocol/sdk/types.js";
import express from "express";
import { requireBearerAuth } from "@modelcontextprotocol/sdk/server/auth/middleware/bearerAuth.js";
import { metadataHandler } from "@modelcontextprotocol/sdk/server/auth/handlers/metadata.js";
import type { OAuthTokenVerifier } from "@modelcontextprotocol/sdk/server/auth/provider.js";
import type { AuthInfo } from "@modelcontextprotocol/sdk/server/auth/types.js";

export type TestTool = Tool & {
  /** What a call returns as text; default echoes the arguments. `auth`: the caller's verified token, on a server with `oauth`. */
  reply?: (args: Record<string, unknown>, auth?: AuthInfo) => string;
  /** The whole result a call returns (structuredContent, isError, several blocks), instead of `reply`'s text. */
  result?: (args: Record<string, unknown>) => CallToolResult;
  /**
   * A call works `steps` times `everyMs` before it replies, sending an MCP progress notification
   * after each step when `reports` and the caller asked for progress (a progressToken). Reports
   * need a streamed (SSE) answer: the server streams whenever a tool has `work`. The work stops
   * when the call is cancelled or its answer's connection closes (the SDK aborts `extra.signal`),
   * as a server's would: a long call left behind does not keep the test's process alive.
   */
  work?: { steps: number; everyMs: number; reports: boolean };
};

export type McpServerOptions = {
  tools: TestTool[];
  /** Delay before answering each HTTP request (for parallelism and timeout tests). */
  delayMs?: number;
  /**
   * Runs before the MCP handler; return true when it has answered the request itself
   * (e.g. a 401 from bearer middleware).
   */
  gate?: (req: IncomingMessage, res: ServerResponse, body: unknown) => boolean | Promise<boolean>;
  name?: string;
  /** Protect the server with OAuth bearer tokens from a test authorization server (oauth-server.ts). */
  oauth?: ProtectOptions;
};

export type ProtectOptions = {
  /** The authorization server: its issuer goes into the resource metadata, its verifier checks tokens. */
  authServer: { issuer: string; verifier: OAuthTokenVerifier };
  /** Scopes every request needs; a 401 names them in WWW-Authenticate `scope` (default none). */
  requiredScopes?: string[];
  /** Extra scopes per tool: tools/call without them answers 403 insufficient_scope (step-up). */
  toolScopes?: Record<string, string[]>;
  /** PRM `scopes_supported`. */
  scopesSupported?: string[];
  /** Where the protected resource metadata is served (default "path": RFC 9728 path-aware URL). */
  metadataAt?: "path" | "root" | "none";
  /** Name the metadata in the 401's WWW-Authenticate (default true). */
  metadataInChallenge?: boolean;
  /** The `resource` the metadata states (default: the server's URL). */
  resource?: string;
  /**
   * JSON-RPC methods answered without a token, as servers that let `initialize` through and ask
   * for authorization only from the first real request do (default none).
   */
  openMethods?: string[];
};

export type RunningMcpServer = {
  url: string;
  /** Requests seen, by JSON-RPC method. */
  requests: string[];
  /** Authorization headers of the MCP requests that reached the handler. */
  authorizations: string[];
  close(): Promise<void>;
};

export async function startMcpServer(options: McpServerOptions): Promise<RunningMcpServer> {
  const requests: string[] = [];
  const authorizations: string[] = [];
  let protect: ((req: IncomingMessage, res: ServerResponse, body: unknown) => Promise<boolean>) | undefined;
  const http: HttpServer = createServer(async (req, res) => {
    try {
      if (options.delayMs) await new Promise((r) => setTimeout(r, options.delayMs));
      let body: unknown;
      if (req.method === "POST") {
        const chunks: Buffer[] = [];
        for await (const chunk of req) chunks.push(chunk as Buffer);
        const text = Buffer.concat(chunks).toString("utf8");
        try {
          body = text ? JSON.parse(text) : undefined;
        } catch {
          res.writeHead(400).end("invalid JSON");
          return;
        }
      }
      if (options.gate && (await options.gate(req, res, body))) return;
      if (protect && (await protect(req, res, body))) return;
      if (!req.url?.startsWith("/mcp")) {
        res.writeHead(404).end();
        return;
      }
      if (req.method !== "POST") {
        res.writeHead(405, { allow: "POST" }).end();
        return;
      }
      for (const message of Array.isArray(body) ? body : [body]) if (message?.method) requests.push(message.method);
      if (req.headers.authorization) authorizations.push(req.headers.authorization);

      const server = new Server({ name: options.name ?? "test-mcp", version: "1.0.0" }, { capabilities: { tools: {} } });
      server.setRequestHandler(ListToolsRequestSchema, async () => ({
        tools: options.tools.map(({ reply: _reply, result: _result, ...tool }) => tool),
      }));
      server.setRequestHandler(CallToolRequestSchema, async (request, extra) => {
        const tool = options.tools.find((t) => t.name === request.params.name);
        if (!tool) return { content: [{ type: "text", text: `unknown tool ${request.params.name}` }], isError: true };
        const args = (request.params.arguments ?? {}) as Record<string, unknown>;
        const progressToken = request.params._meta?.progressToken;
        for (let step = 1; step <= (tool.work?.steps ?? 0); step++) {
          await new Promise((r) => setTimeout(r, tool.work!.everyMs));
          // Nobody is waiting for the answer any more (the SDK sends none for an aborted request).
          if (extra.signal.aborted) return { content: [{ type: "text", text: "cancelled" }], isError: true };
          if (tool.work!.reports && progressToken !== undefined) {
            await extra.sendNotification({ method: "notifications/progress", params: { progressToken, progress: step, total: tool.work!.steps, message: `step ${step}` } });
          }
        }
        if (tool.result) return tool.result(args);
        return { content: [{ type: "text", text: tool.reply ? tool.reply(args, extra.authInfo) : JSON.stringify(args) }] };
      });
      const streams = options.tools.some((t) => t.work);
      const transport = new StreamableHTTPServerTransport({ sessionIdGenerator: undefined, enableJsonResponse: !streams });
      res.on("close", () => {
        void transport.close();
        void server.close();
      });
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
    requests,
    authorizations,
    close: () =>
      new Promise<void>((resolve) => {
        http.closeAllConnections();
        http.close(() => resolve());
      }),
  };
}

/** Tool definitions with and without annotations, for filter tests. */
export const annotatedTool = (name: string, annotations: Tool["annotations"] = undefined): TestTool => ({
  name,
  description: `${name} (test tool)`,
  inputSchema: { type: "object", properties: {} },
  ...(annotations ? { annotations } : {}),
});

/**
 * The resource-server side of MCP authorization from the SDK's pieces: protected resource
 * metadata (RFC 9728) and bearer-token middleware, run as an express app in front of the handler.
 * Resolves true when it answered the request itself (metadata, 401, 403).
 */
export function oauthGate(url: string, protect: ProtectOptions) {
  const origin = new URL(url).origin;
  const path = new URL(url).pathname;
  const metadataPath = protect.metadataAt === "root" ? "/.well-known/oauth-protected-resource" : `/.well-known/oauth-protected-resource${path}`;
  const metadataUrl = `${origin}${metadataPath}`;
  const app = express();
  // Everything is read from `protect` per request, so a test may change it while the server runs
  // (e.g. point `authServer` at another authorization server: a migration).
  const verifier = { verifyAccessToken: (token: string) => protect.authServer.verifier.verifyAccessToken(token) };
  if (protect.metadataAt !== "none") {
    app.use(metadataPath, (req, res, next) =>
      metadataHandler({
        resource: protect.resource ?? url,
        authorization_servers: [protect.authServer.issuer],
        ...(protect.scopesSupported ? { scopes_supported: protect.scopesSupported } : {}),
      })(req, res, next),
    );
  }
  const challengeUrl = protect.metadataInChallenge === false ? undefined : metadataUrl;
  const bearer = requireBearerAuth({ verifier, requiredScopes: protect.requiredScopes ?? [], ...(challengeUrl ? { resourceMetadataUrl: challengeUrl } : {}) });
  app.use(path, (req, res, next) => {
    const method = (req as { body?: { method?: string } }).body?.method;
    if (method !== undefined && protect.openMethods?.includes(method)) return next();
    return bearer(req, res, next);
  });
  app.use(path, (req, res, next) => {
    const body = (req as { body?: { method?: string; params?: { name?: string } } }).body;
    const needed = body?.method === "tools/call" ? protect.toolScopes?.[body.params?.name ?? ""] : undefined;
    if (!needed) return next();
    return requireBearerAuth({ verifier, requiredScopes: needed, ...(challengeUrl ? { resourceMetadataUrl: challengeUrl } : {}) })(req, res, next);
  });
  return (req: IncomingMessage, res: ServerResponse, body: unknown) =>
    new Promise<boolean>((resolve) => {
      (req as { body?: unknown }).body = body;
      res.once("finish", () => resolve(true));
      app(req as express.Request, res as express.Response, () => resolve(false));
    });
}
