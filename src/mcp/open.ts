// Opens an MCP client for one declared connection with the credential the file says it uses:
// a static token from `$token_env`, or the OAuth credential stored for this id, refreshed first
// when it is about to expire. A stored credential is only ever sent to the url it was
// issued for. With nothing stored for the id, the server is tried without a credential: an MCP
// answer is recorded as `subs mcp login` records an open server, a 401 needs a login.
import path from "node:path";
import type { Client } from "@modelcontextprotocol/sdk/client/index.js";
import type { ClientCapabilities } from "@modelcontextprotocol/sdk/types.js";
import type { UpstreamHandshake } from "./client-handshake.ts";
import { UnauthorizedError } from "@modelcontextprotocol/sdk/client/auth.js";
import { isLocalServer, whereIs, type Config, type ConnectionConfig, type RemoteConnection } from "../config/types.ts";
import type { Context } from "../context.ts";
import { aboutId, failed, needsLogin, refused, SubsError } from "../errors.ts";
import { networkFailure } from "../http/guarded-fetch.ts";
import { cut } from "../text/cut.ts";
import { silentReporter, type Reporter } from "../report.ts";
import { answerLimitMiB } from "./answer-cap.ts";
import { fileHeaders, OPEN, UNTRIED, oauthAccessToken, staticAuthorization } from "./credential.ts";
import { connectMcp, requestOptions } from "./connect.ts";

export type OpenConnectionOptions = {
  ctx: Pick<Context, "env" | "fetch" | "now"> & Partial<Pick<Context, "processGroups" | "debugLog" | "secrets" | "signal">>;
  config: Config;
  connection: ConnectionConfig;
  signal?: AbortSignal;
  /** How long one MCP request may go unanswered (src/mcp/connect.ts); the SDK's 60 s when unset. */
  requestTimeoutMs?: number;
  /** Notices (e.g. credentials of deleted sections revoked); silent when absent. */
  reporter?: Reporter;
  /**
   * The server rejected (401) the stored token of an OAuth connection at this time (ms, Date.now()):
   * refresh before connecting, unless another process stored a newer token since.
   */
  tokenRejectedAt?: number;
  /** Called with every 401/403 answer's WWW-Authenticate challenge (step-up needs its scope). */
  onChallenge?: (challenge: AuthChallenge) => void;
  /** What the client says it can do at `initialize` (src/mcp/connect.ts). */
  capabilities?: ClientCapabilities;
  /** A session opened by hand with the credential firstCredential gave, to take over (src/mcp/connect.ts). */
  adopt?: UpstreamHandshake;
  /** A local server: one process for every session of this subs process (src/mcp/local-client.ts). */
  shareLocal?: boolean;
};

export type AuthChallenge = { status: 401 | 403; error?: string; scope?: string; resourceMetadataUrl?: string };

/** A 403 `insufficient_scope` from the MCP server (RFC 6750 §3.1): the token lacks `scope`. */
export class InsufficientScopeError extends SubsError {
  readonly scope: string | undefined;
  constructor(id: string, scope: string | undefined) {
    super("failed", `${id}: the server needs more permissions${scope ? ` (scope: ${scope})` : ""}`, {
      hint: `run \`subs mcp login ${id}\` and grant them`,
      code: "insufficient_scope",
    });
    this.scope = scope;
  }
}

export async function openConnection(options: OpenConnectionOptions): Promise<Client> {
  const { connection } = options;
  if (isLocalServer(connection)) {
    const { openLocalClient } = await import("./local-client.ts");
    return openLocalClient({
      ctx: options.ctx,
      config: options.config,
      connection,
      ...(options.shareLocal ? { shared: true } : {}),
      ...(options.signal ? { signal: options.signal } : {}),
      ...(options.requestTimeoutMs !== undefined ? { requestTimeoutMs: options.requestTimeoutMs } : {}),
      ...(options.capabilities ? { capabilities: options.capabilities } : {}),
    });
  }
  return openRemote({ ...options, connection });
}

