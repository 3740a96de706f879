// A deployment for the tests: implements docs/deployment-protocol.md for real, on loopback.
// It holds declarations, agents and credentials in memory (its own token store), runs the OAuth
// client side itself with the SDK's auth() and its own redirect URI (/oauth/callback), can allow
// only catalog URLs, and injects faults (error statuses, dropped connections, delays) on demand.
import { randomBytes, randomUUID } from "node:crypto";
import type { Server as HttpServer } from "node:http";
import type { AddressInfo } from "node:net";
import express, { type NextFunction, type Request, type Response } from "express";
import { z } from "zod";
import { auth, discoverOAuthServerInfo, UnauthorizedError, type OAuthClientProvider } from "@modelcontextprotocol/sdk/client/auth.js";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import type { OAuthClientInformationMixed, OAuthClientMetadata, OAuthTokens } from "@modelcontextprotocol/sdk/shared/auth.js";

export type Fault = {
  method?: string;
  /** Matches the request path (a string matches a prefix). */
  path: string | RegExp;
  /**
   * status: answer with this status and an error body, changing nothing.
   * drop: close the connection before doing anything.
   * drop_after: do the work, then close the connection instead of answering (a lost answer).
   * delay: wait `ms`, then answer normally.
   * body: answer `status` (default 200) with `body`, changing nothing (a broken deployment).
   */
  kind: "status" | "drop" | "drop_after" | "delay" | "body";
  status?: number;
  body?: unknown;
  ms?: number;
  /** How many matching requests it affects (default 1). */
  times?: number;
};

export type Credential = {
  url: string;
  tokens: OAuthTokens;
  authorizedAt: number;
  expiresAt: number | null;
  /** The issuer that issued it, its RFC 7009 revocation endpoint, and the client it was issued to. */
  issuer?: string;
  revocationEndpoint?: string;
  clientId?: string;
};

type Declared = { id: string; url: string; prefix_tools: boolean; oauth?: { client_id?: string; client_metadata_url?: string; scopes?: string[] } };
type Agent = { name: string; mcp: Array<{ id: string; tools?: Record<string, unknown> }>; tools: string[]; agents: string[] };
type Authorization = {
  id: string;
  connectionId: string;
  url: string;
  state: string;
  codeVerifier?: string;
  status: "pending" | "authorized" | "failed" | "expired";
  error?: string;
  message?: string;
  expiresAt: number;
};

export type DeploymentOptions = {
  /** The API credential the deployment accepts. */
  token: string;
  /** When set, only these connection urls may be declared. */
  catalog?: string[];
  /** Seconds between polls the deployment asks for (fractional in tests). */
  pollInterval?: number;
  /** Seconds an authorization stays pending. */
  authorizationTtl?: number;
};

export type RunningDeployment = {
  url: string;
  /** Every request under /v1 that reached the deployment: "METHOD /path". */
  requests: string[];
  connections: Map<string, Declared>;
  agents: Map<string, Agent>;
  /** The deployment's own token store, per connection id. */
  credentials: Map<string, Credential>;
  fault(fault: Fault): void;
  clearFaults(): void;
  close(): Promise<void>;
};

/** Section 1: a connection id or agent name is one path segment that follows the file's rule. */
const ID = /^[a-z0-9_-]+$/;
const validId = (s: string) => ID.test(s) && !s.includes("__");
const IdSchema = z.string().refine(validId, "not a valid connection id");

const FilterSchema = z.strictObject({
  include: z.array(z.string()).optional(),
  exclude: z.array(z.string()).optional(),
  read_only: z.boolean().optional(),
  non_destructive: z.boolean().optional(),
  idempotent: z.boolean().optional(),
});
const ConnectionBodySchema = z.strictObject({
  url: z.url({ protocol: /^https?$/ }),
  prefix_tools: z.boolean(),
  oauth: z
    .strictObject({
      client_id: z.string().min(1).optional(),
      // Section 3.2: an absolute https URL (a Client ID Metadata Document).
      client_metadata_url: z.url({ protocol: /^https$/ }).optional(),
      scopes: z.array(z.string()).optional(),
    })
    .optional(),
});
const AgentBodySchema = z.strictObject({
  mcp: z.array(z.strictObject({ id: IdSchema, tools: FilterSchema.optional() })),
  tools: z.array(z.string()).default([]),
  agents: z.array(z.string()).default([]),
});

