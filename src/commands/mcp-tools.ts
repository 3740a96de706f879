import { loadConfig } from "../config/load.ts";
import type { Config } from "../config/types.ts";
import { findConnection } from "../config/lookup.ts";
import type { Context } from "../context.ts";
import { refused, SubsError, usage } from "../errors.ts";
import { writeJson } from "../output/json.ts";
import { loginSteps } from "../output/login-words.ts";
import { stderrReporter } from "../output/reporter.ts";
import { styleFor } from "../output/style.ts";
import { renderTable } from "../output/table.ts";
import { shown } from "../output/untrusted.ts";
import { silentProgress, type Progress, type Reporter } from "../report.ts";
import { possessive } from "../output/possessive.ts";

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

/**
 * The SDK's "no answer" (src/mcp/open.ts, code `timeout`) with the flag that waits longer: a slow
 * server, or a long tool, is not always a dead one.
 */
export function withRequestTimeoutHint(error: unknown): unknown {
  // Only the MCP request deadline (the SDK's RequestTimeout, -32001) is --request-timeout's: a
  // step-up's consent wait (--timeout) or an HTTP deadline (SUBS_HTTP_TIMEOUT) keeps its own hint.
  if (!(error instanceof SubsError) || error.code !== "timeout" || (error.cause as { code?: unknown } | undefined)?.code !== -32001) return error;
  return new SubsError(error.kind, error.message, { code: error.code, cause: error, hint: "check that the server is up, or wait longer with --request-timeout SECONDS" });
}

export function localOnly(config: Config, command: string): void {
  // The deployment protocol has no call endpoint, and the credential never leaves the deployment
  // (product.md, "The deployment protocol"), so there is nothing this machine could call with.
  if (config.remote)
    throw refused(`subs ${command} works only without [remote]: the deployment holds the credential and offers no way to call a tool`, {
      hint: "see what the deployment offers with `subs mcp tools <id>`",
      code: "remote_unsupported",
    });
}

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
  if (config.remote) {
    const { mcpToolsRemote } = await import("./mcp-tools-remote.ts");
    return mcpToolsRemote(ctx, config, { id: options.id, json: options.json });
  }
  const connection = findConnection(config, options.id);
  const [{ withConnection }, { listAllTools }] = await Promise.all([import("../mcp/step-up.ts"), import("../mcp/connect.ts")]);
  const reporter = stderrReporter(ctx);
  const fetching = fetchingProgress(ctx, reporter, `Fetching ${possessive(connection.id)} tools from ${new URL(connection.url).origin}`);
  let tools: Awaited<ReturnType<typeof listAllTools>>;
  try {
    const requestTimeoutMs = options.requestTimeoutSeconds * 1000;
    tools = await withConnection(
      { ctx, config, connection, reporter, login: { timeoutMs: options.timeoutSeconds * 1000, openBrowser: options.browser, steps: loginSteps(reporter) }, requestTimeoutMs },
      (client, signal) => listAllTools(client, { signal, requestTimeoutMs }),
    );
  } catch (error) {
    fetching.fail(`Could not list ${possessive(connection.id)} tools`);
    throw withRequestTimeoutHint(error);
  }
  fetching.succeed(`${tools.length} tool${tools.length === 1 ? "" : "s"} on ${connection.id}`);
  writeToolList(ctx, { id: connection.id, tools, json: options.json, seenBy: "" });
}

type ListedTool = { name: string; title?: string | null; description?: string | null; annotations?: object | null };

/** The output of `subs mcp tools`, local or remote: the `--json` document, or a table. */
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

/**
 * A spinner while tools are fetched, on a terminal only: a fetch is short, and piped output or a
 * CI log gains nothing from two more lines (issue 8).
 */
export function fetchingProgress(ctx: Pick<Context, "stderrIsTTY" | "env">, reporter: Reporter, text: string): Progress {
  return ctx.stderrIsTTY && !ctx.env.CI ? reporter.progress(text) : silentProgress;
}

/** The first line, shown (issue 14): cut at 100 visible characters, never inside an escape or a surrogate pair. */
function firstLine(text: string): string {
  return shown(text.split("\n")[0]?.trim() ?? "", { max: 100 });
}
