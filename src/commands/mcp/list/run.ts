import { backendFor } from "../../../backend/choose.ts";
import type { Listing } from "../../../backend/types.ts";
import { readConfig } from "../../../config/read-config.ts";
import type { Config } from "../../../config/types.ts";
import type { Context } from "../../../context.ts";
import { writeJson } from "../../../output/json.ts";
import { stderrReporter } from "../../../output/reporter.ts";
import { styleFor, type Style } from "../../../output/style.ts";
import type { Reporter } from "../../../report.ts";
import { renderTable } from "../../../output/table.ts";
import { shown } from "../../../output/untrusted.ts";
import { isoOrNull, shortDuration } from "../../../output/time.ts";
import type { RemoteListEntry } from "../../../remote/list.ts";
import { DEFAULT_WARN_WITHIN_SECONDS, expiresWithin, grantWarnings, type GrantWarning } from "../../../status/grant.ts";
import type { ConnectionStatus, CredentialLossInfo } from "../../../status/status.ts";
import type { CredentialRow } from "../../../store/schema.ts";

export type McpListOptions = {
  config?: string;
  json: boolean;
  /** `--check`: probe every server, each within this many seconds (docs/commands.md, "subs mcp list"). */
  check?: { timeoutSeconds: number };
  /**
   * `--warn-within` (or `$SUBS_WARN_WITHIN`): warn of a refresh token that expires within this many
   * seconds (0: never); default DEFAULT_WARN_WITHIN_SECONDS.
   */
  warnWithinSeconds?: number;
};

/** The `--json` contract of `subs mcp list` (docs/commands.md, "subs mcp list"). Never holds a secret. */
export type ConnectionJson = {
  id: string;
  /** Null for a local server. */
  url: string | null;
  /** The program a local server runs (its `command`); null for a remote one. */
  command: string | null;
  /** The variables a local server's templates name that are not set. */
  unset_env: string[];
  auth: "oauth" | "static" | "none";
  /** `undeclared`: a credential stored for an id the file no longer declares, kept until `subs apply`. */
  status: ConnectionStatus["status"] | "undeclared";
  usable: boolean;
  issuer: string | null;
  scopes: string[];
  expires_at: string | null;
  refreshable: boolean;
  token_env: string | null;
  logged_in_url: string | null;
  agents: string[];
  /** When the refresh token (the grant) expires, where the authorization server said; null when unknown. */
  refresh_expires_at: string | null;
  /** Why it needs a login, when its credential was lost for good (a refresh rejected); null otherwise. */
  lost: LostJson | null;
  /** `shared` or `personal` (the file's `credential`: one credential per person on a deployment); null for a local server. */
  credential: "shared" | "personal" | null;
};

/** `lost` of `subs mcp list --json` (docs/commands.md): why a credential was lost for good. */
export type LostJson = { reason: string; message: string | null; lost_at: string | null };
const lostJson = (l: CredentialLossInfo | null): LostJson | null => (l ? { reason: l.reason, message: l.message, lost_at: isoOrNull(l.lostAt) } : null);

export function connectionJson(s: ConnectionStatus): ConnectionJson {
  return {
    id: s.id,
    url: s.url,
    command: s.command,
    unset_env: s.unsetEnv,
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
    refresh_expires_at: isoOrNull(s.refreshExpiresAt),
    lost: lostJson(s.lost),
    credential: s.credential,
  };
}

/**
 * A credential stored for an id the file no longer declares, after the declared connections: kept
 * until `subs apply` deletes it, never used meanwhile (docs/file.md, "Looking never deletes").
 * `url` is the one it was issued for.
 */
export function undeclaredJson(row: CredentialRow): ConnectionJson {
  return {
    id: row.id,
    url: row.url,
    command: null,
    unset_env: [],
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
    refresh_expires_at: row.refresh_token !== null ? isoOrNull(row.refresh_expires_at) : null,
    lost: null,
    credential: null,
  };
}

const UNDECLARED = "stored credential for an undeclared id · subs apply deletes it";

