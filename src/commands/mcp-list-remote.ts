// `subs mcp list` with [remote] (issue 4): one GET to the deployment, merged with the file.
// `--json` is documented in README.md, "With `[remote]`"; it never holds a secret.
import { warnLocalOnlyAuth } from "../config/remote-rules.ts";
import type { Config } from "../config/types.ts";
import type { Context } from "../context.ts";
import { writeJson } from "../output/json.ts";
import { stderrReporter } from "../output/reporter.ts";
import { styleFor, type Style } from "../output/style.ts";
import { renderTable } from "../output/table.ts";
import { shortDuration } from "../output/time.ts";
import { DeploymentClient } from "../remote/client.ts";
import { listRemoteConnections, type RemoteListEntry } from "../remote/list.ts";
import type { Reporter } from "../report.ts";
import type { CheckProblem, ConnectionCheck } from "../status/check.ts";

export type McpListRemoteOptions = { json: boolean; check?: { timeoutSeconds: number } };

/** Same keys as the local `mcp list --json` entries, plus the deployment's view and the drift. */
export function remoteConnectionJson(e: RemoteListEntry) {
  return {
    id: e.id,
    url: e.url,
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
    target: "remote" as const,
    authorized_at: e.status === "authorized" ? (e.deployment?.authorized_at ?? null) : null,
    drift: e.drift,
    differs: e.differs,
    deployment: e.deployment ? { url: e.deployment.url, prefix_tools: e.deployment.prefix_tools, status: e.deployment.status } : null,
  };
}

/** Returns the exit code: 0, or with `--check` what checkExitCode says. */
export async function mcpListRemote(ctx: Context, config: Config, options: McpListRemoteOptions): Promise<number> {
  const reporter = stderrReporter(ctx);
  const client = new DeploymentClient({ remote: config.remote!, ctx, reporter });
  const entries = await listRemoteConnections(config, client);
  warnLocalOnlyAuth(config, reporter);
  const checked = options.check && entries.length > 0 ? await import("./mcp-list-check.ts") : undefined;
  const checks = checked ? await checkOnDeployment(ctx, { config, entries, reporter, timeoutSeconds: options.check!.timeoutSeconds, checked }) : undefined;
  if (options.json) {
    writeJson(ctx.stdout, entries.map((e) => (checks ? { ...remoteConnectionJson(e), check: checked!.checkJson(checks.get(e.id)!) } : remoteConnectionJson(e))));
    return checks ? checked!.checkExitCode(checks.values()) : 0;
  }
  if (entries.length === 0) {
    ctx.stderr.write(`No connections in ${config.displayPath} or on ${client.base.origin}.\n`);
    return 0;
  }
  const style = styleFor(ctx.color);
  const now = ctx.now();
  const rows = entries.map((e) => [e.id, e.url, describe(e, now, style), ...(checks ? [checked!.describeCheck(checks.get(e.id)!, style)] : []), e.agents.join(", ") || "-"]);
  const headers = ["ID", "URL", "STATUS ON " + client.base.host, ...(checks ? ["CHECK"] : []), "AGENTS"];
  ctx.stdout.write(renderTable(headers, rows, { tty: ctx.stdoutIsTTY, columns: ctx.stdoutColumns, style: style.bold }));
  const drifted = entries.filter((e) => e.drift !== null).length;
  if (drifted > 0) ctx.stderr.write(`${drifted} connection${drifted === 1 ? "" : "s"} differ${drifted === 1 ? "s" : ""} between ${config.displayPath} and the deployment: run \`subs apply\`.\n`);
  if (!checks) return 0;
  checked!.reportProblems(ctx, checks);
  return checked!.checkExitCode(checks.values());
}

/**
 * `--check` with [remote]: the deployment lists each authorized connection's tools with the
 * credential it holds (GET /v1/mcp/{id}/tools, all at once); the others say why from the listing.
 */
async function checkOnDeployment(
  ctx: Context,
  options: { config: Config; entries: readonly RemoteListEntry[]; reporter: Reporter; timeoutSeconds: number; checked: typeof import("./mcp-list-check.ts") },
): Promise<Map<string, ConnectionCheck>> {
  const { config, entries, reporter, timeoutSeconds, checked } = options;
  const { remoteToolSource } = await import("../agents/remote-source.ts");
  const byId = new Map(config.connections.map((c) => [c.id, c]));
  const targets = entries.map((e) => {
    const connection = byId.get(e.id) ?? checked.bareConnection(e.id, e.url);
    const problem = remoteProblem(e);
    return { connection, ...(problem ? { withoutCredential: problem } : {}) };
  });
  const source = remoteToolSource({
    listTools: (id, { signal }) => new DeploymentClient({ remote: config.remote!, ctx: { ...ctx, signal }, reporter }).listTools(id, { signal }),
  });
  return checked.probe(ctx, reporter, targets.length, { targets, source, timeoutMs: timeoutSeconds * 1000, signal: ctx.signal });
}

function remoteProblem(e: RemoteListEntry): CheckProblem | undefined {
  switch (e.status) {
    case "authorized":
      return undefined;
    case "needs_login":
      return { code: "needs_login", message: `${e.id}: the deployment holds no credential`, hint: `run \`subs mcp login ${e.id}\``, needsLogin: true };
    case "url_changed":
      return { code: "url_changed", message: `${e.id}: the deployment has another url`, hint: `run \`subs apply\`, then \`subs mcp login ${e.id}\``, needsLogin: false };
    case "not_applied":
      return { code: "not_applied", message: `${e.id}: not declared on the deployment`, hint: "run `subs apply`", needsLogin: false };
    case "not_in_file":
      return { code: "not_in_file", message: `${e.id}: on the deployment, not in the file`, hint: "run `subs apply` to remove it", needsLogin: false };
  }
}

function describe(e: RemoteListEntry, now: number, style: Style): string {
  const differs = e.drift === "differs" && e.status !== "url_changed" ? ` · ${e.differs.join(", ")} differ${e.differs.length === 1 ? "s" : ""} · subs apply` : "";
  switch (e.status) {
    case "authorized": {
      const expires = e.deployment?.expires_at ? Date.parse(e.deployment.expires_at) : null;
      return style.green(`authorized${expires !== null && expires > now ? ` (expires in ${shortDuration(expires - now)})` : ""}`) + differs;
    }
    case "needs_login":
      return style.yellow(`needs login · subs mcp login ${e.id}`) + differs;
    case "url_changed":
      return style.yellow(`url differs (deployment: ${e.deployment?.url}) · subs apply, then subs mcp login ${e.id}`);
    case "not_applied":
      return style.yellow("not applied · subs apply");
    case "not_in_file":
      return style.red("not in the file · subs apply removes it and its credential");
  }
}
