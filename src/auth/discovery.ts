// Finds the authorization server of an MCP server and checks its metadata before anything is sent
// to it (MCP authorization 2026-07-28, "Authorization Server Discovery"; RFC 9728; RFC 8414), and
// servers of the 2025-03-26 revision, which publish no resource metadata (docs/conformance.md).
// The well-known URLs are the SDK's; the fetching is done here, because a well-known URL that does
// not serve metadata must read as "none" whatever it answers (a 400, an HTML page, an
// event stream that never ends), and the checks the SDK does not make are made here: issuer
// equality (RFC 8414 §3.3), S256 listed, https endpoints off loopback.
import { buildDiscoveryUrls, extractWWWAuthenticateParams } from "@modelcontextprotocol/sdk/client/auth.js";
import { checkResourceAllowed } from "@modelcontextprotocol/sdk/shared/auth-utils.js";
import { LATEST_PROTOCOL_VERSION } from "@modelcontextprotocol/sdk/types.js";
import {
  OAuthMetadataSchema,
  OAuthProtectedResourceMetadataSchema,
  OpenIdProviderDiscoveryMetadataSchema,
  type AuthorizationServerMetadata,
  type OAuthProtectedResourceMetadata,
} from "@modelcontextprotocol/sdk/shared/auth.js";
import { isLoopbackHost } from "../config/schema.ts";
import { failed, refused, SubsError } from "../errors.ts";
import { VERSION } from "../version.ts";
import { cut } from "../text/cut.ts";
import { BLOCKED_PORT_HINT, HttpGuardError, isBlockedPort, networkFailure } from "../http/guarded-fetch.ts";

export type Challenge = {
  /** `resource_metadata` from WWW-Authenticate (RFC 9728 §5.1). */
  resourceMetadataUrl?: URL;
  /** `scope` from WWW-Authenticate (RFC 6750 §3): authoritative for the current operation. */
  scope?: string;
  error?: string;
};

export type Discovery = {
  /** The authorization server's issuer identifier, exactly as its validated metadata states it. */
  issuer: string;
  metadata: AuthorizationServerMetadata;
  resourceMetadata: OAuthProtectedResourceMetadata | undefined;
  /** The RFC 8707 resource indicator sent in authorization and token requests. */
  resource: string;
  /** What the unauthenticated probe's 401 said (scope guidance, metadata location). */
  challenge: Challenge;
};

/**
 * The server answered the unauthenticated initialize as an MCP server, and publishes no
 * authorization metadata at all: it needs no credential (MCP authorization is optional for a
 * server: "Authorization is OPTIONAL for MCP implementations").
 */
export type OpenServer = { open: true };

type Fetch = typeof globalThis.fetch;

/** Parses a WWW-Authenticate header of a 401/403 answer. */
export function parseChallenge(response: Response): Challenge {
  const params = extractWWWAuthenticateParams(response);
  return {
    ...(params.resourceMetadataUrl ? { resourceMetadataUrl: params.resourceMetadataUrl } : {}),
    ...(params.scope ? { scope: params.scope } : {}),
    ...(params.error ? { error: params.error } : {}),
  };
}

/**
 * The request an MCP client sends first (initialize), without a credential and without following
 * redirects. Also `subs mcp list --check`'s test that a server answers at all.
 */
export function unauthenticatedInitialize(serverUrl: string, fetch: Fetch, signal: AbortSignal | undefined): Promise<Response> {
  return fetch(serverUrl, {
    method: "POST",
    headers: {
      "content-type": "application/json",
      accept: "application/json, text/event-stream",
      "mcp-protocol-version": LATEST_PROTOCOL_VERSION,
    },
    body: JSON.stringify({
      jsonrpc: "2.0",
      id: 1,
      method: "initialize",
      params: { protocolVersion: LATEST_PROTOCOL_VERSION, capabilities: {}, clientInfo: { name: "subs", version: VERSION } },
    }),
    redirect: "manual",
    ...(signal ? { signal } : {}),
  });
}

