// The deployment as the OAuth client of each MCP server (docs/deployment-protocol.md sections 3.4
// to 3.6, 4 and 5): discovery, client choice, PKCE and `resource` as `subs mcp login` does them
// (src/auth/), with the deployment's own redirect URI on its public URL; each consent kept in the
// store, so any replica answers its redirect and its polls; the credential refreshed ahead of expiry, once per credential however
// many requests need it; and revoked at its authorization server when its connection goes.
import { createHash, randomBytes, randomUUID } from "node:crypto";
import { discoverOAuthProtectedResourceMetadata, exchangeAuthorization, refreshAuthorization, registerClient, startAuthorization } from "@modelcontextprotocol/sdk/client/auth.js";
import type { OAuthClientInformationMixed, OAuthTokens } from "@modelcontextprotocol/sdk/shared/auth.js";
import type { Tool } from "@modelcontextprotocol/sdk/types.js";
import { discover, revocationEndpoint, sameIssuer } from "../auth/discovery.ts";
import { expandTemplates, headerVariables } from "../config/templates.ts";
import { grantRejected } from "../auth/errors.ts";
import { grantLifetimeRecorder, refreshExpiryAfter } from "../auth/grant-expiry.ts";
import { issProblem } from "../auth/login.ts";
import { REFRESH_MARGIN_MS } from "../auth/refresh.ts";
import { postRevocation } from "../auth/revocation-request.ts";
import { REVOCATION_TIMEOUT_MS } from "../auth/revoke.ts";
import { checkedTokens } from "../auth/tokens.ts";
import { addressRefusal, ALLOW_PRIVATE_HINT } from "../http/address-refusal.ts";
import { authFetch, httpTimeoutMs } from "../http/guarded-fetch.ts";
import { learningFetch, Secrets } from "../secrets.ts";
import { VERSION } from "../version.ts";
import type { ClientSecret } from "./config.ts";
import { record, type AuditSink } from "./audit.ts";
import { foreignProblem, foreignText, oauthErrorCode } from "./foreign.ts";
import { inCatalog, NOT_IN_CATALOG, notInCatalogMessage } from "./catalog.ts";
import type { Metrics } from "./ops.ts";
import { holderFor, StoreUnavailable, type AuthorizationOutcome, type ConnectionRecord, type CredentialLoss, type CredentialRecord, type DeploymentStore, type Loss, type LossReason } from "./store/types.ts";

/** An error answer of the protocol (section 6), decided deep in a handler. */
export class Refusal extends Error {
  constructor(
    readonly status: number,
    readonly code: string,
    message: string,
    readonly extra: Record<string, unknown> = {},
  ) {
    super(message);
  }
}

export type Outcome = AuthorizationOutcome;

export type OAuthOptions = {
  store: DeploymentStore;
  metrics: Metrics;
  fetch: typeof globalThis.fetch;
  env: Readonly<Record<string, string | undefined>>;
  now: () => number;
  /** `<public-url>/oauth/callback`. */
  redirectUri: string;
  /** Seconds an authorization stays pending (expires_in). */
  ttlSeconds: number;
  /** Seconds between polls the deployment asks for. */
  intervalSeconds: number;
  /** The operator's secrets of confidential pre-registered clients, by client_id, each with the server that issued it. */
  clientSecrets?: ReadonlyMap<string, ClientSecret>;
  /** The only MCP server URLs the deployment uses (catalog.ts); undefined: any. */
  catalog?: readonly string[];
  /** The record (audit.ts): a consent's end, on whichever replica its redirect reaches. */
  audit?: AuditSink;
};

/**
 * One exchange with servers (a consent's start, its callback, a refresh, a listing): the secrets it
 * sent and the credentials it received, which every text it gives back is scrubbed of, and the
 * fetch that learns them. Made per exchange and dropped with it, so what one server returns
 * neither stays in memory nor changes what the deployment says of another (SECURITY.md).
 */
export type Exchange = { secrets: Secrets; fetch: typeof globalThis.fetch };

const FINAL_KEPT_MS = 15 * 60_000;
const stateHash = (state: string) => createHash("sha256").update(state).digest("hex");

