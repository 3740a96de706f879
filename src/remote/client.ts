// A typed client for the deployment protocol (docs/deployment-protocol.md). Every answer is
// validated with zod; 5xx, 429 and network errors are retried with exponential backoff (every
// request is idempotent or safe to repeat, docs "Retries and idempotency"), then reported.
import type * as z from "zod/mini";
import type { RemoteConfig } from "../config/types.ts";
import type { Context } from "../context.ts";
import { remoteNotAllowed } from "../config/secret-pins.ts";
import { failed, interrupted, refused, SubsError, usage } from "../errors.ts";
import type { Reporter } from "../report.ts";
import { withDeadline } from "../http/deadline.ts";
import { errorCode, guardedFetch, HttpGuardError, httpTimeoutMs, isBlockedPort, isDnsFailure, isUntrustedCertificate, UNTRUSTED_CERTIFICATE_HINT } from "../http/guarded-fetch.ts";
import {
  AgentListSchema,
  type LockBody,
  ApiTokenListSchema,
  AuditPageSchema,
  type RemoteAuditPage,
  PersonListSchema,
  RemovedPersonSchema,
  CreatedApiTokenSchema,
  AgentSchema,
  AuthorizationSchema,
  AuthorizationStatusSchema,
  ConnectionListSchema,
  ConnectionSchema,
  ErrorBodySchema,
  StateAnswerSchema,
  ToolListSchema,
  type AgentBody,
  type ApiTokenBody,
  type CreatedApiToken,
  type RemoteApiToken,
  type RemotePerson,
  type RemovedPerson,
  TOKEN_REFUSAL_HINTS,
  type AuthorizationStatus,
  type ConnectionBody,
  type ErrorBody,
  type RemoteAgent,
  type RemoteAuthorization,
  type RemoteConnection,
  type RemoteTool,
  type StateAnswer,
  type StateBody,
} from "./protocol.ts";

export type RetryPolicy = {
  /** Tries in all, the first included. */
  attempts: number;
  baseDelayMs: number;
  maxDelayMs: number;
};

export const DEFAULT_RETRY: RetryPolicy = { attempts: 4, baseDelayMs: 250, maxDelayMs: 5000 };
export type DeploymentClientOptions = {
  remote: RemoteConfig;
  ctx: Pick<Context, "env" | "fetch" | "signal">;
  reporter: Reporter;
  retry?: RetryPolicy;
};

/** A non-2xx answer from the deployment, after retries where they apply. */
export class DeploymentError extends SubsError {
  readonly status: number;
  readonly body: ErrorBody | undefined;
  constructor(kind: SubsError["kind"], message: string, options: { status: number; body?: ErrorBody; hint?: string; details?: Record<string, unknown> }) {
    super(kind, message, {
      code: options.body?.error ?? `http_${options.status}`,
      ...(options.hint ? { hint: options.hint } : {}),
      ...(options.details ? { details: options.details } : {}),
    });
    this.status = options.status;
    this.body = options.body;
  }
}

/** The deployment could not be reached (every attempt failed without an HTTP answer). */
export class DeploymentUnreachableError extends SubsError {}

export type CreatedAuthorization = RemoteAuthorization & {
  /** poll_url resolved against the request URL; same origin as the deployment. */
  pollUrl: URL;
  authorizationUrl: URL;
};

/** The deployment's base URL: [remote].url as a directory, so the protocol's paths resolve under it. */
export function deploymentBase(remote: Pick<RemoteConfig, "url">): URL {
  return new URL(remote.url.endsWith("/") ? remote.url : `${remote.url}/`);
}

export class DeploymentClient {
  readonly base: URL;
  private readonly token: string;
  private readonly remote: RemoteConfig;
  private readonly ctx: DeploymentClientOptions["ctx"];
  private readonly reporter: Reporter;
  private readonly retry: RetryPolicy;

  /** The context's fetch with a cap on answer sizes (the deadline is `timeoutMs`, per attempt). */
  private readonly fetch: typeof globalThis.fetch;
  /**
   * An attempt that takes longer is abandoned and counts as a network error: `SUBS_HTTP_TIMEOUT`
   * (seconds), as for authorization servers, else 30 s.
   */
  private readonly timeoutMs: number;

