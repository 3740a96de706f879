// Gemini CLI (https://github.com/google-gemini/gemini-cli/blob/main/docs/tools/mcp-server.md):
// `.gemini/settings.json` in the project and `~/.gemini/settings.json`, servers under
// `mcpServers`. `httpUrl` is a streamable HTTP endpoint, `url` an SSE one, `headers` their headers
// (values may use `$VAR` or `${VAR}`); `command` a local process.
import { geminiProjectFile, geminiUserFile } from "../../clients/where.ts";
import { serversOf, typedTransport, type EntryRules } from "../shape.ts";
import type { ClientFile, Places } from "../types.ts";

const rules: EntryRules = {
  remote: (entry) =>
    entry.httpUrl !== undefined
      ? { url: entry.httpUrl, transport: "http" }
      : entry.url !== undefined
        ? { url: entry.url, transport: typedTransport(entry.type) ?? "sse" }
        : undefined,
};

export function geminiFiles(places: Places): ClientFile[] {
  const files = places.projectDirs.map((dir) => geminiFile(geminiProjectFile(dir), "project"));
  const user = geminiUserFile(places.env);
  if (user !== undefined) files.push(geminiFile(user, "user"));
  return files;
}

export function geminiFile(file: string, scope: "project" | "user"): ClientFile {
  return { client: "gemini", scope, file, format: "json", servers: (parsed) => serversOf((parsed as { mcpServers?: unknown } | null)?.mcpServers, rules) };
}
