// Dev tools kept out of the project's own install: each folder under tools/ has its own
// package.json and lock file (tools/conformance: the MCP conformance harness and the Inspector on a
// Node 22 binary; tools/clients: the real MCP clients the client tests drive). One installer for
// all of them, used by whatever needs a folder (scripts/conformance*.mjs, test/support/).
//
// Dependencies' install scripts never run (`--ignore-scripts`): on npm before 11 every one would,
// and some fetch from outside the npm registry (prebuilt binaries from GitHub) or compile. What a
// folder does need after the install is its own `postinstall` script, run explicitly.
import { createHash } from "node:crypto";
import { spawnSync } from "node:child_process";
import { mkdirSync, readFileSync, rmdirSync, writeFileSync } from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";

/** Every folder of tools/, each installed from its own lock file. */
export const TOOL_FOLDERS = ["conformance", "clients", "servers"];

/** The absolute path of tools/NAME/, with a trailing separator. */
export function toolsDir(name) {
  return fileURLToPath(new URL(`../tools/${name}/`, import.meta.url));
}

/** Written last by a complete install: the lock file's hash it was installed from. */
const stampOf = (dir) => path.join(dir, "node_modules", ".subs-tools-installed");
const lockHash = (dir) => createHash("sha256").update(readFileSync(path.join(dir, "package-lock.json"))).digest("hex");

function current(dir) {
  try {
    return readFileSync(stampOf(dir), "utf8") === lockHash(dir);
  } catch {
    return false;
  }
}

function run(label, dir, args) {
  const npm = spawnSync("npm", [...args, "--prefix", dir, "--no-audit", "--no-fund", "--loglevel=error"], { encoding: "utf8" });
  if (npm.status !== 0) throw new Error(`${label}: npm ${args.join(" ")} --prefix ${dir} failed (exit ${npm.status}):\n${npm.stderr}${npm.error ?? ""}`);
}

/** Whether tools/NAME holds a complete install from its lock file (nothing for ensureTools to do). */
export function toolsCurrent(name) {
  return current(toolsDir(name));
}

/** The Debian packages of `packages` whose command is not on PATH. */
export function missingDebian(packages) {
  return packages.filter(({ command }) => spawnSync("sh", ["-c", `command -v ${command}`]).status !== 0);
}

/**
 * Installs tools/NAME from its lock file (`npm ci --ignore-scripts`, the npm registry, then the
 * folder's own postinstall) unless a complete install from this very lock file is there already.
 * Processes running at once (parallel test files) take turns through a lock directory. Returns the
 * folder's path; throws when the install fails.
 */
export function ensureTools(name, label) {
  const dir = toolsDir(name);
  const lock = path.join(dir, ".install-lock");
  const deadline = Date.now() + 300_000;
  for (;;) {
    try {
      mkdirSync(lock);
      break;
    } catch {
      if (Date.now() > deadline) throw new Error(`timed out waiting for another process installing ${dir} (remove ${lock} if none is)`);
      spawnSync("sleep", ["0.2"]);
    }
  }
  try {
    if (!current(dir)) {
      process.stderr.write(`${label}: installing tools/${name} (npm ci --ignore-scripts --prefix tools/${name})\n`);
      run(label, dir, ["ci", "--ignore-scripts"]);
      run(label, dir, ["run", "--if-present", "postinstall"]);
      writeFileSync(stampOf(dir), lockHash(dir));
    }
  } finally {
    rmdirSync(lock);
  }
  return dir;
}

/**
 * Debian packages a test drives as a real peer (caddy: the two-replica configuration of
 * docs/deployment-server.md): each whose command is not on PATH is installed with apt-get, as
 * root, from Debian's own packages (no other source). Elsewhere it says what to install. Throws
 * when one cannot be had.
 */
export function ensureDebian(packages, label) {
  const missing = missingDebian(packages);
  if (missing.length === 0) return;
  const names = missing.map((p) => p.package);
  const apt = spawnSync("sh", ["-c", "command -v apt-get"]).status === 0;
  if (!apt || process.getuid?.() !== 0) {
    throw new Error(`${label}: needs ${missing.map((p) => p.command).join(", ")}: install Debian's ${names.join(", ")} (sudo apt-get install -y ${names.join(" ")})`);
  }
  process.stderr.write(`${label}: installing ${names.join(", ")} (apt-get install -y ${names.join(" ")})\n`);
  // Another install at the same time (a second suite on this machine) holds dpkg's lock: wait for it.
  const install = () =>
    spawnSync("apt-get", ["install", "-y", "-qq", "--no-install-recommends", "-o", "DPkg::Lock::Timeout=300", ...names], { encoding: "utf8", env: { ...process.env, DEBIAN_FRONTEND: "noninteractive" } });
  let result = install();
  if (result.status !== 0) {
    // A machine that never read the package lists knows no package yet.
    spawnSync("apt-get", ["update", "-qq", "-o", "DPkg::Lock::Timeout=300"], { encoding: "utf8" });
    result = install();
  }
  if (result.status !== 0) throw new Error(`${label}: apt-get install ${names.join(" ")} failed (exit ${result.status}):\n${result.stderr}`);
}

/** The Debian packages the test suite drives. */
export const DEBIAN_PEERS = [
  { command: "caddy", package: "caddy" },
  { command: "systemd-analyze", package: "systemd" },
];

/** Every folder of tools/ and the Debian peers, each only when missing; throws when one fails. */
export function ensureAllTools(label) {
  for (const name of TOOL_FOLDERS) ensureTools(name, label);
  ensureDebian(DEBIAN_PEERS, label);
}

// `npm run tools:install` (.ci/run's step after `npm ci`): what `npm test` would otherwise install
// beside its first files. Nothing when all are there.
if (process.argv[1] && path.resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  try {
    ensureAllTools("tools:install");
  } catch (error) {
    process.stderr.write(`${error.message}\n`);
    process.exitCode = 1;
  }
}
