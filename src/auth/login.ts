// `subs mcp login <id>` for a local OAuth connection: the MCP authorization flow as an OAuth 2.1
// public native client (product.md, "The MCP authorization flow (local)"). The SDK builds the
// PKCE authorization URL and makes the token request; this module adds what its `auth()` lacks:
// `state` and `iss` checks, a refusal when S256 is not listed, `resource` always, issuer-bound
// storage and an absolute expiry.
import { randomBytes } from "node:crypto";
import { exchangeAuthorization, startAuthorization } from "@modelcontextprotocol/sdk/client/auth.js";
import type { OAuthTokens } from "@modelcontextprotocol/sdk/shared/auth.js";
import type { RemoteConnection as ConnectionConfig } from "../config/types.ts";
import type { Context } from "../context.ts";
import { failed, interrupted, SubsError } from "../errors.ts";
import type { Store } from "../store/store.ts";
import { clientAndLoopback, clientRejected, dropRegistration, dropRegistrationAfterWait, presentedClient, registrationRejected, type ClientKind } from "./client.ts";
import { discover, type Discovery } from "./discovery.ts";
import { oauthProblem } from "./errors.ts";
import { pastedResponse, type ResponseCheck } from "./loopback.ts";
import { grantLifetimeRecorder, refreshExpiryAfter } from "./grant-expiry.ts";
import { checkedTokens } from "./tokens.ts";
import { authFetch } from "../http/guarded-fetch.ts";
import { cut } from "../text/cut.ts";

export type LoginContext = Pick<Context, "env" | "fetch" | "now" | "openBrowser" | "signal" | "terminalStdin">;

export type LoginOptions = {
  ctx: LoginContext;
  connection: ConnectionConfig;
  store: Store;
  /** Told each step the person should see; the command's renderer (output/login-words.ts) words them. */
  steps: (step: LoginStep) => void;
  /** --port: a fixed loopback port. */
  port?: number;
  /** --timeout, in milliseconds. */
  timeoutMs: number;
  /** false under --no-browser: print the URL only (and accept a pasted redirect on a terminal). */
  openBrowser: boolean;
  /** Step-up (403 insufficient_scope): exactly these scopes, already the union of old and new. */
  scopes?: string[];
};

export type LoginResult = AuthorizedResult | OpenResult;

/** A step of a login, in the order they come; `could_not_start` may follow any before `ready`. */
export type LoginStep =
  | { step: "contacting"; id: string; origin: string }
  | { step: "could_not_start"; id: string }
  /** The server answered without asking for a credential. */
  | { step: "open"; id: string }
  | { step: "preparing"; id: string; issuer: string }
  /** The authorization URL is built: consent is given at `issuer`. */
  | { step: "ready"; id: string; issuer: string }
  /** A response for another login (no `state`, or another one) reached the loopback listener, and was ignored. */
  | { step: "foreign_response"; id: string }
  | { step: "opening_browser"; id: string; url: string }
  | { step: "browser_failed"; error: unknown }
  /** --no-browser: the person opens `url`. */
  | { step: "visit"; id: string; url: string }
  /** The person may paste the redirected address on this terminal. */
  | { step: "paste_offered" }
  /** A pasted address was refused, and why. */
  | { step: "paste_refused"; why: string }
  | { step: "waiting"; id: string; timeoutMs: number; pasting: boolean }
  | { step: "waited"; id: string; outcome: "received" | "not_given" | "stopped" | "no_consent" };

/** The server answered without asking for a credential; that finding is stored instead of one. */
export type OpenResult = { id: string; open: true };

export type AuthorizedResult = {
  id: string;
  open?: undefined;
  issuer: string;
  scopes: string[];
  expiresAt: number | null;
  refreshable: boolean;
  client: ClientKind;
};

/** Combines a signal with the context's Ctrl-C signal, so network calls stop on interrupt. */
export function fetchWithSignal(fetch: typeof globalThis.fetch, signal: AbortSignal): typeof globalThis.fetch {
  return (input, init) => fetch(input, { ...init, signal: init?.signal ? AbortSignal.any([init.signal, signal]) : signal });
}

const split = (scope: string | undefined) => (scope ?? "").split(" ").filter(Boolean);

/**
 * The scope to request. `oauth.scopes` from the file, when set and not empty, are what is asked
 * for: a person who writes `scopes = ["read"]` means read, not read plus whatever the server
 * suggests, and a deployment requests them exactly too (docs/deployment-protocol.md, section 4).
 * Otherwise the MCP authorization spec's "Scope Selection Strategy": the 401's `scope`, else the
 * resource's `scopes_supported`, else none. Either way `offline_access` (a refresh token) only
 * when the authorization server lists it.
 */