/** Returns the exit code: 0, or with `--check` what checkExitCode says. */
export async function mcpListCommand(ctx: Context, options: McpListOptions): Promise<number> {
  const config = await readConfig({ configPath: options.config, env: ctx.env, cwd: ctx.cwd });
  const reporter = stderrReporter(ctx);
  const backend = await backendFor({ ctx, config, reporter });
  const listing = await backend.list(options.check ? { check: { timeoutMs: options.check.timeoutSeconds * 1000 } } : {});
  const checked = listing.checks ? await import("./check.ts") : undefined;
  const style = styleFor(ctx.color);
  const windowMs = (options.warnWithinSeconds ?? DEFAULT_WARN_WITHIN_SECONDS) * 1000;
  const done = listing.target === "local" ? writeLocal(ctx, config, listing, options.json, style, checked, windowMs) : writeRemote(ctx, config, listing, options.json, style, checked, windowMs);
  // After the listing, with --json too (warnings are stderr's): each refresh token about to
  // expire, with the login that replaces it before it does. The exit code stays the listing's.
  const entries = listing.target === "local" ? listing.statuses : listing.entries.map(remoteGrant);
  writeGrantWarnings(reporter, grantWarnings(entries, ctx.now(), windowMs), ctx.now());
  if (!listing.checks) return 0;
  if (!done) checked!.reportProblems(ctx, listing.checks);
  return checked!.checkExitCode(listing.checks.values());
}

type Checked = typeof import("./check.ts") | undefined;

/** A deployment's entry as grantWarnings reads it: usable, and when its refresh token expires. */
function remoteGrant(e: RemoteListEntry): { id: string; usable: boolean; refreshExpiresAt: number | null } {
  const at = e.status === "authorized" && e.deployment?.refresh_expires_at ? Date.parse(e.deployment.refresh_expires_at) : Number.NaN;
  return { id: e.id, usable: e.usable, refreshExpiresAt: Number.isNaN(at) ? null : at };
}

/** One line per refresh token about to expire, naming the login to run before it does. */
function writeGrantWarnings(reporter: Reporter, warnings: readonly GrantWarning[], now: number): void {
  for (const w of warnings) {
    const words =
      w.refreshExpiresAt > now
        ? `its refresh token expires in ${shortDuration(w.refreshExpiresAt - now)} (${new Date(w.refreshExpiresAt).toISOString()}); run \`subs mcp login ${w.id}\` before then`
        : `its refresh token expired ${shortDuration(now - w.refreshExpiresAt)} ago, so its next refresh will be refused; run \`subs mcp login ${w.id}\``;
    reporter.warn(`${w.id}: ${words}`);
  }
}

/** Writes the local listing; true when the failures of a check are not to be reported after it. */
function writeLocal(ctx: Context, config: Config, listing: Extract<Listing, { target: "local" }>, json: boolean, style: Style, checked: Checked, windowMs: number): boolean {
  const { statuses, undeclared, checks } = listing;
  if (json) {
    // Undeclared ids are never probed: nothing can name them. Their `check` is null.
    writeJson(ctx.stdout, [
      ...statuses.map((s) => (checks ? { ...connectionJson(s), check: checked!.checkJson(checks.get(s.id)!) } : connectionJson(s))),
      ...undeclared.map((row) => (checks ? { ...undeclaredJson(row), check: null } : undeclaredJson(row))),
    ]);
    // stderr explains the failures with --json too, as any failing command's message is there.
    return false;
  }
  if (statuses.length === 0) {
    ctx.stderr.write(`No connections declared in ${config.displayPath}. Add one:\n\n  [mcp.sentry]\n  url = "https://mcp.sentry.dev/mcp"\n`);
    if (undeclared.length === 0) return true;
  }
  const now = ctx.now();
  const rows = [
    ...statuses.map((s) => [
      s.id,
      s.url ?? `local: ${shown(s.command!)}`,
      s.auth,
      describeStatus(s, now, style, windowMs),
      ...(checks ? [checked!.describeCheck(checks.get(s.id)!, style, s.tokenEnv)] : []),
      s.agents.join(", ") || "-",
    ]),
    ...undeclared.map((row) => [row.id, row.url, "oauth", style.yellow(UNDECLARED), ...(checks ? ["-"] : []), "-"]),
  ];
  const headers = ["ID", "URL", "AUTH", "STATUS", ...(checks ? ["CHECK"] : []), "AGENTS"];
  ctx.stdout.write(renderTable(headers, rows, { tty: ctx.stdoutIsTTY, columns: ctx.stdoutColumns, style: style.bold }));
  return false;
}

