// A real MCP server on loopback for tests, built from the SDK's server pieces. Stateless
// Streamable HTTP: a fresh Server per request, like a horizontally scaled deployment.
import { createServer, type IncomingMessage, type Server as HttpServer, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { Server } from "@modelcontextprotocol/sdk/server/index.js";
import { StreamableHTTPServerTransport } from "@modelcontextprotocol/sdk/server/streamableHttp.js";
import { CallToolRequestSchema, ListToolsRequestSchema, type Tool } from "@modelcontextprotocol/sdk/types.js";

export type TestTool = Tool & {
  /** What a call returns as text; default echoes the arguments. */
  reply?: (args: Record<string, unknown>) => string;
};

export type McpServerOptions = {
  tools: TestTool[];
  /** Delay before answering each HTTP request (for parallelism and timeout tests). */
  delayMs?: number;
  /**
   * Runs before the MCP handler; return true when it has answered the request itself
   * (e.g. a 401 from bearer middleware).
   */
  gate?: (req: IncomingMessage, res: ServerResponse) => boolean | Promise<boolean>;
  name?: string;
};

export type RunningMcpServer = {
  url: string;
  /** Requests seen, by JSON-RPC method. */
  requests: string[];
  close(): Promise<void>;
};

export async function startMcpServer(options: McpServerOptions): Promise<RunningMcpServer> {
  const requests: string[] = [];
  const http: HttpServer = createServer(async (req, res) => {
    try {
      if (options.delayMs) await new Promise((r) => setTimeout(r, options.delayMs));
      if (options.gate && (await options.gate(req, res))) return;
      if (!req.url?.startsWith("/mcp")) {
        res.writeHead(404).end();
        return;
      }
      if (req.method !== "POST") {
        res.writeHead(405, { allow: "POST" }).end();
        return;
      }
      const chunks: Buffer[] = [];
      for await (const chunk of req) chunks.push(chunk as Buffer);
      const body = JSON.parse(Buffer.concat(chunks).toString("utf8"));
      for (const message of Array.isArray(body) ? body : [body]) if (message?.method) requests.push(message.method);

      const server = new Server({ name: options.name ?? "test-mcp", version: "1.0.0" }, { capabilities: { tools: {} } });
      server.setRequestHandler(ListToolsRequestSchema, async () => ({
        tools: options.tools.map(({ reply: _reply, ...tool }) => tool),
      }));
      server.setRequestHandler(CallToolRequestSchema, async (request) => {
        const tool = options.tools.find((t) => t.name === request.params.name);
        if (!tool) return { content: [{ type: "text", text: `unknown tool ${request.params.name}` }], isError: true };
        const args = (request.params.arguments ?? {}) as Record<string, unknown>;
        return { content: [{ type: "text", text: tool.reply ? tool.reply(args) : JSON.stringify(args) }] };
      });
      const transport = new StreamableHTTPServerTransport({ sessionIdGenerator: undefined, enableJsonResponse: true });
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
  return {
    url: `http://127.0.0.1:${port}/mcp`,
    requests,
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
