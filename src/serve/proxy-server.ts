// The server of one `subs mcp proxy <id>` session (src/serve/proxy-session.ts begins it): one MCP
// session in front of one declared connection, with its stored credential. Transparent, as mcp-remote is: what the upstream server can do is what
// the client is told at `initialize`, what the client can do (sampling, elicitation, roots) is
// what the upstream is told, and every other request and notification crosses unchanged, in
// either direction, through the SDK's fallback handlers (shared/protocol.js `_onrequest` and
// `_onnotification` use them for any method without a handler of its own). Only what is per hop
// is rewritten: request ids (each side's Protocol numbers its own), progress tokens (mapped back
// to the one the sender chose) and cancellations (an abort of the forwarded request's signal
// sends `notifications/cancelled` with the id the other side knows).
import type { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPError } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import type { Server } from "@modelcontextprotocol/sdk/server/index.js";
import type { RequestOptions } from "@modelcontextprotocol/sdk/shared/protocol.js";
import type { Transport } from "@modelcontextprotocol/sdk/shared/transport.js";
import {
  CancelledNotificationSchema,
  ErrorCode,
  type ClientCapabilities,
  McpError,
  ProgressNotificationSchema,
  type InitializeResult,
  type JSONRPCRequest,
  type Notification,
  type RequestId,
  type Result,
} from "@modelcontextprotocol/sdk/types.js";
import { z } from "zod";
import { describeWithheld } from "../agents/describe.ts";
import { lockVerdict, type ConnectorTool, type WithheldTool } from "../agents/resolve.ts";
import type { ToolLock } from "../config/tool-lock.ts";
import { whereIs, type Config, type ConnectionConfig } from "../config/types.ts";
import { listAllTools } from "../mcp/connect.ts";
import { SubsError } from "../errors.ts";
import { anySignal } from "../http/deadline.ts";
import { connectionError } from "../mcp/open.ts";
import { VERSION } from "../version.ts";
import { initializeParams, type InitializeParams } from "./handshake.ts";
import { proxyInitializeResult, type ProxyContext, type ProxyOptions } from "./proxy-answer.ts";
import { ServedServer } from "./served-server.ts";
import type { Scrubber, SessionServer } from "./session.ts";
import { passedOn, rpcError, type RpcError } from "./rpc-error.ts";
import { CredentialRejected, localServerEffects, openUpstream, type Upstream } from "./upstream.ts";
import type { UpstreamHandshake } from "../mcp/client-handshake.ts";

/**
 * The proxy has no deadline of its own: the client decides how long it waits and cancels when it
 * gives up, and that cancellation is forwarded. (The SDK's 60 s default would cut a long tool short
 * behind a client that allows more.) The largest delay a Node timer takes.
 */
const NO_DEADLINE_MS = 2_147_483_647;

/** Any JSON-RPC result, kept whole: the SDK's per-method schemas would drop or reject what they do not know. */
const AnyResult = z.looseObject({});

/** Notifications that are about the session, not about a request in flight. */
const UNRELATED = new Set(["notifications/tools/list_changed", "notifications/prompts/list_changed", "notifications/resources/list_changed", "notifications/resources/updated"]);

type Side = {
  request(request: { method: string; params?: Record<string, unknown> }, schema: typeof AnyResult, options?: RequestOptions): Promise<Record<string, unknown>>;
};
type Extra = {
  signal: AbortSignal;
  requestId: RequestId;
  sendNotification(notification: { method: string; params?: Record<string, unknown> }): Promise<void>;
};

/**
 * The SDK's low-level server with its capability checks left to the upstream: it advertises the
 * upstream's capabilities, learnt only at `initialize` (after the transport is connected, when
 * registerCapabilities no longer may), and the upstream answers for what it does not support.
 */
class ProxyServer extends ServedServer {
  protected override assertCapabilityForMethod(): void {}
  protected override assertNotificationCapability(): void {}
  protected override assertRequestHandlerCapability(): void {}
  protected override assertTaskCapability(): void {}
  protected override assertTaskHandlerCapability(): void {}
  override async connect(transport: Transport): Promise<void> {
    await super.connect(transport);
    progressInOrder(this, transport);
  }
}

