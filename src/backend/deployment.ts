// A deployment as the place credentials live: its store holds them and its OAuth flow makes them;
// this machine talks to it through the deployment protocol (src/remote/client.ts,
// docs/deployment-protocol.md) and never sees a credential. Loaded only when the file has [remote].
import type { ToolSource } from "../agents/fetch.ts";
import type { ConnectorTool } from "../agents/resolve.ts";
import { findConnections } from "../config/lookup.ts";
import { assertNoLocalOnlyAuth, warnLocalOnlyAuth } from "../config/remote-rules.ts";
import { headerVariables } from "../config/templates.ts";
import { isLocalServer, type Config, type ConnectionConfig, type RemoteConfig, type RemoteConnection } from "../config/types.ts";
import type { Context } from "../context.ts";
import { failed, refused, SubsError } from "../errors.ts";
import { DeploymentClient, deploymentBase } from "../remote/client.ts";
import { listRemoteConnections, type RemoteListEntry } from "../remote/list.ts";
import { notHeld } from "../remote/protocol.ts";
import { handOverOnDeployment, headerValues, loginOnDeployment } from "../remote/login.ts";
import { carryOut, hasChanges, planLock, planRemote, readRemoteState, type LockStep } from "../remote/plan.ts";
import type { ToolLock } from "../config/tool-lock.ts";
import type { Reporter } from "../report.ts";
import type { CheckProblem, ConnectionCheck } from "../status/check.ts";
import type { Applied, ApplyRequest, AuthorizeOptions, Authorized, Backend, BackendOptions, CallResult, Listing, ListedTool, LoginStep, Place } from "./types.ts";

/** Plans made and sent at most this often when the deployment keeps changing under them. */
const REPLANS = 3;
/** Each connection's list for the plan's surface, as `subs agent tools`'s default --timeout. */
const SURFACE_TIMEOUT_MS = 10_000;

export function deploymentBackend(options: BackendOptions, remote: RemoteConfig): Backend {
  return new DeploymentBackend(options, remote);
}

class DeploymentBackend implements Backend {
  readonly place: Place;
  private readonly ctx: Context;
  private readonly config: Config;
  private readonly reporter: Reporter;
  private readonly loginSteps: () => (step: LoginStep) => void;
  private readonly url: URL;
  // Made at the first operation that talks to the deployment: an unset API token is reported by
  // the command that needs it, after what the command refuses without asking.
  private made: DeploymentClient | undefined;

  constructor({ ctx, config, reporter, loginSteps = () => () => {} }: BackendOptions, private readonly remote: RemoteConfig) {
    this.ctx = ctx;
    this.config = config;
    this.reporter = reporter;
    this.loginSteps = loginSteps;
    this.url = deploymentBase(remote);
    this.place = { kind: "deployment", url: this.url };
  }

  private client(): DeploymentClient {
    return (this.made ??= new DeploymentClient({ remote: this.remote, ctx: this.ctx, reporter: this.reporter }));
  }

  async list({ check }: { check?: { timeoutMs: number } }): Promise<Listing> {
    const { ctx, config, reporter, url } = this;
    const entries = await listRemoteConnections(config, this.client());
    warnLocalOnlyAuth(config, reporter);
    if (!check || entries.length === 0) return { target: "remote", url, entries };
    return { target: "remote", url, entries, checks: await checkOnDeployment(ctx, config, reporter, entries, check.timeoutMs) };
  }

  warnRefusals(ids?: readonly string[]): void {
    warnLocalOnlyAuth(this.config, this.reporter, ids);
  }

