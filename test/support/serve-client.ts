// Drives `subs agent serve` (the built CLI, bin/subs.cjs) as an MCP client would: the SDK's Client
// over the SDK's StdioClientTransport, which spawns the server as Claude Code, Codex or Cursor do.
// Every message the client receives and everything on the server's stderr is kept, so a test can
// check that no token ever reaches either. Below, raw HTTP for `--http`: what a client that
// misbehaves sends (a dropped POST, a connection that never finishes its headers).
import type { ChildProcess } from "node:child_process";
import { request } from "node:http";
import { connect as tcpConnect, type Socket } from "node:net";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
import { LoggingMessageNotificationSchema, type JSONRPCMessage, type LoggingMessageNotification } from "@modelcontextprotocol/sdk/types.js";
import { BIN, ensureBuilt } from "./cli.ts";

export type ServeSession = {
  client: Client;
  /** The MCP log messages (notifications/message) received so far. */
  logs: Array<LoggingMessageNotification["params"]>;
  /** Every JSON-RPC message received so far, serialized. */
  received: string[];
  /** What the client's side could not take (e.g. a line on stdout that is not JSON-RPC). */
  errors: Error[];
  stderr(): string;
  /** The server process (to signal it, or to see how it ended). */
  child: ChildProcess;
  /** Resolves with the exit code (or the signal) once the process has ended. */
  exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
  close(): Promise<void>;
};

export async function serveSession(argv: string[], options: { cwd: string; env?: Record<string, string> }): Promise<ServeSession> {
  ensureBuilt();
  const transport = new StdioClientTransport({
    command: process.execPath,
    args: [BIN, ...argv],
    cwd: options.cwd,
    // The SDK adds HOME, PATH and a few more of its own defaults; nothing else of this process leaks in.
    env: { HOME: options.cwd, ...options.env },
    stderr: "pipe",
  });
  let stderr = "";
  transport.stderr!.on("data", (d: Buffer) => (stderr += d.toString("utf8")));
  const client = new Client({ name: "subs-test-client", version: "1.0.0" });
  const logs: ServeSession["logs"] = [];
  client.setNotificationHandler(LoggingMessageNotificationSchema, (n) => void logs.push(n.params));
  const received: string[] = [];
  const errors: Error[] = [];
  client.onerror = (error) => void errors.push(error);
  await client.connect(transport);
  const onmessage = transport.onmessage!.bind(transport);
  transport.onmessage = ((message: JSONRPCMessage) => {
    received.push(JSON.stringify(message));
    onmessage(message);
  }) as typeof transport.onmessage;
  // The transport keeps its process private; a lifecycle test needs its exit code.
  const child = (transport as unknown as { _process: ChildProcess })._process;
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) => {
    if (child.exitCode !== null || child.signalCode !== null) resolve({ code: child.exitCode, signal: child.signalCode });
    else child.once("exit", (code, signal) => resolve({ code, signal }));
  });
  return { client, logs, received, errors, stderr: () => stderr, child, exited, close: () => client.close() };
}

/** A tools/call POST on its own connection; `drop` closes it before the answer, `answer` waits for it. */
export function rawCall(server: { url: URL; token: string }, session: string, id: number, name: string): Promise<{ drop: () => void; answer: () => Promise<string> }> {
  return new Promise((resolve, reject) => {
    const headers = { "Content-Type": "application/json", Accept: "application/json, text/event-stream", Authorization: `Bearer ${server.token}`, "Mcp-Session-Id": session };
    const req = request(server.url, { method: "POST", headers, agent: false }, (res) => {
      let body = "";
      res.setEncoding("utf8");
      res.on("data", (chunk: string) => (body += chunk));
      const ended = new Promise<string>((done) => res.on("end", () => done(body)));
      // The answer's headers came: the server took the call and is running it.
      resolve({ drop: () => req.destroy(), answer: () => ended });
    });
    req.on("error", reject);
    req.end(JSON.stringify({ jsonrpc: "2.0", id, method: "tools/call", params: { name } }));
  });
}

/** A connection that sends the start of a request and never finishes its headers. */
export async function halfOpen(url: URL): Promise<{ socket: Socket; closed: () => boolean }> {
  const socket = tcpConnect(Number(url.port), url.hostname);
  let closed = false;
  socket.on("close", () => (closed = true));
  socket.on("error", () => {});
  // Read what comes (a 408), so the server's end of the connection is seen.
  socket.resume();
  await new Promise<void>((resolve, reject) => {
    socket.once("connect", resolve);
    socket.once("error", reject);
  });
  socket.write(`POST /mcp HTTP/1.1\r\nHost: ${url.host}\r\n`);
  return { socket, closed: () => closed };
}