/**
 * An unauthenticated MCP request, as the spec's flow begins: its 401 names the protected resource
 * metadata and the scopes the server wants. Any other answer leaves discovery to well-known URLs.
 */
async function probe(serverUrl: string, fetch: Fetch, signal: AbortSignal | undefined): Promise<{ challenge: Challenge; answered: boolean }> {
  try {
    const response = await unauthenticatedInitialize(serverUrl, fetch, signal);
    await response.body?.cancel().catch(() => {});
    const type = response.headers.get("content-type") ?? "";
    // An initialize result, as JSON or as an event stream (MCP "Streamable HTTP").
    const answered = response.ok && /^(application\/json|text\/event-stream)\b/i.test(type);
    return { challenge: response.status === 401 ? parseChallenge(response) : {}, answered };
  } catch (error) {
    if (signal?.aborted) throw error;
    // A redirect elsewhere is no challenge: discovery goes on at the configured URL's well-known paths.
    if (error instanceof HttpGuardError && /redirected to another origin/.test(error.message)) return { challenge: {}, answered: false };
    throw networkFailure(new URL(serverUrl).origin, error);
  }
}

/**
 * One well-known metadata document: the parsed JSON of a 200 `application/json` answer, else
 * undefined. RFC 8414 §3.2 and RFC 9728 §3.2 answer with exactly that; anything else at a
 * well-known URL (a 404, the 400 of a server that treats every GET as a malformed request, an HTML
 * page, an event stream that never ends) is no metadata. A 5xx is the server failing,
 * not saying "none": an error, so that a passing outage never reads as a different server.
 */
async function metadataDocument(url: URL, fetch: Fetch): Promise<unknown> {
  const response = await fetch(url, { headers: { accept: "application/json", "mcp-protocol-version": LATEST_PROTOCOL_VERSION } });
  const type = (response.headers.get("content-type") ?? "").split(";")[0]!.trim().toLowerCase();
  if (response.status >= 500) {
    await response.body?.cancel().catch(() => {});
    throw new Error(`HTTP ${response.status} from ${url.href}`);
  }
  if (response.status !== 200 || !(type === "application/json" || type.endsWith("+json"))) {
    await response.body?.cancel().catch(() => {});
    return undefined;
  }
  return response.json();
}

/** RFC 9728 §3.1: the 401's `resource_metadata`, else the path-aware well-known URL, then the root one. */
async function protectedResourceMetadata(serverUrl: string, challenge: Challenge, fetch: Fetch): Promise<OAuthProtectedResourceMetadata | undefined> {
  const server = new URL(serverUrl);
  const urls: URL[] = [];
  if (challenge.resourceMetadataUrl) {
    const insecure = insecureMetadataUrl(`the resource metadata URL in the 401 of ${new URL(serverUrl).origin}`, challenge.resourceMetadataUrl);
    if (insecure) throw insecure;
    urls.push(challenge.resourceMetadataUrl);
  }
  else {
    const path = server.pathname.endsWith("/") ? server.pathname.slice(0, -1) : server.pathname;
    const pathAware = new URL(`/.well-known/oauth-protected-resource${path}`, server.origin);
    pathAware.search = server.search;
    urls.push(pathAware);
    if (path !== "") urls.push(new URL("/.well-known/oauth-protected-resource", server.origin));
  }
  for (const url of urls) {
    const document = await metadataDocument(url, fetch);
    if (document !== undefined) return OAuthProtectedResourceMetadataSchema.parse(document);
  }
  return undefined;
}

/** RFC 8414 §3.1, then OpenID discovery, in the MCP spec's order (the SDK's list of URLs). */
async function publishedMetadata(issuer: string, fetch: Fetch): Promise<AuthorizationServerMetadata | undefined> {
  for (const { url, type } of buildDiscoveryUrls(issuer)) {
    const document = await metadataDocument(url, fetch);
    if (document !== undefined) return type === "oauth" ? OAuthMetadataSchema.parse(document) : OpenIdProviderDiscoveryMetadataSchema.parse(document);
  }
  return undefined;
}

