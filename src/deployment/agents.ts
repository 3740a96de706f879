// Each declared agent served over MCP Streamable HTTP at <public-url>/v1/agents/<name>/mcp, on
// the engine of `subs agent serve --http`: its sessions (src/serve/http-sessions.ts, with the
// limits of --http) and, per session, the agent's server (src/serve/agent-session.ts): one
// snapshot of exactly the tools `subs agent tools` shows, fetched when the session starts. The
// sessions are kept in the store (a SessionRegistry): another replica continues one with the same
// snapshot, the same owner and the same idle timeout, and a DELETE on any ends it on all. One
// API token holds at most so many sessions, counted in the store on every agent and process.
//
// What differs is where a call's credential comes from. The engine sends each connection's
// request with a static token read from a variable; here that token is a per-session stand-in,
// which the fetch below replaces with the access token the deployment holds for the connection
// (src/deployment/oauth.ts: refreshed ahead of expiry, once per credential, and once more on a
// 401). The stand-in is replaced before the session's secret-learning fetch sees the request, so
// the real token is what the session scrubs from everything its client receives.
import { randomBytes } from "node:crypto";
import { z } from "zod";
import type { Config, ConnectionConfig } from "../config/types.ts";
import { lockOfEntries } from "../config/tool-lock.ts";
import type { Context } from "../context.ts";
import { SubsError } from "../errors.ts";
import { silentProgress, type Reporter } from "../report.ts";
import { learningFetch, Secrets } from "../secrets.ts";
import { agentSessionFactory } from "../serve/agent-session.ts";
import { DEFAULT_LIMITS } from "../serve/http.ts";
import { McpSessions, type SessionRefusal, type SessionRegistry } from "../serve/http-sessions.ts";
import type { Session } from "../serve/session.ts";
import type { Actor, AuditSink } from "./audit.ts";
import { foreignText } from "./foreign.ts";
import { NOT_IN_CATALOG } from "./catalog.ts";
import { Refusal, type OAuth } from "./oauth.ts";
import type { Log, Metrics } from "./ops.ts";
import type { AgentEndpoint } from "./routes/agents.ts";
import { STORE_DOWN_MESSAGE } from "./routes/answer.ts";
import { StoreUnavailable, type ApiTokenRecord, type ConnectionRecord, type DeploymentStore } from "./store/types.ts";

const ResumedAgentSession = z.strictObject({ urls: z.record(z.string(), z.string()), session: z.unknown() });

/** As `subs agent serve`'s defaults: --timeout 10, --request-timeout 60. */
const TOOLS_TIMEOUT_MS = 10_000;
const REQUEST_TIMEOUT_MS = 60_000;
const CLOSE_GRACE_MS = 5000;
/**
 * How often each process checks the sessions it holds against the store: a token revoked by any
 * means (the CLI writes the store directly) loses its sessions, GET streams and calls in progress
 * within about this long; a session ended on another process ends here too. One indexed read
 * while sessions are held, a write only when something changed.
 */
const CHECK_MS = 1000;
/** A session busy here (a call or its GET stream open) is marked used in the store this often. */
const TOUCH_MS = 30_000;
/**
 * At its token's cap, a session unused for this long gives its place to the token's new one: it
 * has no call or GET stream open anywhere (those are marked used every TOUCH_MS), so its client
 * most likely went away without a DELETE (the MCP SDK's close() sends none). A client that comes
 * back to it gets 404 and starts a new session, as the transport specification says.
 */
const DISPLACE_AFTER_MS = 2 * TOUCH_MS;

export type AgentEndpointOptions = {
  ctx: Context;
  store: DeploymentStore;
  oauth: OAuth;
  metrics: Metrics;
  log: Log;
  /** Sessions one API token may hold, on all agents and every process together (store-enforced). */
  maxSessionsPerToken: number;
  /** The record: each served tool call, with the token that started its session (audit.ts). */
  audit?: AuditSink;
};

export type AgentEndpoints = {
  endpoint: AgentEndpoint;
  /**
   * Ends the sessions' GET streams here, the sessions left alive: their clients reconnect, through
   * the balancer to another replica, which continues them from the store. For a replica stopping.
   */
  endStreams(): void;
  /** Ends every session (their upstream connections with them), waiting a little for each. */
  close(): Promise<void>;
};