export function selectScopes(discovery: Discovery, connection: ConnectionConfig, stepUp: string[] | undefined): string[] {
  const configured = connection.oauth?.scopes ?? [];
  const chosen = discovery.challenge.scope ? split(discovery.challenge.scope) : (discovery.resourceMetadata?.scopes_supported ?? []);
  const scopes = new Set(stepUp ?? (configured.length > 0 ? configured : chosen));
  const serverLists = discovery.metadata.scopes_supported ?? [];
  if (serverLists.includes("offline_access")) scopes.add("offline_access");
  else scopes.delete("offline_access");
  return [...scopes];
}

/** RFC 9207 §2.4, as the MCP authorization spec's table states it; exact string comparison. */
export function issProblem(params: URLSearchParams, issuer: string, advertised: boolean): string | undefined {
  const iss = params.get("iss");
  if (iss === null) return advertised ? "the authorization response has no `iss` although the server advertises it (RFC 9207); refusing it" : undefined;
  return iss === issuer ? undefined : "the authorization response came from another issuer than the one the request was sent to (RFC 9207 mix-up protection); refusing it";
}

/**
 * What login accepts as the authorization response to its request: `state` first (a response for
 * another request is not looked at further, RFC 6749 §10.12), then `iss` (RFC 9207).
 */
export function responseCheck(expected: { state: string; issuer: string; issAdvertised: boolean }): ResponseCheck {
  return (params) => {
    const got = params.get("state");
    if (got === null) {
      // Some servers drop `state` from error redirects. A refusal without it is still the
      // person's "no": nothing is redeemed or stored, so a forged one can only end this wait,
      // which Ctrl-C does too. A code without `state` is never redeemed.
      if (params.has("error") && !params.has("code")) return undefined;
      return { why: "the authorization response carries no `state`; refusing it", forThisLogin: false };
    }
    if (got !== expected.state) return { why: "the authorization response's `state` does not match this login; refusing it", forThisLogin: false };
    const iss = issProblem(params, expected.issuer, expected.issAdvertised);
    return iss === undefined ? undefined : { why: iss, forThisLogin: true };
  };
}

export async function login(options: LoginOptions): Promise<LoginResult> {
  try {
    return await loginFlow(options);
  } catch (error) {
    // Whatever was in flight when Ctrl-C came (discovery, registration, the token request) ends as an interrupt.
    if (options.ctx.signal.aborted) throw interrupted();
    throw error;
  }
}