/** Same keys as the local `mcp list --json` entries, plus the deployment's view and the drift (README.md, "With `[remote]`"). */
export function remoteConnectionJson(e: RemoteListEntry) {
  return {
    id: e.id,
    url: e.url,
    command: null,
    unset_env: [] as string[],
    auth: "oauth" as const,
    status: e.status,
    usable: e.usable,
    issuer: null,
    scopes: [] as string[],
    expires_at: e.status === "authorized" ? (e.deployment?.expires_at ?? null) : null,
    refreshable: false,
    token_env: null,
    logged_in_url: e.status === "url_changed" ? (e.deployment?.url ?? null) : null,
    agents: e.agents,
    refresh_expires_at: e.status === "authorized" ? (e.deployment?.refresh_expires_at ?? null) : null,
    // The deployment's record of a credential lost for good, while it needs a login at this url.
    lost: e.status === "needs_login" && e.deployment?.lost ? { reason: e.deployment.lost.reason, message: e.deployment.lost.message ?? null, lost_at: e.deployment.lost.lost_at ?? null } : null,
    credential: e.credential,
    target: "remote" as const,
    authorized_at: e.status === "authorized" ? (e.deployment?.authorized_at ?? null) : null,
    authorized_by: e.status === "authorized" ? (e.deployment?.authorized_by ?? null) : null,
    drift: e.drift,
    differs: e.differs,
    deployment: e.deployment ? { url: e.deployment.url, prefix_tools: e.deployment.prefix_tools, status: e.deployment.status } : null,
    refused: e.refused,
    // Names and whether each is held, never a value (the deployment never gives one).
    secrets: e.secrets.map((h) => ({ name: h.name, held: h.held, set_at: h.set_at ?? null, set_by: h.set_by ?? null })),
  };
}

/** Writes the deployment's listing merged with the file; true when the failures of a check are not to be reported after it. */
function writeRemote(ctx: Context, config: Config, listing: Extract<Listing, { target: "remote" }>, json: boolean, style: Style, checked: Checked, windowMs: number): boolean {
  const { entries, checks, url } = listing;
  if (json) {
    writeJson(ctx.stdout, entries.map((e) => (checks ? { ...remoteConnectionJson(e), check: checked!.checkJson(checks.get(e.id)!) } : remoteConnectionJson(e))));
    return true;
  }
  if (entries.length === 0) {
    ctx.stderr.write(`No connections in ${config.displayPath} or on ${url.origin}.\n`);
    return true;
  }
  const now = ctx.now();
  const rows = entries.map((e) => [e.id, e.url, describeRemote(e, now, style, windowMs), ...(checks ? [checked!.describeCheck(checks.get(e.id)!, style)] : []), e.agents.join(", ") || "-"]);
  const headers = ["ID", "URL", "STATUS ON " + url.host, ...(checks ? ["CHECK"] : []), "AGENTS"];
  ctx.stdout.write(renderTable(headers, rows, { tty: ctx.stdoutIsTTY, columns: ctx.stdoutColumns, style: style.bold }));
  const drifted = entries.filter((e) => e.drift !== null).length;
  if (drifted > 0) ctx.stderr.write(`${drifted} connection${drifted === 1 ? "" : "s"} differ${drifted === 1 ? "s" : ""} between ${config.displayPath} and the deployment: run \`subs apply\`.\n`);
  writeRefusals(ctx, entries);
  return false;
}

/**
 * Why the deployment refuses to use a connection, after the table: each one, then what to do and
 * the allowed URLs, as `subs apply` lists them for a refused url. Both come from the deployment:
 * shown, never interpreted (SECURITY.md, "What subs shows of server text").
 */
function writeRefusals(ctx: Context, entries: readonly RemoteListEntry[]): void {
  const refused = entries.filter((e) => e.refused !== null);
  if (refused.length === 0) return;
  const outside = refused.filter((e) => e.refused!.error === "url_not_in_catalog");
  for (const e of refused) {
    const why = e.refused!.error === "url_not_in_catalog" ? "its url is not in the deployment's catalog" : (e.refused!.message ?? e.refused!.error);
    ctx.stderr.write(`${shown(e.id)}: the deployment refuses to use it: ${shown(why)}\n`);
  }
  if (outside.length === 0) return;
  ctx.stderr.write(`  declare ${outside.length === 1 ? "it with a url" : "them with urls"} from the catalog and run \`subs apply\`, or ask the deployment's operator to add ${outside.length === 1 ? "its url" : "theirs"} (a credential the deployment holds stays there, unused)\n`);
  const catalog = outside.find((e) => e.refused!.catalog)?.refused!.catalog;
  if (catalog) ctx.stderr.write(`  allowed URLs:\n${catalog.map((u) => `    ${shown(u)}\n`).join("")}`);
}

/** How the table says a refresh token's expiry: in the warning window in yellow, else plain; nothing when unknown. */
function refreshWords(refreshExpiresAt: number | null, now: number, style: Style, windowMs: number): string {
  if (refreshExpiresAt === null) return "";
  const words = refreshExpiresAt > now ? `refresh token expires in ${shortDuration(refreshExpiresAt - now)}` : `refresh token expired ${shortDuration(now - refreshExpiresAt)} ago`;
  return ` · ${expiresWithin(refreshExpiresAt, now, windowMs) ? style.yellow(`${words} · subs mcp login`) : words}`;
}

