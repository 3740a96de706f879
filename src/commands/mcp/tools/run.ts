import { backendFor } from "../../../backend/choose.ts";
import type { ListedTool } from "../../../backend/types.ts";
import { loadConfig } from "../../../config/load.ts";
import { findConnection } from "../../../config/lookup.ts";
import { whereIs } from "../../../config/types.ts";
import type { Context } from "../../../context.ts";
import { writeJson } from "../../../output/json.ts";
import { loginSteps } from "../../../output/login-words.ts";
import { stderrReporter } from "../../../output/reporter.ts";
import { styleFor } from "../../../output/style.ts";
import { renderTable } from "../../../output/table.ts";
import { shown } from "../../../output/untrusted.ts";
import { fetchingProgress } from "../../../report.ts";
import { possessive } from "../../../text/possessive.ts";
import { withRequestTimeoutHint } from "../request-timeout.ts";

export type McpToolsOptions = {
  config?: string;
  id: string;
  json: boolean;
  /** How long a re-authorization waits for consent. */
  timeoutSeconds: number;
  /** How long one MCP request may go unanswered (`--request-timeout`). */
  requestTimeoutSeconds: number;
  browser: boolean;
};

/** Short words for a tool's MCP annotations (hints from the server, not guarantees). */
export function annotationWords(annotations: Record<string, unknown> | undefined): string[] {
  if (!annotations) return [];
  const words: string[] = [];
  if (annotations.readOnlyHint === true) words.push("read-only");
  if (annotations.destructiveHint === true) words.push("destructive");
  if (annotations.destructiveHint === false && annotations.readOnlyHint !== true) words.push("non-destructive");
  if (annotations.idempotentHint === true) words.push("idempotent");
  if (annotations.openWorldHint === true) words.push("open-world");
  return words;
}

export async function mcpToolsCommand(ctx: Context, options: McpToolsOptions): Promise<void> {
  const config = loadConfig({ configPath: options.config, env: ctx.env, cwd: ctx.cwd });
  const connection = findConnection(config, options.id);
  const reporter = stderrReporter(ctx);
  const backend = await backendFor({ ctx, config, reporter, loginSteps: () => loginSteps(reporter) });
  backend.warnRefusals([connection.id]);
  // A deployment lists the tools with the credential it holds: the list is as it sees them.
  const [from, seenBy] = backend.place.kind === "local" ? [whereIs(connection), ""] : [`the deployment at ${backend.place.url.origin}`, ", as the deployment sees them"];
  const fetching = fetchingProgress(ctx, reporter, `Fetching ${possessive(connection.id)} tools from ${from}`);
  let tools: ListedTool[];
  try {
    tools = await backend.tools(connection, {
      timeoutMs: options.timeoutSeconds * 1000,
      requestTimeoutMs: options.requestTimeoutSeconds * 1000,
      browser: options.browser,
    });
  } catch (error) {
    fetching.fail(`Could not list ${possessive(connection.id)} tools`);
    throw withRequestTimeoutHint(error);
  }
  fetching.succeed(`${tools.length} tool${tools.length === 1 ? "" : "s"} on ${connection.id}${seenBy}`);
  writeToolList(ctx, { id: connection.id, tools, json: options.json, seenBy });
}

/** The output of `subs mcp tools`: the `--json` document, or a table. */
export function writeToolList(ctx: Context, list: { id: string; tools: ListedTool[]; json: boolean; seenBy: string }): void {
  const { id, tools } = list;
  if (list.json) {
    writeJson(ctx.stdout, { id, tools });
    return;
  }
  if (tools.length === 0) {
    ctx.stderr.write(`${id} offers no tools.\n`);
    return;
  }
  const style = styleFor(ctx.color);
  const rows = tools.map((t) => [shown(t.name), annotationWords((t.annotations ?? undefined) as Record<string, unknown> | undefined).join(", ") || "-", firstLine(t.description ?? t.title ?? "")]);
  ctx.stdout.write(renderTable(["NAME", "ANNOTATIONS", "DESCRIPTION"], rows, { tty: ctx.stdoutIsTTY, columns: ctx.stdoutColumns, style: style.bold }));
  if (ctx.stdoutIsTTY && !ctx.stderrIsTTY) ctx.stderr.write(`${tools.length} tool${tools.length === 1 ? "" : "s"} on ${id}${list.seenBy}.\n`);
}

/** The first line, shown (SECURITY.md, "What subs shows of server text"): cut at 100 visible characters, never inside an escape or a surrogate pair. */
function firstLine(text: string): string {
  return shown(text.split("\n")[0]?.trim() ?? "", { max: 100 });
}