/**
 * The server of one proxy session. `learnt`: the session's secrets and the fetch that learns them
 * (src/secrets.ts), whose every message to the client passes them (ServedServer).
 * `handshake`: the upstream's initialize, sent by hand for this session's initialize; the session
 * it opened is taken over.
 */
export async function proxySession(
  ctx: ProxyContext,
  config: Config,
  connection: ConnectionConfig,
  options: ProxyOptions,
  learnt: { secrets: Scrubber; fetch: typeof globalThis.fetch },
  handshake?: Promise<UpstreamHandshake | undefined>,
): Promise<SessionServer> {
  const session = new ProxiedSession({ ctx, config, connection, options, learnt, handshake });
  return { server: session.server, close: () => session.close() };
}

type ProxiedSessionOptions = {
  ctx: ProxyContext;
  config: Config;
  connection: ConnectionConfig;
  options: ProxyOptions;
  learnt: { secrets: Scrubber; fetch: typeof globalThis.fetch };
  handshake?: Promise<UpstreamHandshake | undefined> | undefined;
};

/** One client's session in front of the connection's server: what it forwards, and what it keeps. */
class ProxiedSession {
  readonly server: ProxyServer;
  private upstream: Upstream | undefined;
  private unavailable: Error | undefined;
  private initializing = false;
  // Settles once `initialize` has opened the upstream or failed to. A client may send its next
  // requests without waiting for the initialize answer (a pipe, a client that pipelines): they
  // wait for it here, and go on in the order they came (MCP lifecycle: the client SHOULD wait,
  // but nothing is gained by refusing one that did not).
  private settleInitialize: () => void = () => {};
  private readonly initialized = new Promise<void>((resolve) => (this.settleInitialize = resolve));
  private closing = false;
  private clientCapabilities: ClientCapabilities = {};
  // What the client set up on the upstream's session, to set up again on a new one (onReopen).
  private readonly subscriptions = new Set<string>();
  private logLevel: string | undefined;
  private readonly ended = new AbortController();
  // The client's requests being answered: a request or a notification the upstream sends while
  // exactly one is in flight belongs to it (a sampling request inside a tools/call), which over
  // Streamable HTTP puts it on that request's response stream. The upstream's transport does not
  // say which of several it came with; then it goes on the session's own stream.
  private readonly inFlight = new Set<RequestId>();
  // substructure.lock, read once for the session; a lock that cannot be read refuses every tool.
  private readonly lock: Promise<{ lock: ToolLock | undefined } | { broken: Error }>;
  // Under a lock: each tool the upstream listed last, as served (its locked face) or withheld.
  private verdicts: Map<string, { ok: true } | { ok: false; withheld: WithheldTool }> | undefined;
  private readonly told = new Set<string>();

  constructor(private readonly given: ProxiedSessionOptions) {
    const { connection, learnt } = given;
    this.lock = (given.options.lock?.() ?? Promise.resolve(undefined)).then(
      (lock) => ({ lock }),
      (error: unknown) => ({ broken: error instanceof Error ? error : new Error(String(error)) }),
    );
    this.lock.catch(() => {});
    const server = new ProxyServer({ name: `subs-proxy-${connection.id}`, version: VERSION }, undefined, learnt.secrets);
    this.server = server;
    // A ping crosses to the other end too: the client learns whether the server answers, not just subs.
    server.removeRequestHandler("ping");
    cancelsEveryId(server);
    // initialize is taken raw, through the fallback: the SDK's schema for it keeps only the client
    // capabilities it knows, and the upstream is to be told all of them.
    server.removeRequestHandler("initialize");
    server.fallbackRequestHandler = (request, extra) => this.onRequest(request, extra);
    server.fallbackNotificationHandler = async (notification) => {
      if (!this.upstream && this.initializing) await this.initialized;
      await this.upstream?.client.transport?.send({ jsonrpc: "2.0", ...(notification as Notification) }).catch(() => {});
    };
  }

