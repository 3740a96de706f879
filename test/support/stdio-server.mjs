#!/usr/bin/env node
// A local (stdio) MCP server for the local-server tests, built from the SDK's server pieces. It
// does what servers started by `npx` do to their host: it starts a child of its own (a `sleep`,
// as npx starts the server), it writes to stderr, and it can crash. On start it appends
// `<its pid> <its child's pid>` to $PIDS_FILE, so a test can see whether it started and whether
// both are gone afterwards.
//   tools: echo {text}; env (its environment's names and values); crash (stderr, then exit 3)
import { spawn } from "node:child_process";
import { appendFileSync } from "node:fs";
import { McpServer } from "@modelcontextprotocol/sdk/server/mcp.js";
import { StdioServerTransport } from "@modelcontextprotocol/sdk/server/stdio.js";
import * as z from "zod";

const child = spawn("sleep", ["1000"], { stdio: "ignore" });
// Like npx, it does not wait for its child: the child outlives it unless its group is ended.
child.unref();
if (process.env.PIDS_FILE) appendFileSync(process.env.PIDS_FILE, `${process.pid} ${child.pid}\n`);
process.stderr.write(`stdio-server ${process.pid}: starting\n`);
if (process.env.STDERR_SECRET) process.stderr.write(`stdio-server: using key ${process.env.STDERR_SECRET}\n`);

const server = new McpServer({ name: "stdio-test-server", version: "1.0.0" });
server.registerTool("echo", { description: "Echoes its text", inputSchema: { text: z.string() }, annotations: { readOnlyHint: true } }, async ({ text }) => ({
  content: [{ type: "text", text }],
}));
server.registerTool("env", { description: "Its environment", inputSchema: {} }, async () => ({
  content: [{ type: "text", text: JSON.stringify(process.env) }],
}));
server.registerTool("crash", { description: "Writes to stderr, then exits 3", inputSchema: {} }, async () => {
  process.stderr.write("fatal: the disk is on fire\n");
  setTimeout(() => process.exit(3), 10);
  return new Promise(() => {});
});
await server.connect(new StdioServerTransport());
