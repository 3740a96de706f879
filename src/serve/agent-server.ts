// The server of one `subs agent serve` session (src/serve/agent-session.ts begins it): the
// session fetches the agent's connections once, in parallel, with the code and rules of `subs agent
// tools` (src/agents/inspect.ts: capability keys, include, exclude, names, collisions), and answers
// tools/list with that snapshot until it ends: an upstream's list_changed changes nothing
// (connectors.md, "When tools are fetched"). Each connection that answered stays open for the
// session and runs its calls with the stored credential. Loads the MCP SDK.
import type { Client } from "@modelcontextprotocol/sdk/client/index.js";
import type { Tool } from "@modelcontextprotocol/sdk/types.js";
import { Protocol } from "@modelcontextprotocol/sdk/shared/protocol.js";
import {
  CallToolRequestSchema,
  ErrorCode,
  ListToolsRequestSchema,
  McpError,
  type CallToolResult,
  type LoggingLevel,
  type Result,
} from "@modelcontextprotocol/sdk/types.js";
import { describeDropped, describeWarning, describeWithheld } from "../agents/describe.ts";
import type { ToolSource } from "../agents/fetch.ts";
import { findAgent, inspectAgentTools, type Inspection } from "../agents/inspect.ts";
import type { Config, ConnectionConfig } from "../config/types.ts";
import type { Context } from "../context.ts";
import { SubsError } from "../errors.ts";
import { anySignal } from "../http/deadline.ts";
import { listAllTools } from "../mcp/connect.ts";
import { mcpError } from "../mcp/open.ts";
import { scrubbedJson } from "../secrets.ts";
import { possessive } from "../text/possessive.ts";
import { z } from "zod";
import { agentServerInfo, AGENT_SERVER_CAPABILITIES, type AgentSessionOptions, type ServedCallOutcome } from "./agent-answer.ts";
import { ServedServer } from "./served-server.ts";
import type { Scrubber, SessionServer } from "./session.ts";
import { passedOn, rpcError } from "./rpc-error.ts";
import { localServerEffects, openUpstream, type Upstream, type UpstreamContext } from "./upstream.ts";

/**
 * An upstream's tools/call result, passed on unchanged (as `subs mcp proxy` passes every result):
 * anything but a JSON object is refused. The SDK's CallToolResultSchema parsed every result twice
 * (once as the upstream's answer, once more by Server before sending it on), a large share of
 * serve's CPU per call (docs/speed.md, "Serving: `subs agent serve` and `subs mcp proxy`"), only
 * to hand the client what the upstream sent.
 */
const UpstreamResult = z.looseObject({});

type Served = { connection: string; tool: Tool };
type CallRequest = Parameters<Parameters<typeof Protocol.prototype.setRequestHandler<typeof CallToolRequestSchema>>[1]>;
type CallToolRequest = CallRequest[0];
type CallExtra = CallRequest[1];

/** `withheld`: why each tool substructure.lock withholds is not served, by the name it would have (kept for a resumed session). */
type Snapshot = { inspection: Inspection | undefined; tools: Tool[]; served: Map<string, Served>; withheld: Map<string, string> };

/**
 * A session's tools as served, kept so that another process can continue the session with the
 * same tools without listing them again (the deployment's replicas; src/deployment/agents.ts).
 * Scrubbed of the session's secrets: it leaves the process.
 */
const ResumedSnapshot = z.strictObject({
  tools: z.array(z.looseObject({ name: z.string() })),
  served: z.array(z.tuple([z.string(), z.strictObject({ connection: z.string(), tool: z.looseObject({ name: z.string() }) })])),
  // So that a call to a withheld tool is refused with its reason on any replica. Optional: a
  // snapshot from before it is still read.
  withheld: z.array(z.tuple([z.string(), z.string()])).optional(),
});
export type ResumedSnapshot = z.infer<typeof ResumedSnapshot>;

/**
 * The server of one session of agent `agentName`. `learnt`: the session's secrets and the fetch
 * that learns them (src/secrets.ts): every credential an upstream request carries is learnt
 * before it is sent, and removed from everything the client receives (ServedServer); `run` scrubs
 * stderr of the same secrets.
 */
