// `subs agent connect` and `subs mcp connect`: one entry in an MCP client's configuration
// (src/connect/). The report goes to stderr; a dry run's diff is its data, on stdout; --json is the
// documented object (docs/commands.md).
import { homeOf, shownPath } from "../clients/where.ts";
import { connect, type ConnectOptions, type ConnectResult } from "../connect/connect.ts";
import type { Context } from "../context.ts";
import { writeJson } from "../output/json.ts";
import { possessive } from "../text/possessive.ts";
import { MARK, styleFor } from "../output/style.ts";

export type ConnectCommandOptions = ConnectOptions & { json: boolean };

export async function connectCommand(ctx: Context, options: ConnectCommandOptions): Promise<void> {
  const result = await connect(ctx, options);
  if (options.json) writeJson(ctx.stdout, jsonOf(result));
  else if (options.dryRun) ctx.stdout.write(result.diff);
  renderReport(ctx, result);
}

/** The --json document (docs/commands.md, `subs agent connect`): names of variables only, never a value. */
export function jsonOf(r: ConnectResult) {
  return {
    client: r.client,
    scope: r.scope,
    file: r.file,
    name: r.name,
    serves: r.serves,
    action: r.action,
    dry_run: r.dryRun,
    entry: r.entry,
    variables: r.variables,
    diff: r.diff,
    notes: r.notes,
  };
}

/** How each client gets the variables to subs, for the report. */
const PASSED_BY: Record<ConnectResult["client"], string> = {
  claude: "Claude Code gives its servers its whole environment",
  codex: "named in env_vars",
  gemini: "named in env, as $VAR",
  cursor: "named in env, as ${env:VAR}",
  vscode: "named in env, as ${env:VAR}",
  "claude-desktop": "not passed",
};

/** What to run (or do) to see the entry in the client. */
const CHECK: Record<ConnectResult["client"], (name: string) => string> = {
  claude: (name) => `\`claude mcp get ${name}\``,
  codex: () => "`codex mcp list`",
  gemini: () => "`gemini mcp list`",
  cursor: () => "open Cursor's MCP settings (a running Cursor picks the change up)",
  vscode: () => "run `MCP: List Servers` in VS Code",
  "claude-desktop": () => "restart Claude Desktop",
};

function renderReport(ctx: Context, r: ConnectResult): void {
  const style = styleFor(ctx.stderrColor);
  const out = (line = "") => ctx.stderr.write(`${line}\n`);
  const where = `${possessive(r.title)} ${shownPath(ctx.cwd, r.file, homeOf(ctx.env))} (${r.scope} scope)`;
  const runs = r.serves.url ? `reaches ${r.serves.url}` : `runs \`subs ${r.serves.kind === "agent" ? "agent serve" : "mcp proxy"} ${r.serves.name}\``;
  const entry = `"${r.name}"`;
  if (r.dryRun) {
    const would = { added: `would add ${entry} to`, updated: `would update ${entry} in`, removed: `would remove ${entry} from`, unchanged: `${entry} needs no change in` }[r.action];
    out(`Dry run: ${would} ${where}; nothing was written.`);
  } else if (r.action === "unchanged") {
    out(r.entry === null ? `No entry ${entry} in ${where}: nothing to remove.` : `${entry} in ${where} is up to date: nothing was written.`);
  } else {
    const done = { added: `Added ${entry} to`, updated: `Updated ${entry} in`, removed: `Removed ${entry} from` }[r.action];
    out(`${style.green(MARK.success)} ${done} ${where}${r.action === "removed" ? "." : `: ${r.title} ${runs}.`}`);
  }
  if (r.serves.url) out(`  API token: $${r.variables[0]} (${r.title} reads it; the file names the variable, never the token).`);
  else if (r.variables.length > 0) out(`  Variables for subs: ${r.variables.join(", ")} (${PASSED_BY[r.client]}).`);
  for (const note of r.notes) out(`  ${style.yellow("!")} ${note}`);
  if (!r.dryRun && (r.action === "added" || r.action === "updated")) out(`Next: ${CHECK[r.client](r.name)}.`);
}