async function openRemote(options: OpenConnectionOptions & { connection: RemoteConnection }): Promise<Client> {
  const { ctx, connection } = options;
  const answerLimit = { id: connection.id, mib: answerLimitMiB(ctx.env) };
  const headers: Record<string, string> = fileHeaders(ctx, connection);
  if (connection.auth) headers.authorization = staticAuthorization(ctx, connection);
  let last: AuthChallenge | undefined;
  const fetch = challengeRecorder(ctx.fetch, (challenge) => {
    last = challenge;
    options.onChallenge?.(challenge);
  });
  // Only the first attempt: a retry (after a refresh) opens a session of its own.
  let adopt = options.adopt;
  const connect = () => {
    const taken = adopt;
    adopt = undefined;
    return connectMcp({
      url: connection.url,
      fetch,
      headers,
      answerLimit,
      ...(options.signal ? { signal: options.signal } : {}),
      ...(options.requestTimeoutMs !== undefined ? { requestTimeoutMs: options.requestTimeoutMs } : {}),
      ...(options.capabilities ? { capabilities: options.capabilities } : {}),
      ...(taken ? { adopt: taken } : {}),
    });
  };
  if (connection.auth) {
    try {
      return await connect();
    } catch (error) {
      throw mcpError(connection, error, last);
    }
  }
  // OAuth: a 401 to a token the store thinks valid (revoked, or expired early at the server) is
  // answered by one refresh and one retry, as the spec's flow has it; a second 401 needs a login.
  const token = await oauthAccessToken(options, options.tokenRejectedAt);
  if (token === OPEN || token === UNTRIED) {
    // No credential to send: found open by `subs mcp login`, or never tried (a server
    // that needs none is found without a login; MCP authorization is optional for a server).
    let client: Client | undefined;
    try {
      client = await connect();
      // Some servers answer `initialize` to anyone and ask for authorization from the first real
      // request: a request past the handshake decides, before the server is recorded as open.
      // Only the first time: once recorded, the finding is OPEN and costs nothing more.
      if (token === UNTRIED) await answeredPastHandshake(client, options);
    } catch (error) {
      await client?.close().catch(() => {});
      const problem = mcpError(connection, error, last);
      if (token === OPEN) {
        if (problem.code !== "token_rejected") throw problem;
        throw new SubsError("needs_login", `${connection.id}: the server now asks for authorization`, { hint: `run \`subs mcp login ${connection.id}\``, code: "needs_login" });
      }
      // A 401 (or a 403 naming scopes) to a request without a credential: the server wants one.
      if (problem.code === "token_rejected" || problem instanceof InsufficientScopeError) throw needsLogin(connection.id, "not logged in");
      throw problem;
    }
    if (token === UNTRIED) await recordOpen(options);
    return client;
  }
  headers.authorization = `Bearer ${token}`;
  let rejectedAt: number;
  try {
    return await connect();
  } catch (error) {
    const problem = mcpError(connection, error, last);
    if (problem.code !== "token_rejected" || options.tokenRejectedAt !== undefined) throw problem;
    rejectedAt = ctx.now();
  }
  await assertSameAuthorizationServer(options, last);
  last = undefined;
  const refreshed = await oauthAccessToken(options, rejectedAt);
  // With a rejection time only a stored credential is an answer (oauthAccessToken).
  if (typeof refreshed !== "string") throw needsLogin(connection.id, "not logged in");
  headers.authorization = `Bearer ${refreshed}`;
  try {
    return await connect();
  } catch (error) {
    throw mcpError(connection, error, last);
  }
}

/**
 * `ping` past the handshake (MCP "Ping": either side may send it, the receiver MUST answer). A
 * JSON-RPC error answer still came through without a credential: only a 401/403 or no answer
 * counts against the server being open.
 */
async function answeredPastHandshake(client: Client, options: OpenConnectionOptions): Promise<void> {
  try {
    await client.ping(requestOptions(options));
  } catch (error) {
    const code = error instanceof Error && error.name === "McpError" ? (error as { code?: unknown }).code : undefined;
    // -32001 is the SDK's own timeout: no answer at all.
    if (typeof code === "number" && code !== -32001) return;
    throw error;
  }
}

/**
 * The server answered MCP to a request without a credential: record it as `subs mcp login` does,
 * so `subs mcp list` says `open`, as this command saw. Creates the db if there is none (the
 * finding has nowhere else to go). A failure to record is a warning: the server did answer.
 */
async function recordOpen(options: OpenConnectionOptions & { connection: RemoteConnection }): Promise<void> {
  const { ctx, config, connection } = options;
  const reporter = options.reporter ?? silentReporter;
  const { openEnvironmentStore } = await import("../store/environment.ts");
  try {
    const opened = await openEnvironmentStore(config, { create: true, reporter });
    try {
      if (opened!.store.putOpenConnectionUnlessLoggedIn({ id: connection.id, url: connection.url, checked_at: ctx.now() })) {
        reporter.info(`${connection.id}: the server asks for no credential; calls to it carry none (\`subs mcp list\` shows it open)`);
      }
    } finally {
      opened!.store.close();
    }
  } catch (error) {
    reporter.warn(`${connection.id}: the server asks for no credential, but recording that failed (${error instanceof Error ? error.message : String(error)})`);
  }
}

/**
 * After a 401: a credential belongs to the authorization server that issued it (MCP
 * authorization, "Authorization Server Binding"). When the server's resource metadata now names
 * another one, nothing is refreshed or sent to either: exit 4, and a new login registers with the
 * new server.
 */
