// The deployment's HTTP server (node:http): every /v1 route of docs/deployment-protocol.md with
// its role, the OAuth redirect URI, the agents' MCP endpoints, /healthz, /readyz and /metrics.
// Section numbers in comments are the protocol document's.
import { randomUUID } from "node:crypto";
import type { IncomingMessage, ServerResponse } from "node:http";
import { z } from "zod";
import { allows, authenticate, bearerOf, type Need } from "./access.ts";
import type { Log, Metrics } from "./ops.ts";
import { Refusal, type OAuth } from "./oauth.ts";
import type { AgentRecord, ApiTokenRecord, ConnectionRecord, DeploymentStore } from "./store/types.ts";

/** Protocol bodies are a few hundred bytes; anything near this is not one. */
export const MAX_BODY_BYTES = 1024 * 1024;
export const CALLBACK_PATH = "/oauth/callback";

const ID = /^[a-z0-9_-]+$/;
const validId = (s: string) => ID.test(s) && !s.includes("__");
const IdSchema = z.string().refine(validId, "not a valid connection id");
const LOOPBACK = new Set(["127.0.0.1", "localhost", "[::1]"]);

const FilterSchema = z.strictObject({
  include: z.array(z.string()).optional(),
  exclude: z.array(z.string()).optional(),
  read_only: z.boolean().optional(),
  non_destructive: z.boolean().optional(),
  idempotent: z.boolean().optional(),
});
const ConnectionBody = z.strictObject({
  url: z.url({ protocol: /^https?$/ }).refine((u) => new URL(u).protocol === "https:" || LOOPBACK.has(new URL(u).hostname), "url must be https (plain http only to a loopback host)"),
  prefix_tools: z.boolean(),
  oauth: z
    .strictObject({
      client_id: z.string().min(1).optional(),
      client_metadata_url: z.url({ protocol: /^https$/ }).optional(),
      scopes: z.array(z.string()).optional(),
    })
    .optional(),
});
const AgentBody = z
  .strictObject({
    mcp: z.array(z.strictObject({ id: IdSchema, tools: FilterSchema.optional() })),
    tools: z.array(z.string()).default([]),
    agents: z.array(z.string().refine(validId, "not a valid agent name")).default([]),
  })
  .refine((b) => new Set(b.mcp.map((e) => e.id)).size === b.mcp.length, "an mcp entry names the same connection twice");

export type AgentEndpoint = (req: IncomingMessage, res: ServerResponse, agent: AgentRecord, token: ApiTokenRecord) => Promise<void>;

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
  /** Whether the store answers (readiness). */
  ready: () => Promise<boolean>;
  /** Step 4: an agent's Streamable HTTP endpoint; absent, such requests get 404. */
  agentEndpoint?: AgentEndpoint;
};

type Answer = { status: number; body?: unknown; headers?: Record<string, string> };
const fail = (status: number, error: string, message: string, extra: Record<string, unknown> = {}): Answer => ({ status, body: { error, message, ...extra } });
const iso = (ms: number) => new Date(ms).toISOString();

class BadBody extends Error {}

async function readJson(req: IncomingMessage): Promise<unknown> {
  const declared = Number(req.headers["content-length"]);
  if (Number.isFinite(declared) && declared > MAX_BODY_BYTES) throw new BadBody(`the body is larger than ${MAX_BODY_BYTES} bytes`);
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of req as AsyncIterable<Buffer>) {
    size += chunk.length;
    if (size > MAX_BODY_BYTES) throw new BadBody(`the body is larger than ${MAX_BODY_BYTES} bytes`);
    chunks.push(chunk);
  }
  const text = Buffer.concat(chunks).toString("utf8");
  if (text.trim() === "") return undefined;
  try {
    return JSON.parse(text);
  } catch {
    throw new BadBody("the body is not JSON");
  }
}

/** One path segment, percent-decoded (section 1); undefined when it does not decode. */
const segment = (raw: string) => {
  try {
    return decodeURIComponent(raw);
  } catch {
    return undefined;
  }
};

type Route = { route: string; need: Need; methods: string[]; run: (method: string, req: IncomingMessage, params: string[], token: ApiTokenRecord) => Promise<Answer | "streamed"> };

