// The MCP Inspector's CLI mode (@modelcontextprotocol/inspector, `mcp-inspector --cli`): an MCP
// client this project did not write, built on the SDK's v2 client packages rather than the v1 SDK
// subs itself uses. It needs Node 22, so it lives in
// tools/conformance beside the conformance harness, on that folder's Node 22 binary, installed
// from that folder's lock file by scripts/tools.mjs when missing.
import { spawn } from "node:child_process";
import { existsSync } from "node:fs";
import path from "node:path";
import { ensureNode22Tools, NODE22, TOOLS_DIR } from "../../scripts/node22-tools.mjs";

export { NODE22 };

/** The package's `mcp-inspector` bin: the launcher that `--cli` sends to the CLI client. */
const LAUNCHER = path.join(TOOLS_DIR, "node_modules", "@modelcontextprotocol", "inspector", "clients", "launcher", "build", "index.js");

/**
 * Installs tools/conformance from its lock file when it is not current (scripts/tools.mjs, the
 * npm registry), with its Node 22 (checked to be one). The Inspector is not started here: its
 * `--version` cost about 0.9 s of CPU (6 s of a loaded machine's time) in each of three files, and
 * a first `inspect` that cannot start fails with the Inspector's own error.
 */
export function ensureInspector(): void {
  ensureNode22Tools("third-party client");
  if (!existsSync(LAUNCHER)) throw new Error(`tools/conformance has no MCP Inspector launcher at ${LAUNCHER}`);
}

export type Inspected = {
  code: number | null;
  stdout: string;
  stderr: string;
  /** `--format json`: the answer, `{"result": …}` on stdout. */
  result: unknown;
  /** `--format json`: the Inspector's error envelope, its last line on stderr. */
  error: { code: string; message: string } | undefined;
};

/**
 * Runs `mcp-inspector --cli --format json ARGS` in `cwd` with HOME there too (the Inspector keeps
 * a catalog and an OAuth store under ~/.mcp-inspector). Over stdio the Inspector gives the server
 * only a default environment plus its `-e KEY=VALUE` options.
 */
export function inspect(args: string[], options: { cwd: string; timeoutMs?: number }): Promise<Inspected> {
  return new Promise((resolve, reject) => {
    const child = spawn(NODE22, [LAUNCHER, "--cli", "--format", "json", ...args], {
      cwd: options.cwd,
      env: { PATH: process.env.PATH ?? "/usr/bin:/bin", HOME: options.cwd, NO_COLOR: "1" },
      stdio: ["ignore", "pipe", "pipe"],
    });
    let stdout = "";
    let stderr = "";
    child.stdout.on("data", (d) => (stdout += d));
    child.stderr.on("data", (d) => (stderr += d));
    const timer = setTimeout(() => child.kill("SIGKILL"), options.timeoutMs ?? 30_000);
    child.on("error", reject);
    child.on("close", (code) => {
      clearTimeout(timer);
      const parsed = stdout.trim() ? (JSON.parse(stdout) as { result?: unknown }) : undefined;
      const last = stderr.trim().split("\n").at(-1) ?? "";
      const error = last.startsWith('{"error"') ? (JSON.parse(last) as { error: { code: string; message: string } }).error : undefined;
      resolve({ code, stdout, stderr, result: parsed?.result, error });
    });
  });
}
