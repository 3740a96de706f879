// The deployment's HTTP server (node:http): every /v1 route of docs/deployment-protocol.md with
// its role, the OAuth redirect URI, the agents' MCP endpoints, /healthz, /readyz and /metrics.
// Section numbers in comments are the protocol document's.
import { randomUUID } from "node:crypto";
import type { IncomingMessage, ServerResponse } from "node:http";
import { allows, authenticate, bearerOf, DOING, forbidden } from "./access.ts";
import { credentialMetrics, type Log, type Metrics } from "./ops.ts";
import { Refusal, type OAuth } from "./oauth.ts";
import { agentRoutes, type AgentEndpoint } from "./routes/agents.ts";
import { isValidName } from "../config/rules.ts";
import { SubsError } from "../errors.ts";
import { foreignText } from "./foreign.ts";
import { scrubbedJson, Secrets } from "../secrets.ts";
import { BadBody, fail, segment, STORE_DOWN_MESSAGE, type Answer } from "./routes/answer.ts";
import { connectionRoutes } from "./routes/connections.ts";
import { stateRoutes } from "./routes/state.ts";
import { tokenRoutes } from "./routes/tokens.ts";
import { auditRoutes } from "./routes/audit.ts";
import type { AuditSink } from "./audit.ts";
import { StoreUnavailable, type ApiTokenRecord, type DeploymentStore } from "./store/types.ts";

export { MAX_BODY_BYTES } from "./routes/answer.ts";
export type { AgentEndpoint };
export const CALLBACK_PATH = "/oauth/callback";

export type AppOptions = {
  store: DeploymentStore;
  oauth: OAuth;
  metrics: Metrics;
  log: Log;
  /** The public URL's path (no trailing `/`): the API is at `<base>/v1/…`. */
  base: string;
  catalog: string[] | undefined;
  pollInterval: number;
  ttlSeconds: number;
  /**
   * Readiness: resolves when the store answers and this process's key still opens it; else throws
   * why not (a SubsError whose message /readyz says, or anything else: "the store does not answer").
   */
  ready: () => Promise<void>;
  /** True once the process is stopping: /readyz then answers 503 whatever the store says. */
  stopping?: () => boolean;
  /** An agent's Streamable HTTP endpoint (src/deployment/agents.ts); absent, such requests get 404. */
  agentEndpoint?: AgentEndpoint;
  /** Told of each request whose token is valid, as soon as it is checked (its connection is then kept: serve.ts). */
  authenticated?: (req: IncomingMessage, token: ApiTokenRecord) => void;
  /** The clock tokens expire by (Date.now unless given). */
  now?: () => number;
  /** The record (audit.ts): the routes write each change to it; absent, nothing is recorded. */
  audit?: AuditSink;
};

