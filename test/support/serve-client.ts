// Drives `subs agent serve` (the built CLI, bin/subs.cjs) as an MCP client would: the SDK's Client
// over the SDK's StdioClientTransport, which spawns the server as Claude Code, Codex or Cursor do.
// Every message the client receives and everything on the server's stderr is kept, so a test can
// check that no token ever reaches either.
import type { ChildProcess } from "node:child_process";
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
