// Connects to an MCP server as a client. Streamable HTTP first; servers of the 2024-11-05
// revision only speak HTTP+SSE, so a 4xx on the first POST falls back to SSE (MCP spec,
// "Transports: Backwards compatibility"). Imported lazily: the SDK is heavy.
// A response stream the server closes before its result is resumed by the SDK's transport as
// SEP-1699 asks: after the stream's `retry:` (its own backoff only when the server sets none),
// with GET and `Last-Event-ID` (test/mcp-sse-retry.test.ts; conformance scenario sse-retry).
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import type { OAuthClientProvider } from "@modelcontextprotocol/sdk/client/auth.js";
import { SSEClientTransport } from "@modelcontextprotocol/sdk/client/sse.js";
import { StreamableHTTPClientTransport, StreamableHTTPError, type StreamableHTTPClientTransportOptions } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import type { TransportSendOptions } from "@modelcontextprotocol/sdk/shared/transport.js";
import { ErrorCode, McpError, type ClientCapabilities, type JSONRPCMessage, type Tool } from "@modelcontextprotocol/sdk/types.js";
import { SubsError } from "../errors.ts";
import { SUBS_CLIENT_INFO, type UpstreamHandshake } from "./client-handshake.ts";
import { cappedAnswers, DEFAULT_MAX_ANSWER_MIB, limitBytes, listingTooLarge, MAX_LISTING_PAGES, type AnswerLimit } from "./answer-cap.ts";

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
  /**
   * A session whose initialize was already sent and answered (src/serve/upstream-handshake.ts):
   * taken over, not opened again.
   */
  adopt?: UpstreamHandshake;
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
  /** The bound on one answer of this connection, and the origin its errors name; a tool listing is held to it too (listAllTools). */
  limit: { answer: AnswerLimit; origin: string } | undefined;

  override async request(...args: Parameters<Client["request"]>): ReturnType<Client["request"]> {
    try {
      return await super.request(...args);
    } catch (error) {
      throw error instanceof McpError && error.data instanceof SubsError ? error.data : error;
    }
  }
}

/**
 * The client of a local server (src/mcp/local-server.ts). A shared one serves every session of one
 * serve from one process: a session's close leaves it running, and its pool ends it (`end`).
 */
export class LocalClient extends SubsClient {
  shared = false;

  // A request the process's end cut short fails with the SDK's "Connection closed"; the transport
  // knows how it ended (its exit status, its last words), which is what a person needs.
  #transport: { ended?: SubsError } | undefined;

  override connect(...args: Parameters<Client["connect"]>): ReturnType<Client["connect"]> {
    // Kept here: the SDK lets go of its transport before it fails the requests the close cut short.
    this.#transport = args[0] as { ended?: SubsError };
    return super.connect(...args);
  }

  override async request(...args: Parameters<Client["request"]>): ReturnType<Client["request"]> {
    try {
      return await super.request(...args);
    } catch (error) {
      const ended = this.#transport?.ended;
      throw error instanceof McpError && error.code === ErrorCode.ConnectionClosed && ended ? ended : error;
    }
  }

  override async close(): Promise<void> {
    if (!this.shared) await super.close();
  }

  end(): Promise<void> {
    return super.close();
  }
}

/** A client for a local server, its answers bounded by `limit` (the transport bounds one message; a listing is bounded here). */
export function localClient(limit: AnswerLimit, origin: string, capabilities?: ClientCapabilities): LocalClient {
  const client = new LocalClient(SUBS_CLIENT_INFO, capabilities ? { capabilities } : undefined);
  client.limit = { answer: limit, origin };
  return client;
}

/**
 * The transport of a session opened by hand (src/serve/upstream-handshake.ts), taken over: the
 * client's initialize is answered with what the server answered then, and not sent; its
 * `notifications/initialized` and everything after go to the server on that session. So the
 * client checks the answer and keeps what it says as after any initialize of its own.
 */
class AdoptingTransport extends StreamableHTTPClientTransport {
  #adopted: UpstreamHandshake | undefined;

  constructor(url: URL, options: StreamableHTTPClientTransportOptions, adopted: UpstreamHandshake) {
    super(url, { ...options, ...(adopted.sessionId !== undefined ? { sessionId: adopted.sessionId } : {}) });
    this.#adopted = adopted;
  }

