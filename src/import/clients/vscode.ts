// VS Code (https://code.visualstudio.com/docs/copilot/reference/mcp-configuration): `.vscode/mcp.json`
// in the workspace and `mcp.json` in the user profile, servers under `servers` (beside `inputs`,
// the prompts `${input:id}` refers to); earlier releases read `mcp.servers` in settings.json, user
// and workspace. A remote entry is `type: "http" | "sse"` with `url` and `headers` (values may use
// `${env:NAME}` and `${input:id}`); a local one `type: "stdio"` with `command`. Files are JSON
// with comments. VS Code keeps which servers are turned off (and trusted) in its own state, outside
// these files.
import path from "node:path";
import { serversOf, typedTransport, type EntryRules } from "../shape.ts";
import type { ClientFile, Places } from "../types.ts";

const rules: EntryRules = {
  remote: (entry) => (entry.url === undefined ? undefined : { url: entry.url, transport: typedTransport(entry.type) }),
};

export function vscodeFiles(places: Places): ClientFile[] {
  const files: ClientFile[] = [];
  for (const dir of places.projectDirs) {
    files.push(mcpJson(path.join(dir, ".vscode", "mcp.json"), "project"), settingsJson(path.join(dir, ".vscode", "settings.json"), "project"));
  }
  for (const dir of userDirs(places)) files.push(mcpJson(path.join(dir, "mcp.json"), "user"), settingsJson(path.join(dir, "settings.json"), "user"));
  return files;
}

/**
 * The user profile's directory, by platform (VS Code, "User and workspace settings"): Linux
 * `$XDG_CONFIG_HOME/Code/User` (`~/.config`), macOS `~/Library/Application Support/Code/User`,
 * Windows `%APPDATA%\Code\User`. Every one that could exist is tried: only the present ones are read.
 */
function userDirs({ home, env }: Places): string[] {
  const dirs = new Set<string>();
  if (env.XDG_CONFIG_HOME) dirs.add(path.join(env.XDG_CONFIG_HOME, "Code", "User"));
  if (env.APPDATA) dirs.add(path.join(env.APPDATA, "Code", "User"));
  if (home !== undefined) {
    dirs.add(path.join(home, ".config", "Code", "User"));
    dirs.add(path.join(home, "Library", "Application Support", "Code", "User"));
  }
  return [...dirs];
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
