// `subs deployment serve`: the settings checked, the store opened with its key, then the HTTP
// server until SIGINT or SIGTERM. Then (docs/deployment-server.md, "Stopping") /readyz answers 503,
// no new connection is accepted (a balancer sends a refused connection to another replica), every
// answer closes its connection (none is reused as it closes), agents' GET streams end (their
// clients reconnect, elsewhere, and continue their sessions from the store), the requests in
// flight are given DRAIN_MS to finish, and the process exits as soon as none is left.
import { createServer, type IncomingMessage, type Server } from "node:http";
import type { AddressInfo, Socket } from "node:net";
import type { Context } from "../context.ts";
import { failed, SubsError, usage } from "../errors.ts";
import { connectionsCheckingInterval, guardConnections } from "../serve/connections.ts";
import { openWithKey, sayServing } from "./commands.ts";
import { deploymentConfig, type Flags } from "./config.ts";
import { warnOutsideCatalog } from "./catalog.ts";
import { OAuth } from "./oauth.ts";
import { jsonLog, Metrics, type Log } from "./ops.ts";
import { CALLBACK_PATH, createApp, stampRequestId } from "./server.ts";
import { AuditRecorder } from "./audit.ts";

/**
 * The /readyz probes a balancer sends: from the time between the last two, how long a stopping
 * replica waits for the next one (answered 503) before it refuses connections.
 */
class ReadinessProbes {
  #last: number | undefined;
  #interval: number | undefined;
  #answered503: (() => void) | undefined;

