// What `subs apply` would change in what each agent's model is served on the deployment
// (docs/commands.md, "subs apply"): the tools each agent is served now (the deployment's agents
// under the lock it holds) against those it would be served after the apply (the file's agents
// under the lock sent), both resolved by the rules of `subs agent tools` (src/agents/resolve.ts)
// from the lists the deployment gives (GET /v1/mcp/{id}/tools, docs/deployment-protocol.md section
// 3.6). A connection that cannot be listed is said, never a failure: the plan stands without it.
import { fetchConnectionTools, type ToolSource } from "../agents/fetch.ts";
import { resolveAgentTools, type FetchOutcome } from "../agents/resolve.ts";
import { lockOfEntries, type ToolLock } from "../config/tool-lock.ts";
import type { AgentConfig, Config, ConnectionConfig } from "../config/types.ts";
import type { LockBody, RemoteAgent, RemoteConnection } from "./protocol.ts";

export type AgentSurface = {
  agent: string;
  /** Names the model would be served that it is not now (sorted). */
  gain: string[];
  /** Names it is served now that it would not be (sorted). */
  lose: string[];
  /** Connections the agent names (now or after) whose tools could not be listed, and why. */
  unlisted: Array<{ connection: string; message: string }>;
};

export type SurfaceOptions = {
  config: Config;
  /** What the deployment holds (plan.ts's RemoteState): its lock undefined when it holds no locks. */
  state: { connections: RemoteConnection[]; agents: RemoteAgent[]; lock?: LockBody | null | undefined };
  /** The lock the apply sends (undefined: none, or a deployment that does not hold locks). */
  lock: ToolLock | undefined;
  source: ToolSource;
  timeoutMs: number;
  signal: AbortSignal;
};

/** Per agent of the file or of the deployment, what its model gains and loses; agents with no change and nothing unlisted are left out. */
export async function surfaceChanges(o: SurfaceOptions): Promise<AgentSurface[]> {
  const remoteConnections: ConnectionConfig[] = o.state.connections.map((c) => ({ id: c.id, url: c.url, prefixTools: c.prefix_tools }));
  const declared = new Set(remoteConnections.map((c) => c.id));
  const remoteAgents = o.state.agents.map(agentOf);
  const named = new Set([...remoteAgents, ...o.config.agents].flatMap((a) => a.mcp.map((m) => m.id)));
  // Listed once each, with the deployment's credential; only what it declares can be listed.
  const outcomes = await fetchConnectionTools({ connections: remoteConnections.filter((c) => named.has(c.id)), source: o.source, timeoutMs: o.timeoutMs, signal: o.signal });
  for (const id of named) {
    if (!declared.has(id)) outcomes.set(id, { ok: false, error: { code: "not_applied", message: `${id}: not declared on the deployment yet, so its tools cannot be listed`, needsLogin: false } });
  }
  const heldLock = o.state.lock ? lockOfEntries(o.state.lock.tools) : undefined;
  const served = (agent: AgentConfig, connections: ReadonlyArray<Pick<ConnectionConfig, "id" | "prefixTools">>, lock: ToolLock | undefined) =>
    new Set(resolveAgentTools({ agent, connections, outcomes, lock }).tools.map((t) => t.name));
  const now = new Map(remoteAgents.map((a) => [a.name, served(a, remoteConnections, heldLock)]));
  const after = new Map(o.config.agents.map((a) => [a.name, served(a, o.config.connections, o.lock)]));
  const names = [...new Set([...now.keys(), ...after.keys()])].sort();
  const surfaces: AgentSurface[] = [];
  for (const name of names) {
    const before = now.get(name) ?? new Set<string>();
    const next = after.get(name) ?? new Set<string>();
    const ids = new Set([...remoteAgents, ...o.config.agents].filter((a) => a.name === name).flatMap((a) => a.mcp.map((m) => m.id)));
    const unlisted = [...ids].sort().flatMap((id) => {
      const outcome: FetchOutcome | undefined = outcomes.get(id);
      return outcome && !outcome.ok ? [{ connection: id, message: outcome.error.message }] : [];
    });
    const gain = [...next].filter((t) => !before.has(t)).sort();
    const lose = [...before].filter((t) => !next.has(t)).sort();
    if (gain.length || lose.length || unlisted.length) surfaces.push({ agent: name, gain, lose, unlisted });
  }
  return surfaces;
}

/** The deployment's agent as the file would declare it (filters without their nulls). */
function agentOf(a: RemoteAgent): AgentConfig {
  return {
    name: a.name,
    mcp: a.mcp.map((m) => {
      const f = m.tools;
      if (!f) return { id: m.id };
      const tools: Record<string, unknown> = {};
      for (const [key, value] of Object.entries(f)) if (value !== null && value !== undefined) tools[key] = value;
      return Object.keys(tools).length ? { id: m.id, tools } : { id: m.id };
    }),
    tools: a.tools,
    agents: a.agents,
  } as AgentConfig;
}