  private related(method?: string): RequestId | undefined {
    return this.inFlight.size === 1 && !(method && UNRELATED.has(method)) ? this.inFlight.values().next().value : undefined;
  }

  // The connection, its token and its session kept current for the client's session: one
  // implementation with `subs agent serve` (src/serve/upstream.ts).
  private open(adopt: UpstreamHandshake | undefined): Promise<Upstream> {
    const { ctx, config, connection, options, learnt } = this.given;
    return openUpstream({
      ...(adopt ? { adopt } : {}),
      ctx: { env: ctx.env, now: ctx.now, fetch: learnt.fetch, ...localServerEffects(ctx) },
      config,
      connection,
      reporter: options.reporter,
      // Lets go of ctx.signal once close() aborts `ended` (AbortSignal.any never does: src/http/deadline.ts).
      sessionSignal: anySignal([ctx.signal, this.ended.signal]).signal,
      capabilities: this.clientCapabilities,
      // The initialize of the upstream: the client waits for its answer, and cancels or times
      // out on its own terms.
      requestTimeoutMs: NO_DEADLINE_MS,
      // The upstream ended its session: the proxy's client keeps its own, so what the client set
      // up on the old one (log level, subscriptions) is set up again on the new one.
      onReopen: async (client) => {
        this.wireUpstream(client);
        const again = { timeout: NO_DEADLINE_MS };
        if (this.logLevel !== undefined) await client.setLoggingLevel(this.logLevel as never, again).catch(() => {});
        for (const uri of this.subscriptions) await client.subscribeResource({ uri }, again).catch(() => {});
      },
    });
  }

  private async initialize(raw: JSONRPCRequest): Promise<InitializeResult> {
    const checked = initializeParams(raw.params);
    if (!("params" in checked)) throw new McpError(ErrorCode.InvalidParams, `invalid initialize: ${checked.problem}`);
    const request = { params: checked.params };
    if (this.initializing) throw new McpError(ErrorCode.InvalidRequest, "the session is already initialized");
    this.initializing = true;
    try {
      return await this.openFor(request);
    } finally {
      this.settleInitialize();
    }
  }

  private async openFor(request: { params: InitializeParams }): Promise<InitializeResult> {
    const { connection, options } = this.given;
    const { reporter } = options;
    this.clientCapabilities = request.params.capabilities as ClientCapabilities;
    const adopted = await this.given.handshake;
    let opened: Upstream;
    try {
      opened = await this.open(adopted);
    } catch (error) {
      const problem = error instanceof SubsError ? error : connectionError(connection, error);
      const words = `${problem.message}${problem.hint ? `; ${problem.hint}` : ""}`;
      reporter.warn(words);
      options.onUnavailable?.(problem);
      // The client shows this message (in its list of servers, its logs): it says what to do.
      this.unavailable = rpcError(ErrorCode.InternalError, words, { code: problem.code ?? problem.kind, ...(problem.hint ? { hint: problem.hint } : {}) });
      throw this.unavailable;
    }
    if (this.closing) {
      await opened.close();
      throw new McpError(ErrorCode.ConnectionClosed, "the session closed");
    }
    this.upstream = opened;
    const { client } = opened;
    this.wireUpstream(client);
    // What the client was answered already, when the upstream's initialize was sent by hand.
    const result = proxyInitializeResult(
      request.params.protocolVersion,
      adopted?.result ?? {
        protocolVersion: (client.transport as { protocolVersion?: string } | undefined)?.protocolVersion,
        capabilities: client.getServerCapabilities(),
        serverInfo: client.getServerVersion(),
        instructions: client.getInstructions(),
      },
      connection,
    );
    reporter.info(`${connection.id}: connected to ${whereIs(connection)}; proxying for ${request.params.clientInfo.name}`);
    return result;
  }

