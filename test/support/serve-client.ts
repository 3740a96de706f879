// Drives `subs agent serve` (the built CLI, bin/subs.cjs) as an MCP client would: the SDK's Client
// over the SDK's StdioClientTransport, which spawns the server as Claude Code, Codex or Cursor do.
// Every message the client receives and everything on the server's stderr is kept, so a test can
// check that no token ever reaches either. serveInProcess drives the same `run()` in this process,
// its stdin and stdout in-memory streams (ctx.protocolStreams), for a test whose subject is what is
// served, not the process. Below, raw HTTP for `--http`: what a client that misbehaves sends (a
// dropped POST, a connection that never finishes its headers).
import type { ChildProcess } from "node:child_process";
import { request } from "node:http";
import { connect as tcpConnect, type Socket } from "node:net";
import { PassThrough } from "node:stream";
import { finished } from "node:stream/promises";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { InMemoryTransport } from "@modelcontextprotocol/sdk/inMemory.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
import { ReadBuffer, serializeMessage } from "@modelcontextprotocol/sdk/shared/stdio.js";
import type { Transport } from "@modelcontextprotocol/sdk/shared/transport.js";
import { LoggingMessageNotificationSchema, type JSONRPCMessage, type LoggingMessageNotification } from "@modelcontextprotocol/sdk/types.js";
import type { SessionServer } from "../../src/serve/session.ts";
import { run } from "../../src/run.ts";
import { BIN, ensureBuilt, testContext, type RunResult } from "./cli.ts";

/** A served session as its client sees it, whether the server is a child or `run()` in this process. */
export type ClientSession = {
  client: Client;
  /** The MCP log messages (notifications/message) received so far. */
  logs: Array<LoggingMessageNotification["params"]>;
  /** Every JSON-RPC message received so far, serialized. */
  received: string[];
  /**
   * What the client's side could not take (e.g. a line on stdout that is not JSON-RPC); in-process,
   * also anything the command wrote to ctx.stdout, which in the process is the protocol's stdout.
   */
  errors: Error[];
  stderr(): string;
  close(): Promise<void>;
};

export type ServeSession = ClientSession & {
  /** The server process (to signal it, or to see how it ended). */
  child: ChildProcess;
  /** Resolves with the exit code (or the signal) once the process has ended. */
  exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
};

