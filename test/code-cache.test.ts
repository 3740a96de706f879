// Issue 6: bin/subs.cjs runs dist/subs.cjs from a V8 code cache. V8 trusts the bytes it is given
// (a damaged cache aborts the process) and matches a cache to its source by length only, so the
// loader must use only a whole cache made from this exact build, and must still run without one.
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { cpSync, existsSync, mkdtempSync, readFileSync, rmSync, symlinkSync, unlinkSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { after, before, test } from "node:test";
import { REPO, ensureBuilt } from "./support/cli.ts";

let pkg: string;
let project: string;
const bundle = () => path.join(pkg, "dist", "subs.cjs");
const cache = () => `${bundle()}.cache`;

before(() => {
  ensureBuilt();
  pkg = mkdtempSync(path.join(tmpdir(), "subs-cache-pkg-"));
  for (const part of ["bin", "dist", "package.json"]) cpSync(path.join(REPO, part), path.join(pkg, part), { recursive: true });
  symlinkSync(path.join(REPO, "node_modules"), path.join(pkg, "node_modules"));
  project = mkdtempSync(path.join(tmpdir(), "subs-cache-project-"));
  writeFileSync(path.join(project, "substructure.toml"), '[mcp.alpha]\nurl = "https://alpha.example.com/mcp"\n');
});
after(() => {
  rmSync(pkg, { recursive: true, force: true });
  rmSync(project, { recursive: true, force: true });
});

function list() {
  const r = spawnSync(process.execPath, [path.join(pkg, "bin", "subs.cjs"), "mcp", "list", "--json"], { cwd: project, encoding: "utf8", env: { PATH: process.env.PATH } });
  assert.equal(r.status, 0, r.stderr);
  assert.equal(JSON.parse(r.stdout)[0].id, "alpha");
  return r;
}

/** Whether a fresh `node` (no test-runner flags, which V8 would count) accepts the cache. */
function cacheAccepted(): boolean {
  const script = `const l = require(${JSON.stringify(path.join(pkg, "bin", "subs.cjs"))}).loadBundle(${JSON.stringify(bundle())}); process.stdout.write(String(l.cacheUsable));`;
  const r = spawnSync(process.execPath, ["-e", script], { encoding: "utf8", env: { PATH: process.env.PATH } });
  assert.equal(r.status, 0, r.stderr);
  return r.stdout === "true";
}

test("the build leaves a code cache that node accepts", () => {
  assert.ok(existsSync(path.join(REPO, "dist", "subs.cjs.cache")));
  assert.equal(cacheAccepted(), true);
});

test("without a cache the CLI runs, and leaves one the next run uses", () => {
  unlinkSync(cache());
  list();
  assert.ok(existsSync(cache()));
  assert.equal(cacheAccepted(), true);
});

test("a damaged cache is not given to V8: the CLI runs and replaces it", () => {
  writeFileSync(cache(), Buffer.alloc(300_000, 7));
  list();
  assert.equal(cacheAccepted(), true);
  // Cut short, with our trailer intact: V8 refuses it by the length in its own header.
  const whole = readFileSync(cache());
  writeFileSync(cache(), Buffer.concat([whole.subarray(0, 1000), whole.subarray(whole.length - 80)]));
  assert.equal(cacheAccepted(), false);
  list();
  assert.equal(cacheAccepted(), true);
});

test("a cache made from another build is refused even when the bundle has the same length", () => {
  list();
  assert.equal(cacheAccepted(), true);
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