  constructor(options: DeploymentClientOptions) {
    this.remote = options.remote;
    this.ctx = options.ctx;
    this.fetch = guardedFetch(options.ctx.fetch);
    this.timeoutMs = httpTimeoutMs(options.ctx.env);
    this.reporter = options.reporter;
    this.retry = options.retry ?? DEFAULT_RETRY;
    this.base = deploymentBase(options.remote);
    // Also checked when the file is loaded; here too, where the token is attached
    // (SECURITY.md, "Where environment secrets may go").
    const notAllowed = remoteNotAllowed(options.ctx.env, options.remote);
    if (notAllowed) throw refused(notAllowed.message, { code: "remote_not_allowed", hint: notAllowed.hint });
    const token = options.ctx.env[options.remote.tokenEnv];
    if (!token) {
      throw usage(`$${options.remote.tokenEnv} is not set: it holds the API credential of the deployment at ${this.base.origin}`, {
        hint: `export ${options.remote.tokenEnv}=<API token for ${this.base.origin}> ([remote].token_env names the variable)`,
      });
    }
    this.token = token;
  }

  listConnections(): Promise<RemoteConnection[]> {
    return this.readConnections().then((r) => r.connections);
  }

  /**
   * GET /v1/mcp with the declarations' revision, when the deployment gives one (section 3.10), and
   * its catalog, when it gives one to explain a refused connection (section 3.1).
   */
  async readConnections(): Promise<{ connections: RemoteConnection[]; revision: string | undefined; catalog: string[] | undefined }> {
    const { data } = await this.request("GET", this.url("v1/mcp"), { schema: ConnectionListSchema });
    return { connections: data.connections, revision: data.revision ?? undefined, catalog: data.catalog ?? undefined };
  }

  /** Declares or updates a connection; `created` is true on 201. */
  async putConnection(id: string, body: ConnectionBody): Promise<{ connection: RemoteConnection; created: boolean }> {
    const r = await this.request("PUT", this.url(`v1/mcp/${encodeURIComponent(id)}`), { schema: ConnectionSchema, body });
    return { connection: r.data, created: r.status === 201 };
  }

  /** Deletes a connection and its credential. Already absent (404) counts as done: DELETE is idempotent. */
  async deleteConnection(id: string): Promise<void> {
    await this.request("DELETE", this.url(`v1/mcp/${encodeURIComponent(id)}`), { schema: null, absentIsDone: true });
  }

  /**
   * Section 3.12: hands over the value of a variable the connection's `headers` name, which the
   * deployment holds and fills the template with. Safe to repeat (it replaces the value held), so
   * retried like the other PUTs. The caller has taught the run's secrets the value first: an
   * answer or a --debug trace that quotes it is scrubbed.
   */
  async putSecret(id: string, name: string, value: string): Promise<void> {
    await this.request("PUT", this.url(`v1/mcp/${encodeURIComponent(id)}/secrets/${encodeURIComponent(name)}`), { schema: null, body: { value } });
  }

  async startAuthorization(id: string): Promise<CreatedAuthorization> {
    const url = this.url(`v1/mcp/${encodeURIComponent(id)}/authorizations`);
    const r = await this.request("POST", url, { schema: AuthorizationSchema, body: {} });
    const pollUrl = new URL(r.data.poll_url, url);
    // The poll request carries the deployment token: never send it to another origin.
    if (pollUrl.origin !== this.base.origin) {
      throw failed(`the deployment gave a poll_url on another origin (${pollUrl.origin}); subs sends $${this.remote.tokenEnv} only to ${this.base.origin}`);
    }
    let authorizationUrl: URL;
    try {
      authorizationUrl = new URL(r.data.authorization_url, url);
    } catch {
      throw failed("the deployment gave an authorization_url that is not a URL");
    }
    if (authorizationUrl.protocol !== "https:" && authorizationUrl.protocol !== "http:") {
      throw failed(`the deployment gave an authorization_url with scheme ${authorizationUrl.protocol}; only http(s) is opened`);
    }
    return { ...r.data, pollUrl, authorizationUrl };
  }

