// A real OAuth 2.1 authorization server on loopback for tests, built from the SDK's server pieces
// (its authorize, token, registration and revocation handlers) around an in-memory provider.
// Consent is automatic by default: the authorization endpoint redirects straight back with a code,
// as a person clicking "Allow" would; `consent: "page"` shows a real consent page instead (the
// offline demo, `npm run demo`). Knobs make it misbehave in the ways a client must notice.
import { randomBytes } from "node:crypto";
import type { Server as HttpServer } from "node:http";
import type { AddressInfo } from "node:net";
import express, { type Response } from "express";
import { authorizationHandler } from "@modelcontextprotocol/sdk/server/auth/handlers/authorize.js";
import { clientRegistrationHandler } from "@modelcontextprotocol/sdk/server/auth/handlers/register.js";
import { revocationHandler } from "@modelcontextprotocol/sdk/server/auth/handlers/revoke.js";
import { tokenHandler } from "@modelcontextprotocol/sdk/server/auth/handlers/token.js";
import { metadataHandler } from "@modelcontextprotocol/sdk/server/auth/handlers/metadata.js";
import { InvalidGrantError, InvalidTargetError, InvalidTokenError } from "@modelcontextprotocol/sdk/server/auth/errors.js";
import type { OAuthRegisteredClientsStore } from "@modelcontextprotocol/sdk/server/auth/clients.js";
import type { AuthorizationParams, OAuthServerProvider, OAuthTokenVerifier } from "@modelcontextprotocol/sdk/server/auth/provider.js";
import type { AuthInfo } from "@modelcontextprotocol/sdk/server/auth/types.js";
import type { OAuthClientInformationFull, OAuthTokenRevocationRequest, OAuthTokens } from "@modelcontextprotocol/sdk/shared/auth.js";

