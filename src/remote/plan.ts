// `subs apply` with [remote]: compare the file with the deployment's state, then carry the
// difference out: in one PUT /v1/state where the deployment has it (all or nothing, so two applies
// at once end in one file's state, never a mix: docs/deployment-protocol.md section 3.10), else
// step by step in an order in which no agent ever names a missing connection: connections put,
// agents put, agents deleted, connections deleted. Every step is an idempotent PUT or DELETE, so a
// run that stopped part-way converges when rerun.
import { canonicalJson, LOCK_FILE, type ToolLock } from "../config/tool-lock.ts";
import { remoteConnectionsOf, type AgentConfig, type Config, type RemoteConnection as FileConnection } from "../config/types.ts";
import { headerVariables } from "../config/templates.ts";
import type { DeploymentClient } from "./client.ts";
import type { AgentSurface } from "./surface.ts";
import type {
  AgentBody,
  ConnectionBody,
  ConnectionOAuth,
  LockBody,
  OAuthSettingsBody,
  RemoteAgent,
  RemoteConnection,
  RemoteToolFilter,
  StateBody,
  ToolFilter,
} from "./protocol.ts";

export type Action = "add" | "change" | "remove" | "unchanged";

export type ConnectionField = "url" | "prefix_tools" | "oauth" | "headers" | "credential";
export type AgentField = "mcp" | "tools" | "agents";

export type CredentialEffect =
  /** Nothing held before, nothing held after (a new or never-authorized connection). */
  | "none"
  | "kept"
  /** The deployment drops it: the url changed (a credential is bound to its url) or the section is gone. */
  | "dropped";

export type ConnectionStep = {
  kind: "connection";
  id: string;
  action: Action;
  changed: ConnectionField[];
  /** The url after the change (the deployment's own for a removal). */
  url: string;
  /** The deployment's url before a url change. */
  previousUrl?: string;
  credential: CredentialEffect;
  credentialReason?: "url_changed" | "declaration_removed" | "headers_changed" | "credential_changed";
  body?: ConnectionBody;
};

export type AgentStep = {
  kind: "agent";
  id: string;
  action: Action;
  changed: AgentField[];
  body?: AgentBody;
};

/**
 * substructure.lock on the deployment (section 3.10, "The lock"). `enforced`: the deployment holds
 * locks; without, nothing is sent (it would refuse the field) and its agents are served every tool
 * their filters keep. `body`: what is sent, the file's entries or null when there is no lock file.
 */
export type LockStep = {
  kind: "lock";
  id: string;
  action: Action;
  changed: [];
  enforced: boolean;
  /** Tools the file's lock names (0 without one). */
  tools: number;
  body: LockBody | null;
};

export type PlanStep = ConnectionStep | AgentStep | LockStep;

export type RemotePlan = {
  connections: ConnectionStep[];
  agents: AgentStep[];
  lock: LockStep;
  /** What each agent's model would gain and lose (src/remote/surface.ts), where a lock is involved; absent otherwise. */
  surface?: AgentSurface[];
};

export type RemoteState = {
  connections: RemoteConnection[];
  agents: RemoteAgent[];
  /** The declarations' revision both reads saw (section 3.10); absent from a deployment of v1 alone. */
  revision?: string;
  /** The lock the deployment holds, null for none; undefined when it does not hold locks (section 9). */
  lock?: LockBody | null | undefined;
};

/** Reads that saw two revisions (a write landed between them) are made again, at most this often. */
const READS = 3;

