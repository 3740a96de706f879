// The record's row of `npm run bench`: the CPU one served tool call costs the deployment to record
// (src/deployment/audit.ts): its entry made and queued on the call's path, then, off it, its JSON
// log line and its share of a batched write to a real SQLite store. Measured in this process with
// process.cpuUsage (user and system) over CALLS calls, from the first call until the last batch is
// written, as the median of ROUNDS rounds; the target is under 0.2 ms per call, so the row's ratio
// is the figure over 0.2 ms (met at most 1), as bench-deployment.ts's rows are.
//   node --import tsx scripts/bench-audit.ts        (also part of `npm run bench`)
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { AuditRecorder } from "../src/deployment/audit.ts";
import { jsonLog, Metrics } from "../src/deployment/ops.ts";
import { openSqliteStore } from "../src/deployment/store/sqlite.ts";
import { median } from "./bench-fixture.ts";
import type { BenchRow } from "./bench-docs.ts";

const CALLS = 20_000;
const ROUNDS = 5;
const TARGET_MS = 0.2;

/** CPU ms per recorded call, one round. */
async function round(audit: AuditRecorder): Promise<number> {
  const actor = { id: "3f9a61c0b2d4", person: "alice@example.com" };
  const before = process.cpuUsage();
  for (let n = 0; n < CALLS; n++) {
    audit.call("triage", actor, { tool: "sentry__search_issues", connection: "sentry", outcome: "ok", durationMs: 12.345, requestId: "8d0c5e2a-4b1f-4a57-9d2e-0c1b2a3d4e5f" });
    // A call's answer takes longer than this loop's turn: let the batches go as they would.
    if (n % 100 === 99) await new Promise((resolve) => setImmediate(resolve));
  }
  await audit.flush();
  const used = process.cpuUsage(before);
  return (used.user + used.system) / 1000 / CALLS;
}

export async function auditBenchRows(print: (row: BenchRow) => void): Promise<BenchRow[]> {
  const dir = mkdtempSync(path.join(tmpdir(), "subs-bench-audit-"));
  const store = await openSqliteStore({ storeDir: dir, dbPath: path.join(dir, "deployment.db"), key: undefined });
  // The log line written as the deployment writes it, to a sink that drops it (stdout's cost is the terminal's).
  const log = jsonLog({ write: () => true }, Date.now);
  const audit = new AuditRecorder({ store, log, metrics: new Metrics(), now: Date.now, retentionMs: 86_400_000 });
  // The writer's timers do not keep a process alive (a server's sockets do): this one does, meanwhile.
  const alive = setInterval(() => {}, 1000);
  try {
    await round(audit); // warm
    const perCall: number[] = [];
    for (let r = 0; r < ROUNDS; r++) perCall.push(await round(audit));
    const ms = median(perCall);
    const row: BenchRow = {
      name: "subs deployment serve: the record of one tool call, CPU (queued, logged, batched to SQLite)",
      ms,
      ratio: ms / TARGET_MS,
      against: `${TARGET_MS} ms of CPU per call (the target)`,
      target: 1,
    };
    print(row);
    return [row];
  } finally {
    clearInterval(alive);
    await audit.close();
    await store.close();
    rmSync(dir, { recursive: true, force: true });
  }
}

if (process.argv[1] && path.resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  await auditBenchRows((r) => console.log(`${r.name}: ${r.ms.toFixed(4)} ms, ${r.ratio.toFixed(2)} × ${r.against} (target ≤${r.target} ${r.ratio <= r.target! ? "met" : "MISSED"})`));
}
