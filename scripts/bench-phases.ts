// Per-connection cost of `subs mcp list --json`, phase by phase. The CLI runs once per
// process, so what counts is the first call of each phase in a fresh process, not warmed-up JIT
// time: every measurement here runs in its own child (`node --import tsx`) and times first calls
// only. Fixtures: 200 and 1000 connections, each with a stored credential, as in scripts/bench.ts.
//
//   node --import tsx scripts/bench-phases.ts            # medians of BENCH_RUNS (9) children per mode
//   BENCH_CLI=1 node --import tsx scripts/bench-phases.ts  # also the built CLI against `node -e 0`
//   BENCH_SIZES=10,200 BENCH_MODES=split …                # other fixture sizes, some modes only
//   BENCH_COMPARE=HEAD~1 …                                # also that commit's src/, interleaved
//
// Modes (one child each): `split` times the steps of parseConfig and of the list one by one;
// `whole` times loadConfig, listLocalConnections and the JSON as the command calls them;
// `command` times mcpListCommand as one call. In a tree older than the hand-written row check
// (BENCH_COMPARE), every mode first times loading zod's compiled row schema, which store.ts then
// loaded for lists of 50 rows or more; under tsx that includes tsx's transform of the file, so
// read the bundled CLI's figures (BENCH_CLI) for what it costs there.
import { spawnSync } from "node:child_process";
import { existsSync, mkdtempSync, readFileSync, symlinkSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";

const SELF = fileURLToPath(import.meta.url);
const REPO = path.dirname(path.dirname(SELF));
const SIZES = (process.env.BENCH_SIZES ?? "200,1000").split(",").map(Number);

type Timings = Record<string, number>;

async function child(mode: string, dir: string, root: string): Promise<Timings> {
  const t: Timings = {};
  const clock = () => performance.now();
  const time = <T>(name: string, fn: () => T): T => {
    const start = clock();
    const value = fn();
    t[name] = clock() - start;
    return value;
  };
  const timeAsync = async <T>(name: string, fn: () => Promise<T>): Promise<T> => {
    const start = clock();
    const value = await fn();
    t[name] = clock() - start;
    return value;
  };
  // Module loading is start-up cost, not per-connection cost: load everything before timing,
  // better-sqlite3's native binding included (openStore imports it lazily).
  const src = <M>(file: string): Promise<M> => import(pathToFileURL(path.join(root, "src", file)).href);
  const [toml, load, schema, store, list, status, mcpList, json] = await Promise.all([
    import("smol-toml"),
    src<typeof import("../src/config/load.ts")>("config/load.ts"),
    src<typeof import("../src/config/schema.ts")>("config/schema.ts"),
    src<typeof import("../src/store/store.ts")>("store/store.ts"),
    src<typeof import("../src/status/list.ts")>("status/list.ts"),
    src<typeof import("../src/status/status.ts")>("status/status.ts"),
    src<typeof import("../src/commands/mcp/list/run.ts")>("commands/mcp/list/run.ts"),
    src<typeof import("../src/output/json.ts")>("output/json.ts"),
    import("better-sqlite3"),
  ]);
  // Older trees: long lists loaded zod's compiler for the row schema (store.ts). Under tsx that
  // import also pays tsx's transform, which the bundled CLI does not: load it here, timed on its own.
  if (existsSync(path.join(root, "src", "store", "compiled-row.ts"))) await timeAsync("row compiler", () => src("store/compiled-row.ts"));
  const file = path.join(dir, "substructure.toml");
  const source = readFileSync(file, "utf8");
  const where = { path: file, cwd: dir };
  const sink = { write: (_s: string) => {} };
  const now = Date.now();

  if (mode === "split") {
    const raw = time("toml", () => toml.parse(source));
    time("secrets and unsafe strings", () => load.scanFile(raw));
    const parsed = time("zod", () => schema.fileSchema().safeParse(load.expandShorthands(raw)));
    if (!parsed.success) throw new Error("fixture does not validate");
    time("xref", () => load.crossReferenceDiagnostics(raw, () => { throw new Error("fixture has a cross-reference error"); }));
    const config = load.parseConfig(source, where); // not timed: warm by now
    const opened = await timeAsync("db open", () => store.openStore({ dbPath: config.dbPath, create: false }));
    if (!opened) throw new Error("fixture has no db");
    const rows = time("db rows", () => ({ credentials: opened.store.listCredentials(), open: opened.store.listOpenConnections() }));
    opened.store.close();
    const statuses = time("statuses", () => status.localStatuses(config, status.storedState(rows), {}, now));
    time("json", () => json.writeJson(sink, statuses.map(mcpList.connectionJson)));
  } else if (mode === "whole") {
    const config = time("loadConfig", () => load.loadConfig({ env: {}, cwd: dir }));
    const { statuses } = await timeAsync("list", () =>
      list.listLocalConnections({ config, env: {}, now, reporter: { info() {}, warn() {}, progress: () => ({ update() {}, succeed() {}, fail() {} }) } }),
    );
    time("json", () => json.writeJson(sink, statuses.map(mcpList.connectionJson)));
  } else if (mode === "command") {
    let out = "";
    const ctx = {
      stdout: { write: (s: string) => (out += s) },
      stderr: { write: () => {} },
      stdoutIsTTY: false,
      stderrIsTTY: false,
      color: false,
      stderrColor: false,
      env: {},
      cwd: dir,
      now: () => now,
    } as unknown as Parameters<typeof mcpList.mcpListCommand>[0];
    await timeAsync("command", () => mcpList.mcpListCommand(ctx, { json: true }));
    if (!out.startsWith("[")) throw new Error("no JSON written");
  } else throw new Error(`unknown mode ${mode}`);
  return t;
}


async function main() {
  const runs = Number(process.env.BENCH_RUNS ?? 9);
  // Imported here, not at the top: a child must load nothing of src/ before it starts timing.
  const { benchEnvironment, median } = await import("./bench-fixture.ts");
  const dirs: Record<number, string> = {};
  for (const n of SIZES) dirs[n] = await benchEnvironment(n, "subs-phases");
  // BENCH_COMPARE=<commit>: the same children on that commit's src/, interleaved with this tree's,
  // so that load on the machine affects both alike.
  const trees: Array<[label: string, root: string]> = [["this tree", REPO]];
  const compare = process.env.BENCH_COMPARE;
  if (compare) {
    const root = mkdtempSync(path.join(tmpdir(), "subs-phases-src-"));
    const archive = spawnSync("git", ["archive", compare, "src", "package.json", "tsconfig.json"], { cwd: REPO, maxBuffer: 1 << 28 });
    if (archive.status !== 0) throw new Error(`git archive ${compare}: ${archive.stderr}`);
    const untar = spawnSync("tar", ["-x", "-C", root], { input: archive.stdout });
    if (untar.status !== 0) throw new Error(`tar: ${untar.stderr}`);
    symlinkSync(path.join(REPO, "node_modules"), path.join(root, "node_modules"));
    trees.unshift([compare, root]);
  }
  const results: Record<string, Record<string, number[]>> = {};
  const spawnChild = (mode: string, n: number, [label, root]: [string, string]) => {
    const r = spawnSync(process.execPath, ["--import", "tsx", SELF, "--child", mode, dirs[n]!, root], { cwd: REPO, encoding: "utf8" });
    if (r.status !== 0) throw new Error(`child ${mode} ${n} (${label}) exited ${r.status}: ${r.stderr}`);
    const t = JSON.parse(r.stdout) as Timings;
    const key = `${label}\t${mode} ${n}`;
    results[key] ??= {};
    for (const [k, v] of Object.entries(t)) (results[key]![k] ??= []).push(v);
  };
  const modes = (process.env.BENCH_MODES ?? "split,whole,command").split(",");
  const all = () => { for (const mode of modes) for (const n of SIZES) for (const tree of trees) spawnChild(mode, n, tree); };
  all(); // warm the file cache
  for (const key of Object.keys(results)) results[key] = {};
  for (let i = 0; i < runs; i++) all();

  console.log(`first-call ms, median of ${runs} fresh processes (node ${process.version})`);
  for (const mode of modes) {
    for (const n of SIZES) {
      for (const [label] of trees) {
        const r = results[`${label}\t${mode} ${n}`]!;
        const cells = Object.entries(r).map(([k, v]) => `${k} ${median(v).toFixed(1)}`);
        const total = Object.values(r).reduce((sum, v) => sum + median(v), 0);
        const name = trees.length > 1 ? `${mode} ${n} ${label}` : `${mode} ${n}`;
        console.log(`${name.padEnd(trees.length > 1 ? 24 : 13)} ${cells.join(" | ")}${cells.length > 1 ? ` | sum ${total.toFixed(1)}` : ""}`);
      }
    }
  }

  if (process.env.BENCH_CLI) {
    const { ensureBuilt, BIN } = await import("../test/support/cli.ts");
    ensureBuilt();
    const wall = (argv: string[], cwd: string) => {
      const start = process.hrtime.bigint();
      const r = spawnSync(process.execPath, argv, { cwd, stdio: ["ignore", "ignore", "pipe"], env: { PATH: process.env.PATH } });
      if (r.status !== 0) throw new Error(`${argv.join(" ")} exited ${r.status}: ${r.stderr}`);
      return Number(process.hrtime.bigint() - start) / 1e6;
    };
    const cases: Record<string, [string[], string]> = { "node -e 0": [["-e", "0"], dirs[200]!] };
    for (const n of SIZES) cases[`cli ${n}`] = [[BIN, "mcp", "list", "--json"], dirs[n]!];
    const times: Record<string, number[]> = {};
    for (const [a, c] of Object.values(cases)) wall(a, c);
    for (let i = 0; i < Math.max(runs, 15); i++) for (const [name, [a, c]] of Object.entries(cases)) (times[name] ??= []).push(wall(a, c));
    const floor = median(times["node -e 0"]!);
    for (const [name, v] of Object.entries(times)) console.log(`${name.padEnd(13)} ${median(v).toFixed(1)} ms  ${(median(v) / floor).toFixed(2)}x`);
  }
}

if (process.argv[2] === "--child") {
  const timings = await child(process.argv[3]!, process.argv[4]!, process.argv[5]!);
  process.stdout.write(JSON.stringify(timings));
} else {
  await main();
}