  async loginTargets({ ids, all, port }: { ids: readonly string[]; all: boolean; port?: number }): Promise<ConnectionConfig[]> {
    const { config, reporter } = this;
    const named = all ? config.connections : findConnections(config, ids);
    // Refused before anything is sent (product.md, "The file").
    assertNoLocalOnlyAuth(config, all ? undefined : named.map((c) => c.id));
    if (port !== undefined) reporter.warn("--port is ignored with [remote]: the deployment receives the redirect");
    const deployment = this.client();
    if (!all) return named;
    const held = new Map((await deployment.listConnections()).map((c) => [c.id, c]));
    return named.filter((c) => {
      const r = held.get(c.id);
      return !r || r.status !== "authorized" || r.url !== c.url;
    });
  }

  authorize(connection: ConnectionConfig, options: AuthorizeOptions): Promise<Authorized> {
    return authorizeOnDeployment(this.ctx, this.client(), this.loginSteps(), connection, options);
  }

  async tools(connection: ConnectionConfig): Promise<ListedTool[]> {
    return this.client().listTools(connection.id);
  }

  async call(): Promise<CallResult> {
    // The deployment protocol has no call endpoint, and the credential never leaves the
    // deployment (product.md, "The deployment protocol"): nothing here could call with it.
    throw refused("subs mcp call works only without [remote]: the deployment holds the credential and offers no way to call a tool", {
      hint: "see what the deployment offers with `subs mcp tools <id>`",
      code: "remote_unsupported",
    });
  }

  toolSource(): ToolSource {
    return deploymentToolSource(this.ctx, this.remote, this.reporter, { check: true });
  }

  async servedLock(lock: ToolLock | undefined): Promise<LockStep> {
    const held = (await this.client().readAgents()).lock;
    return planLock(held === undefined ? {} : { lock: held }, lock);
  }

  async apply(request: ApplyRequest): Promise<Applied> {
    const { config, url, reporter } = this;
    // Everything that can be refused is refused before the first request.
    assertNoLocalOnlyAuth(config);
    // A lock that is wrong is an error before anything is sent, as the file's own are.
    const fileLock = await (await import("../config/tool-lock-read.ts")).readToolLock(config.path, this.ctx.cwd);
    const deployment = this.client();
    for (let attempt = 1; ; attempt++) {
      const state = await readRemoteState(deployment);
      const plan = planRemote(config, state, fileLock);
      // What each agent would gain and lose, where a lock is involved: the lists cost a request
      // to every server the agents name, which a plan without locks does not need.
      if (fileLock !== undefined || state.lock) {
        const { surfaceChanges } = await import("../remote/surface.ts");
        plan.surface = await surfaceChanges({
          config,
          state,
          lock: plan.lock.enforced ? fileLock : undefined,
          source: deploymentToolSource(this.ctx, this.remote, reporter, { check: false }),
          timeoutMs: SURFACE_TIMEOUT_MS,
          signal: this.ctx.signal,
        });
      }
      request.onPlan?.(plan, url);
      if (request.dryRun || !hasChanges(plan)) return { target: "remote", url, plan, dryRun: request.dryRun, outcomes: [] };
      await request.confirm({ target: "remote", plan, url });
      const carried = await carryOut(deployment, config, plan, { ...(state.revision !== undefined ? { revision: state.revision } : {}), onStep: (o) => request.onStep?.(o) });
      if (carried !== "revision_changed") return { target: "remote", url, plan, dryRun: false, ...carried };
      // Another apply (or a login's declaration) changed the deployment since it was read; nothing
      // of this plan was applied (docs/deployment-protocol.md section 3.10). Plan again from the
      // new state: the plan printed and confirmed is always the one carried out.
      if (attempt === REPLANS) {
        throw failed(`the deployment changed while subs applied, ${REPLANS} times (other applies at the same time?); nothing was changed`, {
          code: "revision_changed",
          hint: "rerun `subs apply` when the other applies have finished",
        });
      }
      reporter.warn(`the deployment changed after it was read (another apply at the same time?); nothing was changed; reading it again and planning anew (attempt ${attempt + 1} of ${REPLANS})`);
    }
  }

  // The deployment drops the connection and its credential when `subs apply` removes it, as
  // for a section deleted by hand.
  async forget(): Promise<"deferred"> {
    return "deferred";
  }

