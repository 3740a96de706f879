// `subs mcp list` with [remote] (issue 4): one GET to the deployment, merged with the file.
// `--json` is documented in README.md, "With `[remote]`"; it never holds a secret.
import type { Config } from "../config/types.ts";
import type { Context } from "../context.ts";
import { writeJson } from "../output/json.ts";
import { stderrReporter } from "../output/reporter.ts";
import { styleFor, type Style } from "../output/style.ts";
import { renderTable } from "../output/table.ts";
import { shortDuration } from "../output/time.ts";
import { DeploymentClient } from "../remote/client.ts";
import { listRemoteConnections, type RemoteListEntry } from "../remote/list.ts";

export type McpListRemoteOptions = { json: boolean };

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

export async function mcpListRemote(ctx: Context, config: Config, options: McpListRemoteOptions): Promise<void> {
  const client = new DeploymentClient({ remote: config.remote!, ctx, reporter: stderrReporter(ctx) });
  const entries = await listRemoteConnections(config, client);
  if (options.json) {
    writeJson(ctx.stdout, entries.map(remoteConnectionJson));
    return;
  }
  if (entries.length === 0) {
    ctx.stderr.write(`No connections in ${config.displayPath} or on ${client.base.origin}.\n`);
    return;
  }
  const style = styleFor(ctx.color);
  const now = ctx.now();
  const rows = entries.map((e) => [e.id, e.url, describe(e, now, style), e.agents.join(", ") || "-"]);
  ctx.stdout.write(renderTable(["ID", "URL", "STATUS ON " + client.base.host, "AGENTS"], rows, { tty: ctx.stdoutIsTTY, style: style.bold }));
  const drifted = entries.filter((e) => e.drift !== null).length;
  if (drifted > 0) ctx.stderr.write(`${drifted} connection${drifted === 1 ? "" : "s"} differ${drifted === 1 ? "s" : ""} between ${config.displayPath} and the deployment: run \`subs apply\`.\n`);
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