  private async onRequest(request: JSONRPCRequest, extra: { requestId: RequestId; signal: AbortSignal }): Promise<Result> {
    const { connection, options } = this.given;
    if (request.method === "initialize") return this.initialize(request);
    if (!this.upstream && request.method === "ping") return {};
    if (!this.upstream && this.initializing) await this.initialized;
    const upstream = this.upstream;
    if (!upstream) {
      throw this.unavailable ?? new McpError(ErrorCode.InvalidRequest, "the session is not initialized");
    }
    this.inFlight.add(extra.requestId);
    try {
      if (request.method === "tools/list" || request.method === "tools/call") {
        const locked = await this.lock;
        if ("broken" in locked) throw new McpError(ErrorCode.InternalError, `${locked.broken.message}; no tool is served until substructure.lock is fixed (\`subs lock\` writes it anew)`);
        if (locked.lock) return await this.underLock(locked.lock, upstream, request, extra);
      }
      const result = await upstream.run((client) => forward(client as unknown as Side, request, extra as unknown as Extra), extra.signal);
      this.remember(request);
      return result;
    } catch (error) {
      const failure = asJsonRpcError(error, connection);
      // The person who can run the login reads stderr (the client's log), not the client's error.
      if (error instanceof CredentialRejected || (error instanceof SubsError && error.kind === "needs_login") || (error instanceof StreamableHTTPError && (error.code === 401 || error.code === 403))) {
        options.reporter.warn(failure.message);
      }
      throw failure;
    } finally {
      this.inFlight.delete(extra.requestId);
    }
  }

  /**
   * tools/list and tools/call when substructure.lock exists (docs/file.md, "Reviewing tools"): a
   * listing keeps the tools the lock allows, each as locked; a call of any other name is refused as
   * an unknown tool is (MCP "Tools: Error Handling": -32602), saying why. A call before any listing
   * lists the tools first, so the verdict is on what the server offers now.
   */
  private async underLock(lock: ToolLock, upstream: Upstream, request: JSONRPCRequest, extra: { requestId: RequestId; signal: AbortSignal }): Promise<Result> {
    if (request.method === "tools/list") {
      const result = await upstream.run((client) => forward(client as unknown as Side, request, extra as unknown as Extra), extra.signal);
      const listed = Array.isArray(result.tools) ? (result.tools as ConnectorTool[]) : [];
      const first = !(request.params as { cursor?: unknown } | undefined)?.cursor;
      return { ...result, tools: this.judge(lock, listed, first) };
    }
    const name = (request.params as { name?: unknown } | undefined)?.name;
    if (!this.verdicts) {
      const tools = await upstream.run((client) => listAllTools(client, { signal: extra.signal }), extra.signal);
      this.judge(lock, tools as ConnectorTool[], true);
    }
    const verdict = typeof name === "string" ? this.verdicts?.get(name) : undefined;
    if (!verdict?.ok) {
      const why = verdict ? describeWithheld(verdict.withheld) : `not offered by ${this.given.connection.id}, or not in substructure.lock`;
      // An McpError: the catch in onRequest passes it on as it is (asJsonRpcError).
      throw new McpError(ErrorCode.InvalidParams, `Unknown tool: ${String(name)} (${why})`);
    }
    return upstream.run((client) => forward(client as unknown as Side, request, extra as unknown as Extra), extra.signal);
  }

  /** The tools of one listing page that the lock allows, as locked; what it withholds is said on stderr once a session. */
  private judge(lock: ToolLock, tools: readonly ConnectorTool[], firstPage: boolean): ConnectorTool[] {
    const { connection, options } = this.given;
    if (firstPage || !this.verdicts) this.verdicts = new Map();
    if (!lock.connections.has(connection.id) && !this.told.has("")) {
      this.told.add("");
      options.reporter.warn(`${connection.id}: substructure.lock holds none of its tools (no agent names it, or no agent's filter keeps any), so all are withheld; name it in an agent's \`mcp\` and run \`subs lock\``);
    }
    const served: ConnectorTool[] = [];
    for (const tool of tools) {
      if (typeof tool?.name !== "string") continue;
      const verdict = lockVerdict(lock, connection.id, tool);
      if (verdict.ok) {
        this.verdicts.set(tool.name, { ok: true });
        served.push(verdict.tool);
        continue;
      }
      const withheld: WithheldTool = { connection: connection.id, tool: tool.name, name: tool.name, ...verdict.why };
      this.verdicts.set(tool.name, { ok: false, withheld });
      if (lock.connections.has(connection.id) && !this.told.has(`t:${tool.name}`)) {
        this.told.add(`t:${tool.name}`);
        options.reporter.warn(`not served: ${describeWithheld(withheld)}`);
      }
    }
    return served;
  }