export function createApp(o: AppOptions) {
  const { store, oauth } = o;
  const now = o.now ?? Date.now;
  const routes = [...connectionRoutes(o), ...agentRoutes(o), ...stateRoutes(o), ...tokenRoutes({ store, now, revoke: (c) => oauth.revoke(c), ...(o.audit ? { audit: o.audit } : {}) }), ...auditRoutes({ store })];

  /**
   * Answers one request; returns what the access log needs. A store that does not answer is a 503
   * the client may retry (RFC 9110 section 15.6.4), wherever in the request it was found: the
   * token check reads the store before any route runs.
   */
  return async function handle(req: IncomingMessage, res: ServerResponse): Promise<{ route: string; token?: ApiTokenRecord }> {
    try {
      return await answer(req, res);
    } catch (error) {
      if (!(error instanceof StoreUnavailable) || res.headersSent) throw error;
      o.log("error", "store unavailable", { error: error.message });
      const text = JSON.stringify(storeDown().body);
      res.writeHead(503, { "content-type": "application/json", "cache-control": "no-store", "retry-after": "2", "content-length": String(Buffer.byteLength(text)) }).end(text);
      return { route: "unknown" };
    }
  };

  async function answer(req: IncomingMessage, res: ServerResponse): Promise<{ route: string; token?: ApiTokenRecord }> {
    const method = req.method ?? "GET";
    const pathname = (req.url ?? "/").split("?")[0]!;
    // This request's secrets: what its exchanges with servers sent and received, and the
    // credentials it used. Every answer is scrubbed of them, whichever route built it, as an
    // agent's MCP session scrubs what it sends its client (src/serve/).
    const secrets = new Secrets();
    const send = (answer: Answer) => {
      const headers: Record<string, string> = { ...answer.headers, "cache-control": "no-store" };
      if (answer.body === undefined) {
        res.writeHead(answer.status, headers).end();
      } else {
        const text = JSON.stringify(scrubbedJson(answer.body, (t) => secrets.scrub(t)));
        res.writeHead(answer.status, { ...headers, "content-type": "application/json", "content-length": String(Buffer.byteLength(text)) }).end(text);
      }
    };
    if (!pathname.startsWith(`${o.base}/`)) {
      send(fail(404, "not_found", "no such endpoint"));
      return { route: "unknown" };
    }
    const path = pathname.slice(o.base.length);
    if (path === "/healthz") {
      send({ status: 200, body: { status: "ok" } });
      return { route: "/healthz" };
    }
    if (path === "/readyz") {
      const stopping = fail(503, "unavailable", "stopping: finishing the requests in flight");
      if (o.stopping?.()) {
        send(stopping);
        return { route: "/readyz" };
      }
      const problem = await o.ready().then(
        () => undefined,
        (error: unknown) => (error instanceof SubsError && !(error instanceof StoreUnavailable) ? `${error.message}${error.hint ? `; ${error.hint}` : ""}` : "the store does not answer"),
      );
      // SIGTERM may have come while the store answered: a 200 sent now would keep the balancer
      // sending to a replica that is about to refuse connections.
      if (o.stopping?.()) send(stopping);
      else send(problem === undefined ? { status: 200, body: { status: "ready" } } : { ...fail(503, "unavailable", problem), headers: { "retry-after": "2" } });
      return { route: "/readyz" };
    }
    if (path === CALLBACK_PATH) {
      const page = await oauth.callback(new URL(req.url ?? "/", "http://x").searchParams);
      res.writeHead(page.status, { "content-type": "text/plain; charset=utf-8", "cache-control": "no-store", "referrer-policy": "no-referrer" }).end(`${page.text}\n`);
      return { route: CALLBACK_PATH };
    }
    const isMetrics = path === "/metrics";
    if (!path.startsWith("/v1/") && path !== "/v1" && !isMetrics) {
      send(fail(404, "not_found", "no such endpoint"));
      return { route: "unknown" };
    }
    // Section 1: a missing or wrong token is 401 before anything else.
    const token = await authenticate(store, bearerOf(req.headers.authorization), now());
    if (!token) {
      send({ ...fail(401, "unauthorized", "missing or invalid API token"), headers: { "www-authenticate": 'Bearer realm="subs-deployment"' } });
      return { route: isMetrics ? "/metrics" : "/v1" };
    }
    o.authenticated?.(req, token);
    if (isMetrics) {
      if (!allows(token.role, "read")) {
        send(fail(403, "forbidden", forbidden("reading metrics", "read", token.role)));
      } else {
        const [summaries, losses] = await Promise.all([store.credentialSummaries(), store.credentialLosses()]);
        res.writeHead(200, { "content-type": "text/plain; version=0.0.4; charset=utf-8" }).end(o.metrics.text() + credentialMetrics(summaries, losses, now()));
      }
      return { route: "/metrics", token };
    }
    const found = routes.map((r) => ({ r, m: r.pattern.exec(path) })).find((x) => x.m);
    if (!found) {
      send(fail(404, "not_found", "no such endpoint"));
      return { route: "unknown", token };
    }
    const { r, m } = found;
    const params = m!.slice(1).map(segment);
    const badParams = r.checkParams
      ? r.checkParams(params)
      : params.some((p) => p === undefined || !isValidName(p)) && r.route !== "/v1/authorizations/{id}" && r.route !== "/v1/tokens/{id}"
        ? `${JSON.stringify(params.find((p) => p === undefined || !isValidName(p)) ?? m![1])} is not a valid connection id or agent name`
        : undefined;
    if (badParams !== undefined) {
      send(fail(400, "invalid_request", badParams));
      return { route: r.route, token };
    }
    if (!r.methods.includes(method)) {
      send({ ...fail(405, "method_not_allowed", `${method} is not allowed here`), headers: { allow: r.methods.join(", ") } });
      return { route: r.route, token };
    }
    if (!allows(token.role, r.need)) {
      send(fail(403, "forbidden", forbidden(DOING[r.need], r.need, token.role)));
      return { route: r.route, token };
    }
    try {
      const answer = await r.run(method, req, params as string[], token, res, secrets);
      if (answer !== "streamed") send(answer);
    } catch (error) {
      if (res.headersSent) {
        res.destroy();
      } else if (error instanceof Refusal) {
        send(fail(error.status, error.code, error.message, error.extra));
      } else if (error instanceof BadBody) {
        send(fail(400, "invalid_request", error.message));
      } else if (error instanceof StoreUnavailable) {
        throw error;
      } else {
        // Named, and said: a message may quote a server (an upstream error), so it is made visible,
        // cut and scrubbed of this request's secrets, as every answer is.
        o.log("error", "handler failed", { route: r.route, error: error instanceof Error ? `${error.name}: ${foreignText(error.message, secrets, 500)}` : "unknown" });
        send(fail(500, "internal_error", "the deployment failed; its log says more"));
      }
    }
    return { route: r.route, token };
  }
}

const storeDown = () => fail(503, "store_unavailable", STORE_DOWN_MESSAGE);

export const requestId = (req: IncomingMessage) => {
  const given = req.headers["x-request-id"];
  return typeof given === "string" && /^[A-Za-z0-9._-]{1,64}$/.test(given) ? given : randomUUID();
};

/**
 * The request's id (requestId), made its X-Request-Id: the record names the request each entry
 * came from (section 3.14), and an agent's MCP transport reads headers from `rawHeaders`, where an
 * absent or unusable id given by the client is replaced.
 */
export function stampRequestId(req: IncomingMessage): string {
  const id = requestId(req);
  if (req.headers["x-request-id"] === id) return id;
  const raw: string[] = [];
  for (let n = 0; n + 1 < req.rawHeaders.length; n += 2) if (req.rawHeaders[n]!.toLowerCase() !== "x-request-id") raw.push(req.rawHeaders[n]!, req.rawHeaders[n + 1]!);
  raw.push("x-request-id", id);
  req.rawHeaders.splice(0, req.rawHeaders.length, ...raw);
  req.headers["x-request-id"] = id;
  return id;
}
