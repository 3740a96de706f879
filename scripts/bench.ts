// `npm run bench`: start-up and parallelism of subs, as ratios measured in one run on
// this machine, so they compare across machines. Prints every case with its target and whether it
// is met, and writes bench-results/bench.json (`npm run bench:docs` puts it in docs/speed.md).
import { spawn, spawnSync } from "node:child_process";
import { createHash } from "node:crypto";
import { cpSync, mkdirSync, mkdtempSync, readFileSync, writeFileSync } from "node:fs";
import { createRequire } from "node:module";
import { tmpdir } from "node:os";
import path from "node:path";
import { ensureBuilt, BIN, REPO } from "../test/support/cli.ts";
import { benchEnvironment, median } from "./bench-fixture.ts";
import { annotatedTool, startMcpServer } from "../test/support/mcp-server.ts";
import { serveBenchRows } from "./bench-serve.ts";
import type { BenchResults, BenchRow } from "./bench-docs.ts";

const RUNS = Number(process.env.BENCH_RUNS ?? 15);
/** Peak RSS of `subs mcp list --json` on 1,000 connections must stay under this (MiB). */
const RSS_TARGET_MIB = 64;

function run(argv: string[], cwd: string) {
  return spawnSync(process.execPath, argv, { cwd, stdio: ["ignore", "pipe", "pipe"], env: { PATH: process.env.PATH } });
}

function timeOnce(argv: string[], cwd: string): number {
  const start = process.hrtime.bigint();
  const result = spawnSync(process.execPath, argv, { cwd, stdio: ["ignore", "ignore", "pipe"], env: { PATH: process.env.PATH } });
  const ms = Number(process.hrtime.bigint() - start) / 1e6;
  if (result.status !== 0) throw new Error(`${argv.join(" ")} exited ${result.status}: ${result.stderr}`);
  return ms;
}

/** Medians of `RUNS` runs each, interleaved so that load on the machine affects all alike. */
function measure(cases: Record<string, { argv: string[]; cwd: string }>): Record<string, number> {
  const times: Record<string, number[]> = Object.fromEntries(Object.keys(cases).map((k) => [k, []]));
  for (const c of Object.values(cases)) timeOnce(c.argv, c.cwd); // warm the file cache
  for (let i = 0; i < RUNS; i++) for (const [name, c] of Object.entries(cases)) times[name]!.push(timeOnce(c.argv, c.cwd));
  return Object.fromEntries(Object.entries(times).map(([k, v]) => [k, median(v)]));
}

function peakRssKiB(argv: string[], cwd: string): number {
  const file = path.join(cwd, "rss.txt");
  const result = spawnSync(process.execPath, ["--import", path.join(REPO, "scripts", "bench-rss.mjs"), ...argv], {
    cwd,
    stdio: "ignore",
    env: { PATH: process.env.PATH, SUBS_BENCH_RSS_FILE: file },
  });
  if (result.status !== 0) throw new Error(`${argv.join(" ")} exited ${result.status}`);
  return Number(readFileSync(file, "utf8"));
}

/** `subs agent tools` over N servers that each answer every request after `delayMs`. */
async function agentToolsWall(servers: number, delayMs: number): Promise<{ one: number; all: number }> {
  const running = await Promise.all(Array.from({ length: servers }, () => startMcpServer({ tools: [annotatedTool("search", { readOnlyHint: true })], delayMs })));
  const dir = mkdtempSync(path.join(tmpdir(), "subs-bench-agent-"));
  // A static token: the servers do not check it, and no login is needed to fetch tools.
  const toml = running.map((s, i) => `[mcp.s${i}]\nurl = "${s.url}"\nauth = { token_env = "BENCH_TOKEN" }\n`).join("\n") + `\n[agent.one]\nmcp = ["s0"]\n\n[agent.all]\nmcp = [${running.map((_, i) => `"s${i}"`).join(", ")}]\n`;
  writeFileSync(path.join(dir, "substructure.toml"), toml);
  // The servers live in this process: run the CLI asynchronously so they can answer.
  const timeAsync = (argv: string[]) =>
    new Promise<number>((resolve, reject) => {
      const start = process.hrtime.bigint();
      const child = spawn(process.execPath, argv, { cwd: dir, stdio: ["ignore", "ignore", "pipe"], env: { PATH: process.env.PATH, BENCH_TOKEN: "bench" } });
      let stderr = "";
      child.stderr.on("data", (d) => (stderr += d));
      child.on("close", (code) => (code === 0 ? resolve(Number(process.hrtime.bigint() - start) / 1e6) : reject(new Error(`agent tools exited ${code}: ${stderr}`))));
    });
  const one: number[] = [];
  const all: number[] = [];
  const runs = Math.max(3, Math.floor(RUNS / 3));
  for (let i = 0; i < runs; i++) {
    one.push(await timeAsync([BIN, "agent", "tools", "one", "--json"]));
    all.push(await timeAsync([BIN, "agent", "tools", "all", "--json"]));
  }
  await Promise.all(running.map((s) => s.close()));
  return { one: median(one), all: median(all) };
}

