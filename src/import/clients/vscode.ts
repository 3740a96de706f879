// VS Code (https://code.visualstudio.com/docs/copilot/reference/mcp-configuration): `.vscode/mcp.json`
// in the workspace and `mcp.json` in the user profile, servers under `servers` (beside `inputs`,
// the prompts `${input:id}` refers to); earlier releases read `mcp.servers` in settings.json, user
// and workspace. A remote entry is `type: "http" | "sse"` with `url` and `headers` (values may use
// `${env:NAME}` and `${input:id}`); a local one `type: "stdio"` with `command`. Files are JSON
// with comments.
import path from "node:path";
import { vscodeProjectFile, vscodeUserDirs } from "../../clients/where.ts";
import { serversOf, typedTransport, type EntryRules } from "../shape.ts";
import type { ClientFile, Places } from "../types.ts";

const rules: EntryRules = {
  remote: (entry) => (entry.url === undefined ? undefined : { url: entry.url, transport: typedTransport(entry.type) }),
};

export function vscodeFiles(places: Places): ClientFile[] {
  const files: ClientFile[] = [];
  for (const dir of places.projectDirs) {
    files.push(mcpJson(vscodeProjectFile(dir), "project"), settingsJson(path.join(dir, ".vscode", "settings.json"), "project"));
  }
  for (const dir of vscodeUserDirs(places.env)) files.push(mcpJson(path.join(dir, "mcp.json"), "user"), settingsJson(path.join(dir, "settings.json"), "user"));
  return files;
}

export function mcpJson(file: string, scope: "project" | "user"): ClientFile {
  return { client: "vscode", scope, file, format: "json", servers: (parsed) => serversOf((parsed as { servers?: unknown } | null)?.servers, rules) };
}

export function settingsJson(file: string, scope: "project" | "user"): ClientFile {
  return {
    client: "vscode",
    scope,
    file,
    format: "json",
    servers: (parsed) => {
      const settings = parsed as { mcp?: { servers?: unknown }; "mcp.servers"?: unknown } | null;
      return serversOf(settings?.["mcp.servers"] ?? settings?.mcp?.servers, rules);
    },
  };
}