  close(): void {}
}

/**
 * The consent is made and kept on the deployment: this machine opens its authorization URL and
 * polls. The same steps as a login without [remote], but for where the server is contacted and the
 * consent given, so the command words both alike (src/output/login-words.ts).
 */
async function authorizeOnDeployment(
  ctx: Context,
  client: DeploymentClient,
  steps: (step: LoginStep) => void,
  connection: ConnectionConfig,
  options: AuthorizeOptions,
): Promise<Authorized> {
  const id = connection.id;
  // Refused before any login starts (loginTargets); a local server runs on the machine that starts it.
  if (isLocalServer(connection)) throw new Error(`${id} is a local server, which a deployment cannot run`);
  const deployment = client.base.origin;
  if (headerVariables(connection.headers ?? {}).length > 0) return handOver(ctx, client, steps, connection, options);
  steps({ step: "contacting_deployment", id, deployment });
  let waiting = false;
  let held;
  try {
    held = await loginOnDeployment({
      ctx,
      client,
      connection,
      openBrowser: options.browser,
      timeoutMs: options.timeoutMs,
      events: {
        onAuthorizationUrl: (url, opened, error, waitMs) => {
          steps({ step: "ready_on_deployment", id, deployment });
          // The URL is the deployment's: the command shows it, never interprets it.
          if (options.browser) {
            steps({ step: "opening_browser", id, url });
            if (!opened) steps({ step: "browser_failed", error });
          } else steps({ step: "visit", id, url });
          // The wait is shown at once, below the URL, not after the first poll.
          steps({ step: "waiting", id, timeoutMs: waitMs, pasting: false });
          waiting = true;
        },
      },
    });
    if (waiting) steps({ step: "waited", id, outcome: "received" });
  } catch (error) {
    const code = error instanceof SubsError ? error.code : undefined;
    if (!waiting) steps({ step: "could_not_start", id });
    else steps({ step: "waited", id, outcome: ctx.signal.aborted ? "stopped" : code === "access_denied" || code === "authorization_failed" ? "not_given" : "no_consent" });
    throw error;
  }
  return authorizedOn(client, id, held, []);
}

/** A login's result from the Connection the deployment answered after it. */
function authorizedOn(client: DeploymentClient, id: string, held: { url: string; authorized_at?: string | null; expires_at?: string | null }, secrets: string[]): Authorized {
  return { result: "authorized", target: "remote", id, deployment: client.base, url: held.url, authorizedAt: held.authorized_at ?? null, expiresAt: held.expires_at ?? null, secrets };
}

/**
 * A connection whose headers name variables: the deployment fills them from values handed to it
 * (docs/deployment-protocol.md section 3.12), and holding them is its authorization; no consent
 * is started. Every value is had (asked, or read from this machine's variable) before anything
 * is sent, and before any progress line, which would garble a question on the terminal.
 */
async function handOver(ctx: Context, client: DeploymentClient, steps: (step: LoginStep) => void, connection: RemoteConnection, options: AuthorizeOptions): Promise<Authorized> {
  const { id } = connection;
  const deployment = client.base.origin;
  const ask = options.headerValue;
  if (!ask) throw new Error(`${id}: its headers name variables, and nothing was given to ask for their values`);
  const values = await headerValues(ctx, connection, (name) => ask({ id, name }));
  const names = values.map((v) => v.name);
  steps({ step: "handing_over", id, deployment, names });
  let held;
  try {
    held = await handOverOnDeployment({ client, connection, values });
  } catch (error) {
    steps({ step: "hand_over_failed", id, deployment });
    throw error;
  }
  steps({ step: "handed_over", id, deployment, names });
  return authorizedOn(client, id, held, names);
}

