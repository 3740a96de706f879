// Looking up what a command names: one wording and one "did you mean" for every command
// that takes connection ids or agent names.
import { usage } from "../errors.ts";
import { closest } from "./closest.ts";
import type { AgentConfig, Config, ConnectionConfig } from "./types.ts";

/** The declared connection `id`, or a usage error that suggests the id the user probably meant. */
export function findConnection(config: Config, id: string, options: LookupOptions = {}): ConnectionConfig {
  return findConnections(config, [id], options)[0]!;
}

export type LookupOptions = {
  /**
   * The id is looked up to be removed (`subs mcp remove`): an undeclared one needs no declaring,
   * and what may still be stored for it is `subs apply`'s to delete.
   */
  removing?: boolean;
};

/** The declared connections `ids` (each once, in the order given), or one usage error naming every unknown id. */
export function findConnections(config: Config, ids: readonly string[], options: LookupOptions = {}): ConnectionConfig[] {
  const byId = new Map(config.connections.map((c) => [c.id, c]));
  const unknown = ids.filter((id) => !byId.has(id));
  if (unknown.length > 0) {
    const declared = [...byId.keys()];
    const suggestion = unknown.length === 1 ? closest(unknown[0]!, declared) : undefined;
    throw usage(`${unknown.map((id) => `\`${id}\``).join(", ")} ${unknown.length > 1 ? "are" : "is"} not declared in ${config.displayPath}`, {
      hint: suggestion
        ? `did you mean \`${suggestion}\`? (\`subs mcp list\` shows every connection)`
        : options.removing
          ? `${declared.length > 0 ? `declared: ${declared.join(", ")}; ` : ""}a credential still stored for it is deleted by \`subs apply\` (\`subs mcp list\` shows it)`
          : declared.length > 0
            ? `declared: ${declared.join(", ")}; or declare it with [mcp.${unknown[0]}]`
            : `declare it with [mcp.${unknown[0]}] and a url`,
    });
  }
  return [...new Set(ids)].map((id) => byId.get(id)!);
}

/** The declared agent `name`, or a usage error with a suggestion. */
export function findAgent(config: Config, name: string): AgentConfig {
  const found = config.agents.find((a) => a.name === name);
  if (found) return found;
  const names = config.agents.map((a) => a.name);
  const suggestion = closest(name, names);
  throw usage(`no agent \`${name}\` in ${config.displayPath}`, {
    hint: suggestion
      ? `did you mean \`${suggestion}\`? (\`subs agent list\` shows every agent)`
      : names.length
        ? `declared agents: ${names.join(", ")}; or declare it with [agent.${name}]`
        : `declare it with [agent.${name}] and the connections it uses (mcp = [...])`,
  });
}