/**
 * docs/deployment-protocol.md section 4: `oauth.scopes` exactly when set and not empty; else the
 * MCP authorization specification's scope selection (the challenge's `scope`, else the protected
 * resource metadata's `scopes_supported`, else none). Nothing is added: unlike a local login,
 * the protocol names no `offline_access`.
 */
export function requestedScope(discovery: Exclude<Awaited<ReturnType<typeof discover>>, { open: true }>, connection: ConnectionRecord): string | undefined {
  const configured = connection.oauth?.scopes ?? [];
  const chosen = configured.length > 0 ? configured : discovery.challenge.scope ? discovery.challenge.scope.split(" ").filter(Boolean) : (discovery.resourceMetadata?.scopes_supported ?? []);
  return chosen.length > 0 ? [...new Set(chosen)].join(" ") : undefined;
}

/**
 * Whether a credential is refreshed before use: within a minute of its expiry, or within half its
 * lifetime when that is shorter, so a short-lived token is used for its first half rather than
 * refreshed on every call (as src/auth/refresh.ts does for a local login).
 */
function refreshDue(credential: CredentialRecord, now: number): boolean {
  if (credential.expiresAt === null) return false;
  const lifetime = credential.secret.tokens.expires_in;
  const margin = lifetime === undefined ? REFRESH_MARGIN_MS : Math.min(REFRESH_MARGIN_MS, (lifetime * 1000) / 2);
  return now >= credential.expiresAt - margin;
}

export class OAuth {
  readonly #o: OAuthOptions;
  /** Refreshes in flight, per credential id and version: every request that needs one waits on the same. */
  readonly #refreshes = new Map<string, Promise<CredentialRecord | undefined>>();

  constructor(options: OAuthOptions) {
    this.#o = options;
  }

