// Connects to an MCP server as a client. Streamable HTTP first; servers of the 2024-11-05
// revision only speak HTTP+SSE, so a 4xx on the first POST falls back to SSE (MCP spec,
// "Transports: Backwards compatibility"). Imported lazily: the SDK is heavy.
// A response stream the server closes before its result is resumed by the SDK's transport as
// SEP-1699 asks: after the stream's `retry:` (its own backoff only when the server sets none),
// with GET and `Last-Event-ID` (test/mcp-sse-retry.test.ts; conformance scenario sse-retry).
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import type { OAuthClientProvider } from "@modelcontextprotocol/sdk/client/auth.js";
import { SSEClientTransport } from "@modelcontextprotocol/sdk/client/sse.js";
import { StreamableHTTPClientTransport, StreamableHTTPError } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { ErrorCode, McpError, type ClientCapabilities, type Tool } from "@modelcontextprotocol/sdk/types.js";
import { SubsError } from "../errors.ts";
import { VERSION } from "../version.ts";
import { cappedAnswers, DEFAULT_MAX_ANSWER_MIB, type AnswerLimit } from "./answer-cap.ts";

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
   * own client's (sampling, elicitation, roots) so the server may ask them of it.
   */
  capabilities?: ClientCapabilities;
  /** How large one answer may be (src/mcp/answer-cap.ts); the default limit, naming the host, when unset. */
  answerLimit?: AnswerLimit;
};

/** The SDK's per-request options for a signal and a timeout, leaving out what is unset. */
export function requestOptions(options: { signal?: AbortSignal | undefined; requestTimeoutMs?: number | undefined }): { signal?: AbortSignal; timeout?: number } | undefined {
  if (!options.signal && options.requestTimeoutMs === undefined) return undefined;
  return { ...(options.signal ? { signal: options.signal } : {}), ...(options.requestTimeoutMs !== undefined ? { timeout: options.requestTimeoutMs } : {}) };
}

/**
 * A Client whose requests fail with subs's own error where the transport failed them with one: an
 * answer over the limit arrives as a JSON-RPC error carrying it (see connectMcp), which the SDK
 * turns into an McpError. Unwrapped here, every caller sees the same error as for a JSON answer
 * over the limit, which the transport's send() rejects with as it is.
 */
class SubsClient extends Client {
  override async request(...args: Parameters<Client["request"]>): ReturnType<Client["request"]> {
    try {
      return await super.request(...args);
    } catch (error) {
      throw error instanceof McpError && error.data instanceof SubsError ? error.data : error;
    }
  }
}

export async function connectMcp(options: McpConnectOptions): Promise<Client> {
  const url = new URL(options.url);
  const requestInit: RequestInit = options.headers ? { headers: options.headers } : {};
  const limit = options.answerLimit ?? { id: url.host, mib: DEFAULT_MAX_ANSWER_MIB };
  const common = {
    requestInit,
    ...(options.authProvider ? { authProvider: options.authProvider } : {}),
  };
  const clientOptions = options.capabilities ? { capabilities: options.capabilities } : undefined;
  const client = new SubsClient({ name: "subs", version: VERSION }, clientOptions);
  // An event stream answering a request that went over the limit ends that request at once: the
  // transport itself would only report the broken stream, and the request wait for its timeout.
  // The error is delivered as the JSON-RPC error answer the request gets (Protocol's own path);
  // its data, an object no server can send, is what SubsClient unwraps.
  const streamable: StreamableHTTPClientTransport = new StreamableHTTPClientTransport(url, {
    ...common,
    fetch: cappedAnswers(options.fetch, limit, (id, error) =>
      streamable.onmessage?.({ jsonrpc: "2.0", id, error: { code: ErrorCode.InternalError, message: error.message, data: error } }),
    ),
  });
  try {
    await client.connect(streamable, requestOptions(options));
    return client;
  } catch (error) {
    const status = error instanceof StreamableHTTPError ? error.code : undefined;
    if (status === undefined || status < 400 || status >= 500 || status === 401 || status === 403) throw error;
  }
  // HTTP+SSE answers every request on the one GET stream: an event over the limit there cannot be
  // told apart by request, so it only ends that stream (the request then meets its timeout).
  const sseClient = new SubsClient({ name: "subs", version: VERSION }, clientOptions);
  await sseClient.connect(new SSEClientTransport(url, { ...common, fetch: cappedAnswers(options.fetch, limit) }), requestOptions(options));
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