  /** Subscriptions and the log level, as the upstream accepted them. */
  private remember(request: JSONRPCRequest): void {
    const params = request.params as { uri?: unknown; level?: unknown } | undefined;
    if (request.method === "resources/subscribe" && typeof params?.uri === "string") this.subscriptions.add(params.uri);
    else if (request.method === "resources/unsubscribe" && typeof params?.uri === "string") this.subscriptions.delete(params.uri);
    else if (request.method === "logging/setLevel" && typeof params?.level === "string") this.logLevel = params.level;
  }

  private wireUpstream(client: Client): void {
    const { connection, options } = this.given;
    const { server } = this;
    client.removeRequestHandler("ping");
    cancelsEveryId(client);
    if (client.transport) progressInOrder(client, client.transport);
    client.fallbackRequestHandler = async (request, extra) => {
      const relatedRequestId = this.related();
      try {
        return await forward(server as unknown as Side, request, extra as unknown as Extra, relatedRequestId);
      } catch (error) {
        throw asJsonRpcError(error, connection);
      }
    };
    client.fallbackNotificationHandler = async (notification) => {
      const relatedRequestId = this.related(notification.method);
      await server.transport
        ?.send({ jsonrpc: "2.0" as const, ...(notification as Notification) }, relatedRequestId !== undefined ? { relatedRequestId } : undefined)
        .catch(() => {});
    };
    // The upstream went away for good (an SSE connection closed): this session has nothing left
    // to serve, and ending it tells the client, which may start another.
    client.onclose = () => {
      if (this.closing) return;
      options.reporter.warn(`${connection.id}: the server closed the connection; ending the session`);
      void server.close().catch(() => {});
    };
  }

  async close(): Promise<void> {
    this.closing = true;
    this.ended.abort();
    const opened = this.upstream;
    this.upstream = undefined;
    if (!opened) return;
    const { client } = opened;
    // Polite end of the upstream's session (MCP Streamable HTTP, "Session Management"), capped:
    // a server that does not answer must not hold the proxy open.
    const transport = client.transport as { terminateSession?: () => Promise<void> } | undefined;
    await Promise.race([transport?.terminateSession?.().catch(() => {}), new Promise((resolve) => setTimeout(resolve, 1000).unref())]);
    await opened.close();
  }
}

/**
 * Sends `request` on to the other side as it came, but for the progress token: the other side
 * gets one of the forwarding side's (the SDK numbers them by request), and each progress report
 * comes back with the token the sender chose. Aborting `extra.signal` (the sender cancelled, or
 * the session closed) cancels it on the other side.
 */
async function forward(
  to: Side,
  request: JSONRPCRequest,
  extra: Extra,
  relatedRequestId?: RequestId,
): Promise<Record<string, unknown>> {
  const { params, progressToken } = withoutProgressToken(request.params as Record<string, unknown> | undefined);
  // Reports go out in order and before the result: over Streamable HTTP each is a POST of its
  // own, and one that arrived after the result would be dropped as being for an unknown token.
  let reported = Promise.resolve();
  const result = await to.request({ method: request.method, ...(params ? { params } : {}) }, AnyResult, {
    signal: extra.signal,
    timeout: NO_DEADLINE_MS,
    ...(relatedRequestId !== undefined ? { relatedRequestId } : {}),
    ...(progressToken !== undefined
      ? {
          onprogress: (progress) => {
            const notification = { method: "notifications/progress", params: { ...progress, progressToken } };
            reported = reported.then(() => extra.sendNotification(notification)).catch(() => {});
          },
        }
      : {}),
  });
  await reported;
  return result;
}

