// Codex CLI (https://developers.openai.com/codex/mcp, and docs/config.md of openai/codex; as Codex
// 0.171.0's own `codex mcp add` writes): TOML, `$CODEX_HOME/config.toml` (default
// `~/.codex/config.toml`) and, in a trusted project, `.codex/config.toml`; one `[mcp_servers.<name>]`
// table per server. A streamable HTTP server has `url`, `bearer_token_env_var` (the variable holding
// its bearer token), `http_headers` (values as written), `env_http_headers` (header name to the
// variable holding its whole value) and `http_headers_helper` (a command printing headers); a
// pre-registered OAuth client is `[mcp_servers.<name>.oauth]` { client_id, client_secret (written
// in plain text by `codex mcp add --oauth-client-secret`), callback_url }, with `scopes` (an array)
// on the server; a local one `command` and `args`; `enabled = false` turns one off. Values are never
// expanded.
import { codexProjectFile, codexUserFile } from "../../clients/where.ts";
import * as z from "zod/mini";
import { presentSettings, redirectPort, serverEntries } from "../shape.ts";
import type { ClientFile, FoundOAuth, FoundServer, Header, LeftOut, Places } from "../types.ts";

const Table = z.looseObject({
  url: z.optional(z.string()),
  command: z.optional(z.unknown()),
  bearer_token_env_var: z.optional(z.string()),
  // Older releases took the token itself; still read, so it can be left out knowingly.
  bearer_token: z.optional(z.string()),
  http_headers: z.optional(z.record(z.string(), z.string())),
  env_http_headers: z.optional(z.record(z.string(), z.string())),
  http_headers_helper: z.optional(z.unknown()),
  enabled: z.optional(z.boolean()),
  scopes: z.optional(z.unknown()),
  oauth: z.optional(z.unknown()),
});

const LocalTable = z.looseObject({
  command: z.string().check(z.minLength(1)),
  args: z.optional(z.array(z.string())),
  env: z.optional(z.record(z.string(), z.string())),
  cwd: z.optional(z.string()),
});

const OAuthTable = z.looseObject({
  client_id: z.optional(z.string()),
  client_secret: z.optional(z.string()),
  callback_url: z.optional(z.string()),
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
    if (t.command !== undefined) {
      const local = z.safeParse(LocalTable, raw);
      if (!local.success) return { name, kind: "unrecognized", why: "its command, args, env or cwd is not in the documented shape" };
      const { command, args, env, cwd } = local.data;
      // env_vars: variables Codex passes through by name; subs passes only what `env` names.
      const leftOut: LeftOut[] = presentSettings(raw as Record<string, unknown>, ["env_vars", "enabled_tools", "disabled_tools", "startup_timeout_sec", "tool_timeout_sec"]);
      return {
        name,
        kind: "stdio",
        command,
        args: args ?? [],
        env: env ?? {},
        ...(cwd !== undefined ? { cwd } : {}),
        ...(t.enabled === false ? { disabled: { setting: "enabled = false" } } : {}),
        ...(leftOut.length > 0 ? { leftOut } : {}),
      };
    }
    if (t.url === undefined) return { name, kind: "unrecognized", why: "it has neither a command nor a url" };
    const headers: Header[] = [];
    if (t.bearer_token_env_var !== undefined) headers.push({ name: "Authorization", fromEnv: t.bearer_token_env_var, bearer: true });
    else if (t.bearer_token !== undefined) headers.push({ name: "Authorization", value: `Bearer ${t.bearer_token}` });
    for (const [header, value] of Object.entries(t.http_headers ?? {})) headers.push({ name: header, value });
    for (const [header, variable] of Object.entries(t.env_http_headers ?? {})) headers.push({ name: header, fromEnv: variable });
    const oauth = oauthOf(t);
    const leftOut: LeftOut[] = presentSettings(t, ["enabled_tools", "disabled_tools", "oauth_resource", "startup_timeout_sec", "tool_timeout_sec"]);
    if (t.http_headers_helper !== undefined) leftOut.unshift({ setting: "http_headers_helper", kind: "headers_helper" });
    return {
      name,
      kind: "remote",
      url: t.url,
      transport: "http",
      headers,
      ...(t.enabled === false ? { disabled: { setting: "enabled = false" } } : {}),
      ...(oauth ? { oauth } : {}),
      ...(leftOut.length > 0 ? { leftOut } : {}),
    };
  });
}

/** The pre-registered client and the scopes of a server's table; an `oauth` table of another shape is read as absent. */
function oauthOf(t: z.output<typeof Table>): FoundOAuth | undefined {
  const found: FoundOAuth = {};
  const parsed = z.safeParse(OAuthTable, t.oauth);
  if (t.oauth !== undefined && parsed.success) {
    const o = parsed.data;
    if (o.client_id !== undefined) found.clientId = o.client_id;
    if (o.client_secret !== undefined) found.clientSecret = { literal: o.client_secret };
    // `codex mcp add --oauth-client-id` writes a callback URL of its own (`http://127.0.0.1/callback/<random>`).
    if (o.callback_url !== undefined) found.redirect = { port: redirectPort(o.callback_url) };
  }
  if (Array.isArray(t.scopes) && t.scopes.length > 0 && t.scopes.every((s) => typeof s === "string")) found.scopes = t.scopes as string[];
  return Object.keys(found).length > 0 ? found : undefined;
}
