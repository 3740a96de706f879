import { readFile } from "node:fs/promises";
import path from "node:path";
import { backendFor } from "../../../backend/choose.ts";
import type { CallResult } from "../../../backend/types.ts";
import { loadConfig } from "../../../config/load.ts";
import type { Context } from "../../../context.ts";
import { failed, usage } from "../../../errors.ts";
import { writeJson } from "../../../output/json.ts";
import { loginSteps } from "../../../output/login-words.ts";
import { stderrReporter } from "../../../output/reporter.ts";
import { shown } from "../../../output/untrusted.ts";
import { fetchingProgress, type Progress } from "../../../report.ts";
import { withRequestTimeoutHint } from "../request-timeout.ts";

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
  // levels overflowed the stack, reported as "cannot reach" the server.
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
  const reporter = stderrReporter(ctx);
  const backend = await backendFor({ ctx, config, reporter, loginSteps: () => loginSteps(reporter) });
  const { id, tool } = options;
  let calling: Progress | undefined;
  let result: CallResult;
  try {
    result = await backend.call({
      id,
      tool,
      args,
      timeoutMs: options.timeoutSeconds * 1000,
      requestTimeoutMs: options.requestTimeoutSeconds * 1000,
      browser: options.browser,
      events: {
        onStart: () => (calling = fetchingProgress(ctx, reporter, `Calling ${tool} on ${id}`)),
        onProgress: (progress) => calling?.update(`Calling ${tool} on ${id}: ${progressText(progress)}`),
      },
    });
  } catch (error) {
    calling?.fail(`${tool} on ${id} did not finish`);
    throw withRequestTimeoutHint(error);
  }
  if (result.isError === true) calling?.fail(`${tool} on ${id} reported an error`);
  else calling?.succeed(`${tool} on ${id} finished`);
  if (options.json) {
    writeJson(ctx.stdout, result);
  } else {
    // The tool's text is the server's: its lines as they are, every other control character and
    // bidi override shown, never interpreted (SECURITY.md, "What subs shows of server text").
    // JSON.stringify escapes control characters but not U+202E, hence `shown` on the JSON too.
    // --json above stays exact.
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
    throw failed(`${id}: the tool ${tool} reported an error`, { code: "tool_error" });
  }
}

/** A progress notification as a few words: `3/10 indexing`, or the count alone when there is no total. */
export function progressText(progress: { progress: number; total?: number; message?: string }): string {
  const count = progress.total !== undefined && progress.total > 0 ? `${progress.progress}/${progress.total}` : String(progress.progress);
  // The server's words: shown, and cut between visible characters, never inside one
  // (SECURITY.md, "What subs shows of server text").
  const first = progress.message?.split("\n")[0];
  const message = first === undefined ? undefined : shown(first, { max: 80 });
  return message ? `${count} ${message}` : count;
}
