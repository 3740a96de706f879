import { readFile } from "node:fs/promises";
import path from "node:path";
import { loadConfig } from "../config/load.ts";
import type { Context } from "../context.ts";
import { ErrorCode } from "@modelcontextprotocol/sdk/types.js";
import { closestNames } from "../config/closest.ts";
import { failed, usage, type SubsError } from "../errors.ts";
import { writeJson } from "../output/json.ts";
import { stderrReporter } from "../output/reporter.ts";
import { shown } from "../output/untrusted.ts";
import { findConnection } from "../config/lookup.ts";
import { fetchingProgress, localOnly, withRequestTimeoutHint } from "./mcp-tools.ts";

export type McpCallOptions = {
  config?: string;
  id: string;
  tool: string;
  args?: string;
  json: boolean;
  /** How long a re-authorization waits for consent. */
  timeoutSeconds: number;
  /** How long the server may go without answering or reporting progress (`--request-timeout`). */
  requestTimeoutSeconds: number;
  browser: boolean;
};

/**
 * The text `--args` names: itself, all of stdin for `-`, or a file for `@PATH` (as curl's `-d`), so
 * a script can pass arguments too long or too awkward to quote on a command line.
 */
export async function argsText(ctx: Pick<Context, "cwd" | "readStdin">, given: string | undefined): Promise<{ text: string; from: string } | undefined> {
  if (given === undefined) return undefined;
  if (given === "-") {
    if (!ctx.readStdin) throw usage("--args - reads stdin, which this context does not offer");
    return { text: await ctx.readStdin(), from: "stdin" };
  }
  if (!given.startsWith("@")) return { text: given, from: "--args" };
  const file = path.resolve(ctx.cwd, given.slice(1));
  try {
    return { text: await readFile(file, "utf8"), from: given.slice(1) };
  } catch (error) {
    throw usage(`--args ${given}: cannot read ${given.slice(1)} (${(error as NodeJS.ErrnoException).code ?? "error"})`, { hint: "check the path" });
  }
}

export function parseArgs(text: string | undefined, from = "--args"): Record<string, unknown> {
  if (text === undefined) return {};
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch (error) {
    throw usage(`${from} is not valid JSON (${error instanceof Error ? error.message : String(error)})`, { hint: `e.g. --args '{"query": "error"}'` });
  }
  if (value === null || typeof value !== "object" || Array.isArray(value)) throw usage(`${from} must be a JSON object`, { hint: `e.g. --args '{"query": "error"}'` });
  // JSON.parse takes any depth, but the SDK's validation and JSON.stringify recurse: a few thousand
  // levels overflowed the stack, reported as "cannot reach" the server (issue 14, the fuzzer).
  if (nestedDeeperThan(value, MAX_ARGS_DEPTH)) throw usage(`${from} is nested deeper than ${MAX_ARGS_DEPTH} levels`, { hint: `e.g. --args '{"query": "error"}'` });
  return value as Record<string, unknown>;
}

const MAX_ARGS_DEPTH = 64;

function nestedDeeperThan(root: object, max: number): boolean {
  const stack: Array<[value: unknown, depth: number]> = [[root, 1]];
  while (stack.length > 0) {
    const [value, depth] = stack.pop()!;
    if (value === null || typeof value !== "object") continue;
    if (depth > max) return true;
    for (const child of Object.values(value)) stack.push([child, depth + 1]);
  }
  return false;
}