export async function startDeployment(options: DeploymentOptions): Promise<RunningDeployment> {
  const requests: string[] = [];
  const connections = new Map<string, Declared>();
  const agents = new Map<string, Agent>();
  const credentials = new Map<string, Credential>();
  const authorizations = new Map<string, Authorization>();
  /** Dynamic client registrations, per MCP server url (reused across authorizations). */
  const registrations = new Map<string, OAuthClientInformationMixed>();
  let faults: Fault[] = [];
  const app = express();
  const http: HttpServer = await new Promise((resolve) => {
    const server = app.listen(0, "127.0.0.1", () => resolve(server));
  });
  const base = `http://127.0.0.1:${(http.address() as AddressInfo).port}`;
  const redirectUri = `${base}/oauth/callback`;

  const fail = (res: Response, status: number, error: string, message: string, extra: Record<string, unknown> = {}) =>
    send(res, status, { error, message, ...extra });
  const send = (res: Response, status: number, body?: unknown) => {
    if (res.locals.dropAfter) {
      res.socket?.destroy();
      return;
    }
    if (body === undefined) res.status(status).end();
    else res.status(status).json(body);
  };

  const connectionJson = (c: Declared) => {
    const credential = credentials.get(c.id);
    const held = credential && credential.url === c.url;
    return {
      id: c.id,
      url: c.url,
      prefix_tools: c.prefix_tools,
      ...(c.oauth ? { oauth: c.oauth } : {}),
      status: held ? "authorized" : "declared",
      ...(held ? { authorized_at: new Date(credential.authorizedAt).toISOString() } : {}),
      ...(held && credential.expiresAt ? { expires_at: new Date(credential.expiresAt).toISOString() } : {}),
    };
  };

  /**
   * A credential belongs to its id and url: drop it, revoke it at its authorization server when
   * that offers revocation (a failure does not stop the drop), and end any consent in progress.
   */
  const dropCredential = async (id: string, reason: string) => {
    const credential = credentials.get(id);
    credentials.delete(id);
    if (credential?.revocationEndpoint) {
      for (const [token, hint] of [[credential.tokens.refresh_token, "refresh_token"], [credential.tokens.access_token, "access_token"]] as const) {
        if (!token) continue;
        const form = new URLSearchParams({ token, token_type_hint: hint, ...(credential.clientId ? { client_id: credential.clientId } : {}) });
        await fetch(credential.revocationEndpoint, { method: "POST", body: form, signal: AbortSignal.timeout(5000) }).catch(() => {});
      }
    }
    for (const a of authorizations.values()) {
      if (a.connectionId === id && a.status === "pending") Object.assign(a, { status: "failed", error: "connection_changed", message: reason });
    }
  };

  const provider = (a: Authorization, connection: Declared, onRedirect: (url: URL) => void, onTokens: (t: OAuthTokens) => void): OAuthClientProvider => ({
    get redirectUrl() {
      return redirectUri;
    },
    get clientMetadata(): OAuthClientMetadata {
      return {
        client_name: "subs test deployment",
        redirect_uris: [redirectUri],
        grant_types: ["authorization_code", "refresh_token"],
        response_types: ["code"],
        token_endpoint_auth_method: "none",
        ...(connection.oauth?.scopes ? { scope: connection.oauth.scopes.join(" ") } : {}),
      };
    },
    state: () => a.state,
    clientInformation: () => (connection.oauth?.client_id ? { client_id: connection.oauth.client_id } : registrations.get(connection.url)),
    saveClientInformation: (info) => {
      registrations.set(connection.url, info);
    },
    tokens: () => undefined,
    saveTokens: onTokens,
    redirectToAuthorization: onRedirect,
    saveCodeVerifier: (verifier) => {
      a.codeVerifier = verifier;
    },
    codeVerifier: () => {
      if (!a.codeVerifier) throw new Error("no code verifier");
      return a.codeVerifier;
    },
  });

  // The OAuth redirect target: the person's browser lands here after consent. Not part of the
  // protocol (docs: "the deployment's own redirect URI").
  app.get("/oauth/callback", async (req, res) => {
    const state = typeof req.query.state === "string" ? req.query.state : "";
    const a = [...authorizations.values()].find((x) => x.state === state);
    if (!a || a.status !== "pending") {
      res.status(400).type("text/plain").send("Unknown or finished authorization.");
      return;
    }
    if (typeof req.query.error === "string") {
      Object.assign(a, { status: "failed", error: req.query.error, message: `the authorization server answered ${req.query.error}` });
      res.status(200).type("text/plain").send("Authorization failed. You can close this window.");
      return;
    }
    const connection = connections.get(a.connectionId);
    if (!connection || connection.url !== a.url) {
      Object.assign(a, { status: "failed", error: "connection_changed", message: "the connection changed during consent" });
      res.status(409).type("text/plain").send("The connection changed; start again.");
      return;
    }
    try {
      let tokens: OAuthTokens | undefined;
      const result = await auth(
        provider(a, connection, () => {}, (t) => {
          tokens = t;
        }),
        { serverUrl: connection.url, authorizationCode: String(req.query.code ?? "") },
      );
      if (result !== "AUTHORIZED" || !tokens) throw new Error("no tokens");
      const now = Date.now();
      const info = await discoverOAuthServerInfo(connection.url).catch(() => undefined);
      // RFC 8414 metadata; the OpenID variant of the type has no revocation_endpoint.
      const revocationEndpoint = (info?.authorizationServerMetadata as { revocation_endpoint?: string } | undefined)?.revocation_endpoint;
      const client = connection.oauth?.client_id ? { client_id: connection.oauth.client_id } : registrations.get(connection.url);
      credentials.set(connection.id, {
        url: connection.url,
        tokens,
        authorizedAt: now,
        expiresAt: tokens.expires_in ? now + tokens.expires_in * 1000 : null,
        ...(info?.authorizationServerMetadata?.issuer ? { issuer: info.authorizationServerMetadata.issuer } : {}),
        ...(revocationEndpoint ? { revocationEndpoint } : {}),
        ...(client ? { clientId: client.client_id } : {}),
      });
      a.status = "authorized";
      res.status(200).type("text/plain").send("Authorized. You can close this window.");
    } catch (error) {
      Object.assign(a, { status: "failed", error: "token_exchange_failed", message: error instanceof Error ? error.message : String(error) });
      res.status(502).type("text/plain").send("Authorization failed.");
    }
  });

  const v1 = express.Router();
  v1.use((req: Request, res: Response, next: NextFunction) => {
    requests.push(`${req.method} ${req.path === "/" ? "/v1" : `/v1${req.path}`}`);
    next();
  });
  // Fault injection, before authentication: a proxy or a crash does not check tokens.
  v1.use(async (req, res, next) => {
    const path = `/v1${req.path}`;
    const fault = faults.find(
      (f) => (f.times ?? 1) > 0 && (!f.method || f.method === req.method) && (typeof f.path === "string" ? path.startsWith(f.path) : f.path.test(path)),
    );
    if (!fault) return next();
    fault.times = (fault.times ?? 1) - 1;
    if (fault.kind === "drop") {
      req.socket.destroy();
      return;
    }
    if (fault.kind === "status") {
      const status = fault.status ?? 500;
      res.status(status).json({ error: status === 429 ? "rate_limited" : status === 503 ? "unavailable" : "internal_error", message: "injected fault" });
      return;
    }
    if (fault.kind === "body") {
      res.status(fault.status ?? 200).json(fault.body);
      return;
    }
    if (fault.kind === "delay") await new Promise((r) => setTimeout(r, fault.ms ?? 100));
    if (fault.kind === "drop_after") res.locals.dropAfter = true;
    next();
  });
  v1.use((req, res, next) => {
    if (req.headers.authorization !== `Bearer ${options.token}`) {
      fail(res, 401, "unauthorized", "missing or invalid API token");
      return;
    }
    next();
  });
  v1.use(express.json({ strict: false }));
  // Section 1: a bad id or name is 400 on every endpoint that has one, compared after
  // percent-decoding (Express decodes route parameters).
  v1.param("id", (_req, res, next, id: string) => (validId(id) ? next() : fail(res, 400, "invalid_request", `${JSON.stringify(id)} is not a valid connection id`)));
  v1.param("name", (_req, res, next, name: string) => (validId(name) ? next() : fail(res, 400, "invalid_request", `${JSON.stringify(name)} is not a valid agent name`)));

  v1.get("/mcp", (_req, res) => send(res, 200, { connections: [...connections.values()].map(connectionJson) }));

  v1.put("/mcp/:id", async (req, res) => {
    const id = req.params.id;
    const body = req.body as Record<string, unknown> | undefined;
    const oauth = body && typeof body === "object" && body.oauth && typeof body.oauth === "object" ? (body.oauth as object) : undefined;
    if (body && typeof body === "object" && ("auth" in body || (oauth && ("client_secret_env" in oauth || "client_secret" in oauth)))) {
      return fail(res, 400, "local_only_field", "`auth`, `oauth.client_secret_env` and `oauth.client_secret` belong to the client's machine; authorize on the deployment instead");
    }
    const parsed = ConnectionBodySchema.safeParse(body);
    if (!parsed.success) return fail(res, 400, "invalid_request", parsed.error.issues[0]?.message ?? "invalid body");
    const target = new URL(parsed.data.url);
    if (target.protocol === "http:" && !["127.0.0.1", "localhost", "[::1]"].includes(target.hostname)) {
      return fail(res, 400, "invalid_request", "url must be https (plain http only to a loopback host)");
    }
    if (options.catalog && !options.catalog.includes(parsed.data.url)) {
      return fail(res, 403, "url_not_in_catalog", `${parsed.data.url} is not in this deployment's catalog`, { catalog: options.catalog });
    }
    const existing = connections.get(id);
    if (existing && existing.url !== parsed.data.url) await dropCredential(id, "the connection's url changed");
    const declared: Declared = { id, url: parsed.data.url, prefix_tools: parsed.data.prefix_tools, ...(parsed.data.oauth ? { oauth: parsed.data.oauth } : {}) };
    connections.set(id, declared);
    send(res, existing ? 200 : 201, connectionJson(declared));
  });

  v1.delete("/mcp/:id", async (req, res) => {
    const id = req.params.id;
    const users = [...agents.values()].filter((a) => a.mcp.some((e) => e.id === id)).map((a) => a.name);
    if (users.length) return fail(res, 409, "connection_in_use", `agents ${users.join(", ")} name ${id}`, { agents: users });
    if (!connections.has(id)) return fail(res, 404, "not_found", `no connection ${id}`);
    connections.delete(id);
    await dropCredential(id, "the connection was deleted");
    send(res, 204);
  });

  v1.post("/mcp/:id/authorizations", async (req, res) => {
    const connection = connections.get(String(req.params.id));
    if (!connection) return fail(res, 404, "not_found", `no connection ${req.params.id}`);
    for (const a of authorizations.values()) {
      if (a.connectionId === connection.id && a.status === "pending") Object.assign(a, { status: "failed", error: "superseded", message: "a newer authorization was started" });
    }
    const ttl = options.authorizationTtl ?? 600;
    const a: Authorization = {
      id: randomUUID(),
      connectionId: connection.id,
      url: connection.url,
      state: randomBytes(24).toString("base64url"),
      status: "pending",
      expiresAt: Date.now() + ttl * 1000,
    };
    let authorizationUrl: URL | undefined;
    try {
      await auth(provider(a, connection, (u) => void (authorizationUrl = u), () => {}), { serverUrl: connection.url });
    } catch (error) {
      return fail(res, 502, "upstream_error", `cannot start authorization with ${connection.url}: ${error instanceof Error ? error.message : String(error)}`);
    }
    if (!authorizationUrl) return fail(res, 502, "upstream_error", "the authorization server gave no authorization URL");
    authorizations.set(a.id, a);
    send(res, 201, { authorization_url: authorizationUrl.href, poll_url: `/v1/authorizations/${a.id}`, interval: options.pollInterval ?? 0.1, expires_in: ttl });
  });

  v1.get("/authorizations/:aid", (req, res) => {
    const a = authorizations.get(String(req.params.aid));
    if (!a) return fail(res, 404, "not_found", "no such authorization");
    if (a.status === "pending" && Date.now() > a.expiresAt) Object.assign(a, { status: "expired", message: "nobody consented in time" });
    send(res, 200, { status: a.status, ...(a.error ? { error: a.error } : {}), ...(a.message && a.status !== "authorized" ? { message: a.message } : {}) });
  });

  v1.get("/mcp/:id/tools", async (req, res) => {
    const connection = connections.get(String(req.params.id));
    if (!connection) return fail(res, 404, "not_found", `no connection ${req.params.id}`);
    const credential = credentials.get(connection.id);
    if (!credential || credential.url !== connection.url) return fail(res, 409, "not_authorized", `${connection.id} is declared but not authorized`);
    const client = new Client({ name: "subs-test-deployment", version: "1.0.0" });
    try {
      await client.connect(
        new StreamableHTTPClientTransport(new URL(connection.url), { requestInit: { headers: { authorization: `Bearer ${credential.tokens.access_token}` } } }),
      );
      const tools = [];
      let cursor: string | undefined;
      do {
        const page = await client.listTools(cursor ? { cursor } : {});
        tools.push(...page.tools);
        cursor = page.nextCursor;
      } while (cursor);
      send(res, 200, { tools });
    } catch (error) {
      // The server no longer accepts the token (and this fixture does not refresh): drop it.
      if (error instanceof UnauthorizedError || (error as { code?: unknown }).code === 401) {
        credentials.delete(connection.id);
        return fail(res, 409, "not_authorized", `${connection.url} rejected the credential`);
      }
      fail(res, 502, "upstream_error", `${connection.url}: ${error instanceof Error ? error.message : String(error)}`);
    } finally {
      await client.close().catch(() => {});
    }
  });

  v1.get("/agents", (_req, res) => send(res, 200, { agents: [...agents.values()] }));

  v1.put("/agents/:name", (req, res) => {
    const name = req.params.name;
    const parsed = AgentBodySchema.safeParse(req.body);
    if (!parsed.success) return fail(res, 400, "invalid_request", parsed.error.issues[0]?.message ?? "invalid body");
    const missing = parsed.data.mcp.map((e) => e.id).filter((id) => !connections.has(id));
    if (missing.length) return fail(res, 409, "unknown_connection", `not declared: ${missing.join(", ")}`);
    const existed = agents.has(name);
    const agent: Agent = { name, ...parsed.data };
    agents.set(name, agent);
    send(res, existed ? 200 : 201, agent);
  });

  v1.delete("/agents/:name", (req, res) => {
    if (!agents.delete(String(req.params.name))) return fail(res, 404, "not_found", `no agent ${req.params.name}`);
    send(res, 204);
  });

  v1.use((_req: Request, res: Response) => fail(res, 404, "not_found", "no such endpoint"));
  // Anything unexpected is an error body, never an HTML page. What the body parser or the path
  // decoding refused (bad JSON, too large, an unknown charset, bad %-encoding) is a malformed
  // request: 400 invalid_request (section 6 has no other 4xx for it).
  v1.use((error: unknown, _req: Request, res: Response, _next: NextFunction) => {
    const status = (error as { status?: number }).status ?? 500;
    if (status >= 400 && status < 500) return fail(res, 400, "invalid_request", error instanceof Error ? error.message : String(error));
    fail(res, 500, "internal_error", "the deployment failed");
  });
  app.use("/v1", v1);

  return {
    url: base,
    requests,
    connections,
    agents,
    credentials,
    fault: (f) => {
      faults.push({ ...f });
    },
    clearFaults: () => {
      faults = [];
    },
    close: () =>
      new Promise<void>((resolve) => {
        http.closeAllConnections();
        http.close(() => resolve());
      }),
  };
}
