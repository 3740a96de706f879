#!/usr/bin/env node
// An MCP client as a process of its own, as Claude Code starts a server over stdio: it starts
// `node <argv…>` (e.g. `bin/subs.cjs agent serve mixed`), calls `own__echo`, prints `called` and
// waits, for a test to kill it (test/local-server.e2e.test.ts).
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";

const transport = new StdioClientTransport({ command: process.execPath, args: process.argv.slice(2), env: { ...process.env }, stderr: "inherit" });
const client = new Client({ name: "killed-client", version: "1.0.0" });
await client.connect(transport);
await client.callTool({ name: "own__echo", arguments: { text: "x" } });
console.log("called");
setInterval(() => {}, 1000);