  /** One poll. A 404 means the deployment forgot or superseded the authorization: expired. */
  async pollAuthorization(pollUrl: URL): Promise<AuthorizationStatus> {
    try {
      return (await this.request("GET", pollUrl, { schema: AuthorizationStatusSchema })).data;
    } catch (error) {
      if (error instanceof DeploymentError && error.status === 404) {
        return { status: "expired", error: "not_found", message: error.body?.message ?? "the deployment no longer knows this authorization" };
      }
      throw error;
    }
  }

  /**
   * The connection's tools as the deployment sees them. Not declared there: a `failed` error with
   * code `not_applied`; declared but without a credential: `needs_login` (exit 4). `signal` (e.g. a
   * per-connection timeout) stops the request and its retries.
   */
  async listTools(id: string, options: { signal?: AbortSignal } = {}): Promise<RemoteTool[]> {
    try {
      const r = await this.request("GET", this.url(`v1/mcp/${encodeURIComponent(id)}/tools`), { schema: ToolListSchema, ...options });
      return r.data.tools;
    } catch (error) {
      throw toolsError(error, id);
    }
  }

  listAgents(): Promise<RemoteAgent[]> {
    return this.readAgents().then((r) => r.agents);
  }

  /** `lock`: undefined from a deployment that does not hold locks, null when it holds none (section 3.10). */
  async readAgents(): Promise<{ agents: RemoteAgent[]; revision: string | undefined; lock: LockBody | null | undefined }> {
    const { data } = await this.request("GET", this.url("v1/agents"), { schema: AgentListSchema });
    return { agents: data.agents, revision: data.revision ?? undefined, lock: data.lock };
  }

  async putAgent(name: string, body: AgentBody): Promise<{ agent: RemoteAgent; created: boolean }> {
    const r = await this.request("PUT", this.url(`v1/agents/${encodeURIComponent(name)}`), { schema: AgentSchema, body });
    return { agent: r.data, created: r.status === 201 };
  }

  async deleteAgent(name: string): Promise<void> {
    await this.request("DELETE", this.url(`v1/agents/${encodeURIComponent(name)}`), { schema: null, absentIsDone: true });
  }

  /**
   * The whole declared state in one request (section 3.10), applied entirely or not at all.
   * `unsupported` when the deployment speaks only the requests of v1: it answers an endpoint it
   * does not have 404 or 405 (section 1), and the caller falls back to them. `revision_changed`:
   * the declarations moved on since `body.revision`, and nothing was changed.
   */
  async putState(body: StateBody): Promise<StateAnswer | "unsupported" | "revision_changed"> {
    try {
      return (await this.request("PUT", this.url("v1/state"), { schema: StateAnswerSchema, body })).data;
    } catch (error) {
      if (error instanceof DeploymentError && (error.status === 404 || error.status === 405)) return "unsupported";
      if (error instanceof DeploymentError && error.status === 409 && error.code === "revision_changed") return "revision_changed";
      throw error;
    }
  }

  /**
   * Section 3.11. Sent once, never retried: a repeat after a lost answer would find the name taken
   * and the token made by the first, whose value nobody saw.
   */
  async createToken(body: ApiTokenBody): Promise<CreatedApiToken> {
    return (await this.request("POST", this.url("v1/tokens"), { schema: CreatedApiTokenSchema, body, once: true })).data;
  }

  async listTokens(): Promise<RemoteApiToken[]> {
    return (await this.request("GET", this.url("v1/tokens"), { schema: ApiTokenListSchema })).data.tokens;
  }

  /** Unlike the declarations' DELETEs, a 404 is an error here: the id named no token. */
  async revokeToken(id: string): Promise<void> {
    await this.request("DELETE", this.url(`v1/tokens/${encodeURIComponent(id)}`), { schema: null });
  }

  /** Section 3.13. */
  async listPeople(): Promise<RemotePerson[]> {
    return (await this.request("GET", this.url("v1/people"), { schema: PersonListSchema })).data.people;
  }

