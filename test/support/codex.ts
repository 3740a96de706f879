// Codex CLI (@openai/codex, pinned in tools/clients), driven two ways:
// - `codex app-server` (JSON-RPC over stdio, one JSON object a line): `mcpServerStatus/list` starts
//   every configured MCP server and answers each one's tools. Outside a thread Codex starts them in
//   CODEX_HOME (~/.codex), not in any project; in a thread (`thread/start {cwd}`) in that cwd, with
//   a runtime status. Neither needs a login or a model.
// - `codex exec`, the agent loop, against a fake OpenAI Responses API on loopback (a custom
//   model_provider): the model asks for a tool, Codex calls it on the MCP server.
//   MCP tools reach the model as a namespace tool `mcp__<server>` holding the server's tools.
import { spawn } from "node:child_process";
import path from "node:path";
import type { ServerResponse } from "node:http";
import { CLIENTS_DIR, cleanEnv, ensureClient, killGroup, runClient, sse, startFakeModel } from "./clients.ts";

/** bin/codex.js starts the native binary of this platform's optional dependency. */
export const CODEX = [process.execPath, path.join(CLIENTS_DIR, "node_modules", "@openai", "codex", "bin", "codex.js")];

/**
 * Settings for every run, as `-c` overrides so that config.toml holds only what the test wrote:
 * OpenAI's and ChatGPT's APIs on a closed loopback port (a thread prepares a connection to its
 * model provider), and nothing else Codex would fetch at start (the curated plugin catalog from
 * GitHub, apps, model discovery, analytics, the update check).
 */
const OFFLINE = ['openai_base_url="http://127.0.0.1:9/v1"', 'chatgpt_base_url="http://127.0.0.1:9/"', "features.plugins=false", "features.remote_plugin=false", "features.apps=false", "features.api_key_model_discovery=false", "analytics.enabled=false", "check_for_update_on_startup=false"].flatMap((c) => ["-c", c]);

export function ensureCodex(): void {
  ensureClient("@openai/codex", CODEX);
}

export type CodexServer = {
  name: string;
  /** In a thread: "connected", "disabled", …; outside one, null. */
  runtimeStatus: string | null;
  /** The server's tool names as Codex holds them, sorted. */
  tools: string[];
  toolsError: string | null;
};

type Message = { id?: number; method?: string; params?: unknown; result?: unknown; error?: { message: string } };

/**
 * `codex app-server` with HOME: `mcpServerStatus/list` for every configured server, outside a
 * thread, or (with THREADCWD) in an ephemeral thread started in that directory, asked again while
 * any server is still starting.
 */
export async function codexServers(options: { home: string; cwd: string; env?: Record<string, string>; threadCwd?: string }): Promise<CodexServer[]> {
  const child = spawn(CODEX[0]!, [...CODEX.slice(1), "app-server", ...OFFLINE], { cwd: options.cwd, env: cleanEnv(options.home, options.env), stdio: ["pipe", "pipe", "pipe"], detached: true });
  let stderr = "";
  child.stderr.on("data", (d) => (stderr += d));
  const pending = new Map<number, (m: Message) => void>();
  let buffer = "";
  child.stdout.on("data", (d) => {
    buffer += d;
    for (let i = buffer.indexOf("\n"); i >= 0; i = buffer.indexOf("\n")) {
      const line = buffer.slice(0, i).trim();
      buffer = buffer.slice(i + 1);
      if (!line) continue;
      const message = JSON.parse(line) as Message;
      if (message.id !== undefined && message.method === undefined) pending.get(message.id)?.(message);
    }
  });
  let next = 0;
  const exited = new Promise<never>((_, reject) => child.once("exit", (code) => reject(new Error(`codex app-server exited (${code}):\n${stderr}`))));
  const request = async <T>(method: string, params: unknown): Promise<T> => {
    const id = ++next;
    const answer = new Promise<Message>((resolve) => pending.set(id, resolve));
    child.stdin.write(`${JSON.stringify({ id, method, params })}\n`);
    const timeout = new Promise<never>((_, reject) => setTimeout(() => reject(new Error(`codex app-server: no answer to ${method} in 30 s:\n${stderr}`)), 30_000).unref());
    const message = await Promise.race([answer, exited, timeout]);
    if (message.error) throw new Error(`codex app-server ${method}: ${message.error.message}`);
    return message.result as T;
  };
  try {
    await request("initialize", { clientInfo: { name: "subs-test", title: null, version: "0" }, capabilities: { experimentalApi: true, requestAttestation: false } });
    child.stdin.write(`${JSON.stringify({ method: "initialized" })}\n`);
    let threadId: string | undefined;
    if (options.threadCwd !== undefined) threadId = (await request<{ thread: { id: string } }>("thread/start", { cwd: options.threadCwd, ephemeral: true })).thread.id;
    const deadline = Date.now() + 30_000;
    for (;;) {
      const listed = await request<{ data: Array<{ name: string; runtimeStatus: string | null; tools: Record<string, unknown>; toolsError: string | null }> }>("mcpServerStatus/list", { detail: "toolsAndAuthOnly", ...(threadId ? { threadId } : {}) });
      if (!listed.data.some((s) => s.runtimeStatus === "starting") || Date.now() > deadline) {
        return listed.data.map((s) => ({ name: s.name, runtimeStatus: s.runtimeStatus, tools: Object.keys(s.tools).sort(), toolsError: s.toolsError }));
      }
      await new Promise((r) => setTimeout(r, 200));
    }
  } finally {
    exited.catch(() => {});
    killGroup(child.pid);
  }
}

