// Codex CLI (https://developers.openai.com/codex/mcp, and docs/config.md of openai/codex): TOML,
// `$CODEX_HOME/config.toml` (default `~/.codex/config.toml`) and, in a trusted project,
// `.codex/config.toml`; one `[mcp_servers.<name>]` table per server. A streamable HTTP server has
// `url`, `bearer_token_env_var` (the variable holding its bearer token), `http_headers` (values as
// written) and `env_http_headers` (header name to the variable holding its whole value); a local
// one `command` and `args`; `enabled = false` turns one off. Values are never expanded.
import * as z from "zod/mini";
import { codexProjectFile, codexUserFile } from "../../clients/where.ts";
import { serverEntries } from "../shape.ts";
import type { ClientFile, FoundServer, Header, Places } from "../types.ts";

const Table = z.looseObject({
  url: z.optional(z.string()),
  command: z.optional(z.unknown()),
  bearer_token_env_var: z.optional(z.string()),
  // Older releases took the token itself; still read, so it can be left out knowingly.
  bearer_token: z.optional(z.string()),
  http_headers: z.optional(z.record(z.string(), z.string())),
  env_http_headers: z.optional(z.record(z.string(), z.string())),
  enabled: z.optional(z.boolean()),
});

export function codexFiles(places: Places): ClientFile[] {
  const files = places.projectDirs.map((dir) => codexFile(codexProjectFile(dir), "project"));
  const user = codexUserFile(places.env);
  if (user !== undefined) files.push(codexFile(user, "user"));
  return files;
}

export function codexFile(file: string, scope: "project" | "user"): ClientFile {
  return { client: "codex", scope, file, format: "toml", servers: (parsed) => codexServers(parsed) };
}

function codexServers(parsed: unknown): FoundServer[] {
  return serverEntries((parsed as { mcp_servers?: unknown } | null)?.mcp_servers).map(([name, raw]): FoundServer => {
    const table = z.safeParse(Table, raw);
    if (!table.success) return { name, kind: "unrecognized", why: "its table is not in the documented shape" };
    const t = table.data;
    if (t.command !== undefined) return { name, kind: "stdio" };
    if (t.url === undefined) return { name, kind: "unrecognized", why: "it has neither a command nor a url" };
    const headers: Header[] = [];
    if (t.bearer_token_env_var !== undefined) headers.push({ name: "Authorization", fromEnv: t.bearer_token_env_var, bearer: true });
    else if (t.bearer_token !== undefined) headers.push({ name: "Authorization", value: `Bearer ${t.bearer_token}` });
    for (const [header, value] of Object.entries(t.http_headers ?? {})) headers.push({ name: header, value });
    for (const [header, variable] of Object.entries(t.env_http_headers ?? {})) headers.push({ name: header, fromEnv: variable });
    return { name, kind: "remote", url: t.url, transport: "http", headers, disabled: t.enabled === false };
  });
}
