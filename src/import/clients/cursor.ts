// Cursor (https://cursor.com/docs/context/mcp, "Configuration locations"): `.cursor/mcp.json` in
// the project and `~/.cursor/mcp.json` for every project, servers under `mcpServers`. A remote
// entry is `url` with optional `headers` (values may use `${env:NAME}`); Cursor finds the
// transport itself, so `type` is optional. A local one is `command`. A pre-registered OAuth client
// is `auth` { CLIENT_ID, CLIENT_SECRET, scopes[] } (Cursor's "static OAuth", as the servers that
// need it document it); Cursor then logs in with a redirect URI of its own. Servers are turned off
// in Cursor's settings screen, which keeps that outside these files.
import { cursorProjectFile, cursorUserFile } from "../../clients/where.ts";
import { obj, serversOf, str, strings, typedTransport, type EntryRules } from "../shape.ts";
import { referenceIn } from "../values.ts";
import type { ClientFile, FoundOAuth, Places } from "../types.ts";

const rules: EntryRules = {
  remote: (entry) => (entry.url === undefined ? undefined : { url: entry.url, transport: typedTransport(entry.type) }),
  details: (entry) => {
    const auth = obj(entry.auth);
    const clientId = str(auth?.CLIENT_ID);
    if (clientId === undefined) return {};
    const found: FoundOAuth = { clientId, redirect: { port: undefined } };
    const secret = str(auth?.CLIENT_SECRET);
    if (secret !== undefined) {
      const reference = referenceIn(secret);
      found.clientSecret = reference && "env" in reference ? { env: reference.env } : { literal: secret };
    }
    const scopes = strings(auth?.scopes);
    if (scopes !== undefined && scopes.length > 0) found.scopes = scopes;
    return { oauth: found };
  },
};

export function cursorFiles(places: Places): ClientFile[] {
  const files = places.projectDirs.map((dir) => cursorFile(cursorProjectFile(dir), "project"));
  const user = cursorUserFile(places.env);
  if (user !== undefined) files.push(cursorFile(user, "user"));
  return files;
}

export function cursorFile(file: string, scope: "project" | "user"): ClientFile {
  return { client: "cursor", scope, file, format: "json", servers: (parsed) => serversOf(obj(parsed)?.mcpServers, rules) };
}