/**
 * scripts/bench-floor.ts bundled with esbuild as subs is, minified, in one CommonJS script (smol-toml
 * and better-sqlite3's JavaScript inside, the addon required by path), with a runner that loads it
 * through bin/subs.cjs's loader from a V8 code cache, as subs is run. Returns the runner; its
 * first run writes the cache the measured runs load.
 */
async function buildFloor(): Promise<string> {
  const { build } = await import("esbuild");
  const { BUILD_ID_PREFIX } = createRequire(import.meta.url)(BIN) as { BUILD_ID_PREFIX: string };
  const dir = mkdtempSync(path.join(tmpdir(), "subs-bench-floor-"));
  const bundle = path.join(dir, "floor.cjs");
  const addon = path.join(REPO, "node_modules", "better-sqlite3", "build", "Release");
  await build({
    entryPoints: [path.join(REPO, "scripts", "bench-floor.ts")],
    outfile: bundle,
    bundle: true,
    format: "cjs",
    platform: "node",
    target: "node20",
    minify: true,
    logLevel: "warning",
    plugins: [
      {
        name: "addon-by-path",
        setup(b) {
          b.onResolve({ filter: /^bindings$/ }, () => ({ path: "bindings", namespace: "addon-by-path" }));
          b.onLoad({ filter: /.*/, namespace: "addon-by-path" }, () => ({ contents: `module.exports = (name) => require(${JSON.stringify(addon)} + "/" + name);`, loader: "js" }));
        },
      },
    ],
  });
  const source = readFileSync(bundle, "utf8");
  writeFileSync(bundle, `${BUILD_ID_PREFIX}${createHash("sha256").update(source).digest("hex")}\n${source}`);
  const runner = path.join(dir, "run.cjs");
  writeFileSync(
    runner,
    `const { loadBundle, writeCodeCache } = require(${JSON.stringify(BIN)});\n` +
      `const loaded = loadBundle(${JSON.stringify(bundle)});\n` +
      `if (!loaded.cacheUsable) process.once("exit", () => writeCodeCache(${JSON.stringify(bundle)}, loaded));\n`,
  );
  return runner;
}

/** A copy of a fixture directory, so that the floor's read-only opens (which leave -wal and -shm behind) never meet subs's. */
function copyOf(dir: string): string {
  const copy = mkdtempSync(path.join(tmpdir(), "subs-bench-floor-env-"));
  cpSync(dir, copy, { recursive: true });
  return copy;
}

ensureBuilt();
const floorRunner = await buildFloor();
const sizes = [10, 200, 1000] as const;
const envs = Object.fromEntries(await Promise.all(sizes.map(async (n) => [n, await benchEnvironment(n, "subs-bench")] as const))) as Record<(typeof sizes)[number], string>;
const floorEnvs = Object.fromEntries(sizes.map((n) => [n, copyOf(envs[n])])) as Record<(typeof sizes)[number], string>;

// The floor must give the same answer: byte for byte what subs prints (the statuses depend on the
// clock only by the hour, and both run within seconds).
for (const n of sizes) {
  const subs = run([BIN, "mcp", "list", "--json"], envs[n]);
  const floor = run([floorRunner], floorEnvs[n]);
  if (subs.status !== 0 || floor.status !== 0) throw new Error(`at ${n} connections: subs exited ${subs.status} (${subs.stderr}), the floor ${floor.status} (${floor.stderr})`);
  if (!subs.stdout.equals(floor.stdout)) throw new Error(`at ${n} connections the floor does not answer what subs does`);
}

