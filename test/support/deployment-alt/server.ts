// A second, independent deployment, written from docs/deployment-protocol.md alone:
// plain node:http, in-memory state, loopback only. Section numbers in comments are that document's.
// It is the OAuth client of each MCP server (section 4): its own redirect URI (/oauth/callback),
// its own client registrations (one per authorization server) and its own token store.
import { randomBytes, timingSafeEqual } from "node:crypto";
import { createServer, type IncomingMessage, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import {
  discoverOAuthServerInfo,
  exchangeAuthorization,
  refreshAuthorization,
  registerClient,
  startAuthorization,
} from "@modelcontextprotocol/sdk/client/auth.js";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport, StreamableHTTPError } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import type { AuthorizationServerMetadata, OAuthClientInformationMixed, OAuthTokens } from "@modelcontextprotocol/sdk/shared/auth.js";
import type { Tool } from "@modelcontextprotocol/sdk/types.js";

export type DeploymentOptions = {
  /** The bearer token `/v1/…` requests must carry (default: a random one, see `token`). */
  token?: string;
  /** Catalog mode (section 3.2): only these URLs may be declared (exact string match). */
  catalog?: string[];
  /** `interval` answered by POST …/authorizations, in seconds (default 2). */
  interval?: number;
  /** `expires_in` answered by POST …/authorizations, in seconds (default 600). */
  expiresIn?: number;
  /** Serve under a path (section 1, "Base URL"): "/team-a" puts the API at /team-a/v1/…. */
  basePath?: string;
  /**
   * How answers spell what the document leaves open: optional fields left out instead of null
   * (section 1, "Absent fields"), "no oauth" as null, omitted or {} (section 2), and extra
   * fields in every answer object (section 9: clients ignore unknown fields).
   */
  /**
   * How poll_url is spelled (section 3.4): a path (default), an absolute URL on the origin, or
   * the same server under another origin (localhost instead of 127.0.0.1), which clients refuse.
   */
  pollUrl?: "path" | "absolute" | "other-origin" | "relative";
  /** The redirect URI's path (default "/oauth/callback"; section 4 leaves it to the deployment). */
  callbackPath?: string;
  /** false: a pending authorization never turns `expired` by itself (to see the client stop at expires_in). */
  expireAuthorizations?: boolean;
  /** Forget every authorization at once: polls answer 404 not_found (section 3.5: clients treat it as expired). */
  forgetOutcomes?: boolean;
  answers?: { absent?: "null" | "omit"; noOauth?: "null" | "omit" | "empty"; extraFields?: boolean };
};

/** A canned answer for the next /v1 request (section 6/7: what a client retries). */
export type Fault = {
  status: number;
  error: string;
  retryAfter?: string;
  /** Only for a request whose "METHOD /path-after-the-base" starts with this (default: the next request). */
  match?: string;
  /** A Location header (for a redirect, which section 1 forbids: clients must not follow it). */
  location?: string;
  /** A body that is not JSON (section 6: still handled by its status). */
  raw?: string;
  /** Carry the request out first, then answer the fault (someone else got there first, or the answer was lost). */
  afterApplying?: boolean;
};

type OAuthSettings = { client_id?: string; client_metadata_url?: string; scopes?: string[] };
type Declaration = { id: string; url: string; prefix_tools: boolean; oauth: OAuthSettings | null };
type Filter = { include?: string[]; exclude?: string[]; read_only?: boolean; non_destructive?: boolean; idempotent?: boolean };
type AgentEntry = { id: string; tools?: Filter | null };
type Agent = { name: string; mcp: AgentEntry[]; tools: string[]; agents: string[] };

/** Section 4: tokens bound to the connection id, its url and the issuer. */
type Credential = {
  url: string;
  issuer: string;
  authorizationServerUrl: string;
  metadata: AuthorizationServerMetadata | undefined;
  client: OAuthClientInformationMixed;
  resource: string | undefined;
  tokens: OAuthTokens;
  authorizedAt: Date;
  expiresAt: Date | null;
};