  // The SDK's Client skips the initialize of a transport that has a session id (a reconnection):
  // this one's is still to be answered.
  override get sessionId(): string | undefined {
    return this.#adopted ? undefined : super.sessionId;
  }

  override async send(message: JSONRPCMessage, options?: TransportSendOptions): Promise<void> {
    const adopted = this.#adopted;
    if (adopted && "method" in message && message.method === "initialize" && "id" in message) {
      this.#adopted = undefined;
      const answer: JSONRPCMessage = { jsonrpc: "2.0", id: message.id, result: adopted.result };
      // As an answer arrives: after send has returned.
      queueMicrotask(() => this.onmessage?.(answer));
      return;
    }
    return super.send(message, options);
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
  const client = new SubsClient(SUBS_CLIENT_INFO, clientOptions);
  client.limit = { answer: limit, origin: url.origin };
  // An event stream answering a request that went over the limit ends that request at once: the
  // transport itself would only report the broken stream, and the request wait for its timeout.
  // The error is delivered as the JSON-RPC error answer the request gets (Protocol's own path);
  // its data, an object no server can send, is what SubsClient unwraps.
  const transportOptions: StreamableHTTPClientTransportOptions = {
    ...common,
    fetch: cappedAnswers(options.fetch, limit, (id, error) =>
      streamable.onmessage?.({ jsonrpc: "2.0", id, error: { code: ErrorCode.InternalError, message: error.message, data: error } }),
    ),
  };
  const streamable: StreamableHTTPClientTransport = options.adopt
    ? new AdoptingTransport(url, transportOptions, options.adopt)
    : new StreamableHTTPClientTransport(url, transportOptions);
  try {
    await client.connect(streamable, requestOptions(options));
    return client;
  } catch (error) {
    // The server spoke Streamable HTTP already.
    if (options.adopt) throw error;
    const status = error instanceof StreamableHTTPError ? error.code : undefined;
    if (status === undefined || status < 400 || status >= 500 || status === 401 || status === 403) throw error;
  }
  // HTTP+SSE answers every request on the one GET stream: an event over the limit there cannot be
  // told apart by request, so it only ends that stream (the request then meets its timeout).
  const sseClient = new SubsClient(SUBS_CLIENT_INFO, clientOptions);
  sseClient.limit = client.limit;
  await sseClient.connect(new SSEClientTransport(url, { ...common, fetch: cappedAnswers(options.fetch, limit) }), requestOptions(options));
  return sseClient;
}

/**
 * Every tool the server offers, following `nextCursor` pages. One listing, all its pages, is
 * bounded as one answer is (src/mcp/answer-cap.ts): at most MAX_LISTING_PAGES pages, and pages
 * adding up to no more than the connection's answer limit (each page counted as the JSON it
 * parsed to, about its size on the wire). Past either, the listing fails
 * whole with an error naming the server and the limit: every caller (`subs mcp tools`,
 * `subs agent tools`, `subs agent serve`, the deployment's GET /v1/mcp/{id}/tools and its agent
 * endpoint) gets the same bound from here, and none serves part of a list as if it were all.
 */
export async function listAllTools(client: Client, options: { signal?: AbortSignal; requestTimeoutMs?: number } = {}): Promise<Tool[]> {
  const bound = client instanceof SubsClient && client.limit ? client.limit : { answer: { id: "MCP server", mib: DEFAULT_MAX_ANSWER_MIB }, origin: "the server" };
  const maxBytes = limitBytes(bound.answer);
  const tools: Tool[] = [];
  let bytes = 0;
  let cursor: string | undefined;
  for (let page = 1; ; page++) {
    const result = await client.listTools(cursor === undefined ? {} : { cursor }, requestOptions(options));
    bytes += Buffer.byteLength(JSON.stringify(result));
    if (bytes > maxBytes) throw listingTooLarge(bound.answer, bound.origin, "bytes");
    tools.push(...result.tools);
    cursor = result.nextCursor;
    if (!cursor) return tools;
    if (page === MAX_LISTING_PAGES) throw listingTooLarge(bound.answer, bound.origin, "pages");
  }
}