/** What a deployment tool source needs from the deployment client. */
export type DeploymentToolLister = {
  /**
   * `{"tools": [Tool]}` of `GET /v1/mcp/{id}/tools`, validated. Rejects with a SubsError when this
   * connection's list cannot be had (e.g. `needs_login` when the deployment holds no credential),
   * and must stop when `signal` aborts (the per-connection timeout, or Ctrl-C).
   */
  listTools(id: string, options: { signal: AbortSignal }): Promise<readonly ConnectorTool[]>;
  /**
   * One request that fails for the whole deployment (unreachable, a rejected API token) before any
   * connection is asked; its error ends the command instead of marking every connection unavailable.
   */
  check?(): Promise<unknown>;
};

/**
 * Tool lists as the deployment sees them: `GET /v1/mcp/{id}/tools` (product.md, "The deployment
 * protocol"), resolved by the same rules as lists fetched from the servers.
 */
export function remoteToolSource(deployment: DeploymentToolLister): ToolSource {
  return {
    target: "remote",
    ready: async () => {
      await deployment.check?.();
    },
    listTools: (connection, signal) => deployment.listTools(connection.id, { signal }),
  };
}

/** One client per list, so each carries its own signal. `check`: whether the deployment is asked first. */
function deploymentToolSource(ctx: Context, remote: RemoteConfig, reporter: Reporter, options: { check: boolean }): ToolSource {
  const client = (signal: AbortSignal) => new DeploymentClient({ remote, ctx: { ...ctx, signal }, reporter });
  return remoteToolSource({
    ...(options.check ? { check: () => client(ctx.signal).listConnections() } : {}),
    listTools: (id, { signal }) => client(signal).listTools(id, { signal }),
  });
}

/**
 * `--check` with [remote]: the deployment lists each authorized connection's tools with the
 * credential it holds (GET /v1/mcp/{id}/tools, all at once); the others say why from the listing.
 */
async function checkOnDeployment(
  ctx: Context,
  config: Config,
  reporter: Reporter,
  entries: readonly RemoteListEntry[],
  timeoutMs: number,
): Promise<Map<string, ConnectionCheck>> {
  const { probe } = await import("./probe.ts");
  const byId = new Map(config.connections.map((c) => [c.id, c]));
  const targets = entries.map((e) => {
    // An id the deployment has but the file does not: nothing to probe there with.
    const connection = byId.get(e.id) ?? { id: e.id, url: e.url, prefixTools: true };
    const problem = remoteProblem(e);
    return { connection, ...(problem ? { withoutCredential: problem } : {}) };
  });
  const source = deploymentToolSource(ctx, config.remote!, reporter, { check: false });
  return probe(ctx, reporter, { targets, source, timeoutMs, signal: ctx.signal });
}

function remoteProblem(e: RemoteListEntry): CheckProblem | undefined {
  switch (e.status) {
    case "authorized":
      return undefined;
    case "needs_login": {
      const unheld = notHeld(e.secrets);
      const what = unheld.length ? `no value for ${unheld.join(", ")}` : "no credential";
      return { code: "needs_login", message: `${e.id}: the deployment holds ${what}`, hint: `run \`subs mcp login ${e.id}\``, needsLogin: true };
    }
    case "refused":
      // Nothing to ask for: the deployment would refuse the list as it refuses calls.
      return { code: e.refused?.error ?? "refused", message: `${e.id}: the deployment refuses to use it${e.refused?.error === "url_not_in_catalog" ? ": its url is not in the deployment's catalog" : ""}`, hint: "the allowed URLs are listed above", needsLogin: false };
    case "url_changed":
      return { code: "url_changed", message: `${e.id}: the deployment has another url`, hint: `run \`subs apply\`, then \`subs mcp login ${e.id}\``, needsLogin: false };
    case "not_applied":
      return { code: "not_applied", message: `${e.id}: not declared on the deployment`, hint: "run `subs apply`", needsLogin: false };
    case "not_in_file":
      return { code: "not_in_file", message: `${e.id}: on the deployment, not in the file`, hint: "run `subs apply` to remove it", needsLogin: false };
  }
}