export async function readRemoteState(client: DeploymentClient): Promise<RemoteState> {
  for (let read = 1; ; read++) {
    // Both settle before either's failure is reported: a command never exits with the other read
    // still retrying in the background (and the report names every attempt that was made).
    const [connections, agents] = await Promise.allSettled([client.readConnections(), client.readAgents()]);
    if (connections.status === "rejected") throw connections.reason;
    if (agents.status === "rejected") throw agents.reason;
    const { revision } = connections.value;
    const state: RemoteState = { connections: connections.value.connections, agents: agents.value.agents, ...(agents.value.lock !== undefined ? { lock: agents.value.lock } : {}) };
    if (revision === agents.value.revision) return revision === undefined ? state : { ...state, revision };
    // Torn: the two lists are of different revisions. Without one revision, PUT /v1/state goes
    // without a check, as a v1 deployment's requests do.
    if (read === READS) return state;
  }
}

/** What of a declared connection differs from the body subs would send for it: nothing when declaring it again changes nothing. */
export function connectionChanges(remote: RemoteConnection, body: ConnectionBody): ConnectionField[] {
  const changed: ConnectionField[] = [];
  if (remote.url !== body.url) changed.push("url");
  if (remote.prefix_tools !== body.prefix_tools) changed.push("prefix_tools");
  if (canonical(normalOAuth(remote.oauth)) !== canonical(normalOAuth(body.oauth))) changed.push("oauth");
  // Section 8: the same names and values, in any order; absent, null and {} are the same.
  if (canonical(normalHeaders(remote.headers)) !== canonical(normalHeaders(body.headers))) changed.push("headers");
  if ((remote.credential ?? "shared") !== (body.credential ?? "shared")) changed.push("credential");
  return changed;
}

export function connectionBody(connection: FileConnection): ConnectionBody {
  const oauth: OAuthSettingsBody = {};
  // client_secret_env is local only and refused before planning; it is never sent.
  if (connection.oauth?.clientId !== undefined) oauth.client_id = connection.oauth.clientId;
  if (connection.oauth?.clientMetadataUrl !== undefined) oauth.client_metadata_url = connection.oauth.clientMetadataUrl;
  if (connection.oauth?.scopes !== undefined) oauth.scopes = [...new Set(connection.oauth.scopes)];
  // Templates, not values: the values are handed over by `subs mcp login` (section 3.12). Sent
  // only when the file has some, so a deployment without `headers` (section 9) sees no new field.
  const headers = connection.headers && Object.keys(connection.headers).length ? { headers: { ...connection.headers } } : {};
  return { url: connection.url, prefix_tools: connection.prefixTools, ...(Object.keys(oauth).length ? { oauth } : {}), ...headers, ...(connection.credential === "personal" ? { credential: "personal" as const } : {}) };
}

/** One `mcp` entry as subs sends it. An empty filter takes every tool, like no filter: one spelling, so comparisons are stable. */
function entryBody(entry: { id: string; tools?: ToolFilter | RemoteToolFilter | null | undefined }): AgentBody["mcp"][number] {
  const tools = entry.tools ? cleanFilter(entry.tools) : {};
  return Object.keys(tools).length ? { id: entry.id, tools } : { id: entry.id };
}

export function agentBody(agent: AgentConfig): AgentBody {
  return { mcp: agent.mcp.map(entryBody), tools: agent.tools, agents: agent.agents };
}

/**
 * The whole file as PUT /v1/state carries it: every connection and agent, the rest pruned, and the
 * lock to a deployment that holds locks (`lock`: the plan's lock step).
 */
export function stateBody(config: Config, revision?: string, lock?: LockStep): StateBody {
  return {
    connections: remoteConnectionsOf(config).map((c) => ({ id: c.id, ...connectionBody(c) })),
    agents: config.agents.map((a) => ({ name: a.name, ...agentBody(a) })),
    prune: true,
    ...(revision !== undefined ? { revision } : {}),
    ...(lock?.enforced ? { lock: lock.body } : {}),
  };
}

