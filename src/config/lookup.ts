import { usage } from "../errors.ts";
import { closest } from "./load.ts";
import type { AgentConfig, Config, ConnectionConfig } from "./types.ts";

/** The declared connection `id`, or a usage error that suggests the id the user probably meant. */
export function findConnection(config: Config, id: string): ConnectionConfig {
  const found = config.connections.find((c) => c.id === id);
  if (found) return found;
  const ids = config.connections.map((c) => c.id);
  const suggestion = closest(id, ids);
  throw usage(`no connection '${id}' in ${config.displayPath}`, {
    hint: suggestion ? `did you mean '${suggestion}'?` : ids.length ? `declared: ${ids.join(", ")}` : `declare it with [mcp.${id}]`,
  });
}

/** The declared agent `name`, or a usage error with a suggestion. */
export function findAgent(config: Config, name: string): AgentConfig {
  const found = config.agents.find((a) => a.name === name);
  if (found) return found;
  const names = config.agents.map((a) => a.name);
  const suggestion = closest(name, names);
  throw usage(`no agent '${name}' in ${config.displayPath}`, {
    hint: suggestion ? `did you mean '${suggestion}'?` : names.length ? `declared: ${names.join(", ")}` : `declare it with [agent.${name}]`,
  });
}