  /** Section 3.13; a 404 is an error (nobody by that name). A repeat after a lost answer finds nobody: sent once. */
  async removePerson(name: string): Promise<RemovedPerson> {
    return (await this.request("DELETE", this.url(`v1/people/${encodeURIComponent(name)}`), { schema: RemovedPersonSchema, once: true })).data;
  }

  /** Section 3.14: one page of the record; `query` its filters and cursor (the one request sent with a query). */
  async auditPage(query: URLSearchParams): Promise<RemoteAuditPage> {
    const url = this.url("v1/audit");
    url.search = query.toString();
    return (await this.request("GET", url, { schema: AuditPageSchema })).data;
  }

  private url(path: string): URL {
    return new URL(path, this.base);
  }

  private async request<S extends z.ZodMiniType>(
    method: string,
    url: URL,
    options: { schema: S; body?: unknown; signal?: AbortSignal; once?: boolean },
  ): Promise<{ status: number; data: z.output<S> }>;
  private async request(method: string, url: URL, options: { schema: null; body?: unknown; absentIsDone?: boolean }): Promise<{ status: number; data: undefined }>;
  /** `once`: a single attempt, for a request that is not safe to repeat. */
  private async request(
    method: string,
    url: URL,
    options: { schema: z.ZodMiniType | null; body?: unknown; absentIsDone?: boolean; signal?: AbortSignal; once?: boolean },
  ): Promise<{ status: number; data: unknown }> {
    const attempts = options.once ? 1 : this.retry.attempts;
    const what = `${method} ${url.pathname}`;
    const callerSignal = options.signal;
    const stopped = () => failed(`${what}: stopped before the deployment answered`, { code: "timed_out", cause: callerSignal?.reason });
    const headers: Record<string, string> = { authorization: `Bearer ${this.token}`, accept: "application/json" };
    if (options.body !== undefined) headers["content-type"] = "application/json";
    for (let attempt = 1; ; attempt++) {
      if (this.ctx.signal.aborted) throw interrupted();
      if (callerSignal?.aborted) throw stopped();
      // Per attempt, the body included; a deadline that holds under GC (src/http/deadline.ts).
      const deadline = withDeadline([this.ctx.signal, callerSignal], this.timeoutMs);
      try {
        let response: Response;
        try {
          response = await this.fetch(url, {
            method,
            headers,
            ...(options.body !== undefined ? { body: JSON.stringify(options.body) } : {}),
            redirect: "error",
            signal: deadline.signal,
          });
        } catch (error) {
          if (this.ctx.signal.aborted) throw interrupted();
          if (callerSignal?.aborted) throw stopped();
          const reason = networkReason(error, this.timeoutMs);
          // A name that does not resolve will not resolve a second later either.
          if (isDnsFailure(error)) {
            throw new DeploymentUnreachableError("failed", `cannot resolve ${this.base.hostname}: the deployment at ${this.base.origin} cannot be reached (${what}: ${reason})`, {
              code: "deployment_unreachable",
              hint: "check the host name in [remote].url, and your network or DNS",
              cause: error,
            });
          }
          // The handshake refused its certificate: nothing was sent, and the next try meets the same one.
          if (isUntrustedCertificate(error)) {
            throw new DeploymentUnreachableError("failed", `the certificate of the deployment at ${this.base.origin} is not trusted (${errorCode(error)}); nothing was sent`, {
              code: "untrusted_certificate",
              hint: `check [remote].url; ${UNTRUSTED_CERTIFICATE_HINT}`,
              cause: error,
            });
          }
          if (isBlockedPort(error)) {
            throw new DeploymentUnreachableError("failed", `cannot reach the deployment at ${this.base.origin}: fetch refuses port ${this.base.port}, one the Fetch standard blocks as browsers do`, {
              code: "deployment_unreachable",
              hint: "serve the deployment on another port and change [remote].url",
              cause: error,
            });
          }
          if (attempt < attempts) {
            deadline.clear();
            await this.backoff(attempt, undefined, `${what}: ${reason}`, callerSignal);
            if (callerSignal?.aborted) throw stopped();
            continue;
          }
          throw new DeploymentUnreachableError("failed", `cannot reach the deployment at ${this.base.origin} (${what}: ${reason}; ${attempt} attempts)`, {
            code: "deployment_unreachable",
            hint: "check [remote].url and your network, then rerun: every step is safe to repeat",
            cause: error,
          });
        }

        if (response.ok) {
          if (options.schema === null) {
            await response.body?.cancel();
            return { status: response.status, data: undefined };
          }
          let json: unknown;
          try {
            json = await response.json();
          } catch (error) {
            if (error instanceof HttpGuardError) throw failed(`the deployment answered ${what}: ${error.message}`, { code: "invalid_response" });
            throw failed(`the deployment answered ${what} with a body that is not JSON`, { code: "invalid_response" });
          }
          const parsed = options.schema.safeParse(json);
          if (!parsed.success) {
            const issue = parsed.error.issues[0];
            const where = issue?.path.length ? issue.path.join(".") : "the body";
            throw failed(`the deployment answered ${what} with an unexpected body (${where}: ${issue?.message ?? "invalid"})`, {
              code: "invalid_response",
              hint: "the deployment does not follow docs/deployment-protocol.md; check its version",
            });
          }
          return { status: response.status, data: parsed.data };
        }

        const body = await readErrorBody(response);
        if (response.status === 404 && options.absentIsDone) return { status: 404, data: undefined };
        const retryable = response.status >= 500 || response.status === 429;
        if (retryable && attempt < attempts) {
          deadline.clear();
          await this.backoff(attempt, response.headers.get("retry-after"), `${what}: ${response.status}${body ? ` ${body.error}` : ""}`, callerSignal);
          if (callerSignal?.aborted) throw stopped();
          continue;
        }
        throw this.errorFor(what, response.status, body, retryable ? attempt : undefined);
      } finally {
        deadline.clear();
      }
    }
  }