/** substructure.lock as PUT /v1/state carries it: its entries by connection, then name. */
export function lockBody(lock: ToolLock): LockBody {
  const tools: LockBody["tools"] = [];
  for (const [connection, byName] of [...lock.connections].sort(([a], [b]) => cmp(a, b))) {
    for (const [name, t] of [...byName].sort(([a], [b]) => cmp(a, b))) {
      tools.push({
        connection,
        name,
        digest: t.digest,
        ...(t.title !== undefined ? { title: t.title } : {}),
        ...(t.description !== undefined ? { description: t.description } : {}),
        ...(t.inputSchema !== undefined ? { input_schema: t.inputSchema } : {}),
        ...(t.outputSchema !== undefined ? { output_schema: t.outputSchema } : {}),
        ...(t.annotations !== undefined ? { annotations: t.annotations } : {}),
      });
    }
  }
  return { tools };
}
const cmp = (a: string, b: string) => (a < b ? -1 : a > b ? 1 : 0);

/** One text per lock, whatever order its entries came in: the deployment keeps its own order. */
const lockKey = (lock: LockBody) => canonicalJson([...lock.tools].sort((a, b) => (a.connection === b.connection ? cmp(a.name, b.name) : cmp(a.connection, b.connection))));

/** The lock step: what the deployment holds against the file's lock (`fileLock`, undefined without a lock file). */
export function planLock(state: Pick<RemoteState, "lock">, fileLock: ToolLock | undefined): LockStep {
  const body = fileLock ? lockBody(fileLock) : null;
  const base = { kind: "lock" as const, id: LOCK_FILE, changed: [] as [], tools: body?.tools.length ?? 0, body };
  if (state.lock === undefined) return { ...base, action: "unchanged", enforced: false };
  const held = state.lock;
  const action: Action = held === null ? (body === null ? "unchanged" : "add") : body === null ? "remove" : lockKey(held) === lockKey(body) ? "unchanged" : "change";
  return { ...base, action, enforced: true };
}

/** The deployment's agent in the shape subs would PUT, so the two compare field by field. */
function remoteAgentBody(remote: RemoteAgent): AgentBody {
  return { mcp: remote.mcp.map(entryBody), tools: remote.tools, agents: remote.agents };
}

/** Whether the headers of `body` name a variable whose value `remote` does not hold. */
function namesUnheld(body: ConnectionBody, remote: RemoteConnection): boolean {
  const held = new Set((remote.secrets ?? []).filter((s) => s.held).map((s) => s.name));
  return headerVariables(body.headers ?? {}).some((name) => !held.has(name));
}