/**
 * Progress reports handled as they arrive, not a microtask later: the SDK defers every
 * notification (shared/protocol.js `_onnotification`) but handles a response at once, so a last
 * report that came in the same read as the result (a client answering a sampling request over
 * stdio) found its request gone and was dropped. A forwarded request's reports must all get
 * through before its result.
 */
function progressInOrder(side: Client | Server, transport: Transport): void {
  const sdk = side as unknown as { _onprogress(notification: unknown): void };
  const dispatch = transport.onmessage;
  side.setNotificationHandler(ProgressNotificationSchema, () => {});
  transport.onmessage = (message, extra) => {
    if ("method" in message && message.method === "notifications/progress" && !("id" in message)) sdk._onprogress(message);
    else dispatch?.(message, extra);
  };
}

/**
 * Cancellation by request id, 0 included: the SDK's own handler (shared/protocol.js `_oncancel`)
 * tests `!requestId` and so ignores a cancellation of request 0, the first request a server sends
 * its client (a sampling or elicitation request the upstream then gives up on). Same effect
 * otherwise: the handler's signal aborts, and the forwarded request is cancelled on the other side.
 */
function cancelsEveryId(side: Client | Server): void {
  const controllers = (side as unknown as { _requestHandlerAbortControllers: Map<RequestId, AbortController> })._requestHandlerAbortControllers;
  side.setNotificationHandler(CancelledNotificationSchema, (notification) => {
    const id = notification.params.requestId;
    if (id !== undefined) controllers.get(id)?.abort(notification.params.reason);
  });
}

function withoutProgressToken(params: Record<string, unknown> | undefined): { params: Record<string, unknown> | undefined; progressToken: string | number | undefined } {
  const meta = params?._meta as Record<string, unknown> | undefined;
  if (!params || !meta || !("progressToken" in meta)) return { params, progressToken: undefined };
  const { progressToken, ...rest } = meta;
  const { _meta: _, ...others } = params;
  return {
    params: { ...others, ...(Object.keys(rest).length > 0 ? { _meta: rest } : {}) },
    progressToken: typeof progressToken === "string" || typeof progressToken === "number" ? progressToken : undefined,
  };
}

/**
 * The error the other side answered, as it answered it (code, message, data): the SDK's McpError
 * prefixes its message with "MCP error <code>: ", which is not the server's. A failure of the
 * proxy's own (the upstream unreachable, a credential it rejects) becomes an internal error whose
 * message says what to do.
 */
function asJsonRpcError(error: unknown, connection: ConnectionConfig): RpcError {
  if (error instanceof McpError) return passedOn(error);
  if (error instanceof CredentialRejected) {
    // The server answered 401 and src/serve/upstream.ts found no token it would take.
    const { problem } = error;
    const why = problem.message.startsWith(`${connection.id}: `) ? problem.message.slice(connection.id.length + 2) : problem.message;
    const login = problem.kind === "needs_login";
    const hint = login ? `run \`subs mcp login ${connection.id}\`` : problem.hint;
    return rpcError(ErrorCode.InternalError, `${connection.id}: the server rejected the stored credential and a refresh did not help (${why})${hint ? `; ${hint}` : ""}`, {
      code: login ? "needs_login" : (problem.code ?? problem.kind),
      ...(hint ? { hint } : {}),
    });
  }
  const status = error instanceof StreamableHTTPError ? error.code : undefined;
  if (status === 401 || status === 403) {
    const why = status === 401 ? "the server rejected the stored credential and a refresh did not help" : "the server refused the stored credential (it may need more permissions)";
    const hint = `run \`subs mcp login ${connection.id}\``;
    return rpcError(ErrorCode.InternalError, `${connection.id}: ${why}; ${hint}`, { code: status === 401 ? "needs_login" : "insufficient_scope", hint });
  }
  const problem = error instanceof SubsError ? error : connectionError(connection, error);
  return rpcError(ErrorCode.InternalError, `${problem.message}${problem.hint ? `; ${problem.hint}` : ""}`, { code: problem.code ?? problem.kind });
}