export type AuthServerOptions = {
  /** The issuer's path, e.g. "/tenant1" (default none: the issuer is "http://127.0.0.1:PORT/"). */
  issuerPath?: string;
  /** The `issuer` the metadata states (default: the real one). Another value: an issuer mismatch. */
  metadataIssuer?: string;
  /** Where the metadata is served: RFC 8414 (default) or OpenID discovery only. */
  discovery?: "oauth" | "openid";
  /** code_challenge_methods_supported (default ["S256"]); null leaves the field out. */
  codeChallengeMethods?: string[] | null;
  /** The authorization endpoint the metadata states (default: the real one), e.g. a plain-http non-loopback URL. */
  authorizationEndpoint?: string;
  /** `iss` in authorization responses (RFC 9207): the issuer (default), another value, or none. */
  iss?: "correct" | "wrong" | "absent";
  /** authorization_response_iss_parameter_supported (default: true unless iss is "absent"). */
  advertiseIss?: boolean;
  /** `state` in authorization responses: echoed (default), altered, or left out. */
  state?: "echo" | "wrong" | "absent";
  /**
   * Consent: the person allows at once (default) or denies; "page" answers the authorization
   * request with an HTML page whose Approve / Deny buttons post to /consent (a person clicks).
   */
  consent?: "allow" | "deny" | "page";
  scopesSupported?: string[];
  /** Scopes this server will ever grant (default: whatever is requested). */
  grantableScopes?: string[];
  /** token_endpoint_auth_methods_supported (default ["client_secret_post", "none"]). */
  tokenEndpointAuthMethods?: string[];
  /** Accept https client_ids as Client ID Metadata Documents (and advertise it). */
  clientIdMetadataDocuments?: boolean;
  /** Clients registered out of band (oauth.client_id in the file). Redirect URIs default to
   * http://127.0.0.1/callback (any port, RFC 8252 §7.3); other paths/hosts must match exactly. */
  preRegistered?: Array<{ client_id: string; client_secret?: string; redirect_uris?: string[] }>;
  /** Offer RFC 7591 registration (default true). */
  dynamicRegistration?: boolean;
  /** Offer RFC 7009 revocation (default true). */
  revocation?: boolean;
  /** Access token lifetime in seconds (default 3600). */
  accessTokenTtlSeconds?: number;
  /** The lifetime of an access token a refresh issues (default accessTokenTtlSeconds): one due once, then not again. */
  refreshedAccessTokenTtlSeconds?: number;
  /** Issue refresh tokens (default true); they rotate on every use. */
  refreshTokens?: boolean;
  /**
   * false: a refresh answers no new refresh token and the one used stays valid, as servers that do
   * not rotate them do (RFC 6749 section 6: the client then keeps the one it has). Default true.
   */
  rotateRefreshTokens?: boolean;
  /** Delay before answering a code exchange (a window to interrupt a login in its token request). */
  codeExchangeDelayMs?: number;
  /**
   * Awaited at the start of each code exchange, before the code is looked at: a test holds an
   * exchange open until it has done what must happen meanwhile (a DELETE, a newer consent).
   */
  codeExchangeHold?: () => Promise<void>;
  /** Awaited when a refresh request arrives, before it is answered: a test holds a refresh in flight. */
  refreshHold?: (refreshToken: string) => Promise<void>;
  /** Delay before answering a refresh (widens the window for refresh-race tests). */
  refreshDelayMs?: number;
  /**
   * A rotated refresh token still works this long after its first use (Okta's "grace period for
   * token rotation", Auth0's "reuse interval"): a client that died before it stored the new token
   * can try again. Default 0: a used refresh token is refused at once.
   */
  refreshReuseGraceMs?: number;
  /**
   * Called for each refresh the server grants, after it rotated the refresh token and before it
   * answers: a promise it returns holds the answer, the moment in which the client's refresh token
   * is spent and the new one not yet received (e.g. to kill the client there). `grace`: the token
   * presented was already spent, and accepted within refreshReuseGraceMs.
   */
  onRefresh?: (refresh: { token: string; grace: boolean }) => Promise<void> | undefined;
  /** false: the verifier rejects every access token (a resource server that stopped trusting them). */
  acceptAccessTokens?: boolean;
  /**
   * Compare `redirect_uri` with the registered ones exactly, port included, at the authorization
   * and the token endpoint, as many real servers do (the SDK's handler allows any loopback port,
   * RFC 8252 §7.3). The authorization endpoint answers a mismatch with a direct 400, never a redirect.
   */
  exactRedirectUris?: boolean;
  /** false: error redirects from the authorization endpoint leave `state` out (some servers do). */
  stateOnErrors?: boolean;
  /**
   * "grant": a code exchange with an unknown code is answered `invalid_grant` before the client
   * is looked at, even for a client this server does not know (servers that check the grant
   * first). Default "client": `invalid_client` for an unknown client at every endpoint.
   */
  checkFirst?: "client" | "grant";
  /**
   * Rewrites the token endpoint's answer (the tokens are issued and valid all the same), e.g. an
   * absurd `expires_in` or an empty `access_token`, to check a client refuses it.
   */
  tokenResponse?: (tokens: OAuthTokens, grant: "authorization_code" | "refresh_token") => Record<string, unknown>;
  /**
   * Rejects every refresh as `invalid_grant` (a grant revoked or expired at the server) with the
   * `error_description` this returns for the refresh token presented; undefined lets it through.
   * A hostile server's description may echo the token or carry escape sequences.
   */
  refreshRejection?: (refreshToken: string) => string | undefined;
};

/** A direct error answer (never a redirect) from the authorization, token or revocation endpoint. */
export type EndpointRejection = { endpoint: "authorize" | "token" | "revoke"; error: string; description: string | undefined; client_id: string | undefined };

export type AuthorizationRecord = {
  client_id: string;
  redirect_uri: string;
  scopes: string[];
  resource: string | undefined;
  state: string | undefined;
};

export type AuthServerCounters = {
  authorizations: number;
  codeExchanges: number;
  /** Successful refresh_token grants. */
  refreshes: number;
  /** refresh_token grants refused as invalid_grant (unknown, used or revoked token). */
  rejectedRefreshes: number;
  /** Refreshes with a token already used, accepted within refreshReuseGraceMs. */
  graceRefreshes: number;
  registrations: number;
  revocations: number;
};