const NODE = "node -e 0";
const VERSION = "subs --version";
const list = (n: number) => `subs mcp list --json (${n})`;
const floorRow = (n: number) => `floor: the same answer, no CLI (${n})`;
const ms = measure({
  [NODE]: { argv: ["-e", "0"], cwd: envs[10] },
  [VERSION]: { argv: [BIN, "--version"], cwd: envs[10] },
  ...Object.fromEntries(sizes.flatMap((n) => [
    [list(n), { argv: [BIN, "mcp", "list", "--json"], cwd: envs[n] }],
    [floorRow(n), { argv: [floorRunner], cwd: floorEnvs[n] }],
  ])),
  "subs apply --dry-run (200)": { argv: [BIN, "apply", "--dry-run"], cwd: envs[200] },
});

const rows: BenchRow[] = [
  { name: NODE, ms: ms[NODE]!, ratio: 1, against: NODE, target: null },
  { name: VERSION, ms: ms[VERSION]!, ratio: ms[VERSION]! / ms[NODE]!, against: NODE, target: 1.1 },
  ...sizes.flatMap((n): BenchRow[] => [
    { name: list(n), ms: ms[list(n)]!, ratio: ms[list(n)]! / ms[floorRow(n)]!, against: floorRow(n), target: 1.2 },
    { name: floorRow(n), ms: ms[floorRow(n)]!, ratio: ms[floorRow(n)]! / ms[NODE]!, against: NODE, target: null },
  ]),
  { name: "subs apply --dry-run (200)", ms: ms["subs apply --dry-run (200)"]!, ratio: ms["subs apply --dry-run (200)"]! / ms[NODE]!, against: NODE, target: null },
];
const agent = await agentToolsWall(20, 200);
rows.push({ name: "subs agent tools: 20 servers at 200 ms", ms: agent.all, ratio: agent.all / agent.one, against: "the same with 1 server", target: 2 });
const rssKiB = peakRssKiB([BIN, "mcp", "list", "--json"], envs[1000]);

const pad = (s: string, n: number) => s.padEnd(n);
const verdict = (met: boolean) => (met ? "met" : "MISSED");
console.log(`${pad("case", 60)} ${pad("median ms", 10)} ${pad("ratio", 7)} ${pad("target", 7)} against`);
const printRow = (r: BenchRow) => {
  const judged = r.target === null ? "" : ` ${verdict(r.ratio <= r.target)}`;
  console.log(`${pad(r.name, 60)} ${pad(r.ms.toFixed(1), 10)} ${pad(r.ratio.toFixed(2), 7)} ${pad(r.target === null ? "-" : `≤${r.target}`, 7)} ${r.against}${judged}`);
};
rows.forEach(printRow);
console.log(`peak RSS of subs mcp list --json (1000): ${(rssKiB / 1024).toFixed(1)} MiB (target < ${RSS_TARGET_MIB} MiB) ${verdict(rssKiB / 1024 < RSS_TARGET_MIB)}`);
// What `subs agent serve` adds to a call (printed), its memory over 10,000 calls more,
// and how soon a served session answers (serve start).
const serve = await serveBenchRows(RUNS, BIN);
serve.rows.forEach(printRow);
rows.push(...serve.rows);
rows.push(...(await (await import("./bench-deployment.ts")).deploymentBenchRows(printRow)));
rows.push(...(await (await import("./bench-audit.ts")).auditBenchRows(printRow)));
rows.push(...(await (await import("./bench-replicas.ts")).replicaBenchRows(printRow)));
mkdirSync(path.join(REPO, "bench-results"), { recursive: true });
const out = path.join(REPO, "bench-results", "bench.json");
const results: BenchResults = {
  date: new Date().toISOString(),
  node: process.version,
  runs: RUNS,
  loadavg: (await import("node:os")).loadavg(),
  results: rows,
  peak_rss_kib_mcp_list_1000: rssKiB,
  peak_rss_target_mib: RSS_TARGET_MIB,
  serve_rss_kib: serve.rss,
  agent_serve: serve.calls,
};
writeFileSync(out, JSON.stringify(results, null, 2) + "\n");
console.log(`written: ${path.relative(process.cwd(), out)} (npm run bench:docs puts it in docs/speed.md)`);