export function agentEndpoints(o: AgentEndpointOptions): AgentEndpoints {
  // One set of sessions per agent: a session id is valid at its own agent's endpoint only.
  const byAgent = new Map<string, McpSessions>();
  const idleBefore = () => o.ctx.now() - DEFAULT_LIMITS.idleTimeoutMs;
  const displaceBefore = () => o.ctx.now() - DISPLACE_AFTER_MS;
  const state: CheckState = { checking: false, storeDown: false };
  // The tokens that reached an endpoint here, by id: a session's owner is a token id, and the
  // record names its person too. Every request is authenticated before it is handed here, so a
  // session started or continued here finds its owner's token in it.
  const tokens = new Map<string, Pick<ApiTokenRecord, "id" | "person">>();
  const checks = setInterval(() => void checkHeld(o, byAgent, state), CHECK_MS);
  checks.unref();
  return {
    async endpoint(req, res, agent, token) {
      let sessions = byAgent.get(agent.name);
      if (!sessions) {
        const name = agent.name;
        // In the store, so any replica continues a session another started (src/serve/http-sessions.ts).
        const registry: SessionRegistry = {
          admit: async (owner) => {
            if (owner === undefined) return undefined;
            const held = await o.store.countMcpSessions(owner, idleBefore());
            const displaceable = held.oldestUse !== undefined && held.oldestUse < displaceBefore();
            return held.count >= o.maxSessionsPerToken && !displaceable ? tokenFull(o, held.oldestUse ?? o.ctx.now()) : undefined;
          },
          save: async (s) => {
            const saved = await o.store.putMcpSession({ agent: name, ...s }, o.ctx.now(), idleBefore(), { max: o.maxSessionsPerToken, displaceBefore: displaceBefore() });
            if (saved.outcome === "owner_full") return tokenFull(o, saved.oldestUse);
            // Revoked while the session started: answered as its next request would be.
            if (saved.outcome === "owner_gone") return { status: 401, message: "missing or invalid API token", headers: { "WWW-Authenticate": 'Bearer realm="subs-deployment"' } };
            return undefined;
          },
          use: (id) => o.store.useMcpSession(name, id, o.ctx.now(), idleBefore()),
          endIfIdle: (id) => o.store.endMcpSession(name, id, idleBefore()),
          end: async (id) => void (await o.store.endMcpSession(name, id)),
        };
        sessions = new McpSessions(
          // What the sessions say of themselves (an idle one ended, a limit met) goes to the log,
          // made visible and cut: a session that failed may quote a server.
          { now: o.ctx.now, stderr: { write: (text: string) => o.log("warn", foreignText(text.replace(/^subs: |\n$/g, ""), { scrub: (t) => t }, 500), { agent: name }) } },
          { maxSessions: DEFAULT_LIMITS.maxSessions, idleTimeoutMs: DEFAULT_LIMITS.idleTimeoutMs, maxCalls: DEFAULT_LIMITS.maxCalls },
          (resumed, owner) => agentSession(o, name, resumed, owner === undefined ? undefined : tokens.get(owner)),
          registry,
        );
        byAgent.set(agent.name, sessions);
      }
      // A session belongs to the token that started it: another token's request with its id is
      // 404, and a revoked token is 401 before it gets here (every request is authenticated);
      // what it still holds open is closed by the next check (checkHeld).
      if (tokens.get(token.id)?.person !== token.person) tokens.set(token.id, { id: token.id, person: token.person });
      await sessions.handle(req, res, token.id);
    },
    endStreams() {
      for (const sessions of byAgent.values()) sessions.endStreams();
    },
    async close() {
      clearInterval(checks);
      await Promise.all([...byAgent.values()].map((s) => s.stop(CLOSE_GRACE_MS)));
    },
  };
}

/** The per-token cap met: 503 with the seconds until the token's least recently used session may give its place. */
function tokenFull(o: AgentEndpointOptions, oldestUse: number): SessionRefusal {
  const wait = Math.min(DISPLACE_AFTER_MS, Math.max(1000, oldestUse + DISPLACE_AFTER_MS - o.ctx.now()));
  return {
    status: 503,
    message: `too many sessions for this API token (at most ${o.maxSessionsPerToken}, on all agents together): end one (DELETE) or retry later`,
    headers: { "Retry-After": String(Math.ceil(wait / 1000)) },
  };
}

/** One check at a time; the store's failure logged once per outage. */
type CheckState = { checking: boolean; storeDown: boolean };