async function loginFlow(options: LoginOptions): Promise<LoginResult> {
  const { ctx, connection, store, steps } = options;
  if (ctx.signal.aborted) throw interrupted();
  // Deadline, size cap and same-origin redirects on every call to a server found by discovery.
  const fetch = fetchWithSignal(authFetch(ctx), ctx.signal);
  // Progress from the first request on: discovery and registration can each take the
  // whole HTTP deadline on a slow server, and a terminal must not sit silent meanwhile.
  steps({ step: "contacting", id: connection.id, origin: new URL(connection.url).origin });
  let discovery: Awaited<ReturnType<typeof discover>>;
  try {
    discovery = await discover({ serverUrl: connection.url, fetch, signal: ctx.signal });
  } catch (error) {
    steps({ step: "could_not_start", id: connection.id });
    throw error;
  }
  if ("open" in discovery) {
    steps({ step: "open", id: connection.id });
    store.putOpenConnection({ id: connection.id, url: connection.url, checked_at: ctx.now() });
    return { id: connection.id, open: true };
  }
  const { issuer, metadata, resource } = discovery;
  const scopes = selectScopes(discovery, connection, options.scopes);
  const scope = scopes.length > 0 ? scopes.join(" ") : undefined;
  steps({ step: "preparing", id: connection.id, issuer });

  let prepared = false;
  let setup: Awaited<ReturnType<typeof clientAndLoopback>>;
  try {
    // The client first: a reused registration listens on the port it registered,
    // as servers that compare redirect_uri exactly require (RFC 8252 §7.3 aside).
    setup = await clientAndLoopback({ connection, issuer, metadata, scope, store, env: ctx.env, fetch, now: ctx.now(), port: options.port, signal: ctx.signal });
  } catch (error) {
    steps({ step: "could_not_start", id: connection.id });
    throw error;
  }
  const { client, reused, loopback } = setup;
  try {
    const state = randomBytes(32).toString("base64url");
    const { authorizationUrl, codeVerifier } = await startAuthorization(issuer, {
      metadata,
      clientInformation: client,
      redirectUrl: loopback.redirectUri,
      ...(scope ? { scope } : {}),
      state,
      // RFC 8707: sent whether or not the server publishes resource metadata (the SDK omits it then).
      resource,
    });
    prepared = true;
    steps({ step: "ready", id: connection.id, issuer });

    const check = responseCheck({
      state,
      issuer,
      issAdvertised: (metadata as { authorization_response_iss_parameter_supported?: unknown }).authorization_response_iss_parameter_supported === true,
    });

    // Listen for the response before the browser can possibly deliver it.
    const fromLoopback = loopback.response(check, () => steps({ step: "foreign_response", id: connection.id }));
    fromLoopback.catch(() => {});
    const url = authorizationUrl.href;
    // Opened twice, the one-time link was also opened by someone else on this machine, who may
    // now hold `state`: the login stops before their consent can end it.
    let replayed!: () => void;
    const linkReplayed = new Promise<never>((_, reject) => {
      replayed = () =>
        reject(
          failed(`${connection.id}: the one-time link to the authorization page was opened twice; another program on this machine may have opened it first, so the login was stopped and nothing was stored`, {
            code: "link_replayed",
            hint: `run \`subs mcp login ${connection.id}\` again; if it happens again, use --no-browser and open the printed URL yourself`,
          }),
        );
    });
    linkReplayed.catch(() => {});
    let pasteFrom: NodeJS.ReadableStream | undefined;
    if (options.openBrowser) {
      steps({ step: "opening_browser", id: connection.id, url });
      try {
        // Not the authorization URL itself: `state` must not be in the browser's argv,
        // which every local user can read in /proc.
        await ctx.openBrowser(loopback.openUrl(url, replayed));
      } catch (error) {
        // Said at once, not after the timeout: the person can open the URL elsewhere and, on a
        // terminal, paste the redirect back as under --no-browser (product.md).
        steps({ step: "browser_failed", error });
        pasteFrom = await ctx.terminalStdin?.();
      }
    } else {
      steps({ step: "visit", id: connection.id, url });
      pasteFrom = await ctx.terminalStdin?.();
    }
    if (pasteFrom) steps({ step: "paste_offered" });
    steps({ step: "waiting", id: connection.id, timeoutMs: options.timeoutMs, pasting: pasteFrom !== undefined });
    let params: URLSearchParams;
    try {
      params = await waitForResponse({ ctx, check, loopback: fromLoopback, stop: linkReplayed, timeoutMs: options.timeoutMs, pasteFrom, redirectUri: loopback.redirectUri, steps });
    } catch (error) {
      steps({ step: "waited", id: connection.id, outcome: ctx.signal.aborted ? "stopped" : "no_consent" });
      throw dropRegistrationAfterWait(error, { store, issuer, client, reused, id: connection.id });
    }
    const error = params.get("error");
    steps({ step: "waited", id: connection.id, outcome: error === null ? "received" : "not_given" });
    if (error !== null) {
      const description = params.get("error_description");
      throw failed(`${connection.id}: authorization was not granted (${error}${description ? `: ${cut(description, 200)}` : ""})`, {
        code: error === "access_denied" ? "access_denied" : "authorization_failed",
        ...(error === "access_denied" ? { hint: `run \`subs mcp login ${connection.id}\` again and approve the request` } : {}),
      });
    }
    const code = params.get("code");
    if (!code) throw failed(`${connection.id}: the authorization response carries no code`, { code: "invalid_authorization_response" });
    return await redeemCode({ ctx, connection, store, fetch, issuer, metadata, resource, scopes, client, code, codeVerifier, redirectUri: loopback.redirectUri });
  } catch (error) {
    if (!prepared) steps({ step: "could_not_start", id: connection.id });
    throw error;
  } finally {
    await loopback.close();
  }
}

/**
 * The authorization code exchanged for tokens at the token endpoint (RFC 6749 §4.1.3), the
 * tokens checked and stored as the connection's one credential row.
 */
