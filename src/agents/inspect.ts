// `subs agent tools`: fetch what the agent's connections offer, then apply the rules.
import { findAgent } from "../config/lookup.ts";
import type { ToolLock } from "../config/tool-lock.ts";
import type { Config, ConnectionConfig } from "../config/types.ts";
import { fetchConnectionTools, type ToolSource } from "./fetch.ts";
import { resolveAgentTools, type ResolvedTools } from "./resolve.ts";

export { findAgent } from "../config/lookup.ts";

export type InspectOptions = {
  config: Config;
  agent: string;
  source: ToolSource;
  timeoutMs: number;
  signal: AbortSignal;
  /** substructure.lock (src/config/tool-lock.ts), when there is one: what it does not allow is withheld. */
  lock?: ToolLock | undefined;
};

export type Inspection = ResolvedTools & { target: ToolSource["target"] };

export async function inspectAgentTools(options: InspectOptions): Promise<Inspection> {
  const agent = findAgent(options.config, options.agent);
  const named = agent.mcp.map((entry) => options.config.connections.find((c) => c.id === entry.id)).filter((c): c is ConnectionConfig => c !== undefined);
  const outcomes = await fetchConnectionTools({ connections: named, source: options.source, timeoutMs: options.timeoutMs, signal: options.signal });
  return { target: options.source.target, ...resolveAgentTools({ agent, connections: options.config.connections, outcomes, lock: options.lock }) };
}
