// A third-party authorization server for tests: node-oidc-provider (panva), certified OpenID
// Provider, configured as an MCP server's authorization server would be: dynamic client
// registration (RFC 7591), PKCE, resource indicators (RFC 8707) with JWT access tokens for the
// MCP server's audience, refresh tokens rotated on every use (a reused one revokes the grant, as
// OAuth 2.1 section 4.3.1 asks), revocation (RFC 7009) and `iss` on the redirect (RFC 9207). It
// knows several accounts; the consent "page" logs in as the account a test names and grants what
// was asked, so a test can consent as alice, then as bob. Everything strict is left as the
// library ships it: exact redirect_uri match, PKCE S256 only, no unknown client.
//
// `protect` is the matching resource server side for test/support/mcp-server.ts: the tokens'
// signatures, audience and expiry checked with jose against the provider's key, the caller's
// account (`sub`) handed to the tool as `auth.extra.sub`.
import { createServer, type IncomingMessage, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import type { AuthInfo } from "@modelcontextprotocol/sdk/server/auth/types.js";
import { InvalidTokenError } from "@modelcontextprotocol/sdk/server/auth/errors.js";
import type { ProtectOptions } from "./mcp-server.ts";

/** What the provider did, by event: for tests that count refreshes and revocations. */
export type OidcEvents = { refreshed: number; reused: number; revokedGrants: string[]; issued: Array<{ account: string; grantId: string }> };

export type RunningOidcProvider = {
  issuer: string;
  events: OidcEvents;
  /**
   * Follows an authorization URL as a browser would (cookies kept across the redirects), the
   * consent given as `account`; resolves with the last answer's status and text (the redirect
   * target's page: the deployment's callback, or the CLI's loopback).
   */
  consentAs(account: string, authorizationUrl: string): Promise<{ status: number; text: string }>;
  /** The resource-server side for startMcpServer's `oauth` (scope `mcp`). */
  protect(): ProtectOptions;
  /**
   * From now on the MCP server refuses (401) every access token it has accepted so far, as a
   * server does after a key rotation: what a deployment then does is refresh.
   */
  refuseSeenTokens(): void;
  close(): Promise<void>;
};

/** Seconds an access token lives (the deployment refreshes ahead of expiry). */
export async function startOidcProvider(options: { accounts: string[]; accessTokenTtl?: number }): Promise<RunningOidcProvider> {
  const { default: Provider } = (await import("oidc-provider")) as { default: any };
  const jose = await import("jose");
  const { privateKey, publicKey } = await jose.generateKeyPair("RS256", { extractable: true });
  const privateJwk = { ...(await jose.exportJWK(privateKey)), kid: "k1", alg: "RS256", use: "sig" };
  const publicJwk = { ...(await jose.exportJWK(publicKey)), kid: "k1", alg: "RS256", use: "sig" };
  const accounts = new Set(options.accounts);
  const events: OidcEvents = { refreshed: 0, reused: 0, revokedGrants: [], issued: [] };
  /** The account the next consent logs in as, by interaction: set by consentAs. */
  let consentingAs: string | undefined;

  const http = createServer();
  await new Promise<void>((resolve) => http.listen(0, "127.0.0.1", resolve));
  const issuer = `http://127.0.0.1:${(http.address() as AddressInfo).port}`;
  const ttl = options.accessTokenTtl ?? 3600;

  const provider = new Provider(issuer, {
    jwks: { keys: [privateJwk] },
    findAccount: async (_ctx: unknown, id: string) => (accounts.has(id) ? { accountId: id, claims: async () => ({ sub: id }) } : undefined),
    features: {
      devInteractions: { enabled: false },
      registration: { enabled: true },
      revocation: { enabled: true },
      resourceIndicators: {
        enabled: true,
        // Every resource asked for is an MCP server of the test's: its tokens are JWTs for it.
        getResourceServerInfo: async (_ctx: unknown, resource: string) => ({ scope: "mcp", audience: resource, accessTokenTTL: ttl, accessTokenFormat: "jwt", jwt: { sign: { alg: "RS256" } } }),
        useGrantedResource: async () => true,
        defaultResource: async (_ctx: unknown, _client: unknown, oneOf?: string[]) => oneOf?.[0],
      },
    },
    // A refresh token for every code grant of a client allowed the refresh_token grant (no
    // offline_access consent dance), rotated on every use.
    issueRefreshToken: async (_ctx: unknown, client: { grantTypeAllowed(t: string): boolean }) => client.grantTypeAllowed("refresh_token"),
    rotateRefreshToken: true,
    ttl: { AccessToken: ttl, RefreshToken: 24 * 3600, Grant: 24 * 3600, Session: 3600, Interaction: 600, AuthorizationCode: 60 },
    interactions: { url: async (_ctx: unknown, interaction: { uid: string }) => `/interaction/${interaction.uid}` },
    clientDefaults: { grant_types: ["authorization_code", "refresh_token"], response_types: ["code"], token_endpoint_auth_method: "none" },
    pkce: { required: () => true },
    scopes: ["mcp"],
  });
  provider.on("grant.revoked", (_ctx: unknown, grantId: string) => events.revokedGrants.push(grantId));
  // Each refresh token presented, counted by its value (kept in this process only): one
  // presented twice is a rotated token sent again, which the provider answers by revoking the grant.
  const presented = new Map<string, number>();
  const refreshRequest = (ctx: any) => {
    const token = ctx.oidc?.params?.grant_type === "refresh_token" ? ctx.oidc.params.refresh_token : undefined;
    if (typeof token !== "string") return false;
    const times = (presented.get(token) ?? 0) + 1;
    presented.set(token, times);
    if (times === 2) events.reused++;
    return true;
  };
  provider.on("grant.success", (ctx: any) => {
    if (refreshRequest(ctx)) events.refreshed++;
  });
  provider.on("grant.error", (ctx: any) => void refreshRequest(ctx));
  const callback = provider.callback();

  // The consent "page": logs in as `consentingAs` and grants every scope and resource asked for.
  async function interaction(req: IncomingMessage, res: ServerResponse) {
    const details = await provider.interactionDetails(req, res);
    const account = consentingAs;
    if (account === undefined || !accounts.has(account)) {
      return provider.interactionFinished(req, res, { error: "access_denied", error_description: "nobody consents" }, { mergeWithLastSubmission: false });
    }
    // Everything asked for is granted: the scopes (`mcp` is one of the provider's) and, for each
    // resource indicator, its scope.
    const grant = details.grantId ? await provider.Grant.find(details.grantId) : new provider.Grant({ accountId: account, clientId: details.params.client_id });
    const scope = String(details.params.scope ?? "").trim();
    if (scope) grant.addOIDCScope(scope);
    const resources = [details.params.resource].flat().filter((r): r is string => typeof r === "string");
    for (const resource of resources) grant.addResourceScope(resource, "mcp");
    const grantId = await grant.save();
    events.issued.push({ account, grantId });
    return provider.interactionFinished(req, res, { login: { accountId: account }, consent: { grantId } }, { mergeWithLastSubmission: false });
  }

  http.on("request", (req, res) => {
    if (req.url?.startsWith("/interaction/")) {
      interaction(req, res).catch((error: unknown) => {
        if (!res.headersSent) res.writeHead(500).end(String(error));
      });
      return;
    }
    callback(req, res);
  });

  const keySet = jose.createLocalJWKSet({ keys: [publicJwk] });
  /** Access tokens accepted, and those refused from now on, by `jti`. */
  const seen = new Set<string>();
  const refused = new Set<string>();
  const verifier = {
    async verifyAccessToken(token: string): Promise<AuthInfo> {
      try {
        const { payload } = await jose.jwtVerify(token, keySet, { issuer });
        const jti = String(payload.jti);
        if (refused.has(jti)) throw new Error("this token is no longer accepted");
        seen.add(jti);
        return {
          token,
          clientId: String(payload.client_id ?? ""),
          scopes: String(payload.scope ?? "").split(" ").filter(Boolean),
          ...(typeof payload.exp === "number" ? { expiresAt: payload.exp } : {}),
          ...(typeof payload.aud === "string" ? { resource: new URL(payload.aud) } : {}),
          extra: { sub: payload.sub },
        };
      } catch (error) {
        throw new InvalidTokenError(`invalid token: ${error instanceof Error ? error.message : String(error)}`);
      }
    },
  };

  return {
    issuer,
    events,
    async consentAs(account, authorizationUrl) {
      consentingAs = account;
      try {
        return await browse(authorizationUrl);
      } finally {
        consentingAs = undefined;
      }
    },
    protect: () => ({ authServer: { issuer, verifier }, scopesSupported: ["mcp"], requiredScopes: ["mcp"] }),
    refuseSeenTokens: () => {
      for (const jti of seen) refused.add(jti);
    },
    close: () =>
      new Promise<void>((resolve) => {
        http.closeAllConnections();
        http.close(() => resolve());
      }),
  };
}

/** GETs `url` and follows its redirects, keeping the cookies each host sets, as a browser does. */
async function browse(url: string): Promise<{ status: number; text: string }> {
  const jar = new Map<string, Map<string, string>>();
  let next = url;
  for (let hop = 0; hop < 20; hop++) {
    const host = new URL(next).host;
    const cookies = jar.get(host);
    const res = await fetch(next, { redirect: "manual", headers: cookies?.size ? { cookie: [...cookies].map(([k, v]) => `${k}=${v}`).join("; ") } : {}, signal: AbortSignal.timeout(30_000) });
    for (const line of res.headers.getSetCookie()) {
      const [pair] = line.split(";");
      const at = pair!.indexOf("=");
      const own = jar.get(host) ?? jar.set(host, new Map()).get(host)!;
      own.set(pair!.slice(0, at).trim(), pair!.slice(at + 1).trim());
    }
    const location = res.headers.get("location");
    if (res.status >= 300 && res.status < 400 && location) {
      await res.body?.cancel();
      next = new URL(location, next).href;
      continue;
    }
    return { status: res.status, text: await res.text() };
  }
  throw new Error(`more than 20 redirects from ${url}`);
}
