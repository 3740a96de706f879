// `subs agent serve --http` and `subs mcp proxy --http` started as a user starts them (the built
// CLI, bin/subs.cjs, as a child), and raw HTTP requests to them: node:http with any Host, Origin or
// Authorization a test chooses (fetch would not let it set Host), or a socket for what no HTTP
// client sends (headers without the body they announce).
import { spawn, type ChildProcess } from "node:child_process";
import { readFileSync } from "node:fs";
import { request } from "node:http";
import { connect } from "node:net";
import path from "node:path";
import { BIN, ensureBuilt } from "./cli.ts";
import { stopChild } from "./wait.ts";

export type ServedHttp = {
  child: ChildProcess;
  /** The endpoint the server printed on stderr. */
  url: URL;
  /** The bearer token, read from --token-file. */
  token: string;
  stderr: () => string;
  stdout: () => string;
  /** Resolves with the exit code once the child has ended. */
  exited: Promise<number | null>;
  /** SIGTERM, then the exit code; past a minute without an exit, it is killed and this fails. */
  stop: () => Promise<number | null>;
};

/**
 * Starts `subs <argv> --http 127.0.0.1:0 --token-file <tokenFile>` in `dir` and waits for its
 * endpoint. `shell` runs it through `sh -c` with that text before the command (e.g. `umask 000;`).
 */
export async function serveOverHttp(dir: string, argv: string[], options: { env?: Record<string, string>; tokenFile?: string; shell?: string } = {}): Promise<ServedHttp> {
  ensureBuilt();
  const tokenFile = options.tokenFile ?? "served.token";
  const full = [...argv, "--http", "127.0.0.1:0", "--token-file", tokenFile];
  const env = { PATH: process.env.PATH ?? "/usr/bin:/bin", HOME: dir, ...options.env };
  const child =
    options.shell === undefined
      ? spawn(process.execPath, [BIN, ...full], { cwd: dir, env, stdio: ["ignore", "pipe", "pipe"] })
      : spawn("sh", ["-c", `${options.shell} exec "$0" "$@"`, process.execPath, BIN, ...full], { cwd: dir, env, stdio: ["ignore", "pipe", "pipe"] });
  let stderr = "";
  let stdout = "";
  child.stderr!.on("data", (d) => (stderr += d));
  child.stdout!.on("data", (d) => (stdout += d));
  const exited = new Promise<number | null>((resolve) => child.once("exit", (code) => resolve(code)));
  const deadline = Date.now() + 20_000;
  let url: URL | undefined;
  while (!url) {
    const match = /serving MCP on (http:\/\/127\.0\.0\.1:\d+\/mcp)/.exec(stderr);
    if (match) url = new URL(match[1]!);
    else if (child.exitCode !== null || Date.now() > deadline) {
      child.kill("SIGKILL");
      throw new Error(`no endpoint: exit ${child.exitCode}\n${stderr}`);
    } else await new Promise((r) => setTimeout(r, 50));
  }
  const token = readFileSync(path.resolve(dir, tokenFile), "utf8").trim();
  return {
    child,
    url,
    token,
    stderr: () => stderr,
    stdout: () => stdout,
    exited,
    stop: () => stopChild(child, () => `subs ${full.join(" ")}; its stderr:\n${stderr}`),
  };
}

export type RawAnswer = { status: number; headers: Record<string, string | string[] | undefined>; body: string };

/** One request with exactly these headers (and the JSON and SSE Accept an MCP client sends). */
export function rawRequest(url: URL, options: { method?: string; headers?: Record<string, string>; body?: string | Buffer }): Promise<RawAnswer> {
  return new Promise((resolve, reject) => {
    const req = request(
      url,
      { method: options.method ?? "POST", headers: { "Content-Type": "application/json", Accept: "application/json, text/event-stream", ...options.headers } },
      (res) => {
        let body = "";
        res.setEncoding("utf8");
        res.on("data", (chunk: string) => (body += chunk));
        res.on("end", () => resolve({ status: res.statusCode ?? 0, headers: res.headers, body }));
      },
    );
    req.on("error", reject);
    req.end(options.body);
  });
}

/**
 * Writes `head` (request line and headers, CRLF-ended, without the blank line) and then the pieces
 * of `body`, if any, on a socket, and stops writing once an answer comes or the server hangs up:
 * resolves with the answer's status line, or "no answer" after `waitMs`. For what no HTTP client
 * sends: headers announcing a body that never comes, a body the server stops reading.
 */
export function rawExchange(url: URL, head: string, options: { body?: Buffer[]; waitMs: number }): Promise<string> {
  return new Promise((resolve) => {
    const socket = connect({ host: url.hostname, port: Number(url.port) });
    let seen = "";
    let done = false;
    const finish = (answer: string) => {
      if (done) return;
      done = true;
      clearTimeout(timer);
      socket.destroy();
      resolve(answer);
    };
    const timer = setTimeout(() => finish("no answer"), options.waitMs);
    socket.on("connect", async () => {
      socket.write(`${head}\r\n`);
      for (const piece of options.body ?? []) {
        if (done || socket.destroyed) return;
        if (!socket.write(piece)) await new Promise((r) => socket.once("drain", r).once("close", r));
      }
    });
    socket.on("data", (d) => {
      seen += d.toString("latin1");
      const line = /^HTTP\/1\.1 \d{3}[^\r\n]*/.exec(seen);
      if (line) finish(line[0]);
    });
    // A server that answered and then closed while the body was still being written: its answer counts.
    socket.on("error", () => finish(seen ? seen.split("\r\n")[0]! : "connection error"));
    socket.on("close", () => finish(seen ? seen.split("\r\n")[0]! : "closed without an answer"));
  });
}

/** An initialize request as an MCP client sends it. */
export const INITIALIZE = JSON.stringify({
  jsonrpc: "2.0",
  id: 1,
  method: "initialize",
  params: { protocolVersion: "2025-11-25", capabilities: {}, clientInfo: { name: "raw", version: "1.0.0" } },
});