  /** A probe's answer has gone: `status` as sent (one written just before SIGTERM is 200, and says nothing of the rotation). */
  probed(at: number, status: number, stopping: boolean): void {
    if (stopping) return void (status === 503 && this.#answered503?.());
    if (this.#last !== undefined) this.#interval = at - this.#last;
    this.#last = at;
  }

  /**
   * Resolves true once a probe is answered while stopping, false past three probe intervals and two
   * seconds (at most `maxMs`); undefined when never probed twice. The slack is for a loaded host,
   * where a balancer's probe (or this process's answer to it) comes late: giving up on it early
   * refuses connections the balancer still sends.
   */
  untilOutOfRotation(maxMs: number): Promise<boolean> | undefined {
    if (this.#interval === undefined) return undefined;
    const limit = Math.min(maxMs, 3 * this.#interval + 2000);
    return new Promise<boolean>((resolve) => {
      const timer = setTimeout(() => resolve(false), limit);
      timer.unref();
      this.#answered503 = () => {
        clearTimeout(timer);
        resolve(true);
      };
    });
  }
}

/** The requests in flight: how many, and each as the "stopped" line names those it cut (method and path, never the query). */
class InFlight {
  readonly #open = new Map<string, number>();
  #count = 0;
  #drained: (() => void) | undefined;

  get count(): number {
    return this.#count;
  }
  add(what: string): void {
    this.#open.set(what, (this.#open.get(what) ?? 0) + 1);
    this.#count++;
  }
  done(what: string): void {
    const left = (this.#open.get(what) ?? 1) - 1;
    if (left > 0) this.#open.set(what, left);
    else this.#open.delete(what);
    if (--this.#count === 0) this.#drained?.();
  }
  list(): string[] {
    return [...this.#open.keys()];
  }
  /** Resolves once none is in flight, or after `ms`. */
  drained(ms: number): Promise<void> {
    if (this.#count === 0) return Promise.resolve();
    return new Promise<void>((resolve) => {
      this.#drained = resolve;
      setTimeout(resolve, ms).unref();
    });
  }
}

/** SIGINT or SIGTERM (docs/deployment-server.md, "Operations": the order matters to a balancer). */
async function stopServing(o: { server: Server; sockets: Set<Socket>; agents: { endStreams(): void; close(): Promise<void> }; readiness: ReadinessProbes; requests: InFlight; log: Log }) {
  const { server, requests, log } = o;
  log("info", "stopping", { in_flight: requests.count });
  // Behind a balancer that probes /readyz, the replica serves on until a probe has been answered
  // 503, so that the balancer takes it out of rotation before its connections are refused: a
  // balancer that cannot send a refused request elsewhere (Caddy before 2.11 with a request body,
  // nginx for a request it already sent) would otherwise fail it. Never probed, it stops at once.
  const wait = o.readiness.untilOutOfRotation(DRAIN_MS);
  if (wait) log("info", (await wait) ? "out of rotation" : "no readiness probe came", { in_flight: requests.count });
  server.close();
  server.closeIdleConnections();
  o.agents.endStreams();
  await requests.drained(DRAIN_MS);
  const [unfinished, cut] = [requests.count, requests.list()];
  await o.agents.close();
  for (const socket of o.sockets) socket.destroy();
  log(cut.length ? "warn" : "info", "stopped", { unfinished, ...(cut.length ? { cut } : {}) });
}

/** The health probes (docs/deployment-server.md, "Operations"). */
const PROBES = ["/healthz", "/readyz"] as const;

const DRAIN_MS = 10_000;
/**
 * What one deployment holds open at most (docs/deployment-server.md, "Limits"): connections (a new
 * one past the cap displaces the oldest that has carried no authenticated request: connections.ts),
 * the time a new connection has to send a whole first request or an authenticated one, the time
 * to receive a request, the MCP sessions of one API token, on all agents and every process, and
 * how long an idle connection is kept. That last is Node's 5 s by default, shorter than the balancers
 * in front of replicas keep an idle upstream connection (nginx's upstream keepalive and AWS's load
 * balancers 60 s, Caddy 2 min): a request sent on a connection the deployment is closing at that
 * moment fails (a 502 the client sees). Either side may close an idle connection at any time (RFC
 * 9112 §9.3), so what avoids the race is who closes first: longer than theirs, the balancer does.
 * Clients are told it as `Keep-Alive: timeout=75`.
 */
export const LIMITS = { maxConnections: 1000, preAuthMs: 5000, headersTimeoutMs: 10_000, requestTimeoutMs: 30_000, maxSessionsPerToken: 16, keepAliveMs: 75_000 };

/** A positive number of seconds from the environment, else the default; anything else is a usage error. */
function seconds(ctx: Pick<Context, "env">, name: string, fallback: number): number {
  const text = ctx.env[name];
  if (text === undefined || text === "") return fallback;
  const value = Number(text);
  if (!Number.isFinite(value) || value <= 0) throw usage(`$${name} ${JSON.stringify(text)}: must be a positive number of seconds`);
  return value;
}

/** A positive whole number from the environment, else the default; anything else is a usage error. */
function count(ctx: Pick<Context, "env">, name: string, fallback: number): number {
  const text = ctx.env[name];
  if (text === undefined || text === "") return fallback;
  if (!/^[1-9][0-9]{0,8}$/.test(text)) throw usage(`$${name} ${JSON.stringify(text)}: must be a positive whole number`);
  return Number(text);
}

export async function deploymentServeCommand(ctx: Context, options: { flags: Flags }): Promise<void> {
  const config = deploymentConfig(options.flags, ctx, { serve: true });
  const pollInterval = seconds(ctx, "SUBS_DEPLOYMENT_POLL_INTERVAL", 2);
  const ttlSeconds = seconds(ctx, "SUBS_DEPLOYMENT_AUTHORIZATION_TTL", 600);
  const maxConnections = count(ctx, "SUBS_DEPLOYMENT_MAX_CONNECTIONS", LIMITS.maxConnections);
  const maxSessionsPerToken = count(ctx, "SUBS_DEPLOYMENT_MAX_SESSIONS_PER_TOKEN", LIMITS.maxSessionsPerToken);
  const { store } = await openWithKey(ctx, config);
  const log = jsonLog(ctx.stdout, ctx.now);
  const metrics = new Metrics();
  // Every replica writes the record into the one store; written out before the store closes.
  const audit = new AuditRecorder({ store, log, metrics, now: ctx.now, retentionMs: config.auditRetentionMs });
  let server: Server | undefined;
  let serving: { end(): Promise<void> } | undefined;
  try {
    server = createServer({ headersTimeout: LIMITS.headersTimeoutMs, requestTimeout: LIMITS.requestTimeoutMs, connectionsCheckingInterval: connectionsCheckingInterval(LIMITS) });
    server.keepAliveTimeout = LIMITS.keepAliveMs;
    const connections = guardConnections(server, { maxConnections, preAuthMs: LIMITS.preAuthMs });
    const listening = server;
    await new Promise<void>((resolve, reject) => {
      listening.once("error", reject);
      listening.listen(config.listen.port, config.listen.host, () => resolve());
    }).catch((error: NodeJS.ErrnoException) => {
      throw failed(`cannot listen on ${config.listen.host}:${config.listen.port} (${error.code ?? error.message})`, { hint: "choose another --listen address or port" });
    });
    const bound = listening.address() as AddressInfo;
    const host = bound.family === "IPv6" ? `[${bound.address}]` : bound.address;
    const publicUrl = config.publicUrl ?? new URL(`http://${host}:${bound.port}`);
    const base = publicUrl.pathname.replace(/\/+$/, "");
    const publicText = `${publicUrl.origin}${base}`;
    // Every request the deployment sends goes where its address rules allow (config.allowed;
    // src/http/address-policy.ts), checked on the address each socket connects to.
    const { AddressPolicy } = await import("../http/address-policy.ts");
    const { nodeFetch } = await import("../http/mcp-fetch.ts");
    const policy = new AddressPolicy(config.allowed);
    const outbound = { ...ctx, fetch: nodeFetch((url) => policy.connection(url)) };
    const oauth = new OAuth({
      store,
      catalog: config.catalog,
      metrics,
      fetch: outbound.fetch,
      env: ctx.env,
      now: ctx.now,
      redirectUri: `${publicText}${CALLBACK_PATH}`,
      ttlSeconds,
      intervalSeconds: pollInterval,
      clientSecrets: config.clientSecrets,
      audit,
    });
    const { agentEndpoints } = await import("./agents.ts");
    const agents = agentEndpoints({ ctx: outbound, store, oauth, metrics, log, maxSessionsPerToken, audit });
    const app = createApp({
      store,
      oauth,
      metrics,
      log,
      base,
      catalog: config.catalog,
      pollInterval,
      ttlSeconds,
      ready: async () => {
        await store.listTokens();
        // Another process rotated the key (rotate-key while this one served): every sealed value
        // it reads now fails, so it says so here, to the balancer and once in its log.
        await store.checkKey().catch((error: unknown) => {
          if (!keyGone && error instanceof SubsError) log("error", "key rotated away", { error: `${error.message}; ${error.hint ?? ""}` });
          keyGone = true;
          throw error;
        });
      },
      stopping: () => stopping,
      agentEndpoint: agents.endpoint,
      // The token is known from here on, for the log line at the answer's close: an event stream
      // can close before its handler's promise has said which token it served.
      authenticated: (req, token) => {
        connections.trust(req);
        tokenOf.set(req, token.id);
      },
      now: ctx.now,
      audit,
    });

    let stopping = false;
    let keyGone = false;
    const readiness = new ReadinessProbes();
    const requests = new InFlight();
    const tokenOf = new WeakMap<IncomingMessage, string>();
    const sockets = new Set<Socket>();
    listening.on("connection", (socket: Socket) => {
      sockets.add(socket);
      socket.on("close", () => sockets.delete(socket));
    });
    listening.on("request", (req, res) => {
      const started = process.hrtime.bigint();
      const id = stampRequestId(req);
      res.setHeader("x-request-id", id);
      if (stopping) res.setHeader("connection", "close");
      const path = (req.url ?? "/").split("?")[0]!;
      const what = `${req.method} ${path}`;
      requests.add(what);
      let route = "unknown";
      res.on("close", () => {
        const seconds = Number(process.hrtime.bigint() - started) / 1e9;
        // A probe is answered at once, and its answer can close before the handler's promise has
        // said its route; the path says it. Logged at close, so the log keeps the order in which
        // answers ended (tests read "everything before this request" from it).
        const probe = PROBES.find((p) => path === `${base}${p}`);
        if (probe) route = probe;
        if (probe === "/readyz") readiness.probed(ctx.now(), res.statusCode, stopping);
        metrics.request(req.method ?? "", route, res.statusCode, seconds);
        // A balancer's or orchestrator's health probes (every few seconds, per replica) would
        // bury the requests people make; one that fails is logged. /metrics counts them all.
        // Never the query (the callback's code and state are there), a header or a body.
        if (!(probe && res.statusCode === 200)) {
          log("info", "request", {
            request_id: id,
            method: req.method,
            path,
            status: res.statusCode,
            duration_ms: Math.round(seconds * 1e5) / 100,
            ...(tokenOf.has(req) ? { token: tokenOf.get(req) } : {}),
          });
        }
        requests.done(what);
      });
      app(req, res).then(
        (handled) => {
          route = handled.route;
        },
        () => {
          if (!res.headersSent) res.writeHead(500, { "content-type": "application/json" }).end(JSON.stringify({ error: "internal_error", message: "the deployment failed" }));
          else res.destroy();
        },
      );
    });
    await warnOutsideCatalog(store, config.catalog, log);
    serving = await sayServing(store, `${host}:${bound.port}`, ctx.now);
    audit.startPruning();
    log("info", "listening", { url: publicText, listen: `${host}:${bound.port}`, store: config.postgres?.redacted ?? config.dbPath, catalog: config.catalog?.length ?? null, redirect_uri: `${publicText}${CALLBACK_PATH}`, max_connections: maxConnections, max_sessions_per_token: maxSessionsPerToken, audit_retention_s: config.auditRetentionMs / 1000 });

    await new Promise<void>((resolve) => (ctx.signal.aborted ? resolve() : ctx.signal.addEventListener("abort", () => resolve(), { once: true })));
    stopping = true;
    await stopServing({ server: listening, sockets, agents, readiness, requests, log });
  } finally {
    server?.close();
    await audit.close();
    await serving?.end();
    await store.close();
  }
}