export type RunningAuthServer = {
  /** The issuer identifier (what PRM's authorization_servers names). */
  issuer: string;
  /** The server's origin, e.g. http://127.0.0.1:PORT */
  url: string;
  counters: AuthServerCounters;
  /** Every authorization request, in order. */
  authorizations: AuthorizationRecord[];
  /** Every direct error answer of the authorization, token and revocation endpoints, in order. */
  rejections: EndpointRejection[];
  /** Every dynamic registration request body as sent (before the SDK's schema strips it). */
  registrationRequests: Array<Record<string, unknown>>;
  /** Token requests' `resource` values, in order. */
  tokenResources: Array<string | undefined>;
  /** Verifies access tokens for a protected MCP server (SDK OAuthTokenVerifier). */
  verifier: OAuthTokenVerifier;
  /** Every access and refresh token ever issued (to assert none leaks into output). */
  issuedTokens(): string[];
  /** Revokes every refresh token, as an administrator or the user would. */
  revokeAllRefreshTokens(): void;
  /** Forgets every access token (a restarted server): they answer 401 before their expiry. */
  forgetAccessTokens(): void;
  /**
   * A restart of a server that keeps everything in memory: every dynamically registered client,
   * code, token and pending consent is forgotten (pre-registered clients come back from its
   * configuration). Its clients then get `invalid_client` at every endpoint.
   */
  restart(): void;
  /** Changes knobs while running (e.g. stop advertising S256). */
  set(options: Partial<AuthServerOptions>): void;
  close(): Promise<void>;
};

type CodeRecord = { client_id: string; challenge: string; redirect_uri: string; scopes: string[]; resource: string | undefined };
type TokenRecord = { client_id: string; scopes: string[]; resource: string | undefined; expiresAt: number };