export async function assertSameAuthorizationServer(options: Pick<OpenConnectionOptions, "ctx" | "config" | "connection">, challenge: AuthChallenge | undefined): Promise<void> {
  const { ctx, config, connection } = options;
  if (isLocalServer(connection)) return;
  const { openStore } = await import("../store/store.ts");
  const opened = await openStore({ dbPath: config.dbPath, create: false, root: path.dirname(config.path) });
  let issuer: string | undefined;
  try {
    issuer = opened?.store.getCredential(connection.id)?.issuer;
  } finally {
    opened?.store.close();
  }
  if (!issuer) return;
  const { authFetch } = await import("../http/guarded-fetch.ts");
  const now = await authorizationServerNow(authFetch(ctx), connection, challenge);
  if (now && !(await import("../auth/discovery.ts")).sameIssuer(now, issuer)) {
    throw new SubsError("needs_login", `${connection.id}: the server now uses another authorization server (${now}); the stored credential belongs to ${issuer}`, {
      hint: `run \`subs mcp login ${connection.id}\``,
      code: "issuer_changed",
    });
  }
}

/** The authorization server the MCP server's resource metadata names now, or undefined when unknown. */
async function authorizationServerNow(fetch: typeof globalThis.fetch, connection: RemoteConnection, challenge: AuthChallenge | undefined): Promise<string | undefined> {
  const { discoverOAuthProtectedResourceMetadata } = await import("@modelcontextprotocol/sdk/client/auth.js");
  try {
    let metadataUrl: URL | undefined;
    try {
      if (challenge?.resourceMetadataUrl) metadataUrl = new URL(challenge.resourceMetadataUrl);
    } catch {}
    const metadata = await discoverOAuthProtectedResourceMetadata(connection.url, metadataUrl ? { resourceMetadataUrl: metadataUrl } : {}, fetch);
    return metadata.authorization_servers?.[0];
  } catch {
    return undefined;
  }
}

/** Wraps fetch to report every 401/403 challenge from the server (the SDK's errors drop the header). */
export function challengeRecorder(fetch: typeof globalThis.fetch, record: (challenge: AuthChallenge) => void): typeof globalThis.fetch {
  return async (input, init) => {
    const response = await fetch(input, init);
    const challenge = challengeOf(response);
    if (challenge) record(challenge);
    return response;
  };
}

/** The WWW-Authenticate challenge of a 401/403 answer (RFC 6750 §3). */
function challengeOf(response: Response): AuthChallenge | undefined {
  if (response.status !== 401 && response.status !== 403) return undefined;
  const header = response.headers.get("www-authenticate") ?? "";
  const field = (name: string) => new RegExp(`${name}=(?:"([^"]*)"|([^\\s,]+))`).exec(header)?.slice(1).find((v) => v !== undefined);
  const error = field("error");
  const scope = field("scope");
  const resourceMetadataUrl = field("resource_metadata");
  return {
    status: response.status,
    ...(error ? { error } : {}),
    ...(scope ? { scope } : {}),
    ...(resourceMetadataUrl ? { resourceMetadataUrl } : {}),
  };
}

/** An error from talking MCP to `connection` as the user should see it. */
export function mcpError(connection: ConnectionConfig, error: unknown, challenge: AuthChallenge | undefined): SubsError {
  if (error instanceof SubsError) return error;
  const status = (error as { code?: unknown }).code;
  if (error instanceof UnauthorizedError || status === 401 || (challenge?.status === 401 && status === undefined)) {
    if (connection.auth) return failed(`${connection.id}: the server rejected the token in $${connection.auth.tokenEnv}`, { hint: "check the token's value and scopes" });
    return new SubsError("needs_login", `${connection.id}: the server rejected the stored credential`, { hint: `run \`subs mcp login ${connection.id}\``, code: "token_rejected" });
  }
  if (status === 403 && challenge?.status === 403 && challenge.error === "insufficient_scope") {
    if (connection.auth) {
      return failed(`${connection.id}: the token in $${connection.auth.tokenEnv} lacks a scope the server needs${challenge.scope ? ` (${challenge.scope})` : ""}`, {
        code: "insufficient_scope",
        hint: "use a token with those permissions",
      });
    }
    return new InsufficientScopeError(connection.id, challenge.scope);
  }
  return connectionError(connection, error);
}

export function connectionError(connection: ConnectionConfig, error: unknown): SubsError {
  if (error instanceof SubsError) return error;
  const reason = cut(error instanceof Error ? error.message : String(error), 300);
  const origin = whereIs(connection);
  const status = (error as { code?: unknown }).code;
  if (error instanceof Error && error.name === "McpError") {
    // The SDK's own deadline (RequestTimeout, -32001): the server said nothing at all.
    if (status === -32001) {
      const ms = (error as { data?: { timeout?: unknown } }).data?.timeout;
      const within = typeof ms === "number" ? ` within ${Math.round(ms / 1000)}s` : " in time";
      return failed(`${connection.id}: ${origin} gave no answer${within}`, { cause: error, code: "timeout", hint: "check that the server is up" });
    }
    return failed(`${connection.id}: the server answered with an error (${reason})`, { cause: error });
  }
  if (typeof status === "number" && status >= 400) return failed(`${connection.id}: ${origin} answered HTTP ${status} (${reason})`, { cause: error });
  // No HTTP answer: "cannot reach" only when no connection was made, with the hint that fits.
  return aboutId(networkFailure(origin, error), connection.id) as SubsError;
}