export function planRemote(config: Config, state: RemoteState, fileLock?: ToolLock): RemotePlan {
  const remoteConnections = new Map(state.connections.map((c) => [c.id, c]));
  const connections: ConnectionStep[] = [];
  for (const connection of remoteConnectionsOf(config)) {
    const body = connectionBody(connection);
    const remote = remoteConnections.get(connection.id);
    if (!remote) {
      connections.push({ kind: "connection", id: connection.id, action: "add", changed: [], url: body.url, credential: "none", body });
      continue;
    }
    const changed = connectionChanges(remote, body);
    const held = remote.status === "authorized";
    if (changed.length === 0) {
      connections.push({ kind: "connection", id: connection.id, action: "unchanged", changed, url: body.url, credential: held ? "kept" : "none" });
    } else if (changed.includes("url")) {
      connections.push({
        kind: "connection",
        id: connection.id,
        action: "change",
        changed,
        url: body.url,
        previousUrl: remote.url,
        credential: held ? "dropped" : "none",
        ...(held ? { credentialReason: "url_changed" as const } : {}),
        body,
      });
    } else if (changed.includes("credential")) {
      // Whose the credential is changed: what was held belonged to the other kind, and goes
      // (docs/deployment-protocol.md section 5). Personal credentials may be held for others
      // than the caller, whose own status is all `status` says.
      const dropped = held || remote.credential === "personal";
      connections.push({ kind: "connection", id: connection.id, action: "change", changed, url: body.url, credential: dropped ? "dropped" : "none", ...(dropped ? { credentialReason: "credential_changed" as const } : {}), body });
    } else if (held && changed.includes("headers") && namesUnheld(body, remote)) {
      // Its headers now name a variable the deployment holds no value for: it is not usable until
      // `subs mcp login` hands that over (docs/deployment-protocol.md section 3.12).
      connections.push({ kind: "connection", id: connection.id, action: "change", changed, url: body.url, credential: "dropped", credentialReason: "headers_changed", body });
    } else {
      connections.push({ kind: "connection", id: connection.id, action: "change", changed, url: body.url, credential: held ? "kept" : "none", body });
    }
  }
  const declared = new Set(config.connections.map((c) => c.id));
  for (const remote of state.connections) {
    if (declared.has(remote.id)) continue;
    const held = remote.status === "authorized";
    connections.push({
      kind: "connection",
      id: remote.id,
      action: "remove",
      changed: [],
      url: remote.url,
      credential: held ? "dropped" : "none",
      ...(held ? { credentialReason: "declaration_removed" as const } : {}),
    });
  }

  const remoteAgents = new Map(state.agents.map((a) => [a.name, a]));
  const agents: AgentStep[] = [];
  for (const agent of config.agents) {
    const body = agentBody(agent);
    const remote = remoteAgents.get(agent.name);
    if (!remote) {
      agents.push({ kind: "agent", id: agent.name, action: "add", changed: [], body });
      continue;
    }
    const current = remoteAgentBody(remote);
    const changed = (["mcp", "tools", "agents"] as const).filter((field) => canonical(current[field]) !== canonical(body[field]));
    agents.push(changed.length ? { kind: "agent", id: agent.name, action: "change", changed, body } : { kind: "agent", id: agent.name, action: "unchanged", changed });
  }
  const named = new Set(config.agents.map((a) => a.name));
  for (const remote of state.agents) if (!named.has(remote.name)) agents.push({ kind: "agent", id: remote.name, action: "remove", changed: [] });
  return { connections, agents, lock: planLock(state, fileLock) };
}

export const hasChanges = (plan: RemotePlan) => [...plan.connections, ...plan.agents, plan.lock].some((s) => s.action !== "unchanged");

export type StepOutcome = { step: PlanStep; outcome: "applied" | "failed" | "not_attempted"; error?: unknown };

/** At most this many requests in flight within one phase. */
const CONCURRENCY = 4;

/** The changes in the order they are carried out: no agent ever names a missing connection. */
function phasesOf(plan: RemotePlan): PlanStep[][] {
  const put = (s: PlanStep) => s.action === "add" || s.action === "change";
  return [
    // Only a deployment with PUT /v1/state holds locks: the lock is never a step of its own.
    plan.lock.action === "unchanged" ? [] : [plan.lock],
    plan.connections.filter(put),
    plan.agents.filter(put),
    plan.agents.filter((s) => s.action === "remove"),
    plan.connections.filter((s) => s.action === "remove"),
  ];
}

export type Carried = {
  /** One PUT /v1/state (all or nothing) rather than a request per step. */
  atomic: boolean;
  outcomes: StepOutcome[];
};

/**
 * Carries the plan out in one PUT /v1/state of the whole file, made from `revision`; a deployment
 * without it (404 or 405) gets the requests of v1, step by step. The one request succeeds or fails
 * as a whole, so every change is applied, or every change failed with its error;
 * `revision_changed` (nothing changed) when the deployment moved on since the plan was made.
 */
export async function carryOut(
  client: DeploymentClient,
  config: Config,
  plan: RemotePlan,
  options: { revision?: string; onStep?: (outcome: StepOutcome) => void } = {},
): Promise<Carried | "revision_changed"> {
  const steps = phasesOf(plan).flat();
  let answer: Awaited<ReturnType<DeploymentClient["putState"]>>;
  try {
    answer = await client.putState(stateBody(config, options.revision, plan.lock));
  } catch (error) {
    return { atomic: true, outcomes: steps.map((step) => ({ step, outcome: "failed", error })) };
  }
  if (answer === "revision_changed") return answer;
  // A deployment without PUT /v1/state has no locks (section 9): its plan has no lock step.
  if (answer === "unsupported") return { atomic: false, outcomes: await executePlan(client, plan, options) };
  // Made from the revision it was applied at, the plan is what changed.
  const outcomes = steps.map((step): StepOutcome => ({ step, outcome: "applied" }));
  for (const o of outcomes) options.onStep?.(o);
  return { atomic: true, outcomes };
}