/**
 * MCP authorization 2025-03-26, "Server Metadata Discovery": a server without resource metadata
 * has its metadata at its origin's root, `/.well-known/oauth-authorization-server`, whatever the
 * path of the issuer it states (the conformance suite's server states `<origin>/oauth`).
 */
async function rootMetadata(origin: string, fetch: Fetch): Promise<AuthorizationServerMetadata | undefined> {
  const document = await metadataDocument(new URL("/.well-known/oauth-authorization-server", origin), fetch);
  return document === undefined ? undefined : OAuthMetadataSchema.parse(document);
}

/**
 * MCP authorization 2025-03-26, "Fallbacks for Servers without Metadata Discovery": the default
 * endpoints at the authorization base URL (the MCP server's origin). There is nothing to check
 * the issuer or S256 against; the endpoints are the server's own origin, and PKCE S256 is sent anyway.
 */
export function defaultEndpoints(origin: string): AuthorizationServerMetadata {
  const at = (path: string) => new URL(path, origin).href;
  return {
    issuer: new URL("/", origin).href,
    authorization_endpoint: at("/authorize"),
    token_endpoint: at("/token"),
    registration_endpoint: at("/register"),
    response_types_supported: ["code"],
    code_challenge_methods_supported: ["S256"],
  };
}

const isOrigin = (url: string) => new URL(url).pathname === "/";

/** Authorization and token endpoints must be https, except on loopback (product.md). */
export function endpointProblem(name: string, value: string | undefined): string | undefined {
  if (value === undefined) return undefined;
  let url: URL;
  try {
    url = new URL(value);
  } catch {
    return `its ${name} is not a valid URL`;
  }
  if (url.protocol === "https:") return undefined;
  if (url.protocol === "http:" && isLoopbackHost(url.hostname)) return undefined;
  return `its ${name} (${url.origin}) is not https`;
}

/**
 * Metadata that decides where a login goes is fetched over https only, loopback aside, like the
 * endpoints it names: over plain http anyone on the path could rewrite the
 * authorization server, its endpoints or the issuer. Checked before the request, so nothing is
 * sent. Applies to an issuer (from resource metadata, a stored credential, or a 2025-03-26
 * server's origin) and to the `resource_metadata` URL a 401 names: resource metadata chooses the
 * authorization server, so an http copy of it is as good as an http issuer to an attacker.
 */
export function insecureMetadataUrl(what: string, value: string | URL): SubsError | undefined {
  let url: URL;
  try {
    url = new URL(value);
  } catch {
    return refused(`${what} is not a valid URL; refusing it`, { code: "insecure_metadata" });
  }
  if (url.protocol === "https:") return undefined;
  if (url.protocol === "http:" && isLoopbackHost(url.hostname)) return undefined;
  const why = url.protocol === "http:" ? "is plain http off loopback" : "is not https";
  return refused(`${what} ${why} (${url.origin}${url.pathname}); refusing to fetch metadata from it`, {
    code: "insecure_metadata",
    hint: "authorization metadata must use https (plain http only on 127.0.0.1/localhost); ask the server's operator",
  });
}

/** RFC 8414 §3.3: the metadata's issuer is identical to the issuer it was fetched for. A pathless
 * issuer may be written with or without its "/" (URL parsers add it), nothing else differs. */
export function sameIssuer(expected: string, stated: string): boolean {
  if (expected === stated) return true;
  const bare = (s: string) => {
    try {
      const u = new URL(s);
      return u.pathname === "/" && !u.search && s.endsWith("/") ? s.slice(0, -1) : s;
    } catch {
      return s;
    }
  };
  return bare(expected) === bare(stated);
}

