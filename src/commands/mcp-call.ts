import { loadConfig } from "../config/load.ts";
import type { Context } from "../context.ts";
import { failed, usage } from "../errors.ts";
import { writeJson } from "../output/json.ts";
import { stderrReporter } from "../output/reporter.ts";
import { findConnection } from "../config/lookup.ts";
import { localOnly } from "./mcp-tools.ts";

export type McpCallOptions = { config?: string; id: string; tool: string; args?: string; json: boolean; timeoutSeconds: number; browser: boolean };

export function parseArgs(text: string | undefined): Record<string, unknown> {
  if (text === undefined) return {};
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch (error) {
    throw usage(`--args is not valid JSON (${error instanceof Error ? error.message : String(error)})`, { hint: `e.g. --args '{"query": "error"}'` });
  }
  if (value === null || typeof value !== "object" || Array.isArray(value)) throw usage("--args must be a JSON object", { hint: `e.g. --args '{"query": "error"}'` });
  return value as Record<string, unknown>;
}

export async function mcpCallCommand(ctx: Context, options: McpCallOptions): Promise<void> {
  const args = parseArgs(options.args);
  const config = loadConfig({ configPath: options.config, env: ctx.env, cwd: ctx.cwd });
  localOnly(config, "mcp call");
  const connection = findConnection(config, options.id);
  const { withConnection } = await import("../mcp/step-up.ts");
  const result = await withConnection(
    { ctx, config, connection, reporter: stderrReporter(ctx), login: { timeoutMs: options.timeoutSeconds * 1000, openBrowser: options.browser } },
    (client, signal) => client.callTool({ name: options.tool, arguments: args }, undefined, { signal }),
  );
  if (options.json) {
    writeJson(ctx.stdout, result);
  } else {
    const content = Array.isArray(result.content) ? (result.content as Array<Record<string, unknown>>) : [];
    for (const block of content) {
      if (block.type === "text" && typeof block.text === "string") ctx.stdout.write(block.text.endsWith("\n") ? block.text : `${block.text}\n`);
      else ctx.stdout.write(`${JSON.stringify(block)}\n`);
    }
    if (result.structuredContent !== undefined && content.length === 0) ctx.stdout.write(`${JSON.stringify(result.structuredContent, null, 2)}\n`);
  }
  if (result.isError === true) {
    throw failed(`${connection.id}: the tool ${options.tool} reported an error`, { code: "tool_error" });
  }
}