export type InProcessServeSession = ClientSession & {
  /** Resolves with what `run()` returned (the exit code the CLI would have) once the command has ended. */
  ended: Promise<number>;
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

/**
 * The client's end of a server's stdin and stdout as in-memory streams: newline-delimited JSON-RPC,
 * read with the SDK's own ReadBuffer, as its StdioClientTransport reads a child's stdout.
 */
export class StreamClientTransport implements Transport {
  onclose?: () => void;
  onerror?: (error: Error) => void;
  onmessage?: (message: JSONRPCMessage) => void;
  private readonly buffer = new ReadBuffer();
  private closed = false;

  constructor(
    private readonly toServer: PassThrough,
    private readonly fromServer: PassThrough,
    /** What the transport's close does to the server (as the SDK's ends a child's stdin, then signals it). */
    private readonly stop: () => Promise<void>,
  ) {}

  async start(): Promise<void> {
    this.fromServer.on("data", (chunk: Buffer) => {
      this.buffer.append(chunk);
      for (;;) {
        try {
          const message = this.buffer.readMessage();
          if (message === null) break;
          this.onmessage?.(message);
        } catch (error) {
          this.onerror?.(error as Error);
        }
      }
    });
    this.fromServer.on("end", () => this.ended());
  }

  async send(message: JSONRPCMessage): Promise<void> {
    if (this.closed) throw new Error("Not connected");
    this.toServer.write(serializeMessage(message));
  }

  async close(): Promise<void> {
    await this.stop();
    this.ended();
  }

  private ended(): void {
    if (this.closed) return;
    this.closed = true;
    this.buffer.clear();
    this.onclose?.();
  }
}

/** What the child would have: HOME is `cwd` (testContext gives the process's fetch). */
const served = (options: { cwd: string; env?: Record<string, string> }) => ({ cwd: options.cwd, env: { HOME: options.cwd, ...options.env } });

/**
 * `subs <argv>` as serveSession runs it, but `run()` in this process with a test-built Context:
 * ctx.protocolStreams are in-memory streams the SDK's Client writes and reads. `close()` ends the
 * server's stdin, then aborts the context's signal (what SIGTERM does in the process, src/main.ts)
 * and waits for the command to end.
 */
export async function serveInProcess(argv: string[], options: { cwd: string; env?: Record<string, string> }): Promise<InProcessServeSession> {
  const toServer = new PassThrough();
  const fromServer = new PassThrough();
  const controller = new AbortController();
  const errors: Error[] = [];
  const t = testContext({ ...served(options), signal: controller.signal, protocolStreams: () => ({ input: toServer, output: fromServer }) });
  // In the process, ctx.stdout is the protocol's stdout: anything written there the client could not
  // take. (A line written to ctx.stdout by `agent serve` failed agent-serve.e2e's noToken this way.)
  t.ctx.stdout = { write: (text: string) => void errors.push(new Error(`written to stdout beside the protocol: ${text}`)) };
  const ended = run(argv, t.ctx);
  // The command's end closes its stdout, as a process's exit does: a client waiting on it is told.
  void ended.finally(() => fromServer.end()).catch(() => {});
  const stop = async () => {
    toServer.end();
    controller.abort();
    await ended.catch(() => {});
  };
  const transport = new StreamClientTransport(toServer, fromServer, stop);
  const client = new Client({ name: "subs-test-client", version: "1.0.0" });
  const logs: ClientSession["logs"] = [];
  client.setNotificationHandler(LoggingMessageNotificationSchema, (n) => void logs.push(n.params));
  const received: string[] = [];
  client.onerror = (error) => void errors.push(error);
  try {
    await client.connect(transport);
  } catch (error) {
    // A refused start (the initialize answered with an error): the command is stopped before the error is handed on.
    await stop();
    throw error;
  }
  const onmessage = transport.onmessage!.bind(transport);
  transport.onmessage = ((message: JSONRPCMessage) => {
    received.push(JSON.stringify(message));
    onmessage(message);
  }) as typeof transport.onmessage;
  return { client, logs, received, errors, stderr: t.stderr, ended, close: () => client.close() };
}

/**
 * `subs <argv>` in this process given `input` on its stdin, which then ends (as `… | subs agent
 * serve x` does): its code, stderr, and as stdout everything it wrote to ctx.stdout and to its
 * protocol stdout, in the order written, as the process's one stdout would carry them. (A line
 * written to either by `agent serve` before its refusal failed agent-serve.e2e's "nothing on stdout".)
 * `signal` stops it as SIGTERM stops the process (src/main.ts): e.g. a bound on a refusal that
 * wrongly serves `--http`, which no end of stdin stops.
 */
export async function runServeInProcess(argv: string[], options: { cwd: string; env?: Record<string, string>; input?: string; signal?: AbortSignal }): Promise<RunResult> {
  const toServer = new PassThrough();
  const fromServer = new PassThrough();
  let stdout = "";
  fromServer.on("data", (chunk: Buffer) => (stdout += chunk.toString("utf8")));
  const t = testContext({ ...served(options), ...(options.signal ? { signal: options.signal } : {}), protocolStreams: () => ({ input: toServer, output: fromServer }) });
  t.ctx.stdout = { write: (text: string) => (stdout += text) };
  toServer.end(options.input ?? "");
  const code = await run(argv, t.ctx);
  // What was written before the end is read before the stream's end.
  fromServer.end();
  await finished(fromServer);
  return { code, stdout, stderr: t.stderr() };
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

/** An SDK Client connected in memory to one session of a served agent or proxy (src/serve/session.ts). */
export async function connectSession(session: SessionServer): Promise<Client> {
  const [clientSide, serverSide] = InMemoryTransport.createLinkedPair();
  await session.server.connect(serverSide);
  const client = new Client({ name: "t", version: "1" });
  await client.connect(clientSide);
  return client;
}
