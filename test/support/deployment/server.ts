// A deployment for the tests: implements docs/deployment-protocol.md for real, on loopback.
// It holds declarations, agents, credentials and the values of header variables (section 3.12) in
// memory (its own token store), runs the OAuth
// client side itself with the SDK and its own redirect URI (/oauth/callback), refreshes what it
// holds, can allow only catalog URLs (and then uses no connection outside it), and injects faults (error statuses, dropped connections,
// delays) on demand. Section numbers in comments are the document's.
import { randomBytes, randomUUID } from "node:crypto";
import type { Server as HttpServer } from "node:http";
import type { AddressInfo } from "node:net";
import express, { type NextFunction, type Request, type Response } from "express";
import { z } from "zod";
import {
  auth,
  discoverOAuthProtectedResourceMetadata,
  discoverOAuthServerInfo,
  exchangeAuthorization,
  extractWWWAuthenticateParams,
  refreshAuthorization,
  UnauthorizedError,
  type OAuthClientProvider,
  type OAuthServerInfo,
} from "@modelcontextprotocol/sdk/client/auth.js";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport, StreamableHTTPError } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { InvalidGrantError, OAuthError, ServerError } from "@modelcontextprotocol/sdk/server/auth/errors.js";
import type { AuthorizationServerMetadata, OAuthClientInformationMixed, OAuthTokens } from "@modelcontextprotocol/sdk/shared/auth.js";
import { LATEST_PROTOCOL_VERSION, type Tool } from "@modelcontextprotocol/sdk/types.js";
import { expandTemplates, HEADER_NAME_PATTERN, headerVariables, literalSecretProblem, MAX_HEADER_VARIABLES, reservedHeaderProblem, templateProblem } from "../../../src/config/templates.ts";

export type Fault = {
  method?: string;
  /** Matches the request path (a string matches a prefix). */
  path: string | RegExp;
  /**
   * status: answer with this status and an error body, changing nothing.
   * drop: close the connection before doing anything.
   * drop_after: do the work, then close the connection instead of answering (a lost answer).
   * delay: wait `ms` (or until `until` settles), then answer normally.
   * body: answer `status` (default 200) with `body`, changing nothing (a broken deployment).
   */
  kind: "status" | "drop" | "drop_after" | "delay" | "body";
  status?: number;
  body?: unknown;
  ms?: number;
  /** For a delay: the request is held until this settles (a test that acts meanwhile, at its own pace). */
  until?: Promise<unknown>;
  /** How many matching requests it affects (default 1). */
  times?: number;
};

/**
 * The authorization server a credential came from (section 4: tokens are bound to it). It is
 * refreshed and revoked there, and its tokens are sent to no other.
 */
export type IssuedBy = {
  /** The authorization server URL discovery used (what the resource metadata named). */
  authorizationServerUrl: string;
  metadata?: AuthorizationServerMetadata;
  client: OAuthClientInformationMixed;
  /** The RFC 8707 resource the tokens were issued for. */
  resource?: string;
  /** The protected resource metadata URL the MCP server's challenge named, if it named one. */
  resourceMetadataUrl?: string;
};

export type Credential = {
  url: string;
  tokens: OAuthTokens;
  authorizedAt: number;
  expiresAt: number | null;
  /** Absent for a credential a test put in directly: it cannot be refreshed or revoked. */
  issuedBy?: IssuedBy;
};

type Declared = {
  id: string;
  url: string;
  prefix_tools: boolean;
  oauth?: { client_id?: string; client_metadata_url?: string; scopes?: string[] };
  /** Section 3.2: header templates, as PUT; absent when none (`{}` is none). */
  headers?: Record<string, string>;
};
/** Section 3.12: a value handed over for a variable a connection's headers name, bound to the url it was handed over for. */
export type HeldValue = { value: string; url: string; setAt: number };
type Agent = { name: string; mcp: Array<{ id: string; tools?: Record<string, unknown> }>; tools: string[]; agents: string[] };
type Authorization = {
  id: string;
  connectionId: string;
  url: string;
  state: string;
  status: "pending" | "authorized" | "failed" | "expired";
  error?: string;
  message?: string;
  expiresAt: number;
  /** What discovery found at the start: the code goes to this server's token endpoint, and `iss` must name it. */
  server: OAuthServerInfo;
  resourceMetadataUrl?: URL;
  client?: OAuthClientInformationMixed;
  codeVerifier?: string;
  /** A callback brought a code: one code per authorization (section 4), never exchanged twice. */
  codeReceived: boolean;
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
  /**
   * The deployment's clock in ms (default Date.now). It times authorizations and access tokens,
   * so a test moves it instead of waiting.
   */
  now?: () => number;
  /** "v1": a deployment from before PUT /v1/state (section 3.10), which answers it 404 as any unknown endpoint. */
  protocol?: "v1";
};

export type RunningDeployment = {
  url: string;
  /** The redirect URI it authorizes with; an operator registers it with pre-registered clients (section 3.2). */
  redirectUri: string;
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

/** The reference's own view: what it holds beyond the shape every test deployment has. */
export type ReferenceDeployment = RunningDeployment & {
  /** Section 3.12: the values handed over, per connection id, per variable name. */
  headerValues: Map<string, Map<string, HeldValue>>;
};

/** Section 1: a connection id or agent name is one path segment that follows the file's rule. */
const ID = /^[a-z0-9_-]+$/;
const validId = (s: string) => ID.test(s) && !s.includes("__");
const IdSchema = z.string().refine(validId, "not a valid connection id");
const LOOPBACK = ["127.0.0.1", "localhost", "[::1]"];

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
  headers: z.record(z.string(), z.string()).optional(),
});
const agentFields = {
  mcp: z.array(z.strictObject({ id: IdSchema, tools: FilterSchema.optional() })),
  tools: z.array(z.string()).default([]),
  agents: z.array(z.string()).default([]),
};
const AgentBodySchema = z.strictObject(agentFields);
/** Section 3.10: the whole declared state. */
const StateBodySchema = z.strictObject({
  connections: z.array(z.strictObject({ id: IdSchema, ...ConnectionBodySchema.shape })),
  agents: z.array(z.strictObject({ name: IdSchema, ...agentFields })),
  prune: z.boolean(),
  revision: z.string().min(1).optional(),
});
/** Section 3.2's limits on `headers`, and section 3.12's on a value (RFC 9110 section 5.5: no control character but a tab). */
const MAX_HEADERS = 32;
const MAX_VALUE_BYTES = 8 * 1024;
const CONTROL = /[\u0000-\u0008\u000a-\u001f\u007f]/;
/**
 * Section 3.2: why `headers` cannot be declared, or undefined; the rules of the file's own
 * `headers` (src/config/templates.ts). Never quotes a value: a literal secret is what it refuses.
 */