/**
 * Ends, here, each session this process holds that the store no longer keeps for its owner: the
 * owner's token is gone (revoked through the CLI, the API or by hand: checkMcpSessions deletes
 * its other sessions too), or the session was ended on another process (DELETE, idle). Closing
 * them closes their GET streams and calls in progress now, rather than at their next request.
 */
async function checkHeld(o: AgentEndpointOptions, byAgent: ReadonlyMap<string, McpSessions>, state: CheckState): Promise<void> {
  if (state.checking) return;
  const held = [...byAgent].flatMap(([agent, sessions]) => sessions.held().map((h) => ({ agent, ...h })));
  if (held.length === 0) return;
  state.checking = true;
  try {
    const now = o.ctx.now();
    const busy = held.filter((h) => h.busy);
    const found = await o.store.checkMcpSessions(held, busy, now, now - TOUCH_MS);
    state.storeDown = false;
    const kept = new Set(found.kept.map((k) => `${k.agent}\n${k.id}`));
    const revoked = new Set(found.revoked);
    for (const [agent, sessions] of byAgent) {
      const ended = held.filter((h) => h.agent === agent && !kept.has(`${agent}\n${h.id}`));
      if (ended.length === 0) continue;
      await sessions.end(ended.map((h) => h.id));
      for (const owner of new Set(ended.map((h) => h.owner))) {
        const count = ended.filter((h) => h.owner === owner).length;
        if (owner !== undefined && revoked.has(owner)) o.log("info", "ended the sessions of a revoked token", { agent, token: owner, sessions: count });
        else o.log("info", "ended sessions ended on another process", { agent, sessions: count });
      }
    }
  } catch (error) {
    // Said once per outage; the sessions are checked again when the store answers.
    if (!state.storeDown) o.log("error", "could not check the agents' sessions", { error: error instanceof Error ? error.message : "unknown" });
    state.storeDown = true;
  } finally {
    state.checking = false;
  }
}

/**
 * One client session of an agent: the declaration as stored when it starts, served with the
 * deployment's credentials: a personal connection's are those of the person of the token that
 * owns the session (docs/deployment-protocol.md section 2).
 */
function agentSession(o: AgentEndpointOptions, name: string, resumed: unknown, owner: Actor): Session {
  return {
    async open() {
      if (owner === undefined) throw new Error("the session's owner is not known here");
      const agent = await o.store.getAgent(name);
      if (!agent) throw new Error(`the agent ${name} was deleted`);
      const records = (await Promise.all(agent.mcp.map((m) => o.store.getConnection(m.id)))).filter((c): c is ConnectionRecord => c !== undefined);
      // A session continued here serves the tools it was started with, from the urls they came
      // from: a connection moved since would answer calls to tools it may not have (404 instead,
      // and the client starts a new session).
      const urls = Object.fromEntries(records.map((c) => [c.id, c.url]));
      const kept = resumed === undefined ? undefined : ResumedAgentSession.safeParse(resumed);
      if (kept && (!kept.success || kept.data.session === undefined || JSON.stringify(kept.data.urls) !== JSON.stringify(urls))) throw new Error("its connections changed since it started");
      // A stand-in per connection and session: which connection a request is for, by its header.
      const standIns = new Map(records.map((c, n) => [`SUBS_DEPLOYMENT_CREDENTIAL_${n}`, { value: `subsd-standin-${randomBytes(16).toString("hex")}`, connection: c }]));
      const env: Record<string, string | undefined> = { ...o.ctx.env };
      for (const [variable, s] of standIns) env[variable] = s.value;
      const connections: ConnectionConfig[] = [...standIns].map(([variable, { connection: c }]) => ({ id: c.id, url: c.url, prefixTools: c.prefixTools, auth: { tokenEnv: variable } }));
      const config: Config = {
        path: `${o.store.path}#agent.${name}`,
        displayPath: `the deployment's agent ${name}`,
        dbPath: o.store.path,
        connections,
        agents: [{ name, mcp: agent.mcp, tools: agent.tools, agents: agent.agents }],
        locate: () => ({ line: 0, col: 0 }),
      };
      const secrets = new Secrets();
      const byStandIn = new Map([...standIns.values()].map((s) => [s.value, s.connection]));
      const fetch = withDeploymentCredential(o, byStandIn, learningFetch(o.ctx.fetch, secrets, { answers: "issued" }), secrets, owner.person);
      const session = await agentSessionFactory({ ...o.ctx, env, fetch, secrets }, config, name, {
        reporter: logReporter(o.log, name, secrets),
        timeoutMs: TOOLS_TIMEOUT_MS,
        requestTimeoutMs: REQUEST_TIMEOUT_MS,
        // The lock held when the session starts (docs/deployment-protocol.md section 3.10, "The
        // lock"): what it withholds is said in the log, and a call to it is refused saying why,
        // as `subs agent serve` does. A session continued on another replica keeps its snapshot.
        lock: async () => {
          const held = await o.store.getLock();
          return held === undefined ? undefined : lockOfEntries(held.tools);
        },
        ...(o.audit ? { onCall: (call) => o.audit!.call(name, owner, call) } : {}),
      })(kept?.data?.session).open();
      o.metrics.sessions++;
      // Started here, not continued from another process.
      if (resumed === undefined) o.metrics.sessionsStarted++;
      return {
        server: session.server,
        ...(session.snapshot ? { snapshot: async () => ({ urls, session: await session.snapshot!() }) } : {}),
        async close() {
          o.metrics.sessions--;
          await session.close();
        },
      };
    },
  };
}

