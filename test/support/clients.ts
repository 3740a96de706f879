// What the drivers of the real MCP clients share (claude-code.ts, codex.ts, gemini-cli.ts): the
// pinned install in tools/clients (scripts/tools.mjs, from its lock file, when missing), a clean
// environment, running a client with a deadline, and a fake model API on loopback; and the project
// every client test connects (startSupportProject).
//
// A client runs with nothing of this machine's: HOME is a temp dir, PATH reaches only this Node and
// the system's programs, the API key is a dummy and the model API is a loopback server that the
// driver answers, so no real credential is ever read or sent anywhere.
import { spawn, spawnSync } from "node:child_process";
import { mkdirSync, mkdtempSync, readFileSync, realpathSync, rmSync, writeFileSync } from "node:fs";
import { createServer, type IncomingMessage, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import path from "node:path";
import { ensureTools, toolsDir } from "../../scripts/tools.mjs";
import { BIN, ensureBuilt, REPO, runCli } from "./cli.ts";
import { startMcpServer } from "./mcp-server.ts";
import { unusedPort } from "./ports.ts";
import { stopChild } from "./wait.ts";

export const CLIENTS_DIR = toolsDir("clients");

/** The version tools/clients/package.json pins for PACKAGE. */
export function pinned(pkg: string): string {
  const manifest = JSON.parse(readFileSync(path.join(CLIENTS_DIR, "package.json"), "utf8")) as { dependencies: Record<string, string> };
  const version = manifest.dependencies[pkg];
  if (version === undefined) throw new Error(`tools/clients/package.json pins no ${pkg}`);
  return version;
}

/**
 * Installs tools/clients when it is not current, then checks that the installed PACKAGE is the
 * version pinned for it. With COMMAND, also that `COMMAND --version` starts and names that version:
 * for a client whose executable an install script or an optional dependency puts in place (Claude
 * Code's and Codex's native binaries), which an install can leave missing while the package is
 * there. Gemini CLI is one bundled script whose start costs about 3 s of CPU (10 s and more of a
 * loaded machine's time, where three test files asked): a bundle that does not start fails the
 * test's first run of it, with Gemini's own error.
 */
export function ensureClient(pkg: string, command?: string[]): void {
  ensureTools("clients", pkg);
  const version = pinned(pkg);
  const installed = (JSON.parse(readFileSync(path.join(CLIENTS_DIR, "node_modules", pkg, "package.json"), "utf8")) as { version?: string }).version;
  if (installed !== version) throw new Error(`tools/clients holds ${pkg} ${installed}, not the ${version} pinned`);
  if (!command) return;
  const ran = spawnSync(command[0]!, [...command.slice(1), "--version"], { encoding: "utf8", env: { PATH: systemPath(), HOME: "/nonexistent" }, timeout: 60_000 });
  if (ran.status !== 0 || !ran.stdout.includes(version)) throw new Error(`${command.join(" ")} --version: wanted ${version}, got exit ${ran.status}: ${ran.stdout}${ran.stderr}${ran.error ?? ""}`);
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

export type SupportProject = {
  /** The temp dir holding everything below. */
  root: string;
  /** The directory of substructure.toml, and the file itself. */
  project: string;
  config: string;
  /** The HOME every client runs with (their user files live there). */
  home: string;
  /** Another directory, without a substructure.toml, where connect and the clients run. */
  elsewhere: string;
  /** What the token_env connection reads: give it to the client as the user's shell would. */
  env: Record<string, string>;
  /** `subs agent tools support --json`: the served names, sorted. */
  agentTools: string[];
  /** `subs mcp tools tickets --json`: the upstream's names, sorted. */
  ticketsTools: string[];
  /** What the tickets server saw: the Authorization header of each request that reached it. */
  ticketsAuthorizations: string[];
  close(): Promise<void>;
};

export const TICKETS_TOKEN = "tickets-SECRET-bearer-0123456789";

/**
 * A substructure.toml with an agent `support` of three connections: two to test MCP servers on
 * loopback, `docs` (no credential) and `tickets`, `auth = { token_env = "TICKETS_TOKEN" }`, whose
 * server answers 401 to any request without exactly that bearer token; and `notes`, a local
 * (stdio) server subs starts (test/support/stdio-server.mjs). Reads the tool names subs itself
 * lists (`subs agent tools`, `subs mcp tools`), the names a client must end up with.
 */
export async function startSupportProject(): Promise<SupportProject> {
  const tool = (name: string) => ({ name, description: `${name} (test tool)`, inputSchema: { type: "object" as const, properties: { q: { type: "string" } } }, reply: (args: Record<string, unknown>) => `${name} answered ${String(args.q)}` });
  const docs = await startMcpServer({ name: "docs", tools: [tool("search"), tool("read_page")] });
  const tickets = await startMcpServer({
    name: "tickets",
    tools: [tool("lookup"), tool("comment")],
    gate: (req, res) => {
      if (req.headers.authorization === `Bearer ${TICKETS_TOKEN}`) return false;
      res.writeHead(401, { "www-authenticate": "Bearer" }).end();
      return true;
    },
  });
  const root = mkdtempSync(path.join(realpathSync(tmpdir()), "subs-clients-"));
  const project = path.join(root, "project");
  const home = path.join(root, "home");
  const elsewhere = path.join(root, "elsewhere");
  for (const dir of [project, home, elsewhere]) mkdirSync(dir);
  const config = path.join(project, "substructure.toml");
  const notes = `[mcp.notes]\ncommand = ${JSON.stringify(process.execPath)}\nargs = [${JSON.stringify(path.join(REPO, "test", "support", "stdio-server.mjs"))}]\n`;
  writeFileSync(config, `[mcp.docs]\nurl = "${docs.url}"\n\n[mcp.tickets]\nurl = "${tickets.url}"\nauth = { token_env = "TICKETS_TOKEN" }\n\n${notes}\n[agent.support]\nmcp = ["docs", "tickets", "notes"]\n`);
  const env = { TICKETS_TOKEN };
  const names = async (argv: string[]) => {
    const ran = await runCli([...argv, "--json"], { cwd: project, env });
    if (ran.code !== 0) throw new Error(`subs ${argv.join(" ")}: exit ${ran.code}\n${ran.stderr}`);
    return (JSON.parse(ran.stdout) as { tools: Array<{ name: string }> }).tools.map((t) => t.name).sort();
  };
  const agentTools = await names(["agent", "tools", "support"]);
  // The local server answered: a client offered the agent's tools is offered its tools too.
  if (!agentTools.includes("notes__echo")) throw new Error(`subs agent tools support lists no local tool: ${agentTools.join(", ")}`);
  const ticketsTools = await names(["mcp", "tools", "tickets"]);
  return {
    root,
    project,
    config,
    home,
    elsewhere,
    env,
    agentTools,
    ticketsTools,
    ticketsAuthorizations: tickets.authorizations,
    close: async () => {
      await Promise.all([docs.close(), tickets.close()]);
      rmSync(root, { recursive: true, force: true });
    },
  };
}

export type HttpServed = { url: string; port: number; stderr: () => string; stop(): Promise<void> };

/**
 * Starts `subs ARGV --http 127.0.0.1:PORT --token-file FILE` in the project and waits for its
 * endpoint. Without PORT, a free one outside the kernel's range for port 0 (ports.ts): the tests
 * stop it and start it again on the same port, which another test's server may meanwhile have been
 * given had the kernel chosen it. stop() (once, however often called) sends SIGTERM and waits for
 * exit 0.
 */
export async function serveHttp(project: SupportProject, argv: string[], tokenFile: string, port?: number): Promise<HttpServed> {
  ensureBuilt();
  port ??= await unusedPort();
  const child = spawn(process.execPath, [BIN, ...argv, "--http", `127.0.0.1:${port}`, "--token-file", tokenFile], { cwd: project.project, env: cleanEnv(project.root, project.env), stdio: ["ignore", "ignore", "pipe"] });
  let stderr = "";
  child.stderr.on("data", (d) => (stderr += d));
  let stopped: Promise<void> | undefined;
  const stop = () =>
    (stopped ??= (async () => {
      const code = await stopChild(child, () => `subs ${argv.join(" ")}; its stderr:\n${stderr}`);
      if (code !== 0) throw new Error(`subs ${argv.join(" ")} exited ${code}:\n${stderr}`);
    })());
  const deadline = Date.now() + 15_000;
  for (;;) {
    const match = /serving MCP on (http:\/\/127\.0\.0\.1:(\d+)\/mcp)/.exec(stderr);
    if (match) return { url: match[1]!, port: Number(match[2]), stderr: () => stderr, stop };
    if (child.exitCode !== null || Date.now() > deadline) {
      child.kill("SIGKILL");
      throw new Error(`subs ${argv.join(" ")}: no endpoint (exit ${child.exitCode}):\n${stderr}`);
    }
    await new Promise((r) => setTimeout(r, 50));
  }
}

/**
 * The header helper docs/serve.md shows for clients that run a command for their headers (Claude
 * Code's `headersHelper`, Codex's `http_headers_helper`): prints `{"Authorization": "Bearer …"}`
 * with the token read from TOKENFILE at each run. Written as DIR/NAME, mode 0700; returns its path.
 */
export function writeHeaderHelper(dir: string, name: string, tokenFile: string): string {
  const file = path.join(dir, name);
  writeFileSync(file, `#!/bin/sh\nprintf '{"Authorization": "Bearer %s"}' "$(cat '${tokenFile}')"\n`, { mode: 0o700 });
  return file;
}