type Outcome = { status: "pending" | "authorized" | "failed" | "expired"; error?: string; message?: string };
type PendingAuthorization = {
  key: string;
  connectionId: string;
  url: string;
  state: string;
  codeVerifier: string;
  issuer: string;
  authorizationServerUrl: string;
  metadata: AuthorizationServerMetadata | undefined;
  client: OAuthClientInformationMixed;
  resource: string | undefined;
  expiresAt: number;
  codeUsed: boolean;
  outcome: Outcome;
};

export type RecordedRequest = { method: string; path: string; authorized: boolean; body?: string };

export type RunningDeployment = {
  /** http://127.0.0.1:PORT (no trailing slash, as a user would write it in [remote].url). */
  url: string;
  /** The origin plus the base path: what goes into [remote].url. */
  apiUrl: string;
  token: string;
  /** Every request that reached the server, in order (callback included). */
  requests: RecordedRequest[];
  /** Whether a credential is held for the id (the token store, not the API). */
  hasCredential(id: string): boolean;
  /** Answers the next /v1 requests (after the bearer check) with these faults, in order. */
  fail(...faults: Fault[]): void;
  /** Every token and code the deployment ever held (to assert none leaks). */
  secretsSeen(): string[];
  close(): Promise<void>;
};

const ID = /^[a-z0-9_-]+$/;
const validId = (s: string) => ID.test(s) && !s.includes("__");
const LOOPBACK = new Set(["127.0.0.1", "[::1]", "localhost"]);
const FILTER_KEYS = new Set(["include", "exclude", "read_only", "non_destructive", "idempotent"]);

class ApiError extends Error {
  constructor(
    readonly status: number,
    readonly code: string,
    message: string,
    readonly extra: Record<string, unknown> = {},
  ) {
    super(message);
  }
}
const invalid = (message: string) => new ApiError(400, "invalid_request", message);

function allowedUrl(value: unknown): value is string {
  if (typeof value !== "string") return false;
  let url: URL;
  try {
    url = new URL(value);
  } catch {
    return false;
  }
  return url.protocol === "https:" || (url.protocol === "http:" && LOOPBACK.has(url.hostname));
}

const isObject = (v: unknown): v is Record<string, unknown> => typeof v === "object" && v !== null && !Array.isArray(v);
const isStringArray = (v: unknown): v is string[] => Array.isArray(v) && v.every((s) => typeof s === "string");

function onlyKeys(body: Record<string, unknown>, allowed: string[], where: string): void {
  const unknown = Object.keys(body).filter((k) => !allowed.includes(k));
  if (unknown.length) throw invalid(`${where} has fields this protocol does not define: ${unknown.join(", ")}`);
}

/** Section 3.2: the body of PUT /v1/mcp/{id}. */
function parseConnectionBody(id: string, body: unknown): Declaration {
  if (!isObject(body)) throw invalid("the body must be a JSON object");
  // Local-only fields have their own code (section 1, "Unknown fields"; section 3.2).
  const local: string[] = [];
  if ("auth" in body) local.push("auth");
  if (isObject(body.oauth)) {
    if ("client_secret_env" in body.oauth) local.push("oauth.client_secret_env");
    if ("client_secret" in body.oauth) local.push("oauth.client_secret");
  }
  if (local.length) {
    throw new ApiError(400, "local_only_field", `${local.join(", ")} belong to the developer's machine; the deployment authorizes connections itself`);
  }
  onlyKeys(body, ["url", "prefix_tools", "oauth"], "the connection");
  if (!allowedUrl(body.url)) throw invalid("url must be an https URL, or http to a loopback host");
  if (typeof body.prefix_tools !== "boolean") throw invalid("prefix_tools must be a boolean");
  let oauth: OAuthSettings | null = null;
  if (body.oauth !== undefined && body.oauth !== null) {
    if (!isObject(body.oauth)) throw invalid("oauth must be an object");
    onlyKeys(body.oauth, ["client_id", "client_metadata_url", "scopes"], "oauth");
    const o = body.oauth;
    if (o.client_id !== undefined && typeof o.client_id !== "string") throw invalid("oauth.client_id must be a string");
    if (o.client_metadata_url !== undefined) {
      if (typeof o.client_metadata_url !== "string" || !o.client_metadata_url.startsWith("https://") || !URL.canParse(o.client_metadata_url)) {
        throw invalid("oauth.client_metadata_url must be an https URL");
      }
    }
    if (o.scopes !== undefined && !isStringArray(o.scopes)) throw invalid("oauth.scopes must be an array of strings");
    oauth = { ...(o as OAuthSettings) };
    if (Object.keys(oauth).length === 0) oauth = null;
  }
  return { id, url: body.url, prefix_tools: body.prefix_tools, oauth };
}