/**
 * The authorization server metadata for `issuer`, with every check subs relies on. Used at login
 * and again before a refresh or revocation, so a moved or changed server is noticed.
 *
 * A credential from a 2025-03-26 server names an issuer whose metadata may sit at its origin's
 * root (rootMetadata) or nowhere (defaultEndpoints); both are found again here, the first only
 * when it states exactly this issuer. `backCompat: false` is for an issuer named by resource
 * metadata, which the current spec requires to publish metadata at its own well-known URLs: no
 * root document for a path issuer (the conformance suite counts asking for one as a failure,
 * auth/metadata-var2), and "none" is an error.
 */
export async function authorizationServerMetadata(
  issuer: string,
  options: { fetch: Fetch; requirePkce?: boolean; backCompat?: boolean },
): Promise<AuthorizationServerMetadata> {
  const insecure = insecureMetadataUrl("the authorization server", issuer);
  if (insecure) throw insecure;
  let metadata: AuthorizationServerMetadata | undefined;
  try {
    metadata = await publishedMetadata(issuer, options.fetch);
    if (!metadata && options.backCompat !== false && !isOrigin(issuer)) {
      const atRoot = await rootMetadata(issuer, options.fetch);
      if (atRoot && atRoot.issuer === issuer) metadata = atRoot;
    }
  } catch (error) {
    throw unreadable("the authorization server metadata", issuer, error);
  }
  if (!metadata && options.backCompat !== false && isOrigin(issuer)) return checkedMetadata(defaultEndpoints(issuer), { requirePkce: false });
  if (!metadata) {
    throw failed(`${issuer} publishes no authorization server metadata (RFC 8414 or OpenID discovery)`, {
      hint: "the server does not follow the MCP authorization spec; ask its operator",
    });
  }
  if (!sameIssuer(issuer, metadata.issuer)) {
    throw refused(`the authorization server metadata fetched for ${issuer} names another issuer (${metadata.issuer}); refusing it (RFC 8414 §3.3)`, {
      code: "issuer_mismatch",
    });
  }
  return checkedMetadata(metadata, options);
}

/** The checks every authorization server's metadata passes before anything is sent to it. */
function checkedMetadata(metadata: AuthorizationServerMetadata, options: { requirePkce?: boolean }): AuthorizationServerMetadata {
  const problems = [
    endpointProblem("authorization endpoint", metadata.authorization_endpoint),
    endpointProblem("token endpoint", metadata.token_endpoint),
    endpointProblem("registration endpoint", metadata.registration_endpoint),
    endpointProblem("revocation endpoint", revocationEndpoint(metadata)),
  ].filter((p): p is string => p !== undefined);
  if (problems.length > 0) {
    throw refused(`refusing the authorization server ${metadata.issuer}: ${problems.join("; ")}`, {
      hint: "authorization and token endpoints must use https (plain http only on 127.0.0.1/localhost)",
      code: "insecure_endpoint",
    });
  }
  if (options.requirePkce !== false && !(metadata.code_challenge_methods_supported ?? []).includes("S256")) {
    // MCP authorization: a server whose metadata does not list S256 cannot be verified to
    // support PKCE, and the client must refuse to proceed.
    throw refused(`the authorization server ${metadata.issuer} does not list PKCE S256 in code_challenge_methods_supported; refusing to authorize`, {
      code: "pkce_unsupported",
    });
  }
  if (!metadata.response_types_supported.includes("code")) {
    throw refused(`the authorization server ${metadata.issuer} does not support the authorization code flow`, { code: "code_flow_unsupported" });
  }
  return metadata;
}

/**
 * A 2025-03-26 server (no resource metadata): its origin is the authorization server. Metadata at
 * the origin's root must state an issuer on that same origin (the mix-up protection that still
 * makes sense without an issuer to fetch for: no other site's identity is taken from it);
 * without any, the default endpoints. Undefined when the server answered MCP without a credential
 * and publishes nothing: it needs none.
 */