export async function startSession(
  ctx: Context,
  config: Config,
  agentName: string,
  options: AgentSessionOptions,
  learnt: { secrets: Scrubber; fetch: typeof globalThis.fetch },
  /** The snapshot of a session another process started (zod-checked here): served as it is, its upstreams opened at their first call. */
  resumed?: unknown,
): Promise<SessionServer> {
  const { reporter } = options;
  const ended = new AbortController();
  // Lets go of ctx.signal once close() aborts `ended` (AbortSignal.any never does: src/http/deadline.ts).
  const sessionSignal = anySignal([ctx.signal, ended.signal]).signal;
  // Only what an upstream connection needs: a served session never opens a browser, whatever
  // a server answers (a login needs a person; the call says which command gives it).
  const { secrets, fetch } = learnt;
  const upstreamCtx: UpstreamContext = { env: ctx.env, fetch, now: ctx.now, ...localServerEffects(ctx) };
  const upstreams = new Map<string, Upstream>();

  const source: ToolSource = {
    target: "local",
    async listTools(connection, signal) {
      const upstream = await openUpstream({ ctx: upstreamCtx, config, connection, reporter, sessionSignal, openSignal: signal, requestTimeoutMs: options.requestTimeoutMs, shareLocal: true });
      try {
        const tools = await listAllTools(upstream.client, { signal, requestTimeoutMs: options.timeoutMs });
        // Timed out meanwhile (the session goes on without it) or the session ended: not kept.
        if (signal.aborted || sessionSignal.aborted) throw signal.reason ?? sessionSignal.reason;
        upstreams.set(connection.id, upstream);
        return tools;
      } catch (error) {
        await upstream.close();
        throw error;
      }
    },
  };

  // A resumed session's upstreams open at their first call: another process listed its tools.
  const lazy = upstreamOpener(upstreams, (id) =>
    openUpstream({ ctx: upstreamCtx, config, connection: config.connections.find((c) => c.id === id)!, reporter, sessionSignal, openSignal: sessionSignal, requestTimeoutMs: options.requestTimeoutMs, shareLocal: true }),
  );
  const snapshot: Promise<Snapshot> =
    resumed !== undefined
      ? Promise.resolve(resumedSnapshot(resumed, config))
      : (options.lock?.() ?? Promise.resolve(undefined)).then((lock) =>
          inspectAgentTools({ config, agent: agentName, source, timeoutMs: options.timeoutMs, signal: sessionSignal, lock }).then(servedSnapshot),
        );
  snapshot.then(
    (s) => {
      if (!s.inspection) return;
      for (const { text } of reports(s.inspection)) reporter.warn(text);
      const named = new Set(findAgent(config, agentName).mcp.map((m) => m.id)).size;
      const answered = named - s.inspection.unavailable.length;
      reporter.info(`Serving agent \`${agentName}\`: ${s.tools.length} tool${s.tools.length === 1 ? "" : "s"} from ${answered} of ${named} connection${named === 1 ? "" : "s"}.`);
    },
    (error: unknown) => {
      if (!sessionSignal.aborted) reporter.warn(`could not fetch agent \`${agentName}\`'s tools: ${error instanceof Error ? error.message : String(error)}`);
    },
  );

  const server = new ServedServer(agentServerInfo(agentName), { capabilities: AGENT_SERVER_CAPABILITIES }, secrets);

  // What the session left out goes to the client too, as MCP log messages, once it is initialized
  // (MCP lifecycle: nothing but pings and logging before the client's `initialized`).
  let initialized = false;
  let markInitialized = () => {};
  const whenInitialized = new Promise<void>((resolve) => (markInitialized = resolve));
  server.oninitialized = () => {
    initialized = true;
    markInitialized();
  };
  const reported = Promise.all([whenInitialized, snapshot]).then(async ([, s]) => {
    // After the initialize answer is written: a client that sends `initialized` without waiting
    // for it (a pipe) would otherwise read a log message first.
    await new Promise((resolve) => setImmediate(resolve));
    for (const { level, text } of s.inspection ? reports(s.inspection) : []) {
      await server.sendLoggingMessage({ level, logger: "subs", data: text }, server.transport?.sessionId).catch(() => {});
    }
  });
  reported.catch(() => {});

  const ready = async (): Promise<Snapshot> => {
    try {
      const s = await snapshot;
      // The reports reach the client before the list does, so it can tell why a tool is missing.
      if (initialized) await reported.catch(() => {});
      return s;
    } catch (error) {
      throw rpcError(ErrorCode.InternalError, `could not fetch agent \`${agentName}\`'s tools: ${error instanceof Error ? error.message : String(error)}`);
    }
  };

  server.setRequestHandler(ListToolsRequestSchema, async () => ({ tools: (await ready()).tools }));

  // Registered past Server's own setRequestHandler, which parses a tools/call request a second
  // time and its result against CallToolResultSchema: Protocol still validates the request.
  const handleCall = async (request: CallToolRequest, extra: CallExtra, said: Said): Promise<CallToolResult | Result> => {
    const { name, arguments: args, _meta } = request.params;
    // No tools to serve (their fetch failed): nothing was run, for want of the servers.
    const s = await ready().catch((error: unknown) => {
      said("upstream_error", undefined);
      throw error;
    });
    const target = s.served.get(name);
    // MCP "Tools: Error Handling": an unknown tool is a protocol error (-32602), not a tool result.
    // Observed as refused, without its name: the text is whatever the client sent.
    if (!target) {
      said("refused", undefined);
      const withheld = s.withheld.get(name);
      throw rpcError(ErrorCode.InvalidParams, `Unknown tool: ${name}${withheld !== undefined ? ` (${withheld})` : notServed(s.inspection, name)}`);
    }
    const call = upstreamCall(target.tool.name, args, _meta, extra, options.requestTimeoutMs);
    let upstream: Upstream;
    try {
      upstream = await lazy.get(target.connection);
    } catch (error) {
      said(failureOutcome(error), target);
      if (extra.signal.aborted) throw error;
      return callFailure(config.connections.find((c) => c.id === target.connection)!, error);
    }
    try {
      // A session the upstream ended is replaced and the call sent again, once (src/serve/upstream.ts).
      const result = await upstream.run(call, extra.signal);
      said(result.isError === true ? "tool_error" : "ok", target);
      return result;
    } catch (error) {
      said(failureOutcome(error), target);
      if (extra.signal.aborted) throw error;
      const fromServer = upstreamRpcError(error);
      if (fromServer) throw fromServer;
      return callFailure(upstream.connection, error);
    }
  };
  Protocol.prototype.setRequestHandler.call(server, CallToolRequestSchema, observed(options.onCall, handleCall, secrets));

  return {
    server,
    async snapshot() {
      const s = await snapshot;
      const kept: ResumedSnapshot = { tools: s.tools, served: [...s.served], ...(s.withheld.size ? { withheld: [...s.withheld] } : {}) };
      return scrubbedJson(kept, (text) => secrets.scrub(text));
    },
    async close() {
      ended.abort();
      await snapshot.catch(() => {});
      await lazy.settled();
      await Promise.all([...upstreams.values()].map((u) => u.close()));
      upstreams.clear();
    },
  };
}