/** Section 3.8: the body of PUT /v1/agents/{name}. */
function parseAgentBody(name: string, body: unknown): Agent {
  if (!isObject(body)) throw invalid("the body must be a JSON object");
  onlyKeys(body, ["mcp", "tools", "agents"], "the agent");
  if (!Array.isArray(body.mcp)) throw invalid("mcp must be an array");
  const mcp: AgentEntry[] = body.mcp.map((entry, i) => {
    if (!isObject(entry)) throw invalid(`mcp[${i}] must be an object`);
    onlyKeys(entry, ["id", "tools"], `mcp[${i}]`);
    if (typeof entry.id !== "string" || !validId(entry.id)) throw invalid(`mcp[${i}].id is not a valid connection id`);
    if (entry.tools === undefined) return { id: entry.id };
    if (entry.tools === null) return { id: entry.id, tools: null };
    if (!isObject(entry.tools)) throw invalid(`mcp[${i}].tools must be an object`);
    const unknown = Object.keys(entry.tools).filter((k) => !FILTER_KEYS.has(k));
    if (unknown.length) throw invalid(`mcp[${i}].tools has unknown keys: ${unknown.join(", ")}`);
    for (const key of ["include", "exclude"] as const) {
      if (entry.tools[key] !== undefined && !isStringArray(entry.tools[key])) throw invalid(`mcp[${i}].tools.${key} must be an array of strings`);
    }
    for (const key of ["read_only", "non_destructive", "idempotent"] as const) {
      if (entry.tools[key] !== undefined && typeof entry.tools[key] !== "boolean") throw invalid(`mcp[${i}].tools.${key} must be a boolean`);
    }
    return { id: entry.id, tools: { ...(entry.tools as Filter) } };
  });
  for (const key of ["tools", "agents"] as const) {
    if (body[key] !== undefined && !isStringArray(body[key])) throw invalid(`${key} must be an array of strings`);
  }
  return { name, mcp, tools: (body.tools as string[] | undefined) ?? [], agents: (body.agents as string[] | undefined) ?? [] };
}

const sameJson = (a: unknown, b: unknown) => JSON.stringify(a) === JSON.stringify(b);