export async function startAuthServer(initial: AuthServerOptions = {}): Promise<RunningAuthServer> {
  const options: AuthServerOptions = { ...initial };
  const clients = new Map<string, OAuthClientInformationFull>();
  const configureClients = () => {
    clients.clear();
    for (const c of options.preRegistered ?? []) {
      clients.set(c.client_id, { client_id: c.client_id, ...(c.client_secret ? { client_secret: c.client_secret } : {}), redirect_uris: c.redirect_uris ?? ["http://127.0.0.1/callback"] });
    }
  };
  configureClients();
  const codes = new Map<string, CodeRecord>();
  const accessTokens = new Map<string, TokenRecord>();
  const refreshTokens = new Map<string, TokenRecord>();
  /** Used refresh tokens, with when they were first used (refreshReuseGraceMs). */
  const rotated = new Map<string, TokenRecord & { usedAt: number }>();
  const issued: string[] = [];
  const counters: AuthServerCounters = { authorizations: 0, codeExchanges: 0, refreshes: 0, rejectedRefreshes: 0, graceRefreshes: 0, registrations: 0, revocations: 0 };
  const authorizations: AuthorizationRecord[] = [];
  const rejections: EndpointRejection[] = [];
  const registrationRequests: Array<Record<string, unknown>> = [];
  const tokenResources: Array<string | undefined> = [];
  let issuer = "";

  const clientsStore: OAuthRegisteredClientsStore = {
    getClient(clientId) {
      const known = clients.get(clientId);
      if (known) return known;
      if (options.clientIdMetadataDocuments && clientId.startsWith("https://")) {
        // A real server fetches the document; a test on loopback cannot serve https, so the
        // document is taken as valid with a loopback redirect (any port, RFC 8252 §7.3).
        return { client_id: clientId, redirect_uris: ["http://127.0.0.1/callback"], token_endpoint_auth_method: "none" };
      }
      return undefined;
    },
    registerClient(client) {
      const full = { ...client, client_id: `dyn-${randomBytes(8).toString("hex")}`, client_id_issued_at: Math.floor(Date.now() / 1000) } as OAuthClientInformationFull;
      clients.set(full.client_id, full);
      counters.registrations++;
      return full;
    },
  };

  const issue = (record: Omit<TokenRecord, "expiresAt">, withRefreshToken = options.refreshTokens !== false, ttl = options.accessTokenTtlSeconds ?? 3600): OAuthTokens => {
    const access = `at-${randomBytes(16).toString("hex")}`;
    accessTokens.set(access, { ...record, expiresAt: Math.floor(Date.now() / 1000) + ttl });
    issued.push(access);
    const tokens: OAuthTokens = { access_token: access, token_type: "Bearer", expires_in: ttl, scope: record.scopes.join(" ") };
    if (withRefreshToken) {
      const refresh = `rt-${randomBytes(16).toString("hex")}`;
      refreshTokens.set(refresh, { ...record, expiresAt: Number.MAX_SAFE_INTEGER });
      issued.push(refresh);
      tokens.refresh_token = refresh;
    }
    return tokens;
  };

  const answerTokens = (tokens: OAuthTokens, grant: "authorization_code" | "refresh_token"): OAuthTokens =>
    options.tokenResponse ? (options.tokenResponse(tokens, grant) as OAuthTokens) : tokens;

  const pendingConsents = new Map<string, { client: OAuthClientInformationFull; params: AuthorizationParams }>();

  /** The redirect back to the client: a code when the person allowed, else access_denied. */
  const answer = (client: OAuthClientInformationFull, params: AuthorizationParams, allowed: boolean): string => {
    const resource = params.resource?.href;
    const target = new URL(params.redirectUri);
    if (!allowed) {
      target.searchParams.set("error", "access_denied");
      target.searchParams.set("error_description", "The user denied the request");
    } else {
      const code = `code-${randomBytes(12).toString("hex")}`;
      const requested = params.scopes ?? [];
      const scopes = options.grantableScopes ? requested.filter((s) => options.grantableScopes!.includes(s)) : requested;
      codes.set(code, { client_id: client.client_id, challenge: params.codeChallenge, redirect_uri: params.redirectUri, scopes, resource });
      target.searchParams.set("code", code);
    }
    const state = options.state ?? "echo";
    if (state === "echo" && params.state !== undefined) target.searchParams.set("state", params.state);
    if (state === "wrong") target.searchParams.set("state", "not-the-state-that-was-sent");
    const iss = options.iss ?? "correct";
    if (iss === "correct") target.searchParams.set("iss", issuer);
    if (iss === "wrong") target.searchParams.set("iss", "https://attacker.example/");
    return target.href;
  };

  const provider: OAuthServerProvider = {
    get clientsStore() {
      return clientsStore;
    },
    async authorize(client: OAuthClientInformationFull, params: AuthorizationParams, res: Response) {
      counters.authorizations++;
      const resource = params.resource?.href;
      authorizations.push({ client_id: client.client_id, redirect_uri: params.redirectUri, scopes: params.scopes ?? [], resource, state: params.state });
      if (options.consent === "page") {
        const request = randomBytes(16).toString("hex");
        pendingConsents.set(request, { client, params });
        res.status(200).type("html").set("cache-control", "no-store").send(consentPage(request, client, params));
        return;
      }
      res.redirect(302, answer(client, params, options.consent !== "deny"));
    },
    async challengeForAuthorizationCode(_client, code) {
      const record = codes.get(code);
      if (!record) throw new InvalidGrantError("unknown authorization code");
      return record.challenge;
    },
    async exchangeAuthorizationCode(client, code, _verifier, redirectUri, resource) {
      await options.codeExchangeHold?.();
      if (options.codeExchangeDelayMs) await new Promise((r) => setTimeout(r, options.codeExchangeDelayMs));
      const record = codes.get(code);
      codes.delete(code); // one use (OAuth 2.1 §4.1.3)
      if (!record || record.client_id !== client.client_id) throw new InvalidGrantError("invalid authorization code");
      if (redirectUri !== record.redirect_uri) throw new InvalidGrantError("redirect_uri does not match the authorization request");
      if (options.exactRedirectUris && (redirectUri === undefined || !client.redirect_uris.includes(redirectUri))) throw new InvalidGrantError("Unregistered redirect_uri");
      tokenResources.push(resource?.href);
      if (record.resource !== resource?.href) throw new InvalidTargetError("resource does not match the authorization request");
      counters.codeExchanges++;
      return answerTokens(issue({ client_id: client.client_id, scopes: record.scopes, resource: record.resource }), "authorization_code");
    },
    async exchangeRefreshToken(client, refreshToken, _scopes, resource) {
      await options.refreshHold?.(refreshToken);
      if (options.refreshDelayMs) await new Promise((r) => setTimeout(r, options.refreshDelayMs));
      const rejection = options.refreshRejection?.(refreshToken);
      if (rejection !== undefined) {
        counters.rejectedRefreshes++;
        throw new InvalidGrantError(rejection);
      }
      const spent = rotated.get(refreshToken);
      const record = refreshTokens.get(refreshToken) ?? (spent && Date.now() - spent.usedAt <= (options.refreshReuseGraceMs ?? 0) ? spent : undefined);
      if (!record || record.client_id !== client.client_id) {
        counters.rejectedRefreshes++;
        throw new InvalidGrantError("refresh token is invalid, used or revoked");
      }
      tokenResources.push(resource?.href);
      // Rotation: a refresh token works once. A server that does not rotate keeps it valid and issues none.
      const rotates = options.rotateRefreshTokens !== false;
      let grace = false;
      if (rotates) {
        grace = !refreshTokens.delete(refreshToken);
        if (!grace) rotated.set(refreshToken, { ...record, usedAt: Date.now() });
        else counters.graceRefreshes++;
      }
      counters.refreshes++;
      const tokens = issue({ client_id: client.client_id, scopes: record.scopes, resource: record.resource }, rotates, options.refreshedAccessTokenTtlSeconds ?? options.accessTokenTtlSeconds ?? 3600);
      await options.onRefresh?.({ token: refreshToken, grace });
      return answerTokens(tokens, "refresh_token");
    },
    async verifyAccessToken(token): Promise<AuthInfo> {
      const record = accessTokens.get(token);
      if (!record || options.acceptAccessTokens === false) throw new InvalidTokenError("unknown or revoked access token");
      return { token, clientId: record.client_id, scopes: record.scopes, expiresAt: record.expiresAt, ...(record.resource ? { resource: new URL(record.resource) } : {}) };
    },
    async revokeToken(_client, request: OAuthTokenRevocationRequest) {
      // RFC 7009 §2.2: a token the server never issued is answered 200 too, but nothing was revoked.
      if (refreshTokens.delete(request.token) || accessTokens.delete(request.token)) counters.revocations++;
    },
  };

  const app = express();
  // Records each endpoint's direct error answers (RFC 6749 §5.2 bodies), for tests to assert on.
  const recordRejections = (endpoint: EndpointRejection["endpoint"]) => (req: express.Request, res: Response, next: express.NextFunction) => {
    const json = res.json.bind(res);
    res.json = (body: unknown) => {
      const error = (body as { error?: unknown } | undefined)?.error;
      if (res.statusCode >= 400 && typeof error === "string") {
        const params = { ...(req.query as Record<string, unknown>), ...((req.body ?? {}) as Record<string, unknown>) };
        const description = (body as { error_description?: unknown }).error_description;
        rejections.push({ endpoint, error, description: typeof description === "string" ? description : undefined, client_id: typeof params.client_id === "string" ? params.client_id : undefined });
      }
      return json(body);
    };
    next();
  };
  // stateOnErrors: false drops `state` from every error redirect, the SDK's own included.
  const errorRedirectsWithoutState = (_req: express.Request, res: Response, next: express.NextFunction) => {
    if (options.stateOnErrors === false) {
      const redirect = res.redirect.bind(res) as (status: number, url: string) => void;
      res.redirect = ((a: number | string, b?: string | number) => {
        const [status, url] = typeof a === "number" ? [a, String(b)] : [typeof b === "number" ? b : 302, a];
        const target = new URL(url);
        if (target.searchParams.has("error")) target.searchParams.delete("state");
        redirect(status, target.href);
      }) as Response["redirect"];
    }
    next();
  };
  app.use("/authorize", recordRejections("authorize"), errorRedirectsWithoutState, express.urlencoded({ extended: false }), async (req, res, next) => {
    // exactRedirectUris: the SDK's handler would accept any loopback port; a strict server does not.
    if (!options.exactRedirectUris) return next();
    const params = (req.method === "POST" ? req.body : req.query) as Record<string, unknown>;
    const client = typeof params.client_id === "string" ? await clientsStore.getClient(params.client_id) : undefined;
    const requested = params.redirect_uri;
    if (client && typeof requested === "string" && !client.redirect_uris.includes(requested)) {
      res.set("cache-control", "no-store").status(400).json({ error: "invalid_request", error_description: "Unregistered redirect_uri" });
      return;
    }
    next();
  });
  app.use("/authorize", authorizationHandler({ provider, rateLimit: false }));
  // The consent page's form (consent: "page"): one answer per pending request.
  app.post("/consent", errorRedirectsWithoutState, express.urlencoded({ extended: false }), (req, res) => {
    const body = (req.body ?? {}) as Record<string, unknown>;
    const pending = typeof body.request === "string" ? pendingConsents.get(body.request) : undefined;
    if (!pending) return void res.status(400).type("text").send("This consent request is unknown or was already answered.\n");
    pendingConsents.delete(body.request as string);
    res.redirect(303, answer(pending.client, pending.params, body.decision === "approve"));
  });
  app.use("/token", recordRejections("token"), express.urlencoded({ extended: false }), async (req, res, next) => {
    if (options.checkFirst !== "grant") return next();
    const body = (req.body ?? {}) as Record<string, unknown>;
    if (body.grant_type === "authorization_code" && !(typeof body.code === "string" && codes.has(body.code))) {
      res.set("cache-control", "no-store").status(400).json({ error: "invalid_grant", error_description: "invalid authorization code" });
      return;
    }
    next();
  });
  app.use("/token", tokenHandler({ provider, rateLimit: false }));
  app.use("/register", (req, res, next) => {
    if (options.dynamicRegistration === false) return void res.status(404).end();
    express.json()(req, res, () => {
      if (req.body && typeof req.body === "object") registrationRequests.push({ ...req.body });
      next();
    });
  });
  app.use("/register", clientRegistrationHandler({ clientsStore, rateLimit: false, clientSecretExpirySeconds: 0 }));
  app.use("/revoke", (req, res, next) => (options.revocation === false ? void res.status(404).end() : next()));
  app.use("/revoke", recordRejections("revoke"), revocationHandler({ provider, rateLimit: false }));
  const metadata = () => {
    const origin = new URL(issuer).origin;
    return {
      issuer: options.metadataIssuer ?? issuer,
      authorization_endpoint: options.authorizationEndpoint ?? `${origin}/authorize`,
      token_endpoint: `${origin}/token`,
      ...(options.dynamicRegistration === false ? {} : { registration_endpoint: `${origin}/register` }),
      ...(options.revocation === false ? {} : { revocation_endpoint: `${origin}/revoke`, revocation_endpoint_auth_methods_supported: ["client_secret_post", "none"] }),
      response_types_supported: ["code"],
      grant_types_supported: ["authorization_code", "refresh_token"],
      token_endpoint_auth_methods_supported: options.tokenEndpointAuthMethods ?? ["client_secret_post", "none"],
      ...(options.codeChallengeMethods === null ? {} : { code_challenge_methods_supported: options.codeChallengeMethods ?? ["S256"] }),
      ...(options.scopesSupported ? { scopes_supported: options.scopesSupported } : {}),
      ...(options.clientIdMetadataDocuments ? { client_id_metadata_document_supported: true } : {}),
      authorization_response_iss_parameter_supported: options.advertiseIss ?? (options.iss ?? "correct") !== "absent",
      ...(options.discovery === "openid" ? { jwks_uri: `${origin}/jwks`, subject_types_supported: ["public"], id_token_signing_alg_values_supported: ["RS256"] } : {}),
    };
  };
  // Served from the live options, so set() changes what the next discovery sees.
  const path = (options.issuerPath ?? "").replace(/\/$/, "");
  app.use(options.discovery === "openid" ? `/.well-known/openid-configuration${path}` : `/.well-known/oauth-authorization-server${path}`, (req, res, next) =>
    metadataHandler(metadata())(req, res, next),
  );

  const http: HttpServer = await new Promise((resolve) => {
    const server = app.listen(0, "127.0.0.1", () => resolve(server));
  });
  const { port } = http.address() as AddressInfo;
  const origin = `http://127.0.0.1:${port}`;
  issuer = path ? `${origin}${path}` : `${origin}/`;
  return {
    issuer,
    url: origin,
    counters,
    authorizations,
    rejections,
    registrationRequests,
    tokenResources,
    verifier: { verifyAccessToken: (token) => provider.verifyAccessToken(token) },
    issuedTokens: () => [...issued],
    revokeAllRefreshTokens: () => refreshTokens.clear(),
    forgetAccessTokens: () => accessTokens.clear(),
    restart: () => {
      configureClients();
      codes.clear();
      accessTokens.clear();
      refreshTokens.clear();
      pendingConsents.clear();
    },
    set: (changes) => Object.assign(options, changes),
    close: () =>
      new Promise<void>((resolve) => {
        http.closeAllConnections();
        http.close(() => resolve());
      }),
  };
}