/** The request sent upstream for a call of `name` (the tool's own name on its connection). */
function upstreamCall(name: string, args: CallToolRequest["params"]["arguments"], _meta: CallToolRequest["params"]["_meta"], extra: CallExtra, requestTimeoutMs: number) {
  const progressToken = _meta?.progressToken;
  const { progressToken: _token, ...meta } = _meta ?? {};
  return (client: Client) =>
    client.request(
      { method: "tools/call", params: { name, ...(args !== undefined ? { arguments: args } : {}), ...(Object.keys(meta).length > 0 ? { _meta: meta } : {}) } },
      UpstreamResult,
      {
        // The client's notifications/cancelled aborts this signal; the SDK then cancels upstream.
        signal: extra.signal,
        timeout: requestTimeoutMs,
        resetTimeoutOnProgress: true,
        // Upstream progress goes back under the client's own token (MCP "Progress").
        ...(progressToken !== undefined
          ? { onprogress: (progress) => void extra.sendNotification({ method: "notifications/progress", params: { ...progress, progressToken } }).catch(() => {}) }
          : {}),
      },
    );
}

type Said = (outcome: ServedCallOutcome, target: Served | undefined) => void;

/**
 * The tools/call handler, telling `observer` (if any) how each call ended (AgentSessionOptions.onCall):
 * timed from the request's arrival, said once the answer is known, before it is sent. The tool's
 * name is scrubbed of the session's secrets, as everything the session sends is.
 */
function observed(observer: AgentSessionOptions["onCall"], handle: (request: CallToolRequest, extra: CallExtra, said: Said) => Promise<CallToolResult | Result>, secrets: Scrubber) {
  return (request: CallToolRequest, extra: CallExtra): Promise<CallToolResult | Result> => {
    if (!observer) return handle(request, extra, () => {});
    const started = performance.now();
    return handle(request, extra, (outcome, target) => {
      try {
        const given = extra.requestInfo?.headers?.["x-request-id"];
        observer({ tool: target ? secrets.scrub(request.params.name) : undefined, connection: target?.connection, outcome, durationMs: performance.now() - started, requestId: typeof given === "string" ? given : undefined });
      } catch {
        // An observer's failure is never the call's.
      }
    });
  };
}

/**
 * The tools of a connection the session could not reach are left out; a call to one says why and
 * what to run (a login), as the session's log messages did at its start, which a client over HTTP
 * may have had no stream open to receive. Empty when every connection answered.
 */