/** Why a lost credential needs a login, as recorded (shown, never interpreted: it quotes a server). */
function lostWords(lost: { reason: string; message: string | null } | null): string {
  if (!lost) return "";
  return `: ${shown(lost.reason.replaceAll("_", " "))}${lost.message ? ` (${shown(lost.message, { max: 200 })})` : ""}`;
}

function describeRemote(e: RemoteListEntry, now: number, style: Style, windowMs: number): string {
  const differs = e.drift === "differs" && e.status !== "url_changed" ? ` · ${e.differs.join(", ")} differ${e.differs.length === 1 ? "s" : ""} · subs apply` : "";
  switch (e.status) {
    case "authorized": {
      const expires = e.deployment?.expires_at ? Date.parse(e.deployment.expires_at) : null;
      // The token name comes from the deployment: shown, never interpreted (SECURITY.md, "What subs shows of server text").
      // A personal connection's status is the caller's own: "you" consented, through whichever token.
      const by = e.credential === "personal" ? " by you" : e.deployment?.authorized_by ? ` by ${shown(e.deployment.authorized_by)}` : "";
      return style.green(`authorized${by}${expires !== null && expires > now ? ` (expires in ${shortDuration(expires - now)})` : ""}`) + refreshWords(remoteGrant(e).refreshExpiresAt, now, style, windowMs) + differs;
    }
    case "needs_login": {
      // The variable names come from the deployment: shown, never interpreted.
      const unheld = e.secrets.filter((h) => !h.held).map((h) => shown(h.name));
      const lost = e.deployment?.lost ? lostWords({ reason: e.deployment.lost.reason, message: e.deployment.lost.message ?? null }) : "";
      const whose = e.credential === "personal" ? "needs your login" : "needs login";
      return style.yellow(`${whose}${lost}${unheld.length ? ` (${unheld.join(", ")} not held)` : ""} · subs mcp login ${e.id}`) + differs;
    }
    case "refused":
      return style.red(e.refused?.error === "url_not_in_catalog" ? "refused: url not in the deployment's catalog" : `refused by the deployment (${e.refused?.error})`) + differs;
    case "url_changed":
      return style.yellow(`url differs (deployment: ${e.deployment?.url}) · subs apply, then subs mcp login ${e.id}`);
    case "not_applied":
      return style.yellow("not applied · subs apply");
    case "not_in_file":
      return style.red("not in the file · subs apply removes it and its credential");
  }
}

export function describeStatus(s: ConnectionStatus, now: number, style: Style, windowMs = DEFAULT_WARN_WITHIN_SECONDS * 1000): string {
  const described = statusWords(s, now, style, windowMs);
  // A remote server's headers read variables that are not set: said whatever its credential's state.
  if (s.command === null && s.unsetEnv.length > 0) return `${described} · ${style.red(`${s.unsetEnv.map((name) => `$${name}`).join(", ")} unset (headers)`)}`;
  return described;
}

function statusWords(s: ConnectionStatus, now: number, style: Style, windowMs: number): string {
  switch (s.status) {
    case "authorized": {
      const refresh = refreshWords(s.refreshExpiresAt, now, style, windowMs);
      if (s.expiresAt === null) return style.green("authorized") + refresh;
      if (s.expiresAt <= now) return style.green(`authorized (expired ${shortDuration(now - s.expiresAt)} ago, refreshes on use)`) + refresh;
      return style.green(`authorized (expires in ${shortDuration(s.expiresAt - now)}${s.refreshable ? ", refreshable" : ""})`) + refresh;
    }
    case "needs_login":
      // After --check a credential the server refused is shown needing a login, expired or not.
      if (s.lost) return style.yellow(`needs login${lostWords(s.lost)} · subs mcp login ${s.id}`);
      return style.yellow(s.expiresAt !== null && s.expiresAt <= now ? `needs login (expired) · subs mcp login ${s.id}` : `needs login · subs mcp login ${s.id}`);
    case "url_changed":
      return style.yellow(`url changed since login · subs mcp login ${s.id}`);
    case "env_set":
      return style.green(`$${s.tokenEnv} set`);
    case "env_unset":
      if (s.command !== null) return style.red(`${s.unsetEnv.map((name) => `$${name}`).join(", ")} unset · it reads ${s.unsetEnv.length === 1 ? "it" : "them"} when it starts`);
      return style.red(`$${s.tokenEnv} unset`);
    case "open":
      return style.green("open (the server asks for no credential)");
    case "local":
      return style.green("local · starts when used");
  }
}
