// Claude Code (@anthropic-ai/claude-code, pinned in tools/clients), driven headless: `claude -p
// --output-format stream-json --verbose` prints first a `system/init` line with each configured MCP
// server's status and every tool the session has, MCP tools named `mcp__<server>__<tool>`; then
// the model's turns, which a fake Anthropic Messages API on loopback answers (ANTHROPIC_BASE_URL).
//
// ENABLE_TOOL_SEARCH=false: otherwise MCP tools are deferred behind a ToolSearch tool and never
// reach the model's request. CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1: no telemetry or update
// checks. A tool call in -p needs `--allowedTools NAME`, else Claude refuses it as unapproved.
import path from "node:path";
import type { ServerResponse } from "node:http";
import { CLIENTS_DIR, cleanEnv, ensureClient, runClient, sse, startFakeModel } from "./clients.ts";

/** The native binary, which the folder's postinstall put in place of the bin stub. */
export const CLAUDE = path.join(CLIENTS_DIR, "node_modules", "@anthropic-ai", "claude-code", "bin", "claude.exe");

export function ensureClaude(): void {
  ensureClient("@anthropic-ai/claude-code", [CLAUDE]);
}

export type ClaudeSession = {
  /** The init line's `mcp_servers`: each configured server's name and status ("connected", "failed", …). */
  servers: Array<{ name: string; status: string }>;
  /** The init line's MCP tools (`mcp__…`), sorted. */
  tools: string[];
  /** The MCP tools the model was offered in its first request, sorted. */
  offered: string[];
  /** The text of each tool result the session produced. */
  results: Array<{ text: string; isError: boolean }>;
  code: number | null;
  stderr: string;
};

type Block = { type: string; text?: string; content?: unknown; is_error?: boolean };

/**
 * One `claude -p` session in CWD with HOME. With CALL, the fake model asks for that tool (its
 * model-visible name) with INPUT, once, and Claude is allowed to run it.
 */
export async function claudeSession(options: { home: string; cwd: string; env?: Record<string, string>; call?: { tool: string; input: Record<string, unknown> } }): Promise<ClaudeSession> {
  const call = options.call;
  const model = await startFakeModel((url, body, res) => {
    if (!url.startsWith("/v1/messages") || url.includes("count_tokens")) return void res.writeHead(200, { "content-type": "application/json" }).end('{"input_tokens":1}');
    const tools = ((body.tools ?? []) as Array<{ name: string }>).map((t) => t.name);
    const last = (body.messages as Array<{ content: unknown }> | undefined)?.at(-1)?.content;
    const answered = Array.isArray(last) && last.some((b: Block) => b.type === "tool_result");
    if (call && !answered && tools.includes(call.tool)) messageStream(res, body.model, { type: "tool_use", id: "toolu_1", name: call.tool, input: call.input });
    else messageStream(res, body.model, { type: "text", text: "done" });
  });
  try {
    const ran = await runClient([CLAUDE, "-p", call ? `Use ${call.tool}.` : "Say done.", "--output-format", "stream-json", "--verbose", ...(call ? ["--allowedTools", call.tool] : [])], {
      cwd: options.cwd,
      env: cleanEnv(options.home, {
        ANTHROPIC_API_KEY: "dummy-not-a-key",
        ANTHROPIC_BASE_URL: model.url,
        CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC: "1",
        ENABLE_TOOL_SEARCH: "false",
        // Claude Code's `-p` starts without a server still starting (`pending`, docs/serve.md): the
        // test checks what Claude does with subs's tools, not how fast subs starts on a loaded
        // machine. (MCP_CONNECTION_NONBLOCKING=0 waits a few seconds only: a pair round still saw `pending`.)
        CLAUDE_CODE_MCP_STARTUP_WAIT_MS: "60000",
        ...options.env,
      }),
    });
    const lines = ran.stdout
      .split("\n")
      .filter((l) => l.startsWith("{"))
      .map((l) => JSON.parse(l) as { type: string; subtype?: string; mcp_servers?: ClaudeSession["servers"]; tools?: string[]; message?: { content?: Block[] } });
    const init = lines.find((l) => l.type === "system" && l.subtype === "init");
    if (!init) throw new Error(`claude -p printed no init line (exit ${ran.code}):\n${ran.stdout}\n${ran.stderr}`);
    const first = model.requests.find((r) => r.path.startsWith("/v1/messages") && Array.isArray(r.body.tools));
    const results = lines
      .filter((l) => l.type === "user")
      .flatMap((l) => l.message?.content ?? [])
      .filter((b) => b.type === "tool_result")
      .map((b) => ({ text: textOf(b.content), isError: b.is_error === true }));
    return {
      servers: (init.mcp_servers ?? []).map(({ name, status }) => ({ name, status })),
      tools: (init.tools ?? []).filter((t) => t.startsWith("mcp__")).sort(),
      offered: ((first?.body.tools ?? []) as Array<{ name: string }>).map((t) => t.name).filter((n) => n.startsWith("mcp__")).sort(),
      results,
      code: ran.code,
      stderr: ran.stderr,
    };
  } finally {
    await model.close();
  }
}

function textOf(content: unknown): string {
  if (typeof content === "string") return content;
  if (Array.isArray(content)) return content.map((c: Block) => c.text ?? "").join("");
  return JSON.stringify(content);
}

/** A streamed Messages API answer of one content block (text or tool_use). */
function messageStream(res: ServerResponse, model: unknown, block: { type: "text"; text: string } | { type: "tool_use"; id: string; name: string; input: Record<string, unknown> }): void {
  const stop = block.type === "tool_use" ? "tool_use" : "end_turn";
  const event = (type: string, data: Record<string, unknown>) => sse(res, { type, ...data }, type);
  event("message_start", { message: { id: "msg_1", type: "message", role: "assistant", model, content: [], stop_reason: null, stop_sequence: null, usage: { input_tokens: 1, output_tokens: 1 } } });
  if (block.type === "text") {
    event("content_block_start", { index: 0, content_block: { type: "text", text: "" } });
    event("content_block_delta", { index: 0, delta: { type: "text_delta", text: block.text } });
  } else {
    event("content_block_start", { index: 0, content_block: { ...block, input: {} } });
    event("content_block_delta", { index: 0, delta: { type: "input_json_delta", partial_json: JSON.stringify(block.input) } });
  }
  event("content_block_stop", { index: 0 });
  event("message_delta", { delta: { stop_reason: stop, stop_sequence: null }, usage: { output_tokens: 1 } });
  event("message_stop", {});
  res.end();
}
