import { readConfig } from "../config/parse.ts";
import type { Context } from "../context.ts";
import { writeJson } from "../output/json.ts";
import { stderrReporter } from "../output/reporter.ts";
import { styleFor, type Style } from "../output/style.ts";
import { renderTable } from "../output/table.ts";
import { isoOrNull, shortDuration } from "../output/time.ts";
import { listLocalConnections } from "../status/list.ts";
import type { ConnectionCheck } from "../status/check.ts";
import type { ConnectionStatus } from "../status/status.ts";
import type { CredentialRow } from "../store/schema.ts";

export type McpListOptions = {
  config?: string;
  json: boolean;
  /** `--check`: probe every server, each within this many seconds (docs/commands.md, "subs mcp list"). */
  check?: { timeoutSeconds: number };
};

/** The `--json` contract of `subs mcp list` (docs/commands.md, "subs mcp list"). Never holds a secret. */
export type ConnectionJson = {
  id: string;
  url: string;
  auth: "oauth" | "static" | "none";
  /** `undeclared`: a credential stored for an id the file no longer declares (issue 15). */
  status: ConnectionStatus["status"] | "undeclared";
  usable: boolean;
  issuer: string | null;
  scopes: string[];
  expires_at: string | null;
  refreshable: boolean;
  token_env: string | null;
  logged_in_url: string | null;
  agents: string[];
};

export function connectionJson(s: ConnectionStatus): ConnectionJson {
  return {
    id: s.id,
    url: s.url,
    auth: s.auth,
    status: s.status,
    usable: s.usable,
    issuer: s.issuer,
    scopes: s.scopes,
    expires_at: isoOrNull(s.expiresAt),
    refreshable: s.refreshable,
    token_env: s.tokenEnv,
    logged_in_url: s.loggedInUrl,
    agents: s.agents,
  };
}

/**
 * A credential stored for an id the file no longer declares, after the declared connections: kept
 * until `subs apply` deletes it, never used meanwhile (issue 15). `url` is the one it was issued for.
 */
export function undeclaredJson(row: CredentialRow): ConnectionJson {
  return {
    id: row.id,
    url: row.url,
    auth: "oauth",
    status: "undeclared",
    usable: false,
    issuer: row.issuer,
    scopes: row.scopes ? row.scopes.split(" ") : [],
    expires_at: isoOrNull(row.expires_at),
    refreshable: row.refresh_token !== null,
    token_env: null,
    logged_in_url: null,
    agents: [],
  };
}

const UNDECLARED = "stored credential for an undeclared id · subs apply deletes it";

/** Returns the exit code: 0, or with `--check` what checkExitCode says. */
export async function mcpListCommand(ctx: Context, options: McpListOptions): Promise<number> {
  const config = await readConfig({ configPath: options.config, env: ctx.env, cwd: ctx.cwd });
  if (config.remote) {
    const { mcpListRemote } = await import("./mcp-list-remote.ts");
    return mcpListRemote(ctx, config, { json: options.json, ...(options.check ? { check: options.check } : {}) });
  }
  const reporter = stderrReporter(ctx);
  let { statuses, undeclared } = await listLocalConnections({ config, env: ctx.env, now: ctx.now(), reporter });
  const checked = options.check && statuses.length > 0 ? await import("./mcp-list-check.ts") : undefined;
  let checks: Map<string, ConnectionCheck> | undefined;
  if (checked) ({ checks, statuses, undeclared } = await checked.checkLocal(ctx, reporter, config, options.check!.timeoutSeconds));
  const now = ctx.now();
  if (options.json) {
    // Undeclared ids are never probed: nothing can name them. Their `check` is null.
    writeJson(ctx.stdout, [
      ...statuses.map((s) => (checks ? { ...connectionJson(s), check: checked!.checkJson(checks.get(s.id)!) } : connectionJson(s))),
      ...undeclared.map((row) => (checks ? { ...undeclaredJson(row), check: null } : undeclaredJson(row))),
    ]);
    // stderr explains the failures with --json too, as any failing command's message is there.
    if (checks) checked!.reportProblems(ctx, checks);
    return checks ? checked!.checkExitCode(checks.values()) : 0;
  }
  if (statuses.length === 0) {
    ctx.stderr.write(`No connections declared in ${config.displayPath}. Add one:\n\n  [mcp.sentry]\n  url = "https://mcp.sentry.dev/mcp"\n`);
    if (undeclared.length === 0) return 0;
  }
  const style = styleFor(ctx.color);
  const rows = [
    ...statuses.map((s) => [
      s.id,
      s.url,
      s.auth,
      describeStatus(s, now, style),
      ...(checks ? [checked!.describeCheck(checks.get(s.id)!, style, s.tokenEnv)] : []),
      s.agents.join(", ") || "-",
    ]),
    ...undeclared.map((row) => [row.id, row.url, "oauth", style.yellow(UNDECLARED), ...(checks ? ["-"] : []), "-"]),
  ];
  const headers = ["ID", "URL", "AUTH", "STATUS", ...(checks ? ["CHECK"] : []), "AGENTS"];
  ctx.stdout.write(renderTable(headers, rows, { tty: ctx.stdoutIsTTY, columns: ctx.stdoutColumns, style: style.bold }));
  if (!checks) return 0;
  checked!.reportProblems(ctx, checks);
  return checked!.checkExitCode(checks.values());
}

export function describeStatus(s: ConnectionStatus, now: number, style: Style): string {
  switch (s.status) {
    case "authorized": {
      if (s.expiresAt === null) return style.green("authorized");
      if (s.expiresAt <= now) return style.green(`authorized (expired ${shortDuration(now - s.expiresAt)} ago, refreshes on use)`);
      return style.green(`authorized (expires in ${shortDuration(s.expiresAt - now)}${s.refreshable ? ", refreshable" : ""})`);
    }
    case "needs_login":
      // After --check a credential the server refused is shown needing a login, expired or not.
      return style.yellow(s.expiresAt !== null && s.expiresAt <= now ? `needs login (expired) · subs mcp login ${s.id}` : `needs login · subs mcp login ${s.id}`);
    case "url_changed":
      return style.yellow(`url changed since login · subs mcp login ${s.id}`);
    case "env_set":
      return style.green(`$${s.tokenEnv} set`);
    case "env_unset":
      return style.red(`$${s.tokenEnv} unset`);
    case "open":
      return style.green("open (the server asks for no credential)");
  }
}