const headersProblem = (headers: Record<string, string> | undefined): string | undefined => {
  if (!headers) return undefined;
  const names = Object.keys(headers);
  if (names.length > MAX_HEADERS) return `headers: at most ${MAX_HEADERS}`;
  if (headerVariables(headers).length > MAX_HEADER_VARIABLES) return `headers: they name more than ${MAX_HEADER_VARIABLES} variables`;
  const seen = new Set<string>();
  for (const name of names) {
    const value = headers[name]!;
    if (!HEADER_NAME_PATTERN.test(name)) return `headers: ${JSON.stringify(name)} is not a header name (an RFC 9110 token)`;
    const reserved = reservedHeaderProblem(name);
    if (reserved) return `headers: ${reserved.message}`;
    if (seen.has(name.toLowerCase())) return `headers: two names differ only in case (${name})`;
    seen.add(name.toLowerCase());
    if (Buffer.byteLength(value, "utf8") > MAX_VALUE_BYTES) return `headers: the value of ${name} is longer than 8 KiB`;
    if (CONTROL.test(value)) return `headers: the value of ${name} holds a control character`;
    const template = templateProblem(value);
    if (template) return `headers: ${name} ${template}`;
    const literal = literalSecretProblem(name, value);
    if (literal) return `headers: a literal value in ${name}, whose name says it holds a credential: hand the value over (PUT /v1/mcp/{id}/secrets/{name}) and declare a \${NAME} template`;
  }
  return undefined;
};
/** Absent, `{}`: none (section 3.2). */
const headersOf = (headers: Record<string, string> | undefined) => (headers && Object.keys(headers).length ? { headers } : {});
/** Two declarations alike, their headers compared as sets of names and values (section 8). */
const sameDeclared = (a: Declared | undefined, b: Declared) => {
  const canonical = (d: Declared) => JSON.stringify({ ...d, headers: d.headers ? Object.entries(d.headers).sort(([x], [y]) => (x < y ? -1 : 1)) : null });
  return a !== undefined && canonical(a) === canonical(b);
};
const SecretBodySchema = z.strictObject({ value: z.string() });

const hasLocalOnlyField = (body: unknown) => {
  const fields = body && typeof body === "object" ? (body as Record<string, unknown>) : undefined;
  const oauth = fields?.oauth && typeof fields.oauth === "object" ? (fields.oauth as object) : undefined;
  return fields !== undefined && ("auth" in fields || (oauth !== undefined && ("client_secret_env" in oauth || "client_secret" in oauth)));
};

/** An error answer decided deep in a handler (section 6). */
class Refusal extends Error {
  constructor(
    readonly status: number,
    readonly code: string,
    message: string,
  ) {
    super(message);
  }
}

const messageOf = (error: unknown) => (error instanceof Error ? error.message : String(error));
/** Section 3.5: an OAuth `error` code passed on as is only when RFC 6749 section 5.2 allows its characters. */
const oauthCode = (code: string) => (/^[\x20\x21\x23-\x5b\x5d-\x7e]{1,64}$/.test(code) ? code : "invalid_error_code");
/**
 * Section 6: what a foreign server said, as a summary and never its answer: one line, control
 * characters made visible, scrubbed of the exchange's `secrets`, cut short.
 */
