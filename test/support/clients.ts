// What the drivers of the real MCP clients share (claude-code.ts, codex.ts, gemini-cli.ts): the
// pinned install in tools/clients (scripts/tools.mjs, from its lock file, when missing), a clean
// environment, running a client with a deadline, and a fake model API on loopback.
//
// A client runs with nothing of this machine's: HOME is a temp dir, PATH reaches only this Node and
// the system's programs, the API key is a dummy and the model API is a loopback server that the
// driver answers, so no real credential is ever read or sent anywhere.
import { spawn, spawnSync } from "node:child_process";
import { readFileSync } from "node:fs";
import { createServer, type IncomingMessage, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import path from "node:path";
import { ensureTools, toolsDir } from "../../scripts/tools.mjs";

export const CLIENTS_DIR = toolsDir("clients");

/** The version tools/clients/package.json pins for PACKAGE. */
export function pinned(pkg: string): string {
  const manifest = JSON.parse(readFileSync(path.join(CLIENTS_DIR, "package.json"), "utf8")) as { dependencies: Record<string, string> };
  const version = manifest.dependencies[pkg];
  if (version === undefined) throw new Error(`tools/clients/package.json pins no ${pkg}`);
  return version;
}

/**
 * Installs tools/clients when it is not current, then checks that COMMAND `--version` starts and
 * names the version pinned for PACKAGE. Returns what it printed.
 */
export function ensureClient(pkg: string, command: string[]): string {
  ensureTools("clients", pkg);
  const ran = spawnSync(command[0]!, [...command.slice(1), "--version"], { encoding: "utf8", env: { PATH: systemPath(), HOME: "/nonexistent" }, timeout: 60_000 });
  const version = pinned(pkg);
  if (ran.status !== 0 || !ran.stdout.includes(version)) throw new Error(`${command.join(" ")} --version: wanted ${version}, got exit ${ran.status}: ${ran.stdout}${ran.stderr}${ran.error ?? ""}`);
  return ran.stdout.trim();
}

function systemPath(): string {
  return `${path.dirname(process.execPath)}:/usr/local/bin:/usr/bin:/bin`;
}

/** HOME, PATH to this Node and the system, a UTF-8 locale, and EXTRA: nothing else of this machine's. */
export function cleanEnv(home: string, extra: Record<string, string> = {}): Record<string, string> {
  return { PATH: systemPath(), HOME: home, LANG: "C.UTF-8", NO_COLOR: "1", ...extra };
}

export type Ran = { code: number | null; stdout: string; stderr: string };

/**
 * Runs a client in its own process group and resolves when it exits; past the deadline the whole
 * group (the client and the servers it started) is killed and the promise rejects with its output.
 */
export function runClient(command: string[], options: { cwd: string; env: Record<string, string>; timeoutMs?: number; input?: string }): Promise<Ran> {
  return new Promise((resolve, reject) => {
    const child = spawn(command[0]!, command.slice(1), { cwd: options.cwd, env: options.env, stdio: ["pipe", "pipe", "pipe"], detached: true });
    let stdout = "";
    let stderr = "";
    child.stdout.on("data", (d) => (stdout += d));
    child.stderr.on("data", (d) => (stderr += d));
    const limit = options.timeoutMs ?? 60_000;
    const timer = setTimeout(() => {
      killGroup(child.pid);
      reject(new Error(`${path.basename(command.at(-1) ?? "")} ${command.slice(1).join(" ")} took over ${limit} ms\nstdout:\n${stdout}\nstderr:\n${stderr}`));
    }, limit);
    child.on("error", reject);
    child.on("close", (code) => {
      clearTimeout(timer);
      resolve({ code, stdout, stderr });
    });
    child.stdin.end(options.input ?? "");
  });
}

export function killGroup(pid: number | undefined): void {
  if (pid === undefined) return;
  try {
    process.kill(-pid, "SIGKILL");
  } catch {
    // Already gone.
  }
}

export type FakeModel = {
  /** http://127.0.0.1:PORT, no path. */
  url: string;
  /** Every request, in order: its path and JSON body. */
  requests: Array<{ path: string; body: Record<string, unknown> }>;
  close(): Promise<void>;
};

/**
 * A model API on loopback: ANSWER writes the response to each POST, given its path and JSON body.
 * It stays up until close(), which ends every connection a client left open.
 */
export async function startFakeModel(answer: (path: string, body: Record<string, unknown>, res: ServerResponse) => void): Promise<FakeModel> {
  const requests: FakeModel["requests"] = [];
  const server = createServer((req: IncomingMessage, res: ServerResponse) => {
    const chunks: Buffer[] = [];
    req.on("data", (d: Buffer) => chunks.push(d));
    req.on("end", () => {
      let body: Record<string, unknown> = {};
      try {
        body = JSON.parse(Buffer.concat(chunks).toString("utf8") || "{}") as Record<string, unknown>;
      } catch {
        // Not JSON: answered as an empty body.
      }
      requests.push({ path: req.url ?? "", body });
      try {
        answer(req.url ?? "", body, res);
      } catch (error) {
        if (!res.headersSent) res.writeHead(500).end(String(error));
      }
    });
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    requests,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

/** Writes one server-sent event: `event: TYPE` when given, and the JSON data. */
export function sse(res: ServerResponse, data: unknown, type?: string): void {
  if (!res.headersSent) res.writeHead(200, { "content-type": "text/event-stream", "cache-control": "no-cache" });
  res.write(`${type ? `event: ${type}\n` : ""}data: ${JSON.stringify(data)}\n\n`);
}
