// Claude Code (https://code.claude.com/docs/en/mcp, "MCP installation scopes"): project scope in
// `.mcp.json` at the project root; user scope in `~/.claude.json` under the top-level `mcpServers`;
// local scope (this user, one project) in `~/.claude.json` under
// `projects["<absolute project path>"].mcpServers`. A remote entry is `type: "http" | "sse"` with
// `url` and `headers`, whose values may use `${VAR}` or `${VAR:-default}`; a local one `command`.
import { realpathSync } from "node:fs";
import { claudeProjectFile, claudeUserFile } from "../../clients/where.ts";
import { serversOf, typedTransport, type EntryRules } from "../shape.ts";
import type { ClientFile, FoundServer, Places } from "../types.ts";

const rules: EntryRules = {
  remote: (entry) => (entry.url === undefined ? undefined : { url: entry.url, transport: typedTransport(entry.type) }),
};

export function claudeFiles(places: Places): ClientFile[] {
  const files: ClientFile[] = places.projectDirs.map((dir) => projectFile(claudeProjectFile(dir)));
  const user = claudeUserFile(places.env);
  if (user !== undefined) files.push(userFile(user, places));
  return files;
}

export function projectFile(file: string): ClientFile {
  return { client: "claude", scope: "project", file, format: "json", servers: (parsed) => serversOf(mcpServers(parsed), rules) };
}

export function userFile(file: string, places: Places): ClientFile {
  return {
    client: "claude",
    scope: "user",
    file,
    format: "json",
    servers: (parsed) => {
      const found: FoundServer[] = serversOf(mcpServers(parsed), rules);
      const projects = record(record(parsed)?.projects);
      // Claude Code keys a project by the directory it was started in; through a symlink that may be the real path.
      const dirs = new Set(places.projectDirs.flatMap((dir) => [dir, realPath(dir)]));
      for (const dir of dirs) if (projects && Object.hasOwn(projects, dir)) found.push(...serversOf(mcpServers(projects[dir]), rules));
      return found;
    },
  };
}

const record = (value: unknown): Record<string, unknown> | undefined =>
  typeof value === "object" && value !== null && !Array.isArray(value) ? (value as Record<string, unknown>) : undefined;

const mcpServers = (value: unknown): unknown => record(value)?.mcpServers;

function realPath(dir: string): string {
  try {
    return realpathSync(dir);
  } catch {
    return dir;
  }
}
