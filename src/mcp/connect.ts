// Connects to an MCP server as a client. Streamable HTTP first; servers of the 2024-11-05
// revision only speak HTTP+SSE, so a 4xx on the first POST falls back to SSE (MCP spec,
// "Transports: Backwards compatibility"). Imported lazily: the SDK is heavy (issue 6).
// A response stream the server closes before its result is resumed by the SDK's transport as
// SEP-1699 asks: after the stream's `retry:` (its own backoff only when the server sets none),
// with GET and `Last-Event-ID` (test/mcp-sse-retry.test.ts; conformance scenario sse-retry).
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import type { OAuthClientProvider } from "@modelcontextprotocol/sdk/client/auth.js";
import { SSEClientTransport } from "@modelcontextprotocol/sdk/client/sse.js";
import { StreamableHTTPClientTransport, StreamableHTTPError } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import type { ClientCapabilities, Tool } from "@modelcontextprotocol/sdk/types.js";
import { VERSION } from "../version.ts";

export type { Tool };

export type McpConnectOptions = {
  url: string;
  fetch: typeof globalThis.fetch;
  /** OAuth: the SDK asks it for tokens and refreshes through it. */
  authProvider?: OAuthClientProvider;
  /** Static credential: sent as-is (e.g. `Authorization: Bearer $GITHUB_TOKEN`). */
  headers?: Record<string, string>;
  signal?: AbortSignal;
  /**
   * How long one request (the initialize here) may go unanswered; the SDK's own default is 60 s,
   * which would cut short a command given longer (`--timeout`, `--request-timeout`).
   */
  requestTimeoutMs?: number;
  /**
   * What this client says it can do at `initialize` (none by default). `subs mcp proxy` passes its
   * own client's (sampling, elicitation, roots) so the server may ask them of it (issue 16).
   */
  capabilities?: ClientCapabilities;
};

/** The SDK's per-request options for a signal and a timeout, leaving out what is unset. */
export function requestOptions(options: { signal?: AbortSignal | undefined; requestTimeoutMs?: number | undefined }): { signal?: AbortSignal; timeout?: number } | undefined {
  if (!options.signal && options.requestTimeoutMs === undefined) return undefined;
  return { ...(options.signal ? { signal: options.signal } : {}), ...(options.requestTimeoutMs !== undefined ? { timeout: options.requestTimeoutMs } : {}) };
}

export async function connectMcp(options: McpConnectOptions): Promise<Client> {
  const url = new URL(options.url);
  const requestInit: RequestInit = options.headers ? { headers: options.headers } : {};
  const common = {
    fetch: options.fetch,
    requestInit,
    ...(options.authProvider ? { authProvider: options.authProvider } : {}),
  };
  const clientOptions = options.capabilities ? { capabilities: options.capabilities } : undefined;
  const client = new Client({ name: "subs", version: VERSION }, clientOptions);
  try {
    await client.connect(new StreamableHTTPClientTransport(url, common), requestOptions(options));
    return client;
  } catch (error) {
    const status = error instanceof StreamableHTTPError ? error.code : undefined;
    if (status === undefined || status < 400 || status >= 500 || status === 401 || status === 403) throw error;
  }
  const sseClient = new Client({ name: "subs", version: VERSION }, clientOptions);
  await sseClient.connect(new SSEClientTransport(url, common), requestOptions(options));
  return sseClient;
}

/** Every tool the server offers, following `nextCursor` pages. */
export async function listAllTools(client: Client, options: { signal?: AbortSignal; requestTimeoutMs?: number } = {}): Promise<Tool[]> {
  const tools: Tool[] = [];
  let cursor: string | undefined;
  for (let page = 0; page < 1000; page++) {
    const result = await client.listTools(cursor === undefined ? {} : { cursor }, requestOptions(options));
    tools.push(...result.tools);
    cursor = result.nextCursor;
    if (!cursor) break;
  }
  return tools;
}
