// The team deployment's rows of `npm run bench`, against a real `subs deployment serve` on
// loopback with its own SQLite file:
// - a tool call through an agent's endpoint (/v1/agents/<name>/mcp) against the same call sent
//   straight to the MCP server, 32 in flight, alternating rounds (target: at most 2 ms added at
//   the median). The MCP server is bench-serve.ts's fastest one, in a process of its own; the
//   deployment holds a credential for it that never expires, so no refresh is timed.
// - `subs apply` of 1,000 connections (target: under 2 s), timed from launch to exit, each run
//   against a fresh deployment.
// A row's ratio is its figure over its target, so "met" is a ratio of at most 1, as in the other rows.
//   node --import tsx scripts/bench-deployment.ts        (also part of `npm run bench`)
import { spawn } from "node:child_process";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { BIN, ensureBuilt } from "../test/support/cli.ts";
import { callServed, startServedDeployment } from "../test/support/deployment-serve.ts";
import { median } from "./bench-fixture.ts";
import { timeCalls } from "./bench-serve.ts";
import type { BenchRow } from "./bench-docs.ts";

const APPLY_CONNECTIONS = 1000;
const APPLY_TARGET_MS = 2000;
const ADDED_TARGET_MS = 2;
const CALLS = 1000;
const IN_FLIGHT = 32;

/** bench-serve.ts's fastest MCP server, in a child process: its URL and how to stop it. */
export function startUpstream(): Promise<{ url: string; stop: () => void }> {
  const child = spawn(process.execPath, ["--import", "tsx", fileURLToPath(new URL("./bench-serve.ts", import.meta.url)), "--upstream"], { stdio: ["ignore", "pipe", "inherit"] });
  return new Promise((resolve, reject) => {
    let out = "";
    child.stdout.on("data", (d) => {
      out += d;
      const url = /^(http\S+)\n/.exec(out)?.[1];
      if (url) resolve({ url, stop: () => child.kill() });
    });
    child.once("exit", (code) => reject(new Error(`the upstream exited ${code}`)));
  });
}

/** Medians of a call straight to the MCP server and through the deployment's agent endpoint, ms. */
async function servedCall(): Promise<{ direct: number; served: number }> {
  const upstream = await startUpstream();
  const deployment = await startServedDeployment();
  try {
    await callServed(deployment, "PUT", "/v1/mcp/up", { url: upstream.url, prefix_tools: true });
    deployment.credentials.set("up", { url: upstream.url, tokens: { access_token: "bench", token_type: "bearer" }, authorizedAt: Date.now(), expiresAt: null });
    await callServed(deployment, "PUT", "/v1/agents/bench", { mcp: [{ id: "up" }] });
    const use = await deployment.tokenFor("use");
    const connect = async (url: string, token: string) => {
      const client = new Client({ name: "bench-deployment", version: "1.0.0" });
      await client.connect(new StreamableHTTPClientTransport(new URL(url), { requestInit: { headers: { authorization: `Bearer ${token}` } } }));
      return client;
    };
    const direct = await connect(upstream.url, "bench");
    const served = await connect(`${deployment.url}/v1/agents/bench/mcp`, use);
    // Warm both paths, then alternate rounds so load on the machine affects both alike.
    await timeCalls(direct, "echo", 200, IN_FLIGHT);
    await timeCalls(served, "up__echo", 200, IN_FLIGHT);
    const d: number[] = [];
    const s: number[] = [];
    for (let r = 0; r < 4; r++) {
      d.push(...(await timeCalls(direct, "echo", CALLS / 4, IN_FLIGHT)));
      s.push(...(await timeCalls(served, "up__echo", CALLS / 4, IN_FLIGHT)));
    }
    await Promise.all([direct.close(), served.close()]);
    return { direct: median(d), served: median(s) };
  } finally {
    await deployment.close();
    upstream.stop();
  }
}

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
  const call = await servedCall();
  const added = call.served - call.direct;
  const callRow: BenchRow = {
    name: `subs deployment serve: a tool call through an agent's endpoint, ${IN_FLIGHT} in flight, ms added`,
    ms: added,
    ratio: added / ADDED_TARGET_MS,
    against: `${ADDED_TARGET_MS} ms added (the target; direct median ${call.direct.toFixed(2)} ms, through it ${call.served.toFixed(2)} ms)`,
    target: 1,
  };
  const times: number[] = [];
  for (let i = 0; i < runs; i++) times.push(await applyOnce(APPLY_CONNECTIONS));
  const ms = median(times);
  const rows: BenchRow[] = [callRow, { name: `subs apply (${APPLY_CONNECTIONS}): to subs deployment serve on loopback`, ms, ratio: ms / APPLY_TARGET_MS, against: `${APPLY_TARGET_MS.toLocaleString("en")} ms (the target)`, target: 1 }];
  rows.forEach(print);
  return rows;
}

if (process.argv[1] && path.resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  await deploymentBenchRows((r) => console.log(`${r.name}: ${r.ms.toFixed(1)} ms, ${r.ratio.toFixed(2)} × ${r.against} (target ≤${r.target} ${r.ratio <= r.target! ? "met" : "MISSED"})`));
}