  private errorFor(what: string, status: number, body: ErrorBody | undefined, attempts: number | undefined): DeploymentError {
    const said = body?.message ? `: ${body.message}` : "";
    const code = body?.error;
    if (status === 401) {
      return new DeploymentError("failed", `the deployment at ${this.base.origin} rejected the credential in $${this.remote.tokenEnv}${said}`, {
        status,
        ...(body ? { body } : {}),
        hint: `set ${this.remote.tokenEnv} to a valid API token for ${this.base.origin}`,
      });
    }
    if (status === 403 && code === "url_not_in_catalog") {
      const catalog = body?.catalog ?? [];
      return new DeploymentError("refused", `the deployment allows only the URLs in its catalog${said}`, {
        status,
        ...(body ? { body } : {}),
        hint: catalog.length ? `allowed URLs:\n${catalog.map((u) => `  ${u}`).join("\n")}` : "the deployment listed no allowed URLs",
        details: { catalog },
      });
    }
    // Section 1: this token's role may not do it; the deployment's message names the roles that may.
    if (status === 403 && code === "forbidden") {
      return new DeploymentError("failed", `the deployment refused ${what}${said}`, {
        status,
        ...(body ? { body } : {}),
        hint: `ask the deployment's operator for a token with that role (\`subs deployment token create --role ROLE\`) and set ${this.remote.tokenEnv} to it`,
      });
    }
    // The deployment's own rules, which its operator sets: retrying cannot change the answer.
    if (status === 403 && (code === "address_not_allowed" || code === "client_secret_elsewhere")) {
      return new DeploymentError("refused", `the deployment refused ${what}${said}`, {
        status,
        ...(body ? { body } : {}),
        hint:
          code === "address_not_allowed"
            ? "the deployment reaches only the addresses its operator allows (docs/deployment-server.md, \"Addresses it reaches\"); ask them, or declare a server it reaches"
            : "declare the server that client belongs to, or another oauth.client_id; the deployment's operator holds its secret (docs/deployment-server.md)",
      });
    }
    // Section 3.11: a name in use, the last admin token, the most tokens a deployment holds; nothing was changed.
    if (status === 409 && (code === "name_taken" || code === "last_admin" || code === "too_many_tokens")) {
      return new DeploymentError("refused", `the deployment refused ${what}${said}`, {
        status,
        ...(body ? { body } : {}),
        hint: TOKEN_REFUSAL_HINTS[code],
      });
    }
    if (status === 400 && code === "local_only_field") {
      return new DeploymentError("refused", `the deployment refused ${what}${said}`, { status, ...(body ? { body } : {}) });
    }
    const tries = attempts && attempts > 1 ? ` after ${attempts} attempts` : "";
    return new DeploymentError("failed", `the deployment answered ${what} with ${status}${code ? ` ${code}` : ""}${said}${tries}`, {
      status,
      ...(body ? { body } : {}),
    });
  }