const escapeHtml = (text: string) => text.replace(/[&<>"']/g, (c) => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" })[c]!);

/** The page a person sees under consent: "page": who asks, for what, and two buttons. */
function consentPage(request: string, client: OAuthClientInformationFull, params: AuthorizationParams): string {
  const name = client.client_name ?? client.client_id;
  const scopes = params.scopes ?? [];
  const resource = params.resource?.href ?? "(not stated)";
  const redirect = new URL(params.redirectUri);
  return `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>Authorize ${escapeHtml(name)}</title>
<meta name="viewport" content="width=device-width, initial-scale=1">
<style>
  body { font-family: system-ui, sans-serif; max-width: 32em; margin: 4em auto; padding: 0 1em; color: #222; }
  .card { border: 1px solid #ddd; border-radius: 8px; padding: 1.5em 2em; }
  code { background: #f4f4f4; padding: 0 .3em; border-radius: 3px; }
  button { font-size: 1em; padding: .5em 1.5em; margin-right: .5em; border-radius: 6px; border: 1px solid #888; cursor: pointer; }
  button[value=approve] { background: #1f7a3a; color: white; border-color: #1f7a3a; }
  .fine { color: #666; font-size: .9em; }
</style></head>
<body><div class="card">
<h1>Authorize <code>${escapeHtml(name)}</code>?</h1>
<p><strong>${escapeHtml(name)}</strong> asks to use the MCP server <code>${escapeHtml(resource)}</code> on your behalf.</p>
<p>Permissions: ${scopes.length ? scopes.map((s) => `<code>${escapeHtml(s)}</code>`).join(" ") : "none"}</p>
<p class="fine">After you answer, this browser returns to <code>${escapeHtml(redirect.origin + redirect.pathname)}</code> (the terminal that asked).</p>
<form method="post" action="/consent">
  <input type="hidden" name="request" value="${escapeHtml(request)}">
  <button type="submit" name="decision" value="approve">Approve</button>
  <button type="submit" name="decision" value="deny">Deny</button>
</form>
<p class="fine">subs offline demo: a test authorization server on 127.0.0.1.</p>
</div></body></html>
`;
}