export async function mcpCallCommand(ctx: Context, options: McpCallOptions): Promise<void> {
  const given = await argsText(ctx, options.args);
  const args = parseArgs(given?.text, given?.from);
  const config = loadConfig({ configPath: options.config, env: ctx.env, cwd: ctx.cwd });
  localOnly(config, "mcp call");
  const connection = findConnection(config, options.id);
  const { withConnection } = await import("../mcp/step-up.ts");
  const reporter = stderrReporter(ctx);
  const calling = fetchingProgress(ctx, reporter, `Calling ${options.tool} on ${connection.id}`);
  const requestTimeoutMs = options.requestTimeoutSeconds * 1000;
  let result: Awaited<ReturnType<import("@modelcontextprotocol/sdk/client/index.js").Client["callTool"]>>;
  try {
    result = await withConnection(
      { ctx, config, connection, reporter, login: { timeoutMs: options.timeoutSeconds * 1000, openBrowser: options.browser }, requestTimeoutMs },
      async (client, signal) => {
        const call = client.callTool({ name: options.tool, arguments: args }, undefined, {
          signal,
          timeout: requestTimeoutMs,
          // A long tool that reports progress (MCP "Progress" notifications) is working, not
          // silent: each report restarts the wait, and a terminal shows it.
          resetTimeoutOnProgress: true,
          onprogress: (progress) => calling.update(`Calling ${options.tool} on ${connection.id}: ${progressText(progress)}`),
        });
        // A name the server does not have fails as a protocol error (MCP "Tools: Error Handling",
        // -32602) or, from older servers, as a tool error: either way, the server's own list says
        // whether the name was the problem, and which it has instead. Asked only after a failure.
        const unknown = async () => {
          const { listAllTools } = await import("../mcp/connect.ts");
          const names = (await listAllTools(client, { signal, requestTimeoutMs }).catch(() => undefined))?.map((t) => t.name);
          return names !== undefined && !names.includes(options.tool) ? unknownTool(connection.id, options.tool, names) : undefined;
        };
        const answered = await call.catch(async (error: unknown) => {
          if ((error as { code?: unknown }).code === ErrorCode.InvalidParams) throw (await unknown()) ?? error;
          throw error;
        });
        if (answered.isError === true) {
          const problem = await unknown();
          if (problem) throw problem;
        }
        return answered;
      },
    );
  } catch (error) {
    calling.fail(`${options.tool} on ${connection.id} did not finish`);
    throw withRequestTimeoutHint(error);
  }
  if (result.isError === true) calling.fail(`${options.tool} on ${connection.id} reported an error`);
  else calling.succeed(`${options.tool} on ${connection.id} finished`);
  if (options.json) {
    writeJson(ctx.stdout, result);
  } else {
    // The tool's text is the server's: its lines as they are, every other control character and
    // bidi override shown, never interpreted (issue 14, item 1). JSON.stringify escapes control
    // characters but not U+202E, hence `shown` on the JSON too. --json above stays exact.
    const content = Array.isArray(result.content) ? (result.content as Array<Record<string, unknown>>) : [];
    for (const block of content) {
      if (block.type === "text" && typeof block.text === "string") {
        const text = shown(block.text, { multiline: true });
        ctx.stdout.write(text.endsWith("\n") ? text : `${text}\n`);
      } else ctx.stdout.write(`${shown(JSON.stringify(block))}\n`);
    }
    if (result.structuredContent !== undefined && content.length === 0) ctx.stdout.write(`${shown(JSON.stringify(result.structuredContent, null, 2), { multiline: true })}\n`);
  }
  if (result.isError === true) {
    throw failed(`${connection.id}: the tool ${options.tool} reported an error`, { code: "tool_error" });
  }
}

/** The failure of a call to a tool the server does not list, naming the names it has that are closest. */
function unknownTool(id: string, tool: string, names: readonly string[]): SubsError {
  const near = closestNames(tool, names, 3);
  const listed = `\`subs mcp tools ${id}\` lists its ${names.length} tool${names.length === 1 ? "" : "s"}`;
  return failed(`${id} has no tool named ${shown(tool)}`, {
    code: "unknown_tool",
    hint: near.length > 0 ? `did you mean ${near.map((n) => `\`${shown(n)}\``).join(", ")}? (${listed})` : listed,
  });
}

/** A progress notification as a few words: `3/10 indexing`, or the count alone when there is no total. */
export function progressText(progress: { progress: number; total?: number; message?: string }): string {
  const count = progress.total !== undefined && progress.total > 0 ? `${progress.progress}/${progress.total}` : String(progress.progress);
  // The server's words: shown, and cut between visible characters, never inside one (issue 14).
  const first = progress.message?.split("\n")[0];
  const message = first === undefined ? undefined : shown(first, { max: 80 });
  return message ? `${count} ${message}` : count;
}