  private async backoff(attempt: number, retryAfter: string | null | undefined, reason: string, callerSignal?: AbortSignal): Promise<void> {
    let delay = Math.min(this.retry.baseDelayMs * 2 ** (attempt - 1), this.retry.maxDelayMs);
    delay += Math.random() * delay * 0.25; // jitter: many CI jobs retrying at once spread out
    const seconds = retryAfter ? Number(retryAfter) : NaN;
    if (Number.isFinite(seconds) && seconds >= 0) delay = Math.min(seconds * 1000, 30_000);
    this.reporter.warn(`${reason}; retrying in ${(delay / 1000).toFixed(1)}s (attempt ${attempt + 1} of ${this.retry.attempts})`);
    // The caller's signal ends the wait early (the request then reports it); Ctrl-C interrupts.
    await sleep(delay, this.ctx.signal, callerSignal);
  }
}

/**
 * What a failed `GET /v1/mcp/{id}/tools` means for the user: not declared there (`not_applied`,
 * run `subs apply`) or no credential there (`needs_login`, exit 4); anything else unchanged.
 */
export function toolsError(error: unknown, id: string): unknown {
  if (error instanceof DeploymentError && error.status === 404 && error.code === "not_found") {
    return new SubsError("failed", `${id} is not declared on the deployment`, { code: "not_applied", hint: `run \`subs apply\` (or \`subs mcp login ${id}\`, which declares it)` });
  }
  if (error instanceof DeploymentError && error.status === 409 && error.code === "not_authorized") {
    // The deployment's reason (no credential, a value not held, the server refused the values) is kept, as it worded it.
    const why = error.body?.message ? ` (the deployment says: ${error.body.message})` : "";
    return new SubsError("needs_login", `${id}: not authorized on the deployment${why}`, { code: "needs_login", hint: `run \`subs mcp login ${id}\`` });
  }
  return error;
}

/** Waits `ms`; rejects with `interrupted` when `signal` aborts; resolves early when `until` aborts. */
export function sleep(ms: number, signal: AbortSignal, until?: AbortSignal): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal.aborted) return reject(interrupted());
    if (until?.aborted) return resolve();
    const done = () => {
      clearTimeout(timer);
      signal.removeEventListener("abort", onAbort);
      until?.removeEventListener("abort", done);
      resolve();
    };
    const timer = setTimeout(done, ms);
    const onAbort = () => {
      clearTimeout(timer);
      until?.removeEventListener("abort", done);
      reject(interrupted());
    };
    signal.addEventListener("abort", onAbort, { once: true });
    until?.addEventListener("abort", done, { once: true });
  });
}

async function readErrorBody(response: Response): Promise<ErrorBody | undefined> {
  try {
    const parsed = ErrorBodySchema.safeParse(await response.json());
    return parsed.success ? parsed.data : undefined;
  } catch {
    return undefined;
  }
}

function networkReason(error: unknown, timeoutMs: number): string {
  if (error instanceof Error && error.name === "TimeoutError") return `no answer within ${timeoutMs / 1000}s`;
  const cause = (error as { cause?: { code?: string; message?: string } }).cause;
  return cause?.code ?? cause?.message ?? (error instanceof Error ? error.message : String(error));
}