  /** An exchange's fetch to authorization servers (guarded: deadline, size, same-origin redirects), learning into `secrets`. */
  exchange(secrets = new Secrets()): Exchange {
    return { secrets, fetch: authFetch({ fetch: learningFetch(this.#o.fetch, secrets, { answers: "issued" }), env: this.#o.env }) };
  }

  /** Section 2, `refused`: a connection whose url the catalog leaves out is used nowhere (catalog.ts). */
  #allowed(connection: Pick<ConnectionRecord, "id" | "url">): void {
    const { catalog } = this.#o;
    if (!inCatalog(catalog, connection.url)) throw new Refusal(403, NOT_IN_CATALOG, notInCatalogMessage(connection), { catalog });
  }

  /**
   * Ends the pending authorizations of a connection (section 5: a url change, a DELETE), on every
   * replica: they are in the store.
   */
  async endPending(connectionId: string, error: string, message: string): Promise<void> {
    await this.#o.store.endAuthorizations(connectionId, { status: "failed", error, message }, this.#o.now());
  }

  /** Expires the overdue and forgets those final for FINAL_KEPT_MS (section 3.5: at least 10 minutes). */
  async #sweep() {
    const now = this.#o.now();
    await this.#o.store.sweepAuthorizations(now, { status: "expired", message: `nobody consented within ${this.#o.ttlSeconds}s` }, now - FINAL_KEPT_MS);
  }

  /** The client to present: pre-registered, then a Client ID Metadata Document the server supports, then our registration. */
  async #client(connection: ConnectionRecord, discovery: Exclude<Awaited<ReturnType<typeof discover>>, { open: true }>, scope: string | undefined, exchange: Exchange): Promise<OAuthClientInformationMixed> {
    const preRegistered = connection.oauth?.client_id;
    if (preRegistered) {
      // Section 3.2: a confidential client's secret is the operator's, configured here with the
      // server that issued it; the SDK then authenticates at that server's token endpoint as its
      // metadata allows. Any declaration may name a client_id: the secret goes to its own server only.
      const held = this.#o.clientSecrets?.get(preRegistered);
      if (!held) return { client_id: preRegistered };
      const issuedHere = (held.issuer === undefined || sameIssuer(held.issuer, discovery.issuer)) && (held.tokenEndpoint === undefined || held.tokenEndpoint === discovery.metadata.token_endpoint);
      if (!issuedHere) {
        throw new Refusal(
          403,
          "client_secret_elsewhere",
          `${connection.id}: the deployment holds the secret of client ${preRegistered} for ${held.issuer ?? held.tokenEndpoint}, not for ${foreignText(discovery.issuer, exchange.secrets)} (the authorization server of ${connection.url}), and sends it to no other server`,
        );
      }
      exchange.secrets.add(held.secret);
      return { client_id: preRegistered, client_secret: held.secret };
    }
    if (connection.oauth?.client_metadata_url && discovery.metadata.client_id_metadata_document_supported === true) return { client_id: connection.oauth.client_metadata_url };
    const stored = await this.#o.store.getRegistration(discovery.issuer, this.#o.redirectUri);
    const expired = stored?.client_secret_expires_at !== undefined && stored.client_secret_expires_at !== 0 && stored.client_secret_expires_at * 1000 <= this.#o.now();
    if (stored && !expired) return stored;
    const methods = discovery.metadata.token_endpoint_auth_methods_supported ?? ["client_secret_basic"];
    const client = await registerClient(discovery.issuer, {
      metadata: discovery.metadata,
      clientMetadata: {
        client_name: "subs deployment",
        software_version: VERSION,
        redirect_uris: [this.#o.redirectUri],
        grant_types: ["authorization_code", "refresh_token"],
        response_types: ["code"],
        // A server that runs on its own origin is a confidential web client where the server allows it.
        token_endpoint_auth_method: methods.includes("client_secret_basic") ? "client_secret_basic" : methods.includes("client_secret_post") ? "client_secret_post" : "none",
        ...(scope ? { scope } : {}),
      },
      fetchFn: exchange.fetch,
    });
    await this.#o.store.putRegistration(discovery.issuer, this.#o.redirectUri, client);
    return client;
  }

  /**
   * Section 3.4: discovery, client, scopes, PKCE and state; a newer start supersedes a pending one.
   * `by`: the name of the API token that asked, which the credential records as `authorized_by`;
   * `person`: its person, whose credential it ends in when the connection is personal.
   */
  async start(connection: ConnectionRecord, by: string | null, person: string, exchange = this.exchange()): Promise<{ authorizationUrl: string; id: string }> {
    this.#allowed(connection);
    await this.#sweep();
    let discovery: Awaited<ReturnType<typeof discover>>;
    let client: OAuthClientInformationMixed;
    let started: { authorizationUrl: URL; codeVerifier: string };
    // The state goes to the browser in the authorization URL, which this exchange answers with: it
    // is no secret from its caller, and no server of this exchange is sent it.
    const state = randomBytes(32).toString("base64url");
    try {
      discovery = await discover({ serverUrl: connection.url, fetch: exchange.fetch });
      if ("open" in discovery) throw new Error(`${connection.url} asks for no credential; it needs no authorization`);
      const scope = requestedScope(discovery, connection);
      client = await this.#client(connection, discovery, scope, exchange);
      started = await startAuthorization(discovery.issuer, {
        metadata: discovery.metadata,
        clientInformation: client,
        redirectUrl: this.#o.redirectUri,
        ...(scope ? { scope } : {}),
        state,
        resource: new URL(discovery.resource),
      });
    } catch (error) {
      if (error instanceof Refusal || error instanceof StoreUnavailable) throw error;
      throw upstreamFailure(`cannot start the authorization of ${connection.id} with ${connection.url}`, error, exchange.secrets);
    }
    const id = randomUUID();
    await this.#o.store.startAuthorization(
      {
        id,
        connectionId: connection.id,
        url: connection.url,
        stateHash: stateHash(state),
        issuer: discovery.issuer,
        by,
        person: holderFor(connection, person),
        issAdvertised: (discovery.metadata as { authorization_response_iss_parameter_supported?: unknown }).authorization_response_iss_parameter_supported === true,
        expiresAt: this.#o.now() + this.#o.ttlSeconds * 1000,
        secret: {
          codeVerifier: started.codeVerifier,
          client,
          metadata: discovery.metadata,
          resource: discovery.resource,
          ...(discovery.challenge.resourceMetadataUrl ? { resourceMetadataUrl: discovery.challenge.resourceMetadataUrl.href } : {}),
        },
      },
      { status: "failed", error: "superseded", message: "a newer authorization was started" },
      this.#o.now(),
    );
    return { authorizationUrl: started.authorizationUrl.href, id };
  }

  /** Section 3.5; undefined when unknown or forgotten (404, which clients read as expired). */
  async poll(id: string): Promise<Outcome | undefined> {
    await this.#sweep();
    return (await this.#o.store.getAuthorization(id))?.outcome;
  }

  /**
   * The redirect URI (section 3.5, "What the redirect URI does"), on whichever replica it reaches.
   * A forged, late, expired or second callback changes nothing and its code is never exchanged:
   * only the one callback that claims the authorization in the store exchanges a code.
   */
  async callback(params: URLSearchParams): Promise<{ status: number; text: string }> {
    const state = params.get("state");
    await this.#sweep();
    const a = state === null ? undefined : await this.#o.store.authorizationByState(stateHash(state));
    const unknown = { status: 400, text: "Unknown or finished authorization. Start again with `subs mcp login`." };
    if (!a || a.outcome.status !== "pending" || a.claimed || this.#o.now() >= a.expiresAt) return unknown;
    // The first callback claims it, on whichever replica; the same redirect reaching another
    // replica (a retried request, a reloaded page) changes nothing and exchanges nothing.
    if (!(await this.#o.store.claimAuthorization(a.id, this.#o.now()))) return unknown;
    // Its end goes into the record as made by the token that started it (`by` names it), and its
    // person: the browser that reaches the redirect carries no API token. Only the code, never the
    // server's message (section 3.14).
    const final = async (outcome: Outcome) => {
      const ended = await this.#o.store.finishAuthorization(a.id, outcome, this.#o.now());
      if (ended && this.#o.audit) {
        const starter = a.by === null ? undefined : await this.#o.store.listTokens().then((all) => all.find((t) => t.name === a.by), () => undefined);
        await record(this.#o.audit, {
          kind: "consent.finish",
          actor: starter,
          person: a.by,
          connection: a.connectionId,
          outcome: outcome.status,
          detail: { authorization: a.id, ...(outcome.error !== undefined ? { error: outcome.error } : {}) },
        });
      }
      return ended;
    };
    const { secret } = a;
    // Whoever reaches the redirect URI chooses its parameters (the authorization server, or anyone
    // holding the state): what the poll then says of them is a summary without this exchange's secrets.
    const exchange = this.exchange();
    for (const value of [state, params.get("code"), secret.codeVerifier, secret.client.client_secret]) exchange.secrets.add(value);
    const error = params.get("error");
    if (error !== null) {
      const code = oauthErrorCode(error);
      const description = params.get("error_description");
      await final({ status: "failed", error: code, message: description ? foreignText(description, exchange.secrets) : `the authorization server answered ${code}` });
      return { status: 200, text: "Authorization failed. You can close this window." };
    }
    const iss = issProblem(params, a.issuer, a.issAdvertised);
    if (iss !== undefined) {
      const got = params.get("iss");
      await final({ status: "failed", error: "upstream_error", message: `${iss} (expected issuer ${a.issuer}${got ? `, got ${foreignText(got, exchange.secrets)}` : ""})` });
      return { status: 400, text: "The authorization response came from another issuer. You can close this window." };
    }
    const connection = await this.#o.store.getConnection(a.connectionId);
    if (!connection || connection.url !== a.url) {
      await final({ status: "failed", error: "connection_changed", message: "the connection changed during consent" });
      return { status: 409, text: "The connection changed; start again." };
    }
    // Started before the catalog left its url out: the code goes to no token endpoint.
    if (!inCatalog(this.#o.catalog, connection.url)) {
      await final({ status: "failed", error: NOT_IN_CATALOG, message: notInCatalogMessage(connection) });
      return { status: 403, text: "This connection's URL is not in the deployment's catalog." };
    }
    let tokens: OAuthTokens;
    const grant = grantLifetimeRecorder(exchange.fetch);
    try {
      tokens = await exchangeAuthorization(a.issuer, {
        metadata: secret.metadata,
        clientInformation: secret.client,
        authorizationCode: params.get("code") ?? "",
        codeVerifier: secret.codeVerifier,
        redirectUri: this.#o.redirectUri,
        resource: new URL(secret.resource),
        fetchFn: grant.fetch,
      });
      tokens = checkedTokens(tokens, a.connectionId, a.issuer);
    } catch (error) {
      await final({ status: "failed", error: "token_exchange_failed", message: foreignProblem(error, exchange.secrets) });
      return { status: 502, text: "Authorization failed." };
    }
    if ((await this.#o.store.getAuthorization(a.id))?.outcome.status !== "pending") return { status: 409, text: "This authorization ended meanwhile; start again." };
    const at = this.#o.now();
    const stored = await this.#o.store.putCredential({
      id: a.connectionId,
      person: a.person,
      url: a.url,
      issuer: a.issuer,
      authorizedAt: at,
      authorizedBy: a.by,
      expiresAt: tokens.expires_in !== undefined ? at + Math.round(tokens.expires_in * 1000) : null,
      refreshExpiresAt: tokens.refresh_token === undefined ? null : refreshExpiryAfter({ lifetimeSeconds: grant.lifetime(), rotated: true, previous: null, now: at }),
      secret: {
        tokens,
        client: secret.client,
        authorizationServerUrl: a.issuer,
        metadata: secret.metadata,
        resource: secret.resource,
        ...(secret.resourceMetadataUrl ? { resourceMetadataUrl: secret.resourceMetadataUrl } : {}),
      },
    });
    // Deleted or moved to another url while the code was exchanged (sections 3.4, 5).
    if (!stored) {
      await final({ status: "failed", error: "connection_changed", message: "the connection changed during consent" });
      return { status: 409, text: "The connection changed; start again." };
    }
    await final({ status: "authorized" });
    return { status: 200, text: "Authorized. You can close this window." };
  }

  /**
   * RFC 7009 at the server that issued it, best effort: a failed revocation fails nothing (section
   * 5). What became of it: `revoked` (the server answered 200 for the refresh token, or for the
   * access token when there is none), `not_offered` (its metadata names no revocation endpoint, or
   * the connection is outside the catalog: nothing is sent then), `failed` (another answer, or none).
   */
  async revoke(credential: CredentialRecord | undefined): Promise<RevocationOutcome> {
    // Nothing is sent on behalf of a connection outside the catalog, not even to its revocation endpoint.
    if (!credential || !inCatalog(this.#o.catalog, credential.url)) return "not_offered";
    const { metadata, client, tokens } = credential.secret;
    const endpoint = metadata && revocationEndpoint(metadata);
    if (!metadata || !endpoint) return "not_offered";
    const { fetch: exchangeFetch } = this.exchange();
    const fetch: typeof globalThis.fetch = (input, init) => exchangeFetch(input, { ...init, signal: AbortSignal.timeout(Math.min(REVOCATION_TIMEOUT_MS, httpTimeoutMs(this.#o.env))) });
    let first: boolean | undefined;
    for (const [token, hint] of [
      [tokens.refresh_token, "refresh_token"],
      [tokens.access_token, "access_token"],
    ] as const) {
      if (!token) continue;
      const ok = await postRevocation({ fetch, endpoint, metadata, client, token, hint }).then(
        async (r) => (await r.body?.cancel(), r.status === 200),
        () => false,
      );
      first ??= ok;
    }
    return first ? "revoked" : "failed";
  }

  /** Whether the MCP server's resource metadata now names another authorization server (section 3.6). */
  async #serverMoved(credential: CredentialRecord, fetch: typeof globalThis.fetch): Promise<boolean> {
    try {
      const { resourceMetadataUrl } = credential.secret;
      const metadata = await discoverOAuthProtectedResourceMetadata(credential.url, resourceMetadataUrl ? { resourceMetadataUrl } : undefined, fetch);
      const named = metadata.authorization_servers?.[0];
      return named !== undefined && !sameIssuer(credential.secret.authorizationServerUrl, named) && !sameIssuer(credential.issuer, named);
    } catch {
      return false; // no metadata names any server now: the one that issued it stays the one
    }
  }

  /** One refresh per credential version, however many requests ask; undefined when it cannot be refreshed (the credential is then deleted). */
  refresh(credential: CredentialRecord): Promise<CredentialRecord | undefined> {
    const key = `${credential.id}\0${credential.person}\0${credential.version}`;
    let pending = this.#refreshes.get(key);
    if (!pending) {
      pending = this.#refreshOnce(credential).finally(() => this.#refreshes.delete(key));
      this.#refreshes.set(key, pending);
    }
    return pending;
  }

  /**
   * Under the credential's lock in the store, so that across every replica one exchange spends a
   * rotating refresh token; the others wait and use what it stored (store/types.ts).
   */
  async #refreshOnce(credential: CredentialRecord): Promise<CredentialRecord | undefined> {
    let outcome = "refreshed";
    const exchange = this.exchange();
    const result = await this.#o.store
      .refreshCredential(credential.id, credential.person, credential.version, async (current) => {
        const { secret } = current;
        const refreshToken = secret.tokens.refresh_token;
        // Section 5: the secret material goes (it is useless), the loss and its reason stay.
        const dead = (counted: string, reason: LossReason, message: string) => ((outcome = counted), { delete: { reason, message } });
        if (!refreshToken) return dead("no_refresh_token", "no_refresh_token", "its access token expired and the authorization server issued no refresh token");
        for (const value of [refreshToken, secret.tokens.access_token, secret.client.client_secret]) exchange.secrets.add(value);
        // Section 3.6: never send the credential's tokens to an authorization server it did not come from.
        if (await this.#serverMoved(current, exchange.fetch)) {
          return dead("server_moved", "server_moved", `${foreignText(current.url, exchange.secrets)} now names another authorization server than ${foreignText(current.issuer, exchange.secrets)}, which issued it`);
        }
        let tokens: OAuthTokens;
        const grant = grantLifetimeRecorder(exchange.fetch);
        try {
          tokens = await refreshAuthorization(secret.authorizationServerUrl, {
            ...(secret.metadata ? { metadata: secret.metadata } : {}),
            clientInformation: secret.client,
            refreshToken,
            ...(secret.resource ? { resource: new URL(secret.resource) } : {}),
            fetchFn: grant.fetch,
          });
          tokens = checkedTokens(tokens, current.id, current.issuer);
        } catch (error) {
          // The server's own words, made visible, cut to a line and scrubbed of this exchange's
          // secrets (foreign.ts): whatever it echoes, the refresh token included, is not kept.
          if (grantRejected(error)) return dead("rejected", "refresh_rejected", `${foreignText(current.issuer, exchange.secrets)} rejected the refresh: ${foreignProblem(error, exchange.secrets)}`);
          this.#o.metrics.refresh("failed");
          throw upstreamFailure(`refreshing the credential of ${current.id} at ${current.issuer} failed`, error, exchange.secrets);
        }
        const at = this.#o.now();
        return {
          id: current.id,
          person: current.person,
          url: current.url,
          issuer: current.issuer,
          authorizedAt: current.authorizedAt,
          authorizedBy: current.authorizedBy,
          expiresAt: tokens.expires_in !== undefined ? at + Math.round(tokens.expires_in * 1000) : null,
          // The refresh token's expiry goes with the refresh token (grant-expiry.ts): stated anew,
          // unknown for a new one that came without it, kept with the one kept.
          refreshExpiresAt: refreshExpiryAfter({ lifetimeSeconds: grant.lifetime(), rotated: tokens.refresh_token !== undefined && tokens.refresh_token !== refreshToken, previous: current.refreshExpiresAt ?? null, now: at }),
          // The old refresh token stays when the server sends none (no rotation).
          secret: { ...secret, tokens: { ...tokens, refresh_token: tokens.refresh_token ?? refreshToken } },
        };
      })
      .catch((error: unknown) => {
        // A store that does not answer is said as such (agents.ts words it for the client).
        if (error instanceof Refusal || error instanceof StoreUnavailable) throw error;
        throw new Refusal(503, "unavailable", `cannot refresh the credential of ${credential.id}: ${foreignProblem(error, exchange.secrets)}`);
      });
    // Another replica's refresh, a DELETE, a url change or a new consent came first: theirs stands.
    this.#o.metrics.refresh(result.outcome === "moved" ? "superseded" : outcome);
    return result.credential;
  }

  /**
   * Why `holder`'s credential of the connection (SHARED: the connection's) was lost, when it was
   * lost for good at its current url and not replaced since.
   */
  async lossOf(connection: Pick<ConnectionRecord, "id" | "url">, holder: string): Promise<CredentialLoss | undefined> {
    return (await this.#o.store.credentialLosses(holder)).find((l) => l.id === connection.id && l.url === connection.url);
  }

  /** The words of a refusal for a connection whose credential (of `holder`) is gone: why, when the store recorded it. */
  async #notAuthorized(connection: ConnectionRecord, holder: string, fallback: string): Promise<Refusal> {
    const loss = await this.lossOf(connection, holder).catch(() => undefined);
    const why = loss ? `${fallback}: it was lost for good (${loss.reason}: ${loss.message})` : fallback;
    return new Refusal(409, "not_authorized", `${connection.id}: ${why}; run \`subs mcp login ${connection.id}\``);
  }

  /**
   * The credential for the connection's current url, refreshed when it expires within the margin.
   * Its tokens and client secret join `secrets`: whatever the caller then says of its use is
   * scrubbed of them, whoever quotes them (a server that issued them, one that echoes them).
   */
  async credentialFor(connection: ConnectionRecord, person: string, secrets?: Secrets): Promise<CredentialRecord> {
    this.#allowed(connection);
    const holder = holderFor(connection, person);
    let credential = await this.#o.store.getCredential(connection.id, holder);
    if (!credential || credential.url !== connection.url) {
      throw await this.#notAuthorized(connection, holder, connection.credential === "personal" ? "the deployment holds no credential of yours for it (each person logs in to it)" : "the deployment holds no credential for it");
    }
    if (refreshDue(credential, this.#o.now())) {
      const fresh = await this.refresh(credential);
      if (!fresh) throw await this.#notAuthorized(connection, holder, "its access token expired and could not be refreshed");
      credential = fresh;
    }
    learnCredential(credential, secrets);
    return credential;
  }

  /**
   * Runs `use` with a usable access token; on a 401 before expiry, refreshes once and runs it
   * once more (section 3.6). A credential that still fails is deleted: it can be neither used
   * nor refreshed.
   */
  async withCredential<T>(connection: ConnectionRecord, person: string, use: (accessToken: string) => Promise<T | { refused: 401 }>, secrets?: Secrets): Promise<T> {
    let credential = await this.credentialFor(connection, person, secrets);
    const first = await use(credential.secret.tokens.access_token);
    if (!isRefused(first)) return first;
    const fresh = await this.refresh(credential);
    if (!fresh) throw await this.#notAuthorized(connection, credential.person, `${connection.url} refused the credential and it could not be refreshed`);
    credential = fresh;
    learnCredential(credential, secrets);
    const second = await use(credential.secret.tokens.access_token);
    if (!isRefused(second)) return second;
    // A token that had expired by the time it was refused (a loaded machine, a clock ahead of the
    // server's) says nothing against the grant: the credential is kept, and the request may be
    // retried. Only a token refused within its lifetime shows a grant the server no longer honours.
    if (credential.expiresAt !== null && this.#o.now() >= credential.expiresAt) {
      throw new Refusal(503, "unavailable", `${connection.id}: ${connection.url} refused the refreshed credential, which had expired on the way; retry`);
    }
    const loss: Loss = { reason: "refused_after_refresh", message: `${connection.url} refused the access token a refresh had just issued` };
    await this.#o.store.deleteCredential(credential.id, credential.person, credential.version, loss, this.#o.now());
    throw new Refusal(409, "not_authorized", `${connection.id}: ${connection.url} refused the refreshed credential; run \`subs mcp login ${connection.id}\``);
  }

  /**
   * Section 3.12: the connection's headers, each template filled from the values held for it and
   * its url, never from the deployment's own environment (a declaration is an `apply` token's to
   * write; the operator's variables are not its to read). The values join `secrets`. A variable
   * with no value held is `not_authorized`, naming it; {} when it declares no headers.
   */
  async headersFor(connection: ConnectionRecord, secrets?: Secrets): Promise<Record<string, string>> {
    this.#allowed(connection);
    if (!connection.headers) return {};
    const held: Record<string, string> = Object.create(null);
    for (const v of await this.#o.store.headerValues(connection.id, connection.url)) {
      held[v.name] = v.value;
      secrets?.add(v.value);
    }
    const missing = new Set<string>();
    const headers: Record<string, string> = {};
    for (const [name, template] of Object.entries(connection.headers)) headers[name] = expandTemplates(template, held, missing);
    if (missing.size > 0) {
      throw new Refusal(409, "not_authorized", `${connection.id}: the deployment holds no value of ${[...missing].join(", ")}; run \`subs mcp login ${connection.id}\``);
    }
    return headers;
  }

  /**
   * Runs `use` with the headers a request to the connection carries (section 3.12): its headers'
   * values, and `Authorization` with a usable access token when it holds an OAuth credential for
   * the url (withCredential's refresh and retry). A connection whose headers name variables needs
   * no credential: without one it is sent the headers alone, and a 401 then says to hand over new
   * values. One that names none needs the credential, as before headers existed. `person`: the
   * caller's, whose credential a personal connection uses.
   */
  async withAccess<T>(connection: ConnectionRecord, person: string, use: (headers: Record<string, string>) => Promise<T | { refused: 401 }>, secrets?: Secrets): Promise<T> {
    const fixed = await this.headersFor(connection, secrets);
    if (headerVariables(connection.headers ?? {}).length > 0) {
      const credential = await this.#o.store.getCredential(connection.id, holderFor(connection, person));
      if (!credential || credential.url !== connection.url) {
        const answer = await use(fixed);
        if (!isRefused(answer)) return answer;
        throw new Refusal(409, "not_authorized", `${connection.id}: ${connection.url} refused the values of its headers; run \`subs mcp login ${connection.id}\` to hand over new ones`);
      }
    }
    return this.withCredential(connection, person, (accessToken) => use({ ...fixed, authorization: `Bearer ${accessToken}` }), secrets);
  }

  /**
   * Section 3.6: tools/list to the end, with the deployment's credential and header values. What
   * it returns is the server's and may quote either: its caller scrubs the answer with `secrets`.
   */
  async tools(connection: ConnectionRecord, person: string, secrets: Secrets): Promise<Tool[]> {
    return this.withAccess(connection, person, async (headers) => {
      const { connectMcp, listAllTools } = await import("../mcp/connect.ts");
      const { challengeRecorder } = await import("../mcp/open.ts");
      let challenge: { status: number; error?: string; scope?: string } | undefined;
      const fetch = challengeRecorder(learningFetch(this.#o.fetch, secrets, { answers: "issued" }), (c) => (challenge = c));
      let client: Awaited<ReturnType<typeof connectMcp>> | undefined;
      try {
        client = await connectMcp({ url: connection.url, fetch, headers, requestTimeoutMs: 30_000 });
        return await listAllTools(client, { requestTimeoutMs: 30_000 });
      } catch (error) {
        const status = (error as { code?: unknown }).code;
        if (status === 401 || challenge?.status === 401) return { refused: 401 as const };
        if (challenge?.status === 403 && challenge.error === "insufficient_scope") {
          throw new Refusal(409, "not_authorized", `${connection.id}: ${connection.url} needs scope ${challenge.scope ? foreignText(challenge.scope, secrets) : "(not named)"}; add it to oauth.scopes and run \`subs mcp login ${connection.id}\``);
        }
        throw upstreamFailure(connection.url, error, secrets);
      } finally {
        await client?.close().catch(() => {});
      }
    }, secrets);
  }
}

/**
 * A failed exchange with a server, for the API's caller: a request the deployment's address rules
 * kept from leaving is its own refusal (`403 address_not_allowed`: retrying cannot help, the
 * operator's setting can), any other failure `502 upstream_error` with its summary (foreign.ts).
 */
function upstreamFailure(what: string, error: unknown, secrets: Secrets): Refusal {
  const notAllowed = addressRefusal(error);
  if (notAllowed) return new Refusal(403, "address_not_allowed", `${what}: ${notAllowed.message}; ${ALLOW_PRIVATE_HINT}`);
  return new Refusal(502, "upstream_error", `${what}: ${foreignProblem(error, secrets)}`);
}

/** What a credential holds that a server could quote back, learnt by the exchange that uses it. */
function learnCredential(credential: CredentialRecord, secrets: Secrets | undefined): void {
  if (!secrets) return;
  const { tokens, client } = credential.secret;
  for (const value of [tokens.access_token, tokens.refresh_token, tokens.id_token, client.client_secret]) secrets.add(value);
}

/** What revoke() did with a credential's grant (RFC 7009). */
export type RevocationOutcome = "revoked" | "not_offered" | "failed";

const isRefused = (value: unknown): value is { refused: 401 } => typeof value === "object" && value !== null && (value as { refused?: unknown }).refused === 401 && Object.keys(value).length === 1;