export function createApp(o: AppOptions) {
  const { store, oauth } = o;

  const connectionJson = async (c: ConnectionRecord, held?: { url: string; authorizedAt: number; expiresAt: number | null }) => {
    const authorized = held !== undefined && held.url === c.url;
    return {
      id: c.id,
      url: c.url,
      prefix_tools: c.prefixTools,
      ...(c.oauth ? { oauth: c.oauth } : {}),
      status: authorized ? "authorized" : "declared",
      ...(authorized ? { authorized_at: iso(held.authorizedAt) } : {}),
      ...(authorized && held.expiresAt !== null ? { expires_at: iso(held.expiresAt) } : {}),
    };
  };

  const routes: Array<{ pattern: RegExp } & Route> = [
    {
      pattern: /^\/v1\/mcp\/?$/,
      route: "/v1/mcp",
      need: "read",
      methods: ["GET"],
      run: async () => {
        const [connections, held] = await Promise.all([store.listConnections(), store.credentialSummaries()]);
        const byId = new Map(held.map((h) => [h.id, h]));
        return { status: 200, body: { connections: await Promise.all(connections.map((c) => connectionJson(c, byId.get(c.id)))) } };
      },
    },
    {
      pattern: /^\/v1\/mcp\/([^/]+)\/?$/,
      route: "/v1/mcp/{id}",
      need: "apply",
      methods: ["PUT", "DELETE"],
      run: async (method, req, [id]) => {
        if (method === "DELETE") {
          const outcome = await store.deleteConnection(id!);
          if (outcome.outcome === "in_use") return fail(409, "connection_in_use", `agents ${outcome.agents.join(", ")} name ${id}; delete them first`, { agents: outcome.agents });
          if (outcome.outcome === "absent") return fail(404, "not_found", `no connection ${id}`);
          oauth.endPending(id!, "connection_changed", "the connection was deleted");
          await oauth.revoke(outcome.dropped);
          return { status: 204 };
        }
        const body = await readJson(req);
        const fields = body && typeof body === "object" ? (body as Record<string, unknown>) : undefined;
        const oauthField = fields?.oauth && typeof fields.oauth === "object" ? (fields.oauth as object) : undefined;
        if (fields && ("auth" in fields || (oauthField && ("client_secret_env" in oauthField || "client_secret" in oauthField)))) {
          return fail(400, "local_only_field", "`auth`, `oauth.client_secret_env` and `oauth.client_secret` belong to the client's machine; authorize on the deployment instead (subs mcp login)");
        }
        const parsed = ConnectionBody.safeParse(body);
        if (!parsed.success) return fail(400, "invalid_request", issueText(parsed.error));
        if (o.catalog && !o.catalog.includes(parsed.data.url)) {
          return fail(403, "url_not_in_catalog", `${parsed.data.url} is not in this deployment's catalog`, { catalog: o.catalog });
        }
        const record: ConnectionRecord = { id: id!, url: parsed.data.url, prefixTools: parsed.data.prefix_tools, oauth: parsed.data.oauth };
        const put = await store.putConnection(record);
        // Section 5: a changed url ends pending consents too, whether or not a credential was held.
        if (put.urlChanged) oauth.endPending(id!, "connection_changed", "the connection's url changed");
        await oauth.revoke(put.dropped);
        const held = (await store.credentialSummaries()).find((h) => h.id === id);
        return { status: put.created ? 201 : 200, body: await connectionJson(record, held) };
      },
    },
    {
      pattern: /^\/v1\/mcp\/([^/]+)\/authorizations\/?$/,
      route: "/v1/mcp/{id}/authorizations",
      need: "apply",
      methods: ["POST"],
      run: async (_m, req, [id]) => {
        // Section 3.4: the body defines no fields and its content is ignored (JSON or not).
        await readJson(req).catch((error) => {
          if (error instanceof BadBody && /larger/.test(error.message)) throw error;
        });
        const connection = await store.getConnection(id!);
        if (!connection) return fail(404, "not_found", `no connection ${id}; declare it first (subs apply)`);
        const started = await oauth.start(connection);
        return {
          status: 201,
          body: { authorization_url: started.authorizationUrl, poll_url: `${o.base}/v1/authorizations/${started.id}`, interval: o.pollInterval, expires_in: o.ttlSeconds },
        };
      },
    },
    {
      pattern: /^\/v1\/authorizations\/([^/]+)\/?$/,
      route: "/v1/authorizations/{id}",
      need: "read",
      methods: ["GET"],
      run: async (_m, _req, [aid]) => {
        const outcome = oauth.poll(aid!);
        if (!outcome) return fail(404, "not_found", "no such authorization (or it ended long ago)");
        return { status: 200, body: { status: outcome.status, ...(outcome.error ? { error: outcome.error } : {}), ...(outcome.message && outcome.status !== "authorized" ? { message: outcome.message } : {}) } };
      },
    },
    {
      pattern: /^\/v1\/mcp\/([^/]+)\/tools\/?$/,
      route: "/v1/mcp/{id}/tools",
      need: "read",
      methods: ["GET"],
      run: async (_m, _req, [id]) => {
        const connection = await store.getConnection(id!);
        if (!connection) return fail(404, "not_found", `no connection ${id}; run \`subs apply\``);
        return { status: 200, body: { tools: await oauth.tools(connection) } };
      },
    },
    {
      pattern: /^\/v1\/agents\/?$/,
      route: "/v1/agents",
      need: "read",
      methods: ["GET"],
      run: async () => ({ status: 200, body: { agents: await store.listAgents() } }),
    },
    {
      pattern: /^\/v1\/agents\/([^/]+)\/?$/,
      route: "/v1/agents/{name}",
      need: "apply",
      methods: ["PUT", "DELETE"],
      run: async (method, req, [name]) => {
        if (method === "DELETE") return (await store.deleteAgent(name!)) ? { status: 204 } : fail(404, "not_found", `no agent ${name}`);
        const parsed = AgentBody.safeParse(await readJson(req));
        if (!parsed.success) return fail(400, "invalid_request", issueText(parsed.error));
        if (parsed.data.agents.includes(name!)) return fail(400, "invalid_request", `agent ${name} names itself as a sub-agent`);
        const agent: AgentRecord = { name: name!, ...parsed.data };
        const put = await store.putAgent(agent);
        if (put.outcome === "unknown_connection") return fail(409, "unknown_connection", `not declared: ${put.missing.join(", ")}; declare them first`);
        return { status: put.outcome === "created" ? 201 : 200, body: agent };
      },
    },
    {
      pattern: /^\/v1\/agents\/([^/]+)\/mcp\/?$/,
      route: "/v1/agents/{name}/mcp",
      need: "use",
      methods: ["GET", "POST", "DELETE"],
      run: async (_m, req, [name], token) => {
        const agent = await store.getAgent(name!);
        if (!agent || !o.agentEndpoint) return fail(404, "not_found", `no agent ${name}`);
        // The transport writes its own answers (JSON or an event stream).
        await o.agentEndpoint(req, resOf.get(req)!, agent, token);
        return "streamed";
      },
    },
  ];
  const resOf = new WeakMap<IncomingMessage, ServerResponse>();

  /** Answers one request; returns what the access log needs. */
  return async function handle(req: IncomingMessage, res: ServerResponse): Promise<{ route: string; token?: ApiTokenRecord }> {
    const method = req.method ?? "GET";
    const pathname = (req.url ?? "/").split("?")[0]!;
    const send = (answer: Answer) => {
      const headers: Record<string, string> = { ...answer.headers, "cache-control": "no-store" };
      if (answer.body === undefined) {
        res.writeHead(answer.status, headers).end();
      } else {
        const text = JSON.stringify(answer.body);
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
      const ready = await o.ready().catch(() => false);
      send(ready ? { status: 200, body: { status: "ready" } } : fail(503, "unavailable", "the store does not answer"));
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
    const token = await authenticate(store, bearerOf(req.headers.authorization));
    if (!token) {
      send({ ...fail(401, "unauthorized", "missing or invalid API token"), headers: { "www-authenticate": 'Bearer realm="subs-deployment"' } });
      return { route: isMetrics ? "/metrics" : "/v1" };
    }
    if (isMetrics) {
      if (!allows(token.role, "read")) {
        send(fail(403, "forbidden", `a ${token.role} token may not read metrics`));
      } else {
        res.writeHead(200, { "content-type": "text/plain; version=0.0.4; charset=utf-8" }).end(o.metrics.text());
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
    if (params.some((p) => p === undefined || !validId(p)) && r.route !== "/v1/authorizations/{id}") {
      send(fail(400, "invalid_request", `${JSON.stringify(params.find((p) => p === undefined || !validId(p)) ?? m![1])} is not a valid connection id or agent name`));
      return { route: r.route, token };
    }
    if (!r.methods.includes(method)) {
      send({ ...fail(405, "method_not_allowed", `${method} is not allowed here`), headers: { allow: r.methods.join(", ") } });
      return { route: r.route, token };
    }
    if (!allows(token.role, r.need)) {
      send(fail(403, "forbidden", `a ${token.role} token may not ${r.need === "use" ? "use agents' MCP endpoints" : r.need === "apply" ? "change the deployment" : "read the deployment"}`));
      return { route: r.route, token };
    }
    resOf.set(req, res);
    try {
      const answer = await r.run(method, req, params as string[], token);
      if (answer !== "streamed") send(answer);
    } catch (error) {
      if (res.headersSent) {
        res.destroy();
      } else if (error instanceof Refusal) {
        send(fail(error.status, error.code, error.message, error.extra));
      } else if (error instanceof BadBody) {
        send(fail(400, "invalid_request", error.message));
      } else {
        o.log("error", "handler failed", { route: r.route, error: error instanceof Error ? error.name : "unknown" });
        send(fail(500, "internal_error", "the deployment failed; its log says more"));
      }
    }
    return { route: r.route, token };
  };
}

function issueText(error: z.ZodError): string {
  const issue = error.issues[0];
  if (!issue) return "invalid body";
  const where = issue.path.length ? `${issue.path.join(".")}: ` : "";
  return `${where}${issue.message}`;
}

export const requestId = (req: IncomingMessage) => {
  const given = req.headers["x-request-id"];
  return typeof given === "string" && /^[A-Za-z0-9._-]{1,64}$/.test(given) ? given : randomUUID();
};