export async function startDeployment(options: DeploymentOptions = {}): Promise<RunningDeployment> {
  const token = options.token ?? `dep-${randomBytes(16).toString("hex")}`;
  const connections = new Map<string, Declaration>();
  const agents = new Map<string, Agent>();
  const credentials = new Map<string, Credential>();
  const authorizations = new Map<string, PendingAuthorization>();
  /** Own client registrations, reused per authorization server (section 4). */
  const registrations = new Map<string, OAuthClientInformationMixed>();
  const requests: RecordedRequest[] = [];
  const secrets: string[] = [];
  let origin = "";
  const basePath = (options.basePath ?? "").replace(/\/$/, "");
  const callbackPath = `${basePath}${options.callbackPath ?? "/oauth/callback"}`;
  const redirectUri = () => `${origin}${callbackPath}`;
  const faults: Fault[] = [];

  const connectionAnswer = (d: Declaration) => {
    const credential = credentials.get(d.id);
    const held = credential !== undefined && credential.url === d.url;
    return shape({
      id: d.id,
      url: d.url,
      prefix_tools: d.prefix_tools,
      oauth: d.oauth,
      status: held ? "authorized" : "declared",
      authorized_at: held ? credential.authorizedAt.toISOString() : null,
      expires_at: held && credential.expiresAt ? credential.expiresAt.toISOString() : null,
    });
  };

  const agentAnswer = (a: Agent) => shape({ name: a.name, mcp: a.mcp, tools: a.tools, agents: a.agents });

  /** Applies options.answers to one answer object. */
  const shape = (object: Record<string, unknown>): Record<string, unknown> => {
    const style = options.answers ?? {};
    const out: Record<string, unknown> = {};
    for (const [key, value] of Object.entries(object)) {
      if (key === "oauth" && value === null) {
        if (style.noOauth === "empty") out.oauth = {};
        else if (style.noOauth !== "omit") out.oauth = null;
        continue;
      }
      if (value === null && style.absent === "omit") continue;
      out[key] = value;
    }
    if (style.extraFields) Object.assign(out, { x_deployment_note: "ignored by clients", x_revision: 7 });
    return out;
  };

  /** Ends every pending authorization of the id (sections 3.4, 5). */
  const endPending = (id: string, error: string, message: string) => {
    for (const a of authorizations.values()) {
      if (a.connectionId === id && a.outcome.status === "pending") a.outcome = { status: "failed", error, message };
    }
  };

  const expireIfDue = (a: PendingAuthorization) => {
    if (options.expireAuthorizations !== false && a.outcome.status === "pending" && Date.now() >= a.expiresAt) {
      a.outcome = { status: "expired", message: `nobody consented within ${options.expiresIn ?? 600}s` };
    }
  };

  /** RFC 7009, best effort: a failed revocation does not fail the DELETE (section 5). */
  const revoke = async (credential: Credential) => {
    const endpoint = (credential.metadata as { revocation_endpoint?: string } | undefined)?.revocation_endpoint;
    if (!endpoint) return;
    for (const value of [credential.tokens.refresh_token, credential.tokens.access_token]) {
      if (!value) continue;
      const form = new URLSearchParams({ token: value, client_id: credential.client.client_id });
      if ("client_secret" in credential.client && credential.client.client_secret) form.set("client_secret", credential.client.client_secret);
      try {
        const res = await fetch(endpoint, { method: "POST", body: form, redirect: "manual" });
        await res.body?.cancel();
      } catch {}
    }
  };

  const clientFor = async (decl: Declaration, authorizationServerUrl: string, metadata: AuthorizationServerMetadata | undefined, scope: string | undefined) => {
    // The declaration's client takes precedence over the deployment's own registration (section 4).
    if (decl.oauth?.client_id) return { client_id: decl.oauth.client_id };
    if (decl.oauth?.client_metadata_url) return { client_id: decl.oauth.client_metadata_url };
    const cached = registrations.get(authorizationServerUrl);
    if (cached) return cached;
    const registered = await registerClient(authorizationServerUrl, {
      metadata,
      clientMetadata: {
        client_name: "deployment-alt",
        redirect_uris: [redirectUri()],
        grant_types: ["authorization_code", "refresh_token"],
        response_types: ["code"],
        token_endpoint_auth_method: "client_secret_post",
      },
      ...(scope ? { scope } : {}),
    });
    if (registered.client_secret) secrets.push(registered.client_secret);
    registrations.set(authorizationServerUrl, registered);
    return registered;
  };

  /** Section 3.4. */
  const startConsent = async (decl: Declaration) => {
    let info: Awaited<ReturnType<typeof discoverOAuthServerInfo>>;
    try {
      info = await discoverOAuthServerInfo(decl.url);
    } catch (error) {
      throw new ApiError(502, "upstream_error", `discovery at ${decl.url} failed: ${(error as Error).message}`);
    }
    if (!info.authorizationServerMetadata) throw new ApiError(502, "upstream_error", `no usable authorization server metadata for ${decl.url}`);
    const scopes = decl.oauth?.scopes ?? info.resourceMetadata?.scopes_supported;
    const scope = scopes && scopes.length ? scopes.join(" ") : undefined;
    let client: OAuthClientInformationMixed;
    try {
      client = await clientFor(decl, info.authorizationServerUrl, info.authorizationServerMetadata, scope);
    } catch (error) {
      throw new ApiError(502, "upstream_error", `client registration at ${info.authorizationServerUrl} was refused: ${(error as Error).message}`);
    }
    const resource = info.resourceMetadata?.resource ?? decl.url;
    const state = randomBytes(16).toString("base64url");
    let started: Awaited<ReturnType<typeof startAuthorization>>;
    try {
      started = await startAuthorization(info.authorizationServerUrl, {
        metadata: info.authorizationServerMetadata,
        clientInformation: client,
        redirectUrl: redirectUri(),
        state,
        resource,
        ...(scope ? { scope } : {}),
      });
    } catch (error) {
      throw new ApiError(502, "upstream_error", `cannot start authorization: ${(error as Error).message}`);
    }
    endPending(decl.id, "superseded", "a newer authorization was started");
    const key = randomBytes(12).toString("hex");
    authorizations.set(key, {
      key,
      connectionId: decl.id,
      url: decl.url,
      state,
      codeVerifier: started.codeVerifier,
      issuer: info.authorizationServerMetadata.issuer,
      authorizationServerUrl: info.authorizationServerUrl,
      metadata: info.authorizationServerMetadata,
      client,
      resource,
      expiresAt: Date.now() + (options.expiresIn ?? 600) * 1000,
      codeUsed: false,
      outcome: { status: "pending" },
    });
    return shape({
      authorization_url: started.authorizationUrl.href,
      // A path on the deployment's origin (section 3.4), including the base path: it is resolved
      // against the POST's URL, so "/v1/…" alone would leave a deployment served under /team-a.
      poll_url:
        options.pollUrl === "relative"
          ? `../../authorizations/${key}` // from …/v1/mcp/{id}/authorizations
          : `${options.pollUrl === "absolute" ? origin : options.pollUrl === "other-origin" ? origin.replace("127.0.0.1", "localhost") : ""}${basePath}/v1/authorizations/${key}`,
      interval: options.interval ?? 2,
      expires_in: options.expiresIn ?? 600,
    });
  };

  /** The redirect URI (section 4): checks state, accepts one code, exchanges it, stores the tokens. */
  const callback = async (params: URLSearchParams, res: ServerResponse) => {
    const page = (status: number, text: string) => {
      res.writeHead(status, { "content-type": "text/html; charset=utf-8" }).end(`<!doctype html><title>deployment</title><p>${text}</p>`);
    };
    const state = params.get("state");
    const a = [...authorizations.values()].find((x) => state !== null && x.state === state);
    if (!a) return page(400, "Unknown or missing state. Start the login again.");
    expireIfDue(a);
    if (a.outcome.status !== "pending" || a.codeUsed) return page(400, "This authorization is no longer pending. Start the login again.");
    const error = params.get("error");
    if (error) {
      a.outcome = { status: "failed", error, message: params.get("error_description") ?? `the authorization server answered ${error}` };
      return page(200, "Authorization was refused. You can close this window.");
    }
    const iss = params.get("iss");
    if (iss !== null && iss !== a.issuer) {
      a.outcome = { status: "failed", error: "upstream_error", message: "the authorization response came from another issuer" };
      return page(400, "The authorization response came from another issuer. You can close this window.");
    }
    const code = params.get("code");
    if (!code) return page(400, "No authorization code.");
    a.codeUsed = true;
    secrets.push(code);
    let tokens: OAuthTokens;
    try {
      tokens = await exchangeAuthorization(a.authorizationServerUrl, {
        metadata: a.metadata,
        clientInformation: a.client,
        authorizationCode: code,
        codeVerifier: a.codeVerifier,
        redirectUri: redirectUri(),
        ...(a.resource ? { resource: a.resource } : {}),
      });
    } catch (e) {
      a.outcome = { status: "failed", error: "token_exchange_failed", message: `the code could not be exchanged: ${(e as Error).message}` };
      return page(502, "The authorization could not be completed. You can close this window.");
    }
    secrets.push(tokens.access_token, ...(tokens.refresh_token ? [tokens.refresh_token] : []));
    // The flow may have been superseded or the connection changed while the code was exchanged.
    const decl = connections.get(a.connectionId);
    if (a.outcome.status !== "pending") return page(409, "This authorization is no longer pending. You can close this window.");
    if (!decl || decl.url !== a.url) {
      a.outcome = { status: "failed", error: "connection_changed", message: "the connection changed meanwhile" };
      return page(409, "The connection changed meanwhile. You can close this window.");
    }
    const now = new Date();
    credentials.set(a.connectionId, {
      url: a.url,
      issuer: a.issuer,
      authorizationServerUrl: a.authorizationServerUrl,
      metadata: a.metadata,
      client: a.client,
      resource: a.resource,
      tokens,
      authorizedAt: now,
      expiresAt: tokens.expires_in !== undefined ? new Date(now.getTime() + tokens.expires_in * 1000) : null,
    });
    a.outcome = { status: "authorized" };
    page(200, "Authorized. You can close this window.");
  };

  /** Section 3.6 / section 5 on refresh. */
  const refresh = async (id: string, credential: Credential): Promise<Credential | undefined> => {
    if (!credential.tokens.refresh_token) return undefined;
    try {
      const tokens = await refreshAuthorization(credential.authorizationServerUrl, {
        metadata: credential.metadata,
        clientInformation: credential.client,
        refreshToken: credential.tokens.refresh_token,
        ...(credential.resource ? { resource: credential.resource } : {}),
      });
      secrets.push(tokens.access_token, ...(tokens.refresh_token ? [tokens.refresh_token] : []));
      const updated: Credential = {
        ...credential,
        tokens,
        expiresAt: tokens.expires_in !== undefined ? new Date(Date.now() + tokens.expires_in * 1000) : null,
      };
      if (credentials.get(id) === credential) credentials.set(id, updated);
      return updated;
    } catch (error) {
      if ((error as { errorCode?: string }).errorCode === "invalid_grant" || /invalid_grant/.test(String(error))) {
        if (credentials.get(id) === credential) credentials.delete(id);
        return undefined;
      }
      throw new ApiError(502, "upstream_error", `refreshing the credential failed: ${(error as Error).message}`);
    }
  };

  const listTools = async (url: string, accessToken: string): Promise<Tool[]> => {
    const client = new Client({ name: "deployment-alt", version: "1.0.0" });
    const transport = new StreamableHTTPClientTransport(new URL(url), { requestInit: { headers: { authorization: `Bearer ${accessToken}` } } });
    try {
      await client.connect(transport);
      const tools: Tool[] = [];
      let cursor: string | undefined;
      do {
        const page = await client.listTools(cursor ? { cursor } : {});
        tools.push(...page.tools);
        cursor = page.nextCursor;
      } while (cursor);
      return tools;
    } finally {
      await client.close().catch(() => {});
    }
  };

  const refused = (error: unknown) => error instanceof StreamableHTTPError && error.code === 401;

  const tools = async (id: string) => {
    const decl = connections.get(id);
    if (!decl) throw new ApiError(404, "not_found", `no connection ${id} is declared`);
    const notAuthorized = () => new ApiError(409, "not_authorized", `the deployment holds no usable credential for ${id}; run \`subs mcp login ${id}\``);
    let credential = credentials.get(id);
    if (!credential || credential.url !== decl.url) throw notAuthorized();
    if (credential.expiresAt && credential.expiresAt.getTime() <= Date.now() + 5_000) {
      credential = await refresh(id, credential);
      if (!credential) throw notAuthorized();
    }
    try {
      return await listTools(decl.url, credential.tokens.access_token);
    } catch (error) {
      if (!refused(error)) throw new ApiError(502, "upstream_error", `${decl.url} failed: ${(error as Error).message}`);
    }
    // The access token was refused before its expiry: refresh once and retry.
    credential = await refresh(id, credential);
    if (!credential) throw notAuthorized();
    try {
      return await listTools(decl.url, credential.tokens.access_token);
    } catch (error) {
      if (refused(error)) throw notAuthorized();
      throw new ApiError(502, "upstream_error", `${decl.url} failed: ${(error as Error).message}`);
    }
  };

  const readBody = async (req: IncomingMessage, recorded: RecordedRequest): Promise<unknown> => {
    const chunks: Buffer[] = [];
    for await (const chunk of req) chunks.push(chunk as Buffer);
    const text = Buffer.concat(chunks).toString("utf8");
    recorded.body = text;
    if (text === "") return undefined;
    try {
      return JSON.parse(text);
    } catch {
      throw invalid("the body is not valid JSON");
    }
  };

  const bearerOk = (header: string | undefined) => {
    const match = /^Bearer (.+)$/.exec(header ?? "");
    if (!match) return false;
    const given = Buffer.from(match[1]!);
    const expected = Buffer.from(token);
    return given.length === expected.length && timingSafeEqual(given, expected);
  };

  type Answer = { status: number; body?: unknown };

  const route = async (req: IncomingMessage, recorded: RecordedRequest, segments: string[]): Promise<Answer> => {
    const method = req.method ?? "GET";
    const checkId = (s: string, what: string) => {
      if (!validId(s)) throw invalid(`${JSON.stringify(s)} is not a valid ${what}`);
      return s;
    };
    const noSuchEndpoint = () => new ApiError(404, "not_found", `no endpoint ${method} /${segments.join("/")}`);

    if (segments[0] === "mcp") {
      if (segments.length === 1) {
        if (method !== "GET") throw noSuchEndpoint();
        return { status: 200, body: { connections: [...connections.values()].map(connectionAnswer) } };
      }
      const id = checkId(segments[1]!, "connection id");
      if (segments.length === 2 && method === "PUT") {
        const decl = parseConnectionBody(id, await readBody(req, recorded));
        if (options.catalog && !options.catalog.includes(decl.url)) {
          throw new ApiError(403, "url_not_in_catalog", `${decl.url} is not in this deployment's catalog`, { catalog: options.catalog });
        }
        const previous = connections.get(id);
        if (previous && previous.url !== decl.url) {
          // Section 5: drop the credential before answering; end pending authorizations.
          credentials.delete(id);
          endPending(id, "connection_changed", "the connection's url changed");
        }
        connections.set(id, decl);
        return { status: previous ? 200 : 201, body: connectionAnswer(decl) };
      }
      if (segments.length === 2 && method === "DELETE") {
        if (!connections.has(id)) throw new ApiError(404, "not_found", `no connection ${id} is declared`);
        const users = [...agents.values()].filter((a) => a.mcp.some((e) => e.id === id)).map((a) => a.name);
        if (users.length) throw new ApiError(409, "connection_in_use", `${id} is used by ${users.join(", ")}`);
        connections.delete(id);
        const credential = credentials.get(id);
        credentials.delete(id);
        endPending(id, "connection_changed", "the connection was deleted");
        if (credential) await revoke(credential);
        return { status: 204 };
      }
      if (segments.length === 3 && segments[2] === "authorizations" && method === "POST") {
        // Section 3.4: clients send {}; deployments ignore its content.
        await readBody(req, recorded).catch(() => undefined);
        const decl = connections.get(id);
        if (!decl) throw new ApiError(404, "not_found", `no connection ${id} is declared; declare it first`);
        return { status: 201, body: await startConsent(decl) };
      }
      if (segments.length === 3 && segments[2] === "tools" && method === "GET") {
        return { status: 200, body: { tools: await tools(id) } };
      }
      throw noSuchEndpoint();
    }
    if (segments[0] === "authorizations" && segments.length === 2 && method === "GET") {
      const a = options.forgetOutcomes ? undefined : authorizations.get(segments[1]!);
      if (!a) throw new ApiError(404, "not_found", "no such authorization");
      expireIfDue(a);
      return { status: 200, body: shape({ ...a.outcome }) };
    }
    if (segments[0] === "agents") {
      if (segments.length === 1) {
        if (method !== "GET") throw noSuchEndpoint();
        return { status: 200, body: { agents: [...agents.values()].map(agentAnswer) } };
      }
      const name = checkId(segments[1]!, "agent name");
      if (segments.length === 2 && method === "PUT") {
        const agent = parseAgentBody(name, await readBody(req, recorded));
        const missing = [...new Set(agent.mcp.map((e) => e.id).filter((c) => !connections.has(c)))];
        if (missing.length) throw new ApiError(409, "unknown_connection", `not declared: ${missing.join(", ")}`);
        const previous = agents.get(name);
        if (!previous || !sameJson(previous, agent)) agents.set(name, agent);
        return { status: previous ? 200 : 201, body: agentAnswer(agent) };
      }
      if (segments.length === 2 && method === "DELETE") {
        if (!agents.delete(name)) throw new ApiError(404, "not_found", `no agent ${name}`);
        return { status: 204 };
      }
    }
    throw noSuchEndpoint();
  };

  const send = (res: ServerResponse, status: number, body?: unknown) => {
    if (status === 204) return void res.writeHead(204).end();
    res.writeHead(status, { "content-type": "application/json" }).end(JSON.stringify(body));
  };

  const http = createServer(async (req, res) => {
    const url = new URL(req.url ?? "/", origin);
    const authorized = bearerOk(req.headers.authorization);
    const recorded: RecordedRequest = { method: req.method ?? "GET", path: url.pathname, authorized };
    requests.push(recorded);
    try {
      if (url.pathname === callbackPath && req.method === "GET") return await callback(url.searchParams, res);
      if (!url.pathname.startsWith(`${basePath}/`)) throw new ApiError(404, "not_found", `no endpoint ${url.pathname}`);
      const segments = url.pathname.slice(basePath.length).split("/").slice(1);
      if (segments[0] !== "v1") throw new ApiError(404, "not_found", `no endpoint ${url.pathname}`);
      // Section 10: 401 before anything else.
      if (!authorized) throw new ApiError(401, "unauthorized", "a valid bearer token is required");
      const here = `${req.method} ${url.pathname.slice(basePath.length)}`;
      const at = faults.findIndex((f) => f.match === undefined || here.startsWith(f.match));
      if (at >= 0) {
        const [fault] = faults.splice(at, 1) as [Fault];
        if (fault.afterApplying) await route(req, recorded, segments.slice(1).map(decodeURIComponent)).catch(() => undefined);
        else await readBody(req, recorded).catch(() => undefined);
        res.writeHead(fault.status, {
          "content-type": fault.raw !== undefined ? "text/html" : "application/json",
          ...(fault.retryAfter !== undefined ? { "retry-after": fault.retryAfter } : {}),
          ...(fault.location !== undefined ? { location: fault.location } : {}),
        });
        return void res.end(fault.raw ?? JSON.stringify({ error: fault.error, message: `injected ${fault.error}` }));
      }
      let decoded: string[];
      try {
        decoded = segments.slice(1).map(decodeURIComponent);
      } catch {
        throw invalid("the path is not valid percent-encoding");
      }
      const answer = await route(req, recorded, decoded);
      send(res, answer.status, answer.body);
    } catch (error) {
      if (error instanceof ApiError) return send(res, error.status, { error: error.code, message: error.message, ...error.extra });
      send(res, 500, { error: "internal_error", message: "the deployment failed" });
    }
  });
  await new Promise<void>((resolve) => http.listen(0, "127.0.0.1", resolve));
  origin = `http://127.0.0.1:${(http.address() as AddressInfo).port}`;

  return {
    url: origin,
    apiUrl: `${origin}${basePath}`,
    token,
    requests,
    hasCredential: (id) => credentials.has(id),
    fail: (...more) => void faults.push(...more),
    secretsSeen: () => [...secrets, token],
    close: () =>
      new Promise<void>((resolve) => {
        http.closeAllConnections();
        http.close(() => resolve());
      }),
  };
}
