// `subs agent list`: every declared agent as the file states it. Reads only the file: no
// network, no db (`subs agent tools <name>` fetches what one agent's model sees).
import { loadConfig } from "../../../config/load.ts";
import type { AgentConfig, Config, McpToolsFilter } from "../../../config/types.ts";
import type { Context } from "../../../context.ts";
import { writeJson } from "../../../output/json.ts";
import { styleFor } from "../../../output/style.ts";
import { renderTable } from "../../../output/table.ts";

export type AgentListOptions = { config?: string; json: boolean };

/** The `--json` contract of `subs agent list` (docs/commands.md, "subs agent …"). */
export type AgentJson = {
  name: string;
  mcp: Array<{
    id: string;
    prefix_tools: boolean;
    tools: { include: string[] | null; exclude: string[] | null; read_only: boolean; non_destructive: boolean; idempotent: boolean } | null;
  }>;
  tools: string[];
  agents: string[];
};

export function agentJson(agent: AgentConfig, config: Config): AgentJson {
  return {
    name: agent.name,
    mcp: agent.mcp.map((entry) => ({
      id: entry.id,
      prefix_tools: config.connections.find((c) => c.id === entry.id)?.prefixTools ?? true,
      tools: entry.tools
        ? {
            include: entry.tools.include ?? null,
            exclude: entry.tools.exclude ?? null,
            read_only: entry.tools.read_only ?? false,
            non_destructive: entry.tools.non_destructive ?? false,
            idempotent: entry.tools.idempotent ?? false,
          }
        : null,
    })),
    tools: agent.tools,
    agents: agent.agents,
  };
}

/** "read_only, include search_*, exclude *_delete" */
export function describeFilter(filter: McpToolsFilter): string {
  const parts: string[] = [];
  if (filter.read_only) parts.push("read_only");
  if (filter.non_destructive) parts.push("non_destructive");
  if (filter.idempotent) parts.push("idempotent");
  if (filter.include) parts.push(`include ${filter.include.join(" ") || "(none)"}`);
  if (filter.exclude) parts.push(`exclude ${filter.exclude.join(" ") || "(none)"}`);
  return parts.join(", ");
}

export async function agentListCommand(ctx: Context, options: AgentListOptions): Promise<void> {
  const config = loadConfig({ configPath: options.config, env: ctx.env, cwd: ctx.cwd });
  if (options.json) {
    writeJson(ctx.stdout, config.agents.map((a) => agentJson(a, config)));
    return;
  }
  if (config.agents.length === 0) {
    ctx.stderr.write(`No agents declared in ${config.displayPath}. Add one:\n\n  [agent.support]\n  mcp = ["sentry"]\n`);
    return;
  }
  const style = styleFor(ctx.color);
  const rows = config.agents.map((a) => [
    a.name,
    a.mcp
      .map((entry) => {
        const filter = entry.tools ? describeFilter(entry.tools) : "";
        return filter ? `${entry.id} (${filter})` : entry.id;
      })
      .join(", ") || "-",
    a.tools.join(", ") || "-",
    a.agents.join(", ") || "-",
  ]);
  ctx.stdout.write(renderTable(["AGENT", "CONNECTIONS", "TOOLS", "SUB-AGENTS"], rows, { tty: ctx.stdoutIsTTY, columns: ctx.stdoutColumns, style: style.bold }));
}