function notServed(inspection: Inspection | undefined, name: string): string {
  const missing = inspection?.unavailable ?? [];
  return missing.length ? ` (not served in this session: ${missing.map((u) => `${u.message}${u.hint ? `; ${u.hint}` : ""}`).join("; ")})` : "";
}

/** Each connection's upstream, opened once however many calls want it first. */
function upstreamOpener(upstreams: Map<string, Upstream>, open: (id: string) => Promise<Upstream>) {
  const opening = new Map<string, Promise<Upstream>>();
  return {
    get(id: string): Promise<Upstream> {
      const ready = upstreams.get(id);
      if (ready) return Promise.resolve(ready);
      let pending = opening.get(id);
      if (!pending) {
        pending = open(id).then((u) => (upstreams.set(id, u), u));
        pending.catch(() => opening.delete(id));
        opening.set(id, pending);
      }
      return pending;
    },
    settled: () => Promise.allSettled(opening.values()),
  };
}

/** The tools a session serves: the inspection's connector tools (declared tools and sub-agents are the worker's own). */
function servedSnapshot(inspection: Inspection): Snapshot {
  const served = new Map<string, Served>();
  const tools: Tool[] = [];
  for (const t of inspection.tools) {
    if (t.kind !== "connector") continue;
    served.set(t.name, { connection: t.connection, tool: t.tool as Tool });
    tools.push({ ...(t.tool as Tool), name: t.name });
  }
  return { inspection, tools, served, withheld: new Map(inspection.withheld.map((w) => [w.name, describeWithheld(w)])) };
}

/** The snapshot another process kept (ResumedSnapshot), served as it is. */
function resumedSnapshot(resumed: unknown, config: Config): Snapshot {
  const parsed = ResumedSnapshot.parse(resumed);
  const known = new Set(config.connections.map((c) => c.id));
  if (!parsed.served.every(([, s]) => known.has(s.connection))) throw new Error("the session's snapshot names a connection the agent no longer has");
  return { inspection: undefined, tools: parsed.tools as Tool[], served: new Map(parsed.served as Array<[string, Served]>), withheld: new Map(parsed.withheld ?? []) };
}

type Report = { level: LoggingLevel; text: string };

/** Everything a session leaves out and why: unavailable connections, dropped names, tools substructure.lock withholds, warnings. */
function reports(r: Inspection): Report[] {
  return [
    ...r.unavailable.map((u) => ({
      level: "warning" as const,
      text: `${u.message}; this session serves none of ${possessive(u.connection)} tools${u.hint ? `; hint: ${u.hint}` : ""}`,
    })),
    ...r.dropped.map((d) => ({ level: "warning" as const, text: `not served: ${describeDropped(d)}` })),
    ...r.withheld.map((w) => ({ level: "warning" as const, text: `not served: ${describeWithheld(w)}` })),
    ...r.warnings.map((w) => ({ level: "warning" as const, text: describeWarning(w, r.agent) })),
  ];
}

/**
 * A JSON-RPC error the upstream server answered, passed on as it is (code, message, data). The
 * SDK's own errors for the request (its timeout, a closed connection) are ours to explain.
 */
function upstreamRpcError(error: unknown): Error | undefined {
  if (!(error instanceof McpError)) return undefined;
  if (error.code === ErrorCode.RequestTimeout || error.code === ErrorCode.ConnectionClosed) return undefined;
  return passedOn(error);
}

/**
 * A call that could not run (no answer, not logged in, server gone) as a tool error the model
 * can read (MCP "Tools: Error Handling"), naming the command that fixes it.
 */
function callFailure(connection: ConnectionConfig, error: unknown): CallToolResult {
  const problem = subsErrorIn(error) ?? mcpError(connection, error, undefined);
  return { content: [{ type: "text", text: `${problem.message}${problem.hint ? ` (${problem.hint})` : ""}` }], isError: true };
}

/**
 * A call that got no result (ServedCallOutcome): refused when the session may not run it (no
 * usable credential, a connection outside the catalog: src/deployment/agents.ts's errors), else an
 * upstream error (no answer, the connection failed, a JSON-RPC error, the client cancelled).
 */
function failureOutcome(error: unknown): ServedCallOutcome {
  const known = subsErrorIn(error);
  return known && (known.kind === "needs_login" || known.code === "needs_login" || known.code === "url_not_in_catalog") ? "refused" : "upstream_error";
}

function subsErrorIn(error: unknown): SubsError | undefined {
  for (let e = error, depth = 0; e !== undefined && e !== null && depth < 5; e = (e as { cause?: unknown }).cause, depth++) {
    if (e instanceof SubsError) return e;
  }
  return undefined;
}