/**
 * Carries the plan out phase by phase (v1). After a failure no new step starts (those in flight
 * finish), so the report says exactly what was applied, what failed and what was not attempted.
 */
export async function executePlan(
  client: DeploymentClient,
  plan: RemotePlan,
  options: { onStep?: (outcome: StepOutcome) => void } = {},
): Promise<StepOutcome[]> {
  const phases = phasesOf(plan);
  const outcomes: StepOutcome[] = [];
  let stopped = false;
  for (const phase of phases) {
    const queue = [...phase];
    const worker = async () => {
      for (let step = queue.shift(); step; step = queue.shift()) {
        if (stopped) {
          outcomes.push({ step, outcome: "not_attempted" });
          continue;
        }
        try {
          await runStep(client, step);
          const outcome: StepOutcome = { step, outcome: "applied" };
          outcomes.push(outcome);
          options.onStep?.(outcome);
        } catch (error) {
          stopped = true;
          const outcome: StepOutcome = { step, outcome: "failed", error };
          outcomes.push(outcome);
          options.onStep?.(outcome);
        }
      }
    };
    await Promise.all(Array.from({ length: Math.min(CONCURRENCY, Math.max(queue.length, 1)) }, worker));
  }
  return outcomes;
}

async function runStep(client: DeploymentClient, step: PlanStep): Promise<void> {
  if (step.kind === "lock") throw new Error("a lock is sent only with PUT /v1/state");
  if (step.kind === "connection") {
    if (step.action === "remove") await client.deleteConnection(step.id);
    else await client.putConnection(step.id, step.body!);
  } else {
    if (step.action === "remove") await client.deleteAgent(step.id);
    else await client.putAgent(step.id, step.body!);
  }
}

function cleanFilter(filter: ToolFilter | RemoteToolFilter): ToolFilter {
  const out: ToolFilter = {};
  for (const key of ["include", "exclude", "read_only", "non_destructive", "idempotent"] as const) {
    const value = filter[key];
    if (value !== undefined && value !== null) (out as Record<string, unknown>)[key] = value;
  }
  return out;
}

function normalOAuth(oauth: ConnectionOAuth | OAuthSettingsBody | null | undefined): OAuthSettingsBody | undefined {
  if (!oauth) return undefined;
  const out: OAuthSettingsBody = {};
  if (oauth.client_id != null) out.client_id = oauth.client_id;
  if (oauth.client_metadata_url != null) out.client_metadata_url = oauth.client_metadata_url;
  // An OAuth scope is a set (RFC 6749 §3.3; docs/deployment-protocol.md §8): order and repeats carry no meaning.
  if (oauth.scopes != null) out.scopes = [...new Set(oauth.scopes)].sort();
  return Object.keys(out).length ? out : undefined;
}

function normalHeaders(headers: Readonly<Record<string, string>> | null | undefined): Record<string, string> | undefined {
  return headers && Object.keys(headers).length ? { ...headers } : undefined;
}

/** JSON with sorted keys and no null/undefined members: equal values compare equal. */
function canonical(value: unknown): string {
  return JSON.stringify(value ?? null, (_key, v) =>
    v && typeof v === "object" && !Array.isArray(v)
      ? Object.fromEntries(Object.entries(v as Record<string, unknown>).filter(([, x]) => x !== undefined && x !== null).sort(([a], [b]) => (a < b ? -1 : 1)))
      : v,
  );
}
