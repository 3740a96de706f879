// bin/subs.cjs runs dist/subs.cjs from a V8 code cache. V8 trusts the
// bytes it is given (a damaged cache aborts the process, a cache of other source runs that source's
// bytecode) and matches a cache to its source by length only. So the package ships no cache, and
// the loader runs only a cache this installation made from this exact bundle file (its seal names
// both files' identity on this machine), writable by nobody but its owner; anything else is
// compiled from source and the CLI still works.
import assert from "node:assert/strict";
import { spawn, spawnSync } from "node:child_process";
import { chmodSync, chownSync, cpSync, existsSync, mkdtempSync, readFileSync, readdirSync, rmSync, statSync, symlinkSync, unlinkSync, utimesSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { after, before, test } from "node:test";
import { REPO, ensureBuilt } from "./support/cli.ts";
import { annotatedTool, startMcpServer } from "./support/mcp-server.ts";

let pkg: string;
let project: string;
const bundle = () => path.join(pkg, "dist", "subs.cjs");
const cache = () => `${bundle()}.cache`;
const seal = () => `${bundle()}.cache.seal`;
const env = { PATH: process.env.PATH };

before(() => {
  ensureBuilt();
  pkg = mkdtempSync(path.join(tmpdir(), "subs-cache-pkg-"));
  // Not a cache another file's CLI is writing into the repository's dist/ at this moment (a
  // command's first run rewrites it at exit, through `subs.cjs.cache.<pid>.tmp`): copied, that
  // file would be left in this copy's dist/ as if a run here had left it.
  const inProgress = /\.\d+\.tmp$/;
  for (const part of ["bin", "dist", "package.json"]) cpSync(path.join(REPO, part), path.join(pkg, part), { recursive: true, filter: (from) => !inProgress.test(from) });
  symlinkSync(path.join(REPO, "node_modules"), path.join(pkg, "node_modules"));
  project = mkdtempSync(path.join(tmpdir(), "subs-cache-project-"));
  writeFileSync(path.join(project, "substructure.toml"), '[mcp.alpha]\nurl = "https://alpha.example.com/mcp"\n');
});
after(() => {
  rmSync(pkg, { recursive: true, force: true });
  rmSync(project, { recursive: true, force: true });
});

function list() {
  const r = spawnSync(process.execPath, [path.join(pkg, "bin", "subs.cjs"), "mcp", "list", "--json"], { cwd: project, encoding: "utf8", env });
  assert.equal(r.status, 0, r.stdout + r.stderr);
  assert.equal(JSON.parse(r.stdout)[0].id, "alpha");
  return r;
}

/** Whether a fresh `node` (no test-runner flags, which V8 would count) accepts the cache. */
function cacheAccepted(root = pkg): boolean {
  const bin = path.join(root, "bin", "subs.cjs");
  const script = `const l = require(${JSON.stringify(bin)}).loadBundle(${JSON.stringify(path.join(root, "dist", "subs.cjs"))}); process.stdout.write(String(l.cacheUsable));`;
  const r = spawnSync(process.execPath, ["-e", script], { encoding: "utf8", env });
  assert.equal(r.status, 0, r.stderr);
  return r.stdout === "true";
}

/**
 * A run that leaves a cache the next run uses: the state each test starts from. Most tests end in
 * it (a run, then the cache accepted), and then one node start asks whether it holds rather than
 * a run making it again and a second start asking.
 */
function freshCache({ anew = false } = {}) {
  if (!anew && existsSync(cache()) && cacheAccepted()) return;
  if (existsSync(cache())) unlinkSync(cache());
  list();
  assert.equal(cacheAccepted(), true);
}

test("the build leaves a code cache that node accepts", () => {
  assert.ok(existsSync(path.join(REPO, "dist", "subs.cjs.cache")));
  // Other test files running the CLI at the same time grow this cache (a command's first run
  // rewrites it), and between its two renames the cache and seal do not match: ask again then.
  let accepted = cacheAccepted(REPO);
  for (let attempt = 0; !accepted && attempt < 5; attempt++) {
    spawnSync("sleep", ["0.2"]);
    accepted = cacheAccepted(REPO);
  }
  assert.equal(accepted, true);
});

test("the package ships no code cache: npm pack lists the bundle and no .cache", () => {
  // The cache is there to be shipped (the build wrote it), so leaving it out is the files list's doing.
  assert.ok(existsSync(path.join(REPO, "dist", "subs.cjs.cache")));
  const r = spawnSync("npm", ["pack", "--dry-run", "--json", "--ignore-scripts"], { cwd: REPO, encoding: "utf8", env: { ...env, HOME: project } });
  assert.equal(r.status, 0, r.stderr);
  const files = (JSON.parse(r.stdout) as { files: { path: string }[] }[])[0]!.files.map((f) => f.path);
  assert.ok(files.includes("dist/subs.cjs"), files.join(", "));
  assert.ok(files.includes("bin/subs.cjs"), files.join(", "));
  assert.deepEqual(
    files.filter((f) => f.endsWith(".cache") || f.includes(".cache.")),
    [],
  );
});

test("a cache copied with the bundle (made on another machine or another install) is not run; the first run makes its own", () => {
  // `before` copied dist/ from the repository, cache included, as a tarball or an image layer
  // would carry it: the bytes are the build's own, but they were not made from this file.
  assert.ok(existsSync(cache()));
  assert.equal(cacheAccepted(), false);
  list();
  assert.equal(cacheAccepted(), true);
});

test("without a cache the CLI runs, and leaves one the next run uses", () => {
  unlinkSync(cache());
  list();
  assert.ok(existsSync(cache()));
  assert.equal(cacheAccepted(), true);
});

test("a damaged cache is not given to V8: the CLI runs and replaces it", () => {
  freshCache();
  writeFileSync(cache(), Buffer.alloc(300_000, 7));
  list();
  assert.equal(cacheAccepted(), true);
  // Cut short, with the end (where the seal used to be kept) intact.
  const whole = readFileSync(cache());
  writeFileSync(cache(), Buffer.concat([whole.subarray(0, 1000), whole.subarray(whole.length - 400)]));
  assert.equal(cacheAccepted(), false);
  list();
  assert.equal(cacheAccepted(), true);
  // Whole length, one byte of the bytecode changed: V8 would take it (it checks no sum in release
  // builds) and run or crash on it.
  const good = readFileSync(cache());
  const middle = good.length >> 1;
  good[middle] = good[middle]! ^ 0x55;
  writeFileSync(cache(), good);
  assert.equal(cacheAccepted(), false);
  list();
  assert.equal(cacheAccepted(), true);
});

test("a cache made from another build is refused even when the bundle has the same length", () => {
  freshCache();
  // Another build id, same length: V8 alone would take the old bytecode for the new source.
  const source = readFileSync(bundle(), "utf8");
  const [first, ...rest] = source.split("\n");
  const otherId = first!.replace(/[0-9a-f]$/, (c) => (c === "0" ? "1" : "0"));
  writeFileSync(bundle(), [otherId, ...rest].join("\n"));
  assert.equal(readFileSync(bundle()).length, Buffer.byteLength(source));
  assert.equal(cacheAccepted(), false);
  list();
  assert.equal(cacheAccepted(), true, "the run wrote a cache for the build it ran");
});

test("a cache compiled from other source, beside this bundle's real seal (or with its old trailer appended), is not run: the bundle is compiled from source", () => {
  freshCache();
  const source = readFileSync(bundle(), "utf8");
  const firstLine = source.slice(0, source.indexOf("\n") + 1);
  // Other source of the same length (V8's only match), starting with the real build id.
  const head = `${firstLine}module.exports={main(){process.stdout.write("forged\\n");process.exit(0)}};`;
  const forged = `${head}//${"x".repeat(source.length - head.length - 2)}`;
  assert.equal(forged.length, source.length);
  const forgedFile = path.join(pkg, "forged.cjs");
  writeFileSync(forgedFile, forged);
  // Compiled by a fresh node exactly as the loader compiles a bundle, so V8 would accept it.
  const compile =
    `const vm = require("node:vm"); const fs = require("node:fs");` +
    `const s = fs.readFileSync(${JSON.stringify(forgedFile)}, "utf8");` +
    `const w = "(function (exports, require, module, __filename, __dirname) {" + s + "\\n})";` +
    `fs.writeFileSync(${JSON.stringify(forgedFile)} + ".v8", new vm.Script(w, { filename: ${JSON.stringify(bundle())} }).createCachedData());`;
  const r = spawnSync(process.execPath, ["-e", compile], { encoding: "utf8", env });
  assert.equal(r.status, 0, r.stderr);
  const payload = readFileSync(`${forgedFile}.v8`);
  // Written over the cache with the seal left as it was; and again with the real cache's last 80
  // bytes appended, the trailer that alone named the build before there was a seal.
  const real = readFileSync(cache());
  for (const forgedCache of [payload, Buffer.concat([payload, real.subarray(real.length - 80)])]) {
    writeFileSync(cache(), forgedCache);
    assert.equal(cacheAccepted(), false);
    const run = list();
    assert.doesNotMatch(run.stdout, /forged/);
    assert.equal(cacheAccepted(), true);
  }
});

test("on a file system with whole-second timestamps the seal's SHA-256 of both files is checked too", () => {
  freshCache();
  // A bundle whose mtime is a whole second stands for such a file system, where an identical
  // identity no longer proves identical bytes.
  utimesSync(bundle(), 1_700_000_000, 1_700_000_000);
  assert.equal(cacheAccepted(), false, "the bundle's identity changed");
  list();
  assert.equal(cacheAccepted(), true, "a cache whose hashes match is used");
  // The recorded hash of the bundle changed, identities kept: refused here (and only here: on
  // other file systems nothing but root can keep an identity while changing the bytes).
  const text = readFileSync(seal(), "latin1");
  const changed = text.replace(/^bundle-sha256 ([0-9a-f])/m, (_, c: string) => `bundle-sha256 ${c === "0" ? "1" : "0"}`);
  assert.notEqual(changed, text);
  writeFileSync(seal(), changed, "latin1");
  assert.equal(cacheAccepted(), false);
  list();
  assert.equal(cacheAccepted(), true);
});

test("a cache or seal others can write is not used; a dist/ others can write gets none", { skip: process.platform === "win32" }, () => {
  // A chmod of the cache also changes its ctime, which its seal names; the seal's own mode and
  // owner, and the directory's, are what the owner checks alone stand for.
  for (const file of [cache, seal]) {
    freshCache();
    chmodSync(file(), 0o666);
    assert.equal(cacheAccepted(), false, file());
    list();
    for (const written of [cache(), seal()]) assert.equal(statSync(written).mode & 0o022, 0, `the run replaced ${written} with one only its owner can write`);
    assert.equal(cacheAccepted(), true);
  }

  const dist = path.dirname(bundle());
  chmodSync(dist, 0o777);
  try {
    assert.equal(cacheAccepted(), false);
    unlinkSync(cache());
    unlinkSync(seal());
    list();
    assert.equal(existsSync(cache()), false, "no cache is written where others could swap it");
    assert.equal(existsSync(seal()), false);
  } finally {
    chmodSync(dist, 0o755);
  }
  list();
  assert.equal(cacheAccepted(), true);
});

// Only root can make a file another user owns (a second user or a user namespace would need a
// mapping for that user too): elsewhere this is reported as skipped, with why.
const NOT_ROOT = process.getuid?.() !== 0 ? "needs root: only root can give a file to another user or group" : false;

test("a cache or seal another user owns, or another group can write, is not used; the next run replaces it", { skip: process.platform === "win32" || NOT_ROOT }, () => {
  for (const file of [cache, seal]) {
    freshCache();
    // The loader trusts only the runner, the bundle's owner and root, and a group write only for
    // the runner's own primary group.
    chownSync(file(), 54321, 54321);
    assert.equal(cacheAccepted(), false, file());
    list();
    assert.equal(statSync(file()).uid, 0);
    assert.equal(cacheAccepted(), true);

    chownSync(file(), 0, 54321);
    chmodSync(file(), 0o664);
    assert.equal(cacheAccepted(), false, file());
    list();
    assert.equal(cacheAccepted(), true);
  }
});

test("a cache grows by each command it lacks, once: the first successful run of that command rewrites it", () => {
  // As after an install, whose first command decides what the first cache holds.
  unlinkSync(cache());
  const help = spawnSync(process.execPath, [path.join(pkg, "bin", "subs.cjs"), "--help"], { cwd: project, encoding: "utf8", env });
  assert.equal(help.status, 0, help.stderr);
  assert.equal(cacheAccepted(), true);
  const commands = () => readFileSync(seal(), "latin1").split("\n").find((line) => line.startsWith("commands "));
  assert.equal(commands(), "commands ");
  const written = () => `${statSync(cache()).ino}:${statSync(cache()).ctimeMs}`;

  list();
  assert.equal(commands(), "commands ,mcp list");
  assert.equal(cacheAccepted(), true);
  const grown = written();
  list();
  assert.equal(written(), grown, "a command the cache holds does not rewrite it");
  const flagged = () => spawnSync(process.execPath, [path.join(pkg, "bin", "subs.cjs"), "--debug", "mcp", "list", "--json"], { cwd: project, encoding: "utf8", env });
  // --debug loads a module of a group a plain listing never compiles, which that run adds; the
  // command is the same, and once its groups are in, the cache stays as it is.
  assert.equal(flagged().status, 0);
  assert.equal(commands(), "commands ,mcp list", "the same command with flags is no other command");
  const withFlags = written();
  assert.equal(flagged().status, 0);
  assert.equal(written(), withFlags, "nor does the same command with flags");

  // A run whose bytecode is smaller than the cache's (V8 flushed functions it did not call) keeps
  // the cache and only adds its command to the seal. A tiny script stands for that run's bytecode.
  const smaller =
    `const m = require(${JSON.stringify(path.join(pkg, "bin", "subs.cjs"))});` +
    `const l = m.loadBundle(${JSON.stringify(bundle())}, { command: "agent tools" });` +
    `if (!l.cacheUsable || !l.cacheWanted) throw new Error("expected a usable cache lacking the command");` +
    `l.script = new (require("node:vm").Script)("0");` +
    `m.writeCodeCache(${JSON.stringify(bundle())}, l, ["agent tools"]);`;
  const shrunk = spawnSync(process.execPath, ["-e", smaller], { encoding: "utf8", env });
  assert.equal(shrunk.status, 0, shrunk.stderr);
  assert.equal(written(), withFlags, "the larger cache is kept");
  assert.equal(commands(), "commands ,mcp list,agent tools");
  assert.equal(cacheAccepted(), true);

  const typo = spawnSync(process.execPath, [path.join(pkg, "bin", "subs.cjs"), "mcp", "lsit"], { cwd: project, encoding: "utf8", env });
  assert.equal(typo.status, 2, typo.stderr);
  assert.equal(written(), withFlags, "a failed command does not");
  assert.equal(commands(), "commands ,mcp list,agent tools");
});

test("a listing compiles and caches only the first group of the bundle; a group a sealed command compiles later is added to the cache", () => {
  const sealLine = (prefix: string) => readFileSync(seal(), "latin1").split("\n").find((line) => line.startsWith(prefix));
  const written = () => `${statSync(cache()).ino}:${statSync(cache()).ctimeMs}`;
  unlinkSync(cache());
  list();
  assert.equal(sealLine("commands "), "commands mcp list");
  const parts = () => sealLine("parts ")!.slice("parts ".length).split(",").map(Number);
  const [first, ...others] = parts();
  assert.ok(first! > 0, "the first group is in the cache");
  assert.ok(others.length > 0 && others.every((length) => length === 0), `a listing never compiled another group: ${parts().join(",")}`);
  // The same command, asking for its help: commander and the command tree are in a later group.
  const help = () => spawnSync(process.execPath, [path.join(pkg, "bin", "subs.cjs"), "mcp", "list", "--help"], { cwd: project, encoding: "utf8", env });
  assert.equal(help().status, 0);
  assert.ok(parts().slice(1).some((length) => length > 0), `the command line's group, compiled by a command the cache held, is added: ${parts().join(",")}`);
  assert.equal(sealLine("commands "), "commands mcp list");
  assert.equal(cacheAccepted(), true);
  const grown = written();
  assert.equal(help().status, 0);
  list();
  assert.equal(written(), grown, "runs the cache holds every group of leave it as it is");
});

test("a user who cannot write dist/ (a global install by root) runs from the cache root made, and writes none", { skip: NOT_ROOT }, () => {
  // Made anew: a cache holding `mcp list` alone, so --help below is a command it lacks.
  freshCache({ anew: true });
  chmodSync(pkg, 0o755);
  chmodSync(project, 0o755);
  const before = `${statSync(cache()).ino}:${statSync(cache()).ctimeMs}:${statSync(seal()).ctimeMs}`;
  const other = { uid: 54321, gid: 54321, encoding: "utf8" as const, env };
  const loader = `const l = require(${JSON.stringify(path.join(pkg, "bin", "subs.cjs"))}).loadBundle(${JSON.stringify(bundle())}); process.stdout.write(String(l.cacheUsable));`;
  const accepted = spawnSync(process.execPath, ["-e", loader], other);
  assert.equal(accepted.stdout, "true", accepted.stderr);
  // A command the cache lacks: the run would grow the cache if it could.
  const help = spawnSync(process.execPath, [path.join(pkg, "bin", "subs.cjs"), "--help"], { ...other, cwd: project });
  assert.equal(help.status, 0, help.stderr);
  assert.equal(`${statSync(cache()).ino}:${statSync(cache()).ctimeMs}:${statSync(seal()).ctimeMs}`, before);
  assert.deepEqual(readdirSync(path.dirname(bundle())).sort(), ["subs.cjs", "subs.cjs.cache", "subs.cjs.cache.seal"]);
});

test("subs agent serve and subs mcp proxy answer initialize from the groups before the last: the rest (the MCP SDK, zod) loads after", async () => {
  // A copy whose last group throws when it is run, in the same number of bytes, and no cache.
  const broken = mkdtempSync(path.join(tmpdir(), "subs-cache-rest-"));
  const upstream = await startMcpServer({ tools: [annotatedTool("search")] });
  try {
    for (const part of ["bin", "dist", "package.json"]) cpSync(path.join(pkg, part), path.join(broken, part), { recursive: true });
    symlinkSync(path.join(REPO, "node_modules"), path.join(broken, "node_modules"));
    const file = path.join(broken, "dist", "subs.cjs");
    for (const stale of [`${file}.cache`, `${file}.cache.seal`]) rmSync(stale, { force: true });
    const bytes = readFileSync(file);
    const head = bytes.toString("latin1", 0, 4096).split("\n");
    const lengths = head[1]!.slice("//subs-groups:".length).split(",").map(Number);
    assert.ok(lengths.length > 2, head[1]);
    const last = lengths.at(-1)!;
    // zod's classes are named by strings, which minifying keeps: none is in the groups before.
    assert.ok(bytes.includes("$ZodObject", bytes.length - last, "latin1"), "the rest holds zod");
    assert.ok(!bytes.subarray(0, bytes.length - last).includes("$ZodObject"), "no group before the rest holds zod");
    const throwing = 'throw new Error("the last group ran");';
    bytes.write(throwing.padEnd(last, " "), bytes.length - last, "latin1");
    writeFileSync(file, bytes);
    writeFileSync(path.join(project, "served.toml"), `[mcp.up]\nurl = "${upstream.url}"\nauth = { token_env = "T" }\n\n[agent.bot]\nmcp = ["up"]\n`);

    const initialize = { jsonrpc: "2.0", id: 7, method: "initialize", params: { protocolVersion: "2025-06-18", capabilities: {}, clientInfo: { name: "t", version: "1" } } };
    const firstLine = (args: string[]) =>
      new Promise<{ line: string; stderr: string }>((resolve, reject) => {
        const child = spawn(process.execPath, [path.join(broken, "bin", "subs.cjs"), ...args, "--config", "served.toml"], { cwd: project, env: { ...env, T: "token" } });
        let out = "";
        let stderr = "";
        child.stderr.on("data", (d) => (stderr += d));
        child.stdout.on("data", (d) => {
          out += d;
          if (out.includes("\n")) child.stdin.end();
        });
        child.once("error", reject);
        child.once("close", () => resolve({ line: out.split("\n")[0]!, stderr }));
        child.stdin.write(`${JSON.stringify(initialize)}\n`);
      });
    for (const args of [["agent", "serve", "bot"], ["mcp", "proxy", "up"]]) {
      const { line, stderr } = await firstLine(args);
      assert.match(stderr, /the last group ran/, `${args.join(" ")} went on to the rest after its answer`);
      const answer = JSON.parse(line) as { id: number; result?: { protocolVersion?: string } };
      assert.equal(answer.id, 7, line);
      assert.equal(answer.result?.protocolVersion, "2025-06-18", `${args.join(" ")}: ${line}\n${stderr}`);
    }
  } finally {
    await upstream.close();
    rmSync(broken, { recursive: true, force: true });
  }
});
