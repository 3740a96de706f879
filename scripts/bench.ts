// `npm run bench` (issue 6): start-up and parallelism of subs, as ratios measured in one run on
// this machine, so they compare across machines. Prints a table and writes bench-results/bench.json.
import { spawnSync, spawn } from "node:child_process";
import { createHash } from "node:crypto";
import { mkdirSync, mkdtempSync, readFileSync, writeFileSync } from "node:fs";
import { createRequire } from "node:module";
import { tmpdir } from "node:os";
import path from "node:path";
import { ensureBuilt, BIN, REPO } from "../test/support/cli.ts";
import { benchEnvironment, median } from "./bench-fixture.ts";
import { annotatedTool, startMcpServer } from "../test/support/mcp-server.ts";
import { serveBenchRows, type BenchRow } from "./bench-serve.ts";

const RUNS = Number(process.env.BENCH_RUNS ?? 15);

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
 * A reference script (scripts/bench-floor*.{cjs,ts}) bundled as dist/subs.cjs is (smol-toml and
 * better-sqlite3's JavaScript inside, the addon required by path), with a runner that loads it
 * through bin/subs.cjs's loader. Returns the runner; its first run writes the code cache the
 * measured runs load.
 */
async function buildFloor(script: string): Promise<string> {
  const { build } = await import("esbuild");
  const { BUILD_ID_PREFIX } = createRequire(import.meta.url)(BIN) as { BUILD_ID_PREFIX: string };
  const dir = mkdtempSync(path.join(tmpdir(), "subs-bench-floor-"));
  const bundle = path.join(dir, "floor.cjs");
  const addon = path.join(REPO, "node_modules", "better-sqlite3", "build", "Release");
  await build({
    entryPoints: [path.join(REPO, "scripts", script)],
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

ensureBuilt();
const floorRunner = await buildFloor("bench-floor.cjs");
const checkedFloorRunner = await buildFloor("bench-floor-checked.ts");
const env10 = await benchEnvironment(10, "subs-bench");
const env200 = await benchEnvironment(200, "subs-bench");
const env1000 = await benchEnvironment(1000, "subs-bench");
const floor = "node -e 0";
// Reference rows, not subs: scripts/bench-floor.cjs, and scripts/bench-floor-checked.ts (the same
// plus subs's check of the file, which rule 5 requires of any subs).
const FLOOR_200 = "reference: smol-toml + sqlite only (200)";
const FLOOR_1000 = "reference: smol-toml + sqlite only (1000)";
const CHECKED_200 = "reference + zod check of the file (200)";
const CHECKED_1000 = "reference + zod check of the file (1000)";
const ms = measure({
  [floor]: { argv: ["-e", "0"], cwd: env10 },
  "subs --version": { argv: [BIN, "--version"], cwd: env10 },
  "subs mcp list --json (10)": { argv: [BIN, "mcp", "list", "--json"], cwd: env10 },
  "subs mcp list --json (200)": { argv: [BIN, "mcp", "list", "--json"], cwd: env200 },
  "subs mcp list --json (1000)": { argv: [BIN, "mcp", "list", "--json"], cwd: env1000 },
  "subs apply --dry-run (200)": { argv: [BIN, "apply", "--dry-run"], cwd: env200 },
  [FLOOR_200]: { argv: [floorRunner], cwd: env200 },
  [FLOOR_1000]: { argv: [floorRunner], cwd: env1000 },
  [CHECKED_200]: { argv: [checkedFloorRunner], cwd: env200 },
  [CHECKED_1000]: { argv: [checkedFloorRunner], cwd: env1000 },
});
const targets: Record<string, number> = {
  "subs --version": 1.2,
  "subs mcp list --json (200)": 1.5,
  "subs mcp list --json (1000)": 2,
};
const rows: BenchRow[] = Object.entries(ms).map(([name, t]) => ({
  name,
  ms: t,
  ratio: t / ms[floor]!,
  against: floor,
  target: targets[name] ?? null,
}));
const agent = await agentToolsWall(20, 200);
rows.push({ name: "subs agent tools: 20 servers at 200 ms", ms: agent.all, ratio: agent.all / agent.one, against: "the same with 1 server", target: 2 });
const rssKiB = peakRssKiB([BIN, "mcp", "list", "--json"], env1000);
// What `subs agent serve` adds to a call (issue 16) and serve start (issue 23).
const serve = await serveBenchRows(RUNS, BIN);
rows.push(...serve.rows);

const pad = (s: string, n: number) => s.padEnd(n);
console.log(`${pad("case", 58)} ${pad("median ms", 10)} ${pad("ratio", 7)} ${pad("target", 7)} against`);
for (const r of rows) {
  const verdict = r.target === null ? "" : r.ratio <= r.target ? " ok" : " MISSED";
  console.log(`${pad(r.name, 58)} ${pad(r.ms === null ? "-" : r.ms.toFixed(1), 10)} ${pad(r.ratio.toFixed(2), 7)} ${pad(r.target === null ? "-" : `≤${r.target}`, 7)} ${r.against}${verdict}`);
}
console.log(`peak RSS of subs mcp list --json (1000): ${(rssKiB / 1024).toFixed(1)} MiB`);
mkdirSync(path.join(REPO, "bench-results"), { recursive: true });
const out = path.join(REPO, "bench-results", "bench.json");
writeFileSync(out, JSON.stringify({ date: new Date().toISOString(), node: process.version, runs: RUNS, results: rows, peak_rss_kib_mcp_list_1000: rssKiB, agent_serve: serve.calls }, null, 2) + "\n");
console.log(`written: ${path.relative(process.cwd(), out)}`);
