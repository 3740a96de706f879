// Cursor (https://cursor.com/docs/context/mcp, "Configuration locations"): `.cursor/mcp.json` in
// the project and `~/.cursor/mcp.json` for every project, servers under `mcpServers`. A remote
// entry is `url` with optional `headers` (values may use `${env:NAME}`); Cursor finds the
// transport itself, so `type` is optional. A local one is `command`.
import { cursorProjectFile, cursorUserFile } from "../../clients/where.ts";
import { serversOf, typedTransport, type EntryRules } from "../shape.ts";
import type { ClientFile, Places } from "../types.ts";

const rules: EntryRules = {
  remote: (entry) => (entry.url === undefined ? undefined : { url: entry.url, transport: typedTransport(entry.type) }),
};

export function cursorFiles(places: Places): ClientFile[] {
  const files = places.projectDirs.map((dir) => cursorFile(cursorProjectFile(dir), "project"));
  const user = cursorUserFile(places.env);
  if (user !== undefined) files.push(cursorFile(user, "user"));
  return files;
}

export function cursorFile(file: string, scope: "project" | "user"): ClientFile {
  return { client: "cursor", scope, file, format: "json", servers: (parsed) => serversOf((parsed as { mcpServers?: unknown } | null)?.mcpServers, rules) };
}