/**
 * Sends each upstream request with the values of the connection's headers (section 3.12) and its
 * current access token in place of its stand-in (docs/deployment-protocol.md section 3.6: a 401
 * before expiry is refreshed once and the request sent once more). No usable credential is `needs_login`, which a call answers as a
 * tool error naming `subs mcp login <id>`; a connection outside the catalog, one saying so. A
 * store that stops answering mid-call is a tool error saying to retry, as the 503 of every other
 * request does; its cause (the store's URL, the driver's words) is for the log, not for the
 * agent's client.
 */
function withDeploymentCredential(
  { oauth, log }: Pick<AgentEndpointOptions, "oauth" | "log">,
  byStandIn: ReadonlyMap<string, ConnectionRecord>,
  inner: typeof globalThis.fetch,
  secrets: Secrets,
  person: string,
): typeof globalThis.fetch {
  return async (input, init) => {
    const headers = new Headers(init?.headers);
    const standIn = /^Bearer\s+(\S+)$/i.exec(headers.get("authorization") ?? "")?.[1];
    const connection = standIn === undefined ? undefined : byStandIn.get(standIn);
    if (!connection) return inner(input, init);
    const resendable = init?.body === undefined || init.body === null || typeof init.body === "string";
    try {
      return await oauth.withAccess(connection, person, async (sent) => {
        // The stand-in named the connection; it goes no further (a connection with header values only sends none).
        headers.delete("authorization");
        for (const [name, value] of Object.entries(sent)) headers.set(name, value);
        const response = await inner(input, { ...init, headers });
        if (response.status !== 401 || !resendable) return response;
        await response.body?.cancel().catch(() => {});
        return { refused: 401 as const };
      }, secrets);
    } catch (error) {
      if (error instanceof Refusal && error.code === "not_authorized") throw new SubsError("needs_login", error.message, { code: "needs_login" });
      // Nothing was sent: the session neither lists nor calls the tools of a connection outside
      // the catalog (catalog.ts). The catalog itself is not a `use` token's to read.
      if (error instanceof Refusal && error.code === NOT_IN_CATALOG) {
        throw new SubsError("refused", `${connection.id}: the deployment refuses this connection: its url is not in the deployment's catalog`, {
          code: NOT_IN_CATALOG,
          hint: "the deployment's operator can add the url to its catalog, or the connection can be declared with a url from it",
        });
      }
      if (error instanceof StoreUnavailable) {
        log("error", "store unavailable", { connection: connection.id, error: error.message });
        throw new SubsError("failed", STORE_DOWN_MESSAGE, { code: "store_unavailable" });
      }
      // Any other refusal (a refresh that failed, a server that refused a refreshed credential)
      // in its own words, already made visible and scrubbed (oauth.ts), not as a dropped connection.
      if (error instanceof Refusal) throw new SubsError("failed", error.message, { code: error.code });
      throw error;
    }
  };
}

/**
 * A session's words for the log: they quote its servers (a connection's error), so they are made
 * visible, cut, and scrubbed of the session's secrets; the log's own fields are not (ops.ts).
 */
function logReporter(log: Log, agent: string, secrets: Secrets): Reporter {
  const said = (text: string) => foreignText(text, secrets, 500);
  return { info: (text) => log("info", said(text), { agent }), warn: (text) => log("warn", said(text), { agent }), progress: () => silentProgress };
}
