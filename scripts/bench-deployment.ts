// The team deployment's rows of `npm run bench`: `subs apply` of 1,000 connections to a real
// `subs deployment serve` on loopback (target: under 2 s), timed from launch to exit, each run
// against a fresh deployment with its own SQLite file. A row's ratio is its time over its target,
// so "met" is a ratio of at most 1, as in the other rows.
//   node --import tsx scripts/bench-deployment.ts        (also part of `npm run bench`)
import { spawn } from "node:child_process";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { BIN, ensureBuilt } from "../test/support/cli.ts";
import { startServedDeployment } from "../test/support/deployment-serve.ts";
import { median } from "./bench-fixture.ts";
import type { BenchRow } from "./bench-docs.ts";

const APPLY_CONNECTIONS = 1000;
const APPLY_TARGET_MS = 2000;

/** Wall time of one `subs apply` of `connections` new connections to a fresh deployment, ms. */
async function applyOnce(connections: number): Promise<number> {
  const deployment = await startServedDeployment();
  const dir = mkdtempSync(path.join(tmpdir(), "subs-bench-apply-"));
  try {
    const sections = Array.from({ length: connections }, (_, i) => `[mcp.c${i}]\nurl = "https://mcp${i}.example.com/mcp"\n`);
    writeFileSync(path.join(dir, "substructure.toml"), `[remote]\nurl = "${deployment.url}"\n\n${sections.join("\n")}`);
    return await new Promise<number>((resolve, reject) => {
      const start = process.hrtime.bigint();
      const child = spawn(process.execPath, [BIN, "apply", "--json"], { cwd: dir, stdio: ["ignore", "ignore", "pipe"], env: { PATH: process.env.PATH, SUBSTRUCTURE_TOKEN: deployment.token } });
      let stderr = "";
      child.stderr.on("data", (d) => (stderr += d));
      child.on("close", (code) => (code === 0 ? resolve(Number(process.hrtime.bigint() - start) / 1e6) : reject(new Error(`subs apply exited ${code}: ${stderr}`))));
    }).then((ms) => {
      if (deployment.connections.size !== connections) throw new Error(`the deployment holds ${deployment.connections.size} connections, not ${connections}`);
      return ms;
    });
  } finally {
    await deployment.close();
    rmSync(dir, { recursive: true, force: true });
  }
}

export async function deploymentBenchRows(print: (row: BenchRow) => void, runs = Math.max(3, Math.floor(Number(process.env.BENCH_RUNS ?? 15) / 3))): Promise<BenchRow[]> {
  ensureBuilt();
  const times: number[] = [];
  for (let i = 0; i < runs; i++) times.push(await applyOnce(APPLY_CONNECTIONS));
  const ms = median(times);
  const rows: BenchRow[] = [{ name: `subs apply (${APPLY_CONNECTIONS}): to subs deployment serve on loopback`, ms, ratio: ms / APPLY_TARGET_MS, against: `${APPLY_TARGET_MS.toLocaleString("en")} ms (the target)`, target: 1 }];
  rows.forEach(print);
  return rows;
}

if (process.argv[1] && path.resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  await deploymentBenchRows((r) => console.log(`${r.name}: ${r.ms.toFixed(1)} ms, ${r.ratio.toFixed(2)} × ${r.against} (target ≤${r.target} ${r.ratio <= r.target! ? "met" : "MISSED"})`));
}