const summaryOf = (text: string, secrets: Array<string | undefined> = []) => {
  let line = text.replace(/\s+/g, " ").trim().replace(/[\u0000-\u001f\u007f-\u009f]/g, (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, "0")}`);
  for (const secret of secrets) if (secret) line = line.split(secret).join("[redacted]");
  return line.length > 200 ? `${line.slice(0, 199)}…` : line;
};
/** A failed exchange with a server: its OAuth error code and description, or its HTTP status, never the body it sent. */
const problemOf = (error: unknown, secrets: Array<string | undefined> = []) => {
  if (error instanceof ServerError) return /^HTTP \d{3}/.exec(error.message)?.[0] ?? "server_error";
  if (error instanceof OAuthError) return summaryOf(`${oauthCode(error.errorCode)}: ${error.message}`, secrets);
  if (error instanceof StreamableHTTPError) return `HTTP ${error.code}`;
  return summaryOf(messageOf(error), secrets);
};
/** Two authorization server URLs name the same server (a trailing `/` aside, as the SDK spells them). */
const sameServer = (a: string, b: string) => {
  const plain = (u: string) => (URL.canParse(u) ? new URL(u).href : u).replace(/\/$/, "");
  return plain(a) === plain(b);
};

export async function startDeployment(options: DeploymentOptions): Promise<ReferenceDeployment> {
  const now = options.now ?? Date.now;
  const requests: string[] = [];
  const connections = new Map<string, Declared>();
  const agents = new Map<string, Agent>();
  const credentials = new Map<string, Credential>();
  const headerValues = new Map<string, Map<string, HeldValue>>();
  const authorizations = new Map<string, Authorization>();
  /** Dynamic client registrations, per authorization server (reused across authorizations, section 4). */
  const registrations = new Map<string, OAuthClientInformationMixed>();
  /** Refreshes in flight, per credential: concurrent requests share one (refresh tokens rotate). */
  const refreshes = new Map<Credential, Promise<Credential | undefined>>();
  let faults: Fault[] = [];
  /** Section 3.10: changes with every write of a declaration; v1 alone has none. */
  let revision = 0;
  const bump = () => void revision++;
  const withRevision = <T extends object>(body: T) => (options.protocol === "v1" ? body : { ...body, revision: String(revision) });
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

  /**
   * Catalog mode: a connection declared before its url left the catalog (a test puts one in
   * `connections` directly) is used nowhere: no consent, no tools, no refresh, no revocation.
   */
  const inCatalog = (url: string) => !options.catalog || options.catalog.includes(url);
  const notInCatalog = (res: Response, c: Declared) =>
    fail(res, 403, "url_not_in_catalog", `${c.id}: ${c.url} is not in this deployment's catalog`, { catalog: options.catalog });

  /** Section 3.12: the values held for `c`'s variables, for its current url, by name. */
  const valuesFor = (c: Declared): Map<string, HeldValue> => {
    const held = new Map<string, HeldValue>();
    for (const name of headerVariables(c.headers ?? {})) {
      const v = headerValues.get(c.id)?.get(name);
      if (v && v.url === c.url) held.set(name, v);
    }
    return held;
  };

  /**
   * Section 2: `authorized` only with what it would use: a credential for the url, or, when the
   * headers name variables, a value for every one (section 3.12: without one, it sends nothing,
   * whatever credential it holds). `refused` outside the catalog.
   */
  const connectionJson = (c: Declared) => {
    const credential = credentials.get(c.id);
    const variables = headerVariables(c.headers ?? {});
    const values = valuesFor(c);
    const oauthHeld = credential !== undefined && credential.url === c.url && inCatalog(c.url);
    const held = variables.length > 0 ? values.size === variables.length && inCatalog(c.url) : oauthHeld;
    const setAt = Math.max(0, ...[...values.values()].map((v) => v.setAt));
    const authorizedAt = variables.length > 0 ? setAt : credential?.authorizedAt;
    return {
      id: c.id,
      url: c.url,
      prefix_tools: c.prefix_tools,
      ...(c.oauth ? { oauth: c.oauth } : {}),
      ...(c.headers ? { headers: c.headers } : {}),
      ...(variables.length
        ? { secrets: variables.map((name) => ({ name, held: values.has(name), ...(values.has(name) ? { set_at: new Date(values.get(name)!.setAt).toISOString() } : {}) })) }
        : {}),
      status: held ? "authorized" : "declared",
      ...(held && authorizedAt !== undefined ? { authorized_at: new Date(authorizedAt).toISOString() } : {}),
      ...(held && oauthHeld && credential.expiresAt ? { expires_at: new Date(credential.expiresAt).toISOString() } : {}),
      ...(inCatalog(c.url) ? {} : { refused: { error: "url_not_in_catalog", message: `${c.id}: ${c.url} is not in this deployment's catalog` } }),
    };
  };

  /** Section 5: a value of a variable the headers no longer name, or handed over for another url, goes. */
  const keepNamedValues = (c: Declared) => {
    const held = headerValues.get(c.id);
    if (!held) return;
    const named = new Set(headerVariables(c.headers ?? {}));
    for (const [name, v] of held) if (!named.has(name) || v.url !== c.url) held.delete(name);
    if (held.size === 0) headerValues.delete(c.id);
  };

  const endPending = (id: string, error: string, message: string) => {
    for (const a of authorizations.values()) {
      if (a.connectionId === id && a.status === "pending") Object.assign(a, { status: "failed", error, message });
    }
  };

  const expireIfDue = (a: Authorization) => {
    if (a.status === "pending" && now() >= a.expiresAt) {
      Object.assign(a, { status: "expired", message: `nobody consented within ${options.authorizationTtl ?? 600}s` });
    }
  };

  /** RFC 7009 at the server that issued it, best effort: a failed revocation fails nothing (section 5). */
  const revoke = async (credential: Credential) => {
    if (!inCatalog(credential.url)) return;
    const endpoint = (credential.issuedBy?.metadata as { revocation_endpoint?: string } | undefined)?.revocation_endpoint;
    if (!endpoint) return;
    for (const [token, hint] of [[credential.tokens.refresh_token, "refresh_token"], [credential.tokens.access_token, "access_token"]] as const) {
      if (!token) continue;
      const form = new URLSearchParams({ token, token_type_hint: hint, client_id: credential.issuedBy!.client.client_id });
      await fetch(endpoint, { method: "POST", body: form, signal: AbortSignal.timeout(5000) }).catch(() => {});
    }
  };

  /**
   * Section 5: a url change or a DELETE drops the credential and ends pending consents at once,
   * before anything is awaited (a callback arriving meanwhile finds them ended); the revocation follows.
   */
  const dropCredential = (id: string, reason: string): Promise<void> => {
    const credential = credentials.get(id);
    credentials.delete(id);
    headerValues.delete(id);
    endPending(id, "connection_changed", reason);
    return credential ? revoke(credential) : Promise.resolve();
  };

  /**
   * The MCP server's answer to an unauthenticated request (section 4, as the MCP authorization
   * spec starts): its 401 challenge may name the scope to ask for and the resource metadata.
   */
  const challengeOf = async (url: string): Promise<{ scope?: string; resourceMetadataUrl?: URL }> => {
    try {
      const res = await fetch(url, {
        method: "POST",
        headers: { "content-type": "application/json", accept: "application/json, text/event-stream" },
        body: JSON.stringify({
          jsonrpc: "2.0",
          id: 1,
          method: "initialize",
          params: { protocolVersion: LATEST_PROTOCOL_VERSION, capabilities: {}, clientInfo: { name: "subs-test-deployment", version: "1.0.0" } },
        }),
        redirect: "manual",
        signal: AbortSignal.timeout(5000),
      });
      await res.body?.cancel();
      return res.status === 401 ? extractWWWAuthenticateParams(res) : {};
    } catch {
      return {}; // discovery reports what is wrong with the server
    }
  };

  /** The OAuth client side of one authorization, for the SDK's auth(). */
  const provider = (a: Authorization, connection: Declared, onRedirect: (url: URL) => void): OAuthClientProvider => {
    const server = a.server.authorizationServerUrl;
    const preRegistered = connection.oauth?.client_id;
    // Section 3.2: client_id wins over client_metadata_url. A metadata document is used where the
    // authorization server accepts them, as `subs` does for local logins (docs/oauth.md).
    const metadataDocument = preRegistered ? undefined : connection.oauth?.client_metadata_url;
    const usesMetadataDocument = metadataDocument !== undefined && a.server.authorizationServerMetadata?.client_id_metadata_document_supported === true;
    return {
      redirectUrl: redirectUri,
      clientMetadata: {
        client_name: "subs test deployment",
        redirect_uris: [redirectUri],
        grant_types: ["authorization_code", "refresh_token"],
        response_types: ["code"],
        token_endpoint_auth_method: "none",
      },
      ...(metadataDocument ? { clientMetadataUrl: metadataDocument } : {}),
      state: () => a.state,
      clientInformation: () => {
        // Section 4: the declaration's client takes precedence over the deployment's own registration.
        a.client ??= preRegistered ? { client_id: preRegistered } : usesMetadataDocument ? undefined : registrations.get(server);
        return a.client;
      },
      saveClientInformation: (info) => {
        a.client = info;
        if (!preRegistered && info.client_id !== metadataDocument) registrations.set(server, info);
      },
      tokens: () => undefined,
      saveTokens: () => {},
      redirectToAuthorization: onRedirect,
      saveCodeVerifier: (verifier) => {
        a.codeVerifier = verifier;
      },
      codeVerifier: () => {
        if (!a.codeVerifier) throw new Error("no code verifier");
        return a.codeVerifier;
      },
      // Discovery already ran (with the challenge's metadata URL): the SDK reuses it.
      discoveryState: () => ({ ...a.server, ...(a.resourceMetadataUrl ? { resourceMetadataUrl: a.resourceMetadataUrl.href } : {}) }),
    };
  };

  /** Section 3.4 / 4: discovery, client, scopes, PKCE and state; the browser's URL and the pending authorization. */
  const startConsent = async (connection: Declared): Promise<{ authorization: Authorization; authorizationUrl: URL }> => {
    const challenge = await challengeOf(connection.url);
    const server = await discoverOAuthServerInfo(connection.url, challenge.resourceMetadataUrl ? { resourceMetadataUrl: challenge.resourceMetadataUrl } : undefined);
    const a: Authorization = {
      id: randomUUID(),
      connectionId: connection.id,
      url: connection.url,
      state: randomBytes(24).toString("base64url"),
      status: "pending",
      expiresAt: now() + (options.authorizationTtl ?? 600) * 1000,
      server,
      ...(challenge.resourceMetadataUrl ? { resourceMetadataUrl: challenge.resourceMetadataUrl } : {}),
      codeReceived: false,
    };
    // Section 4: the declaration's scopes exactly when set and not empty; else the challenge's
    // scope; else (the SDK's next steps) the resource metadata's scopes_supported; else none.
    const scopes = connection.oauth?.scopes;
    const scope = scopes?.length ? scopes.join(" ") : challenge.scope;
    let authorizationUrl: URL | undefined;
    await auth(
      provider(a, connection, (url) => void (authorizationUrl = url)),
      { serverUrl: connection.url, ...(scope ? { scope } : {}), ...(challenge.resourceMetadataUrl ? { resourceMetadataUrl: challenge.resourceMetadataUrl } : {}) },
    );
    if (!authorizationUrl) throw new Error("the authorization server gave no authorization URL");
    return { authorization: a, authorizationUrl };
  };

  // The OAuth redirect target: the person's browser lands here after consent. Not part of the
  // protocol (section 4: "its own redirect URI"); what it does with odd callbacks is section 3.5.
  app.get("/oauth/callback", async (req, res) => {
    const page = (status: number, text: string) => res.status(status).type("text/plain").send(text);
    const param = (name: string) => (typeof req.query[name] === "string" ? (req.query[name] as string) : undefined);
    const state = param("state");
    const a = state === undefined ? undefined : [...authorizations.values()].find((x) => x.state === state);
    if (a) expireIfDue(a);
    // A forged, late, expired or second callback changes nothing, and its code is not exchanged.
    if (!a || a.status !== "pending" || a.codeReceived) return page(400, "Unknown or finished authorization.");
    const error = param("error");
    // Whoever reaches the redirect URI chooses its parameters: the code checked, the description a summary.
    const secrets = [state, param("code"), a.codeVerifier, a.client?.client_secret];
    if (error !== undefined) {
      const code = oauthCode(error);
      const description = param("error_description");
      Object.assign(a, { status: "failed", error: code, message: description ? summaryOf(description, secrets) : `the authorization server answered ${code}` });
      return page(200, "Authorization failed. You can close this window.");
    }
    // RFC 9207: the response names the issuer the authorization started with, or none when that
    // server does not say it sends one.
    const issuer = a.server.authorizationServerMetadata?.issuer ?? a.server.authorizationServerUrl;
    const iss = param("iss");
    // RFC 9207 metadata; the OpenID variant of the SDK's type does not list it.
    const issPromised = (a.server.authorizationServerMetadata as { authorization_response_iss_parameter_supported?: boolean } | undefined)?.authorization_response_iss_parameter_supported === true;
    if (iss !== undefined ? iss !== issuer : issPromised) {
      const message = iss === undefined ? `the authorization response has no iss, although ${issuer} says it sends one` : `the authorization response names issuer ${iss}, not ${issuer}`;
      Object.assign(a, { status: "failed", error: "upstream_error", message });
      return page(400, "The authorization response came from another issuer. You can close this window.");
    }
    const connection = connections.get(a.connectionId);
    if (!connection || connection.url !== a.url) {
      Object.assign(a, { status: "failed", error: "connection_changed", message: "the connection changed during consent" });
      return page(409, "The connection changed; start again.");
    }
    if (!inCatalog(connection.url)) {
      Object.assign(a, { status: "failed", error: "url_not_in_catalog", message: `${connection.id}: ${connection.url} is not in this deployment's catalog` });
      return page(403, "This connection's URL is not in the deployment's catalog.");
    }
    a.codeReceived = true;
    let tokens: OAuthTokens;
    try {
      if (!a.client || !a.codeVerifier) throw new Error("the authorization was not started");
      // Not auth(): it exchanges a code again after an invalid_grant.
      tokens = await exchangeAuthorization(a.server.authorizationServerUrl, {
        ...(a.server.authorizationServerMetadata ? { metadata: a.server.authorizationServerMetadata } : {}),
        clientInformation: a.client,
        authorizationCode: param("code") ?? "",
        codeVerifier: a.codeVerifier,
        redirectUri,
        ...(a.server.resourceMetadata ? { resource: a.server.resourceMetadata.resource } : {}),
      });
    } catch (error) {
      if (a.status === "pending") Object.assign(a, { status: "failed", error: "token_exchange_failed", message: problemOf(error, secrets) });
      return page(502, "Authorization failed.");
    }
    // Superseded, deleted or moved to another url while the code was exchanged (sections 3.4, 5).
    const current = connections.get(a.connectionId);
    if (a.status === "pending" && (!current || current.url !== a.url)) {
      Object.assign(a, { status: "failed", error: "connection_changed", message: "the connection changed during consent" });
    }
    if (a.status !== "pending") return page(409, "This authorization ended meanwhile; start again.");
    const at = now();
    credentials.set(a.connectionId, {
      url: a.url,
      tokens,
      authorizedAt: at,
      expiresAt: tokens.expires_in !== undefined ? at + tokens.expires_in * 1000 : null,
      issuedBy: {
        authorizationServerUrl: a.server.authorizationServerUrl,
        ...(a.server.authorizationServerMetadata ? { metadata: a.server.authorizationServerMetadata } : {}),
        client: a.client,
        ...(a.server.resourceMetadata ? { resource: a.server.resourceMetadata.resource } : {}),
        ...(a.resourceMetadataUrl ? { resourceMetadataUrl: a.resourceMetadataUrl.href } : {}),
      },
    });
    a.status = "authorized";
    page(200, "Authorized. You can close this window.");
  });

  /** Section 3.6: whether the MCP server's resource metadata now names another authorization server. */
  const authorizationServerMoved = async (url: string, issuedBy: IssuedBy): Promise<boolean> => {
    try {
      const metadata = await discoverOAuthProtectedResourceMetadata(url, issuedBy.resourceMetadataUrl ? { resourceMetadataUrl: issuedBy.resourceMetadataUrl } : undefined);
      const named = metadata.authorization_servers?.[0];
      return named !== undefined && !sameServer(named, issuedBy.authorizationServerUrl);
    } catch {
      return false; // no metadata now names any server: the one that issued it stays the one
    }
  };

  /**
   * One refresh at the server that issued the credential; undefined when it cannot be refreshed
   * (no refresh token, refused with invalid_grant, or its server is no longer the MCP server's).
   */
  const refreshOnce = async (id: string, credential: Credential): Promise<Credential | undefined> => {
    const { issuedBy } = credential;
    const refreshToken = credential.tokens.refresh_token;
    if (!issuedBy || !refreshToken) return undefined;
    // Section 3.6: never send the credential's tokens to an authorization server it did not come from.
    if (await authorizationServerMoved(credential.url, issuedBy)) return undefined;
    let tokens: OAuthTokens;
    try {
      tokens = await refreshAuthorization(issuedBy.authorizationServerUrl, {
        ...(issuedBy.metadata ? { metadata: issuedBy.metadata } : {}),
        clientInformation: issuedBy.client,
        refreshToken,
        ...(issuedBy.resource ? { resource: issuedBy.resource } : {}),
      });
    } catch (error) {
      if (error instanceof InvalidGrantError) return undefined;
      throw new Refusal(502, "upstream_error", `refreshing the credential of ${id} failed: ${problemOf(error, [refreshToken, issuedBy.client.client_secret])}`);
    }
    const at = now();
    const refreshed: Credential = { ...credential, tokens, expiresAt: tokens.expires_in !== undefined ? at + tokens.expires_in * 1000 : null };
    // A DELETE, a url change or a new consent meanwhile wins over this refresh.
    if (credentials.get(id) !== credential) return undefined;
    credentials.set(id, refreshed);
    return refreshed;
  };
  const refresh = (id: string, credential: Credential): Promise<Credential | undefined> => {
    let pending = refreshes.get(credential);
    if (!pending) {
      pending = refreshOnce(id, credential).finally(() => refreshes.delete(credential));
      refreshes.set(credential, pending);
    }
    return pending;
  };

  type Listing = { tools: Tool[] } | { refused: 401 } | { refused: 403; scope: string | undefined };
  /**
   * tools/list to the end of its pages, with this access token (none: the headers alone, section
   * 3.12) and the connection's headers, filled. `values`: what filled them, scrubbed from errors.
   */
  const listTools = async (url: string, accessToken: string | undefined, headers: Record<string, string> = {}, values: string[] = []): Promise<Listing> => {
    // The SDK reports a refusal by status only; the challenge names the scope (RFC 6750 section 3).
    let challenge: { scope?: string; error?: string } = {};
    const recording: typeof fetch = async (input, init) => {
      // Section 3.12: a held value goes to the connection's url, never where a redirect points.
      const res = await fetch(input, values.length ? { ...init, redirect: "error" } : init);
      if (res.status === 401 || res.status === 403) challenge = extractWWWAuthenticateParams(res);
      return res;
    };
    const client = new Client({ name: "subs-test-deployment", version: "1.0.0" });
    try {
      const sent = { ...headers, ...(accessToken ? { authorization: `Bearer ${accessToken}` } : {}) };
      await client.connect(new StreamableHTTPClientTransport(new URL(url), { fetch: recording, requestInit: { headers: sent } }));
      const tools: Tool[] = [];
      let cursor: string | undefined;
      do {
        const page = await client.listTools(cursor ? { cursor } : {});
        tools.push(...page.tools);
        cursor = page.nextCursor;
      } while (cursor);
      return { tools };
    } catch (error) {
      const status = error instanceof StreamableHTTPError ? error.code : (error as { code?: unknown }).code;
      if (status === 401 || error instanceof UnauthorizedError) return { refused: 401 };
      if (status === 403 && challenge.error === "insufficient_scope") return { refused: 403, scope: challenge.scope };
      throw new Refusal(502, "upstream_error", `${url}: ${problemOf(error, [accessToken, ...values])}`);
    } finally {
      await client.close().catch(() => {});
    }
  };

  /** Section 3.6: the connection's tools with the deployment's own credential, refreshed when needed. */
  const toolsOf = async (connection: Declared): Promise<Tool[]> => {
    const { id } = connection;
    const notAuthorized = (why: string) => new Refusal(409, "not_authorized", `${id}: ${why}; run \`subs mcp login ${id}\``);
    // A credential the MCP server refuses and that cannot be refreshed is not one the deployment
    // "can use or refresh" (section 2, `status`): it goes, and the connection reads `declared`.
    const unusable = (credential: Credential, why: string) => {
      if (credentials.get(id) === credential) credentials.delete(id);
      return notAuthorized(why);
    };
    // Section 3.12: the headers filled from the values held for this url alone, never from the
    // deployment's own environment; one missing, nothing is sent.
    const variables = headerVariables(connection.headers ?? {});
    const values = valuesFor(connection);
    const unheld = variables.filter((name) => !values.has(name));
    if (unheld.length) throw notAuthorized(`the deployment holds no value for ${unheld.join(", ")}`);
    const filled = Object.fromEntries([...values].map(([name, v]) => [name, v.value]));
    const headers = Object.fromEntries(Object.entries(connection.headers ?? {}).map(([name, template]) => [name, expandTemplates(template, filled, new Set())]));
    const sentValues = [...values.values()].map((v) => v.value);
    let credential = credentials.get(id);
    if (!credential || credential.url !== connection.url) {
      if (variables.length === 0) throw notAuthorized("the deployment holds no credential for it");
      // The headers alone: no OAuth credential is held (section 3.12).
      const listing = await listTools(connection.url, undefined, headers, sentValues);
      if ("tools" in listing) return listing.tools;
      throw notAuthorized(`${connection.url} refused the request with the values held for ${variables.join(", ")}`);
    }
    let refreshed = false;
    if (credential.expiresAt !== null && now() >= credential.expiresAt) {
      const fresh = await refresh(id, credential);
      if (!fresh) throw unusable(credential, "its access token expired and could not be refreshed");
      [credential, refreshed] = [fresh, true];
    }
    let listing = await listTools(connection.url, credential.tokens.access_token, headers, sentValues);
    if ("refused" in listing && listing.refused === 401 && !refreshed) {
      // Refused before its expiry: refresh once, retry once.
      const fresh = await refresh(id, credential);
      if (!fresh) throw unusable(credential, `${connection.url} refused the credential and it could not be refreshed`);
      credential = fresh;
      listing = await listTools(connection.url, credential.tokens.access_token, headers, sentValues);
    }
    if ("tools" in listing) return listing.tools;
    // The credential still holds its other scopes: kept (the fix is oauth.scopes and a new login).
    if (listing.refused === 403) throw notAuthorized(`${connection.url} needs scope ${listing.scope ?? "(not named)"}; add it to oauth.scopes`);
    throw unusable(credential, `${connection.url} refused the refreshed credential`);
  };

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
    if (fault.kind === "delay") await (fault.until ?? new Promise((r) => setTimeout(r, fault.ms ?? 100)));
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

  v1.get("/mcp", (_req, res) => {
    const listed = [...connections.values()].map(connectionJson);
    // Section 3.1: the catalog goes with the refusals it explains.
    send(res, 200, withRevision({ connections: listed, ...(listed.some((c) => c.refused) ? { catalog: options.catalog } : {}) }));
  });

  v1.put("/mcp/:id", async (req, res) => {
    const id = req.params.id;
    const body = req.body as Record<string, unknown> | undefined;
    if (hasLocalOnlyField(body)) {
      return fail(res, 400, "local_only_field", "`auth`, `oauth.client_secret_env` and `oauth.client_secret` belong to the client's machine; authorize on the deployment instead");
    }
    const parsed = ConnectionBodySchema.safeParse(body);
    if (!parsed.success) return fail(res, 400, "invalid_request", parsed.error.issues[0]?.message ?? "invalid body");
    const target = new URL(parsed.data.url);
    if (target.protocol === "http:" && !LOOPBACK.includes(target.hostname)) {
      return fail(res, 400, "invalid_request", "url must be https (plain http only to a loopback host)");
    }
    const headersRefused = headersProblem(parsed.data.headers);
    if (headersRefused) return fail(res, 400, "invalid_request", headersRefused);
    if (options.catalog && !options.catalog.includes(parsed.data.url)) {
      return fail(res, 403, "url_not_in_catalog", `${parsed.data.url} is not in this deployment's catalog`, { catalog: options.catalog });
    }
    const existing = connections.get(id);
    const declared: Declared = {
      id,
      url: parsed.data.url,
      prefix_tools: parsed.data.prefix_tools,
      ...(parsed.data.oauth ? { oauth: parsed.data.oauth } : {}),
      ...headersOf(parsed.data.headers),
    };
    connections.set(id, declared);
    bump();
    keepNamedValues(declared);
    if (existing && existing.url !== declared.url) await dropCredential(id, "the connection's url changed");
    send(res, existing ? 200 : 201, connectionJson(declared));
  });

  v1.delete("/mcp/:id", async (req, res) => {
    const id = req.params.id;
    const users = [...agents.values()].filter((a) => a.mcp.some((e) => e.id === id)).map((a) => a.name);
    if (users.length) return fail(res, 409, "connection_in_use", `agents ${users.join(", ")} name ${id}`, { agents: users });
    if (!connections.has(id)) return fail(res, 404, "not_found", `no connection ${id}`);
    connections.delete(id);
    bump();
    await dropCredential(id, "the connection was deleted");
    send(res, 204);
  });

  // Section 3.12. The reference has one API token, which may do everything: any token that may
  // start a consent may hand a value over. No answer, and no error message, quotes the value.
  v1.put("/mcp/:id/secrets/:variable", (req, res) => {
    const { id, variable } = req.params as { id: string; variable: string };
    const connection = connections.get(id);
    if (!connection) return fail(res, 404, "not_found", `no connection ${id}`);
    const parsed = SecretBodySchema.safeParse(req.body);
    if (!parsed.success) return fail(res, 400, "invalid_request", 'the body must be {"value": string}');
    const { value } = parsed.data;
    if (value === "") return fail(res, 400, "invalid_request", "the value is empty");
    if (Buffer.byteLength(value, "utf8") > MAX_VALUE_BYTES) return fail(res, 400, "invalid_request", "the value is longer than 8 KiB");
    if (CONTROL.test(value)) return fail(res, 400, "invalid_request", "the value holds a control character other than a tab, which a header value cannot carry");
    const variables = headerVariables(connection.headers ?? {});
    if (!variables.includes(variable)) {
      const named = variables.length ? `names ${variables.map((n) => `\${${n}}`).join(", ")}` : "names no variable";
      return fail(res, 400, "unknown_variable", `${id}: its headers do not name \${${variable}}; they ${named}`);
    }
    if (!inCatalog(connection.url)) return notInCatalog(res, connection);
    const held = headerValues.get(id) ?? new Map<string, HeldValue>();
    held.set(variable, { value, url: connection.url, setAt: now() });
    headerValues.set(id, held);
    send(res, 204);
  });

  v1.delete("/mcp/:id/secrets/:variable", (req, res) => {
    const { id, variable } = req.params as { id: string; variable: string };
    const held = headerValues.get(id);
    if (!connections.has(id) || !held?.delete(variable)) return fail(res, 404, "not_found", `no value held for ${variable} of ${id}`);
    if (held.size === 0) headerValues.delete(id);
    send(res, 204);
  });

  v1.post("/mcp/:id/authorizations", async (req, res) => {
    const connection = connections.get(req.params.id);
    if (!connection) return fail(res, 404, "not_found", `no connection ${req.params.id}`);
    if (!inCatalog(connection.url)) return notInCatalog(res, connection);
    let started: Awaited<ReturnType<typeof startConsent>>;
    try {
      started = await startConsent(connection);
    } catch (error) {
      return fail(res, 502, "upstream_error", `cannot start authorization with ${connection.url}: ${problemOf(error)}`);
    }
    // Only an authorization that did start supersedes the pending one (a failed POST leaves it be).
    endPending(connection.id, "superseded", "a newer authorization was started");
    const a = started.authorization;
    authorizations.set(a.id, a);
    send(res, 201, { authorization_url: started.authorizationUrl.href, poll_url: `/v1/authorizations/${a.id}`, interval: options.pollInterval ?? 0.1, expires_in: options.authorizationTtl ?? 600 });
  });

  v1.get("/authorizations/:aid", (req, res) => {
    const a = authorizations.get(req.params.aid);
    if (!a) return fail(res, 404, "not_found", "no such authorization");
    expireIfDue(a);
    send(res, 200, { status: a.status, ...(a.error ? { error: a.error } : {}), ...(a.message && a.status !== "authorized" ? { message: a.message } : {}) });
  });

  v1.get("/mcp/:id/tools", async (req, res) => {
    const connection = connections.get(req.params.id);
    if (!connection) return fail(res, 404, "not_found", `no connection ${req.params.id}`);
    if (!inCatalog(connection.url)) return notInCatalog(res, connection);
    try {
      send(res, 200, { tools: await toolsOf(connection) });
    } catch (error) {
      if (!(error instanceof Refusal)) throw error;
      fail(res, error.status, error.code, error.message);
    }
  });

  v1.get("/agents", (_req, res) => send(res, 200, withRevision({ agents: [...agents.values()] })));

  v1.put("/agents/:name", (req, res) => {
    const name = req.params.name;
    const parsed = AgentBodySchema.safeParse(req.body);
    if (!parsed.success) return fail(res, 400, "invalid_request", parsed.error.issues[0]?.message ?? "invalid body");
    const missing = parsed.data.mcp.map((e) => e.id).filter((id) => !connections.has(id));
    if (missing.length) return fail(res, 409, "unknown_connection", `not declared: ${missing.join(", ")}`);
    const existed = agents.has(name);
    const agent: Agent = { name, ...parsed.data };
    agents.set(name, agent);
    bump();
    send(res, existed ? 200 : 201, agent);
  });

  v1.delete("/agents/:name", (req, res) => {
    if (!agents.delete(req.params.name)) return fail(res, 404, "not_found", `no agent ${req.params.name}`);
    bump();
    send(res, 204);
  });

  // Section 3.10: the whole state, checked entirely before anything changes, then applied with no
  // await in between (nothing else runs meanwhile); revocations follow.
  if (options.protocol !== "v1") {
    v1.put("/state", async (req, res) => {
      const body = req.body as { connections?: unknown } | undefined;
      if (body && typeof body === "object" && Array.isArray(body.connections) && body.connections.some(hasLocalOnlyField)) {
        return fail(res, 400, "local_only_field", "`auth`, `oauth.client_secret_env` and `oauth.client_secret` belong to the client's machine; authorize on the deployment instead");
      }
      const parsed = StateBodySchema.safeParse(body);
      if (!parsed.success) return fail(res, 400, "invalid_request", parsed.error.issues[0]?.message ?? "invalid body");
      const state = parsed.data;
      const ids = state.connections.map((c) => c.id);
      const names = state.agents.map((a) => a.name);
      if (new Set(ids).size !== ids.length || new Set(names).size !== names.length) return fail(res, 400, "invalid_request", "an id or a name appears twice");
      if (state.agents.some((a) => a.agents.includes(a.name))) return fail(res, 400, "invalid_request", "an agent names itself as a sub-agent");
      for (const c of state.connections) {
        const target = new URL(c.url);
        if (target.protocol === "http:" && !LOOPBACK.includes(target.hostname)) return fail(res, 400, "invalid_request", "url must be https (plain http only to a loopback host)");
        const headersRefused = headersProblem(c.headers);
        if (headersRefused) return fail(res, 400, "invalid_request", `${c.id}: ${headersRefused}`);
      }
      if (options.catalog && state.connections.some((c) => !options.catalog!.includes(c.url))) {
        const outside = state.connections.filter((c) => !options.catalog!.includes(c.url)).map((c) => c.url);
        return fail(res, 403, "url_not_in_catalog", `${outside.join(", ")} not in this deployment's catalog`, { catalog: options.catalog });
      }
      const kept = (id: string) => ids.includes(id) || (!state.prune && connections.has(id));
      const missing = [...new Set(state.agents.flatMap((a) => a.mcp.map((e) => e.id)))].filter((id) => !kept(id));
      if (missing.length) return fail(res, 409, "unknown_connection", `not declared: ${missing.join(", ")}`);
      const declaredOf = ({ id, ...fields }: (typeof state.connections)[number]): Declared => ({
        id,
        url: fields.url,
        prefix_tools: fields.prefix_tools,
        ...(fields.oauth ? { oauth: fields.oauth } : {}),
        ...headersOf(fields.headers),
      });
      const same = (a: unknown, b: unknown) => JSON.stringify(a) === JSON.stringify(b);
      const alreadySo =
        state.connections.every((c) => sameDeclared(connections.get(c.id), declaredOf(c))) &&
        state.agents.every(({ name, ...fields }) => same(agents.get(name), { name, ...fields })) &&
        (!state.prune || (connections.size === ids.length && agents.size === names.length));
      // A stale revision is refused only when the request would change something: the repeat of a
      // request whose answer was lost finds it all done.
      if (state.revision !== undefined && state.revision !== String(revision) && !alreadySo) {
        return fail(res, 409, "revision_changed", "the declarations changed since that revision", { revision: String(revision) });
      }

      const changes: Array<{ kind: string; id: string; action: string; credential_dropped: boolean }> = [];
      const drops: Array<[string, string]> = [];
      for (const entry of state.connections) {
        const { id } = entry;
        const existing = connections.get(id);
        const declared = declaredOf(entry);
        if (sameDeclared(existing, declared)) continue;
        const urlChanged = existing !== undefined && existing.url !== declared.url;
        changes.push({ kind: "connection", id, action: existing ? "change" : "add", credential_dropped: urlChanged && (credentials.has(id) || headerValues.has(id)) });
        connections.set(id, declared);
        if (urlChanged) drops.push([id, "the connection's url changed"]);
        else keepNamedValues(declared);
      }
      for (const { name, ...fields } of state.agents) {
        const agent: Agent = { name, ...fields };
        const existing = agents.get(name);
        if (existing && same(existing, agent)) continue;
        changes.push({ kind: "agent", id: name, action: existing ? "change" : "add", credential_dropped: false });
        agents.set(name, agent);
      }
      if (state.prune) {
        for (const name of [...agents.keys()].filter((n) => !names.includes(n))) {
          agents.delete(name);
          changes.push({ kind: "agent", id: name, action: "remove", credential_dropped: false });
        }
        for (const id of [...connections.keys()].filter((i) => !ids.includes(i))) {
          connections.delete(id);
          changes.push({ kind: "connection", id, action: "remove", credential_dropped: credentials.has(id) || headerValues.has(id) });
          drops.push([id, "the connection was deleted"]);
        }
      }
      if (changes.length) bump();
      const after = String(revision);
      // dropCredential takes the credential and ends pending consents before its first await.
      await Promise.all(drops.map(([id, why]) => dropCredential(id, why)));
      send(res, 200, { revision: after, connections: [...connections.values()].map(connectionJson), agents: [...agents.values()], changes });
    });
  }

  v1.use((_req: Request, res: Response) => fail(res, 404, "not_found", "no such endpoint"));
  // Anything unexpected is an error body, never an HTML page. What the body parser or the path
  // decoding refused (bad JSON, too large, an unknown charset, bad %-encoding) is a malformed
  // request: 400 invalid_request (section 6 has no other 4xx for it).
  v1.use((error: unknown, _req: Request, res: Response, _next: NextFunction) => {
    const status = (error as { status?: number }).status ?? 500;
    if (status >= 400 && status < 500) return fail(res, 400, "invalid_request", messageOf(error));
    fail(res, 500, "internal_error", "the deployment failed");
  });
  app.use("/v1", v1);

  return {
    url: base,
    redirectUri,
    requests,
    connections,
    agents,
    credentials,
    headerValues,
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