export type CodexRun = {
  /** Each MCP tool call the agent loop completed: server, tool, status and the result's text. */
  calls: Array<{ server: string; tool: string; status: string; text: string }>;
  /** The MCP tools the model was offered in its first request, `namespace/tool`, sorted. */
  offered: string[];
  code: number | null;
  stderr: string;
};

/**
 * `codex exec` in CWD with HOME against a fake model that asks, once, for TOOL of SERVER (as Codex
 * offered it: the namespace `mcp__SERVER`) with ARGS. Calls of that server are approved up front
 * (`default_tools_approval_mode`), as exec's approval policy would otherwise refuse them. SERVER is
 * `required`: Codex starts a turn without an optional server that is still starting after a short
 * grace ("omitting pending optional MCP server"), and on a loaded machine subs can take longer than
 * that, so the model would be offered no MCP tools at all.
 */
export async function codexExec(options: { home: string; cwd: string; env?: Record<string, string>; server: string; tool: string; args: Record<string, unknown> }): Promise<CodexRun> {
  const namespace = `mcp__${options.server}`;
  const model = await startFakeModel((url, body, res) => {
    if (!url.includes("/responses")) return void res.writeHead(200, { "content-type": "application/json" }).end('{"data":[],"models":[]}');
    const input = (body.input ?? []) as Array<{ type: string }>;
    const answered = input.some((i) => i.type === "function_call_output" || i.type === "mcp_tool_call_output");
    const offered = namespaced(body.tools);
    const item = !answered && offered.includes(`${namespace}/${options.tool}`)
      ? { type: "function_call", id: "fc_1", call_id: "call_1", name: options.tool, namespace, arguments: JSON.stringify(options.args), status: "completed" }
      : { type: "message", id: "msg_1", role: "assistant", status: "completed", content: [{ type: "output_text", text: "done", annotations: [] }] };
    responseStream(res, body.model, item);
  });
  try {
    const provider = `{name="fake",base_url="${model.url}/v1",wire_api="responses",env_key="FAKE_MODEL_KEY"}`;
    const ran = await runClient(
      [...CODEX, "exec", ...OFFLINE, "--json", "--skip-git-repo-check", "-c", "model_provider=fake", "-c", `model_providers.fake=${provider}`, "-c", "model=gpt-fake", "-c", `mcp_servers.${options.server}.default_tools_approval_mode="approve"`, "-c", `mcp_servers.${options.server}.required=true`, `Use ${options.tool}.`],
      { cwd: options.cwd, env: cleanEnv(options.home, { FAKE_MODEL_KEY: "dummy-not-a-key", ...options.env }) },
    );
    const events = ran.stdout
      .split("\n")
      .filter((l) => l.startsWith("{"))
      .map((l) => JSON.parse(l) as { type: string; item?: { type: string; server: string; tool: string; status: string; result?: { content?: Array<{ text?: string }> }; error?: { message: string } } });
    const calls = events
      .filter((e) => e.type === "item.completed" && e.item?.type === "mcp_tool_call")
      .map(({ item }) => ({ server: item!.server, tool: item!.tool, status: item!.status, text: item!.result?.content?.map((c) => c.text ?? "").join("") ?? item!.error?.message ?? "" }));
    const first = model.requests.find((r) => r.path.includes("/responses"));
    return { calls, offered: namespaced(first?.body.tools).filter((n) => n.startsWith("mcp__")).sort(), code: ran.code, stderr: ran.stderr };
  } finally {
    await model.close();
  }
}

/** The tools of a Responses API request, a namespace's as `namespace/tool`. */
function namespaced(tools: unknown): string[] {
  return ((tools ?? []) as Array<{ type: string; name?: string; tools?: Array<{ name: string }> }>).flatMap((t) => (t.type === "namespace" ? (t.tools ?? []).map((u) => `${t.name}/${u.name}`) : [t.name ?? t.type]));
}

function responseStream(res: ServerResponse, model: unknown, item: Record<string, unknown>): void {
  const response = { id: "resp_1", object: "response", status: "in_progress", model, output: [] as unknown[] };
  const event = (type: string, data: Record<string, unknown>) => sse(res, { type, ...data }, type);
  event("response.created", { response });
  event("response.output_item.added", { output_index: 0, item });
  event("response.output_item.done", { output_index: 0, item });
  const usage = { input_tokens: 1, output_tokens: 1, total_tokens: 2, input_tokens_details: { cached_tokens: 0 }, output_tokens_details: { reasoning_tokens: 0 } };
  event("response.completed", { response: { ...response, status: "completed", output: [item], usage } });
  res.end();
}
