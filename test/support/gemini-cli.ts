// Gemini CLI (@google/gemini-cli, pinned in tools/clients), driven two ways:
// - `gemini mcp list`: connects to every configured server and prints its status (no tools).
// - `gemini -p --output-format stream-json` against a fake Gemini API on loopback
//   (GOOGLE_GEMINI_BASE_URL): the model's request declares every MCP tool it may call, named
//   `mcp_<server>_<tool>`; the fake asks for one and Gemini calls it on the MCP server.
//
// Gemini needs the auth type chosen in settings, else the base URL alone selects a gateway auth that
// headless mode refuses: each HOME's ~/.gemini/settings.json starts as BASE_SETTINGS, what Gemini
// writes when its user picks an API key. (A system settings file cannot carry it: Gemini skips one
// under a world-writable directory such as /tmp.) Stdio servers are off in an untrusted folder:
// GEMINI_CLI_TRUST_WORKSPACE=true trusts it.
// In -p, MCP tools are offered to the model only with `--approval-mode yolo` (or a trusted server).
import { rmSync } from "node:fs";
import path from "node:path";
import { CLIENTS_DIR, cleanEnv, ensureClient, runClient, sse, startFakeModel, type Ran } from "./clients.ts";

export const GEMINI = [process.execPath, path.join(CLIENTS_DIR, "node_modules", "@google", "gemini-cli", "bundle", "gemini.js")];

export function ensureGemini(): void {
  ensureClient("@google/gemini-cli");
}

/**
 * What ~/.gemini/settings.json holds once a user chose to sign in with an API key and turned off
 * usage statistics (which Gemini would otherwise send to play.googleapis.com).
 */
export const BASE_SETTINGS = { security: { auth: { selectedType: "gemini-api-key" } }, privacy: { usageStatisticsEnabled: false } };

/** GEMINI_CLI_NO_RELAUNCH: one process, not a second Node started with a larger heap. */
function geminiEnv(home: string, env: Record<string, string> = {}, extra: Record<string, string> = {}): Record<string, string> {
  return cleanEnv(home, { GEMINI_API_KEY: "dummy-not-a-key", GEMINI_CLI_TRUST_WORKSPACE: "true", GEMINI_CLI_NO_RELAUNCH: "true", ...extra, ...env });
}

/**
 * Runs gemini, then removes the lock on its project registry (~/.gemini/projects.json.lock, a
 * proper-lockfile directory) if the process left it: 0.61 can exit while a startup cleanup still
 * holds it, and the next gemini then waits for it to go stale, about 13 s. The process is gone, so
 * nothing holds it any more.
 */
async function gemini(args: string[], options: { home: string; cwd: string; env: Record<string, string> }): Promise<Ran> {
  try {
    return await runClient([...GEMINI, ...args], options);
  } finally {
    rmSync(path.join(options.home, ".gemini", "projects.json.lock"), { recursive: true, force: true });
  }
}

/** `gemini mcp list` in CWD: each server's name and status ("Connected", "Disconnected", "Disabled", "Blocked"). */
export async function geminiList(options: { home: string; cwd: string; env?: Record<string, string> }): Promise<Array<{ name: string; status: string }>> {
  const ran = await gemini(["mcp", "list"], { home: options.home, cwd: options.cwd, env: geminiEnv(options.home, options.env) });
  if (ran.code !== 0) throw new Error(`gemini mcp list exited ${ran.code}:\n${ran.stdout}\n${ran.stderr}`);
  // "✓ support: /usr/bin/node … (stdio) - Connected"
  return [...`${ran.stdout}\n${ran.stderr}`.matchAll(/^\S+ ([^:\s]+): .* - (\w+)$/gm)].map((m) => ({ name: m[1]!, status: m[2]! }));
}

export type GeminiRun = {
  /** The MCP tools (`mcp_…`) the model was offered in its first request, sorted. */
  offered: string[];
  /** Each tool result of the session: the tool's name, status and output. */
  results: Array<{ tool: string; status: string; output: string }>;
  code: number | null;
  stderr: string;
};

/** `gemini -p` in CWD with HOME; with CALL, the fake model asks for that tool (its model-visible name) with ARGS, once. */
export async function geminiRun(options: { home: string; cwd: string; env?: Record<string, string>; call?: { tool: string; args: Record<string, unknown> } }): Promise<GeminiRun> {
  const call = options.call;
  const model = await startFakeModel((url, body, res) => {
    if (url.includes(":countTokens")) return void res.writeHead(200, { "content-type": "application/json" }).end('{"totalTokens":1}');
    const contents = (body.contents ?? []) as Array<{ parts?: Array<Record<string, unknown>> }>;
    const answered = (contents.at(-1)?.parts ?? []).some((p) => p.functionResponse);
    const declared = declarations(body.tools);
    const config = body.generationConfig as { responseMimeType?: string } | undefined;
    let parts: unknown[];
    if (call && !answered && declared.includes(call.tool)) parts = [{ functionCall: { name: call.tool, args: call.args } }];
    // Gemini's own side requests (next speaker, model routing) ask for JSON.
    else if (config?.responseMimeType === "application/json") parts = [{ text: JSON.stringify({ reasoning: "-", next_speaker: "user", model_choice: "flash" }) }];
    else parts = [{ text: "done" }];
    const chunk = { candidates: [{ content: { role: "model", parts }, finishReason: "STOP", index: 0 }], usageMetadata: { promptTokenCount: 1, candidatesTokenCount: 1, totalTokenCount: 2 } };
    if (url.includes("alt=sse")) {
      sse(res, chunk);
      res.end();
    } else res.writeHead(200, { "content-type": "application/json" }).end(JSON.stringify(chunk));
  });
  try {
    const ran = await gemini(["-p", call ? `Use ${call.tool}.` : "Say done.", "-m", "gemini-2.5-flash", "--output-format", "stream-json", "--approval-mode", "yolo"], {
      home: options.home,
      cwd: options.cwd,
      env: geminiEnv(options.home, options.env, { GOOGLE_GEMINI_BASE_URL: model.url }),
    });
    const lines = ran.stdout
      .split("\n")
      .filter((l) => l.startsWith("{"))
      .map((l) => JSON.parse(l) as { type: string; tool_name?: string; tool_id?: string; status?: string; output?: string });
    const names = new Map(lines.filter((l) => l.type === "tool_use").map((l) => [l.tool_id, l.tool_name ?? ""]));
    const first = model.requests.find((r) => r.body.tools !== undefined && declarations(r.body.tools).some((n) => n.startsWith("mcp_")));
    return {
      offered: declarations(first?.body.tools).filter((n) => n.startsWith("mcp_")).sort(),
      results: lines.filter((l) => l.type === "tool_result").map((l) => ({ tool: names.get(l.tool_id) ?? "", status: l.status ?? "", output: l.output ?? "" })),
      code: ran.code,
      stderr: ran.stderr,
    };
  } finally {
    await model.close();
  }
}

function declarations(tools: unknown): string[] {
  return ((tools ?? []) as Array<{ functionDeclarations?: Array<{ name: string }> }>).flatMap((t) => (t.functionDeclarations ?? []).map((f) => f.name));
}