async function legacyAuthorizationServer(serverUrl: string, answered: boolean, fetch: Fetch): Promise<AuthorizationServerMetadata | undefined> {
  const origin = new URL("/", serverUrl).href;
  // The file allows plain http only to loopback, so this holds already; checked where it is relied on.
  const insecure = insecureMetadataUrl("the authorization server", origin);
  if (insecure) throw insecure;
  let metadata: AuthorizationServerMetadata | undefined;
  try {
    // RFC 8414 at the root first (the 2025-03-26 location), then OpenID discovery at the root.
    metadata = await publishedMetadata(origin, fetch);
  } catch (error) {
    throw unreadable("the authorization server metadata", origin, error);
  }
  if (!metadata) return answered ? undefined : checkedMetadata(defaultEndpoints(origin), { requirePkce: false });
  let stated: URL | undefined;
  try {
    stated = new URL(metadata.issuer);
  } catch {}
  if (stated?.origin !== new URL(origin).origin) {
    throw refused(`the authorization server metadata at ${origin} names an issuer on another origin (${metadata.issuer}); refusing it`, { code: "issuer_mismatch" });
  }
  return checkedMetadata(metadata, {});
}

/** OpenID discovery metadata may carry it too (loose object); RFC 7009 via RFC 8414 §2. */
export function revocationEndpoint(metadata: AuthorizationServerMetadata): string | undefined {
  const value = (metadata as { revocation_endpoint?: unknown }).revocation_endpoint;
  return typeof value === "string" ? value : undefined;
}

/** The canonical URI of the MCP server (RFC 8707 §2): the configured URL without a fragment. */
export function canonicalResource(serverUrl: string): string {
  const hash = serverUrl.indexOf("#");
  return hash === -1 ? serverUrl : serverUrl.slice(0, hash);
}

export async function discover(options: { serverUrl: string; fetch: Fetch; signal?: AbortSignal }): Promise<Discovery | OpenServer> {
  const { serverUrl, fetch } = options;
  const { challenge, answered } = await probe(serverUrl, fetch, options.signal);
  let resourceMetadata: OAuthProtectedResourceMetadata | undefined;
  try {
    resourceMetadata = await protectedResourceMetadata(serverUrl, challenge, fetch);
  } catch (error) {
    if (error instanceof SubsError) throw error;
    throw unreadable("the protected resource metadata", new URL(serverUrl).origin, error);
  }
  let resource = canonicalResource(serverUrl);
  if (!resourceMetadata) {
    // Servers of the 2025-03-26 revision publish no resource metadata.
    const metadata = await legacyAuthorizationServer(serverUrl, answered, fetch);
    if (!metadata) return { open: true };
    return { issuer: metadata.issuer, metadata, resourceMetadata, resource, challenge };
  }
  // RFC 9728 §3.3: the metadata must describe this resource, or an attacker's metadata could
  // obtain tokens for another one.
  if (!checkResourceAllowed({ requestedResource: resource, configuredResource: resourceMetadata.resource })) {
    throw refused(`the protected resource metadata of ${serverUrl} describes another resource (${resourceMetadata.resource})`, { code: "resource_mismatch" });
  }
  resource = resourceMetadata.resource;
  const first = resourceMetadata.authorization_servers?.[0];
  if (!first) throw failed(`the protected resource metadata of ${serverUrl} names no authorization server`);
  const metadata = await authorizationServerMetadata(first, { fetch, backCompat: false });
  return { issuer: metadata.issuer, metadata, resourceMetadata, resource, challenge };
}

function unreadable(what: string, where: string, error: unknown): SubsError {
  if (isBlockedPort(error)) {
    return failed(`cannot read ${what} of ${where}: fetch refuses its port, one the Fetch standard blocks as browsers do`, { cause: error, hint: BLOCKED_PORT_HINT });
  }
  return failed(`cannot read ${what} of ${where} (${reason(error)})`, { cause: error });
}

export function reason(error: unknown): string {
  const message = error instanceof Error ? error.message : String(error);
  const cause = error instanceof Error && error.cause instanceof Error ? `: ${error.cause.message}` : "";
  return cut(message + cause, 300);
}