async function redeemCode(options: {
  ctx: LoginContext;
  connection: ConnectionConfig;
  store: Store;
  fetch: typeof globalThis.fetch;
  issuer: string;
  metadata: Discovery["metadata"];
  resource: string;
  scopes: string[];
  client: Awaited<ReturnType<typeof clientAndLoopback>>["client"];
  code: string;
  codeVerifier: string;
  redirectUri: string;
}): Promise<AuthorizedResult> {
  const { ctx, connection, store, fetch, issuer, metadata, resource, scopes, client, code, codeVerifier, redirectUri } = options;
  let tokens: OAuthTokens;
  const grant = grantLifetimeRecorder(fetch);
  try {
    tokens = await exchangeAuthorization(issuer, {
      metadata,
      clientInformation: presentedClient(client, connection, ctx.env),
      authorizationCode: code,
      codeVerifier,
      redirectUri,
      resource,
      fetchFn: grant.fetch,
    });
  } catch (error) {
    if (ctx.signal.aborted) throw interrupted();
    if (clientRejected(error) && dropRegistration(store, issuer, client)) throw registrationRejected(connection.id, issuer, error);
    throw failed(`${connection.id}: the token request to ${issuer} failed (${oauthProblem(error)})`, { cause: error, code: "token_request_failed" });
  }
  tokens = checkedTokens(tokens, connection.id, issuer);
  if (tokens.token_type.toLowerCase() !== "bearer") {
    throw failed(`${connection.id}: the authorization server issued a ${tokens.token_type} token; subs sends only bearer tokens`);
  }
  const now = ctx.now();
  const granted = tokens.scope !== undefined ? split(tokens.scope) : scopes;
  const expiresAt = tokens.expires_in !== undefined ? now + Math.round(tokens.expires_in * 1000) : null;
  // One upsert: the row is either the old credential or the whole new one, never half of each.
  store.exclusive(() =>
    store.putCredential({
      id: connection.id,
      url: connection.url,
      issuer,
      resource,
      // A pre-registered client's secret is not in `client`: it stays in its environment variable.
      client_json: JSON.stringify(client),
      access_token: tokens.access_token,
      token_type: tokens.token_type,
      refresh_token: tokens.refresh_token ?? null,
      expires_at: expiresAt,
      refresh_expires_at: tokens.refresh_token === undefined ? null : refreshExpiryAfter({ lifetimeSeconds: grant.lifetime(), rotated: true, previous: null, now }),
      scopes: granted.join(" "),
      created_at: now,
      updated_at: now,
    }),
  );
  return { id: connection.id, issuer, scopes: granted, expiresAt, refreshable: tokens.refresh_token !== undefined, client: client.kind ?? "dynamic" };
}

async function waitForResponse(options: {
  ctx: LoginContext;
  check: ResponseCheck;
  loopback: Promise<URLSearchParams>;
  /** Rejects when the wait must end without a response (the one-time link was replayed). */
  stop: Promise<never>;
  timeoutMs: number;
  /** A terminal the person may paste the redirected URL into (--no-browser, or no browser opened). */
  pasteFrom: NodeJS.ReadableStream | undefined;
  redirectUri: string;
  steps: LoginOptions["steps"];
}): Promise<URLSearchParams> {
  const { ctx } = options;
  const stop = new AbortController();
  const waits: Promise<URLSearchParams>[] = [options.loopback, options.stop];
  if (options.pasteFrom) {
    waits.push(pastedResponse({ stdin: options.pasteFrom, check: options.check, signal: stop.signal, redirectUri: options.redirectUri, tell: (why) => options.steps({ step: "paste_refused", why }) }));
  }
  // The losers of the race may still settle; their outcome is deliberately ignored.
  for (const wait of waits) wait.catch(() => {});
  let timer: NodeJS.Timeout | undefined;
  let onAbort: (() => void) | undefined;
  waits.push(
    new Promise<never>((_, reject) => {
      timer = setTimeout(
        () => reject(failed(`timed out after ${Math.round(options.timeoutMs / 1000)}s waiting for consent in the browser`, { hint: "run the command again, or raise --timeout", code: "timeout" })),
        options.timeoutMs,
      );
      onAbort = () => reject(interrupted());
      if (ctx.signal.aborted) onAbort();
      else ctx.signal.addEventListener("abort", onAbort, { once: true });
    }),
  );
  try {
    return await Promise.race(waits);
  } catch (error) {
    if (ctx.signal.aborted && !(error instanceof SubsError && error.kind === "interrupted")) throw interrupted();
    throw error;
  } finally {
    clearTimeout(timer);
    if (onAbort) ctx.signal.removeEventListener("abort", onAbort);
    stop.abort();
  }
}
