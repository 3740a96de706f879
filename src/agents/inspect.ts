// `subs agent tools`: fetch what the agent's connections offer, then apply the rules.
import { closest } from "../config/load.ts";
import type { AgentConfig, Config, ConnectionConfig } from "../config/types.ts";
import { usage } from "../errors.ts";
import { fetchConnectionTools, type ToolSource } from "./fetch.ts";
import { resolveAgentTools, type ResolvedTools } from "./resolve.ts";

export function findAgent(config: Config, name: string): AgentConfig {
  const agent = config.agents.find((a) => a.name === name);
  if (agent) return agent;
  const names = config.agents.map((a) => a.name);
  const suggestion = closest(name, names);
  throw usage(`no agent \`${name}\` in ${config.displayPath}`, {
    hint: suggestion ? `did you mean \`${suggestion}\`?` : names.length ? `declared agents: ${names.join(", ")}` : `declare it with [agent.${name}]`,
  });
}

export type InspectOptions = {
  config: Config;
  agent: string;
  source: ToolSource;
  timeoutMs: number;
  signal: AbortSignal;
};

export type Inspection = ResolvedTools & { target: ToolSource["target"] };

export async function inspectAgentTools(options: InspectOptions): Promise<Inspection> {
  const agent = findAgent(options.config, options.agent);
  const named = agent.mcp.map((entry) => options.config.connections.find((c) => c.id === entry.id)).filter((c): c is ConnectionConfig => c !== undefined);
  const outcomes = await fetchConnectionTools({ connections: named, source: options.source, timeoutMs: options.timeoutMs, signal: options.signal });
  return { target: options.source.target, ...resolveAgentTools({ agent, connections: options.config.connections, outcomes }) };
}
