// What `subs agent serve` adds to a tool call (docs/speed.md, "Serving"): 1,000 calls with 32 in flight,
// each timed from the client's request to its answer, through `subs agent serve` over stdio and
// straight from an SDK client to the same loopback server; the medians and the p99s are compared.
// Then the server's resident memory after a further 10,000 calls (it should stay flat).
// The MCP server runs in a process of its own, so neither client shares its event loop.
// Then serve start: launch to the answer of initialize, alone and four at once, and to
// the first tools/list of an agent of 20 connections.
//   node --import tsx scripts/bench-serve.ts        (also part of `npm run bench`)
import { spawn, spawnSync } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { annotatedTool, startMcpServer } from "../test/support/mcp-server.ts";
import { median } from "./bench-fixture.ts";
import { BIN, ensureBuilt } from "../test/support/cli.ts";
import { serveSession } from "../test/support/serve-client.ts";
import type { BenchRow, ServeRss } from "./bench-docs.ts";

export type ServeBench = {
  calls: number;
  inFlight: number;
  direct: { median: number; p99: number };
  served: { median: number; p99: number };
  /** What serve adds, ms. */
  added: { median: number; p99: number };
  /** The same with one call at a time: what serve adds to a call when nothing queues. */
  single: { direct: number; served: number; added: number };
  /** Resident memory of the serve process, KiB, after the measured calls and then every `every` calls more. */
  rssKiB: { every: number; samples: number[] };
  /** CPU time (user + system) the serve process spent per call over those calls, ms. */
  cpuMsPerCall: number;
};

const percentile = (xs: readonly number[], p: number) => {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.ceil((p / 100) * s.length) - 1)]!;
};

/** Per-call latencies (ms) of `calls` calls, `inFlight` at a time. */
export async function timeCalls(client: Client, name: string, calls: number, inFlight: number): Promise<number[]> {
  const times: number[] = [];
  let next = 0;
  await Promise.all(
    Array.from({ length: inFlight }, async () => {
      while (next < calls) {
        const n = next++;
        const start = process.hrtime.bigint();
        const result = await client.callTool({ name, arguments: { n } });
        times.push(Number(process.hrtime.bigint() - start) / 1e6);
        if (result.isError) throw new Error(`${name} failed: ${JSON.stringify(result)}`);
      }
    }),
  );
  return times;
}

/** User + system CPU time of a process so far, ms (Linux: /proc/PID/stat, in clock ticks of 10 ms). */
function cpuMs(pid: number): number {
  const fields = readFileSync(`/proc/${pid}/stat`, "utf8").split(") ")[1]!.split(" ");
  return (Number(fields[11]) + Number(fields[12])) * 10;
}

function rssKiB(pid: number): number {
  const line = readFileSync(`/proc/${pid}/status`, "utf8").split("\n").find((l) => l.startsWith("VmRSS:"));
  return Number(line?.match(/(\d+)/)?.[1] ?? NaN);
}

/** The loopback MCP server, in a child process: resolves with its URL. */
function startUpstream(): Promise<{ url: string; stop: () => void }> {
  const child = spawn(process.execPath, ["--import", "tsx", fileURLToPath(import.meta.url), "--upstream"], { stdio: ["ignore", "pipe", "inherit"] });
  return new Promise((resolve, reject) => {
    let out = "";
    child.stdout.on("data", (d) => {
      out += d;
      const url = out.match(/^(http\S+)\n/)?.[1];
      if (url) resolve({ url, stop: () => child.kill() });
    });
    child.once("exit", (code) => reject(new Error(`the upstream exited ${code}`)));
  });
}

export async function benchServe(options: { calls?: number; inFlight?: number; moreCalls?: number } = {}): Promise<ServeBench> {
  const calls = options.calls ?? 1000;
  const inFlight = options.inFlight ?? 32;
  const moreCalls = options.moreCalls ?? 10_000;
  const upstream = await startUpstream();
  const dir = mkdtempSync(path.join(tmpdir(), "subs-bench-serve-"));
  writeFileSync(path.join(dir, "substructure.toml"), `[mcp.up]\nurl = "${upstream.url}"\nauth = { token_env = "BENCH_TOKEN" }\n\n[agent.bench]\nmcp = ["up"]\n`);
  const direct = new Client({ name: "bench-direct", version: "1.0.0" });
  await direct.connect(new StreamableHTTPClientTransport(new URL(upstream.url), { requestInit: { headers: { authorization: "Bearer bench" } } }));
  const served = await serveSession(["agent", "serve", "bench"], { cwd: dir, env: { BENCH_TOKEN: "bench" } });
  try {
    // Warm both paths (JIT, sockets), then alternate rounds so load on the machine affects both alike.
    await timeCalls(direct, "echo", 200, inFlight);
    await timeCalls(served.client, "up__echo", 200, inFlight);
    const d: number[] = [];
    const s: number[] = [];
    const rounds = 4;
    for (let r = 0; r < rounds; r++) {
      d.push(...(await timeCalls(direct, "echo", calls / rounds, inFlight)));
      s.push(...(await timeCalls(served.client, "up__echo", calls / rounds, inFlight)));
    }
    const oneDirect: number[] = [];
    const oneServed: number[] = [];
    for (let r = 0; r < rounds; r++) {
      oneDirect.push(...(await timeCalls(direct, "echo", 100, 1)));
      oneServed.push(...(await timeCalls(served.client, "up__echo", 100, 1)));
    }
    const every = Math.max(1, Math.floor(moreCalls / 4));
    const samples = [rssKiB(served.child.pid!)];
    const cpuBefore = cpuMs(served.child.pid!);
    for (let done = 0; done < moreCalls; done += every) {
      await timeCalls(served.client, "up__echo", every, inFlight);
      samples.push(rssKiB(served.child.pid!));
    }
    const cpuMsPerCall = moreCalls > 0 ? (cpuMs(served.child.pid!) - cpuBefore) / moreCalls : NaN;
    const result = {
      direct: { median: percentile(d, 50), p99: percentile(d, 99) },
      served: { median: percentile(s, 50), p99: percentile(s, 99) },
    };
    const single = { direct: percentile(oneDirect, 50), served: percentile(oneServed, 50) };
    return {
      calls,
      inFlight,
      ...result,
      added: { median: result.served.median - result.direct.median, p99: result.served.p99 - result.direct.p99 },
      single: { ...single, added: single.served - single.direct },
      rssKiB: { every, samples },
      cpuMsPerCall,
    };
  } finally {
    await Promise.all([direct.close(), served.close()]);
    upstream.stop();
    rmSync(dir, { recursive: true, force: true });
  }
}

/**
 * Session start: from launching `subs agent serve` to the answer of its first
 * tools/list, for an agent of one connection and of `servers`, each server answering every
 * request after `delayMs`. The connections are fetched in parallel, so `all / one` stays near 1.
 */
export async function benchSessionStart(servers = 20, delayMs = 200, runs = 3): Promise<{ one: number; all: number; ratio: number }> {
  const running = await Promise.all(Array.from({ length: servers }, () => startMcpServer({ tools: [annotatedTool("search")], delayMs })));
  const dir = mkdtempSync(path.join(tmpdir(), "subs-bench-serve-start-"));
  const toml = running.map((s, i) => `[mcp.s${i}]\nurl = "${s.url}"\nauth = { token_env = "BENCH_TOKEN" }\n`).join("\n");
  writeFileSync(path.join(dir, "substructure.toml"), `${toml}\n[agent.one]\nmcp = ["s0"]\n\n[agent.all]\nmcp = [${running.map((_, i) => `"s${i}"`).join(", ")}]\n`);
  const start = async (agent: string) => {
    const t0 = process.hrtime.bigint();
    const session = await serveSession(["agent", "serve", agent], { cwd: dir, env: { BENCH_TOKEN: "bench" } });
    const { tools } = await session.client.listTools();
    const ms = Number(process.hrtime.bigint() - t0) / 1e6;
    await session.close();
    if (tools.length !== (agent === "one" ? 1 : servers)) throw new Error(`${agent}: ${tools.length} tools\n${session.stderr()}`);
    return ms;
  };
  try {
    const one: number[] = [];
    const all: number[] = [];
    for (let i = 0; i < runs; i++) {
      one.push(await start("one"));
      all.push(await start("all"));
    }
    return { one: median(one), all: median(all), ratio: median(all) / median(one) };
  } finally {
    await Promise.all(running.map((s) => s.close()));
    rmSync(dir, { recursive: true, force: true });
  }
}

/**
 * What substructure.lock costs a served call (docs/file.md, "Reviewing tools"): the same upstream
 * served by `subs agent serve` and by `subs mcp proxy` from a project with a lock (written by
 * `subs lock --yes`) and from one without, `calls` calls each with `inFlight` in flight, in
 * alternating rounds so that load on the machine affects both alike; the medians are compared.
 * The lock is judged when the tools are listed; a call only finds its name among them.
 */
export async function benchLockedCalls(calls = 1000, inFlight = 32): Promise<BenchRow[]> {
  const upstream = await startUpstream();
  const project = (lock: boolean) => {
    const dir = mkdtempSync(path.join(tmpdir(), `subs-bench-lock-${lock ? "on" : "off"}-`));
    writeFileSync(path.join(dir, "substructure.toml"), `[mcp.up]\nurl = "${upstream.url}"\nauth = { token_env = "BENCH_TOKEN" }\n\n[agent.bench]\nmcp = ["up"]\n`);
    return dir;
  };
  const env = { BENCH_TOKEN: "bench" };
  const locked = project(true);
  const open = project(false);
  const sessions: Awaited<ReturnType<typeof serveSession>>[] = [];
  try {
    const lockRun = spawnSync(process.execPath, [BIN, "lock", "--yes"], { cwd: locked, env: { PATH: process.env.PATH ?? "", HOME: locked, ...env }, encoding: "utf8" });
    if (lockRun.status !== 0) throw new Error(`subs lock exited ${lockRun.status}: ${lockRun.stderr}`);
    const rows: BenchRow[] = [];
    for (const [what, argv, tool] of [
      ["subs agent serve", ["agent", "serve", "bench"], "up__echo"],
      ["subs mcp proxy", ["mcp", "proxy", "up"], "echo"],
    ] as const) {
      const withLock = await serveSession([...argv], { cwd: locked, env });
      const without = await serveSession([...argv], { cwd: open, env });
      sessions.push(withLock, without);
      // Both list first, as a client does: under the lock, the listing is where a tool is judged.
      for (const session of [withLock, without]) {
        const names = (await session.client.listTools()).tools.map((t) => t.name);
        if (!names.includes(tool)) throw new Error(`${what} serves no ${tool}: ${names.join(", ")}\n${session.stderr()}`);
        await timeCalls(session.client, tool, 200, inFlight);
      }
      const on: number[] = [];
      const off: number[] = [];
      const rounds = 4;
      for (let r = 0; r < rounds; r++) {
        on.push(...(await timeCalls(withLock.client, tool, calls / rounds, inFlight)));
        off.push(...(await timeCalls(without.client, tool, calls / rounds, inFlight)));
      }
      const against = `${what}: a call without a lock (median, ${inFlight} in flight)`;
      rows.push({ name: against, ms: percentile(off, 50), ratio: 1, against, target: null });
      rows.push({ name: `${what}: a call under substructure.lock`, ms: percentile(on, 50), ratio: percentile(on, 50) / percentile(off, 50), against, target: 1.1 });
    }
    return rows;
  } finally {
    await Promise.all(sessions.map((s) => s.close()));
    upstream.stop();
    for (const dir of [locked, open]) rmSync(dir, { recursive: true, force: true });
  }
}

const FLOOR = "node -e 0";

/** Launches `argv` and resolves with the ms until its exit (no `initialize`), or until the first line it answers `initialize` with. */
function launch(argv: string[], cwd: string, env: Record<string, string>, initialize: boolean): Promise<number> {
  return new Promise((resolve, reject) => {
    const start = process.hrtime.bigint();
    const child = spawn(process.execPath, argv, { cwd, env: { PATH: process.env.PATH ?? "", HOME: cwd, ...env }, stdio: ["pipe", "pipe", "pipe"] });
    let stdout = "";
    let stderr = "";
    let answered: number | undefined;
    child.stderr.on("data", (d) => (stderr += d));
    child.stdout.on("data", (d) => {
      stdout += d;
      if (answered !== undefined || !stdout.includes("\n")) return;
      answered = Number(process.hrtime.bigint() - start) / 1e6;
      if (!/^\{.*"result":\{"protocolVersion"/.test(stdout)) reject(new Error(`${argv.join(" ")} answered ${stdout.slice(0, 300)}\n${stderr}`));
      child.stdin.end();
    });
    child.once("exit", (code) => {
      if (!initialize) return code === 0 ? resolve(Number(process.hrtime.bigint() - start) / 1e6) : reject(new Error(`${argv.join(" ")} exited ${code}: ${stderr}`));
      if (answered === undefined) return reject(new Error(`${argv.join(" ")} exited ${code} without answering initialize: ${stderr}`));
      resolve(answered);
    });
    const request = { jsonrpc: "2.0", id: 0, method: "initialize", params: { protocolVersion: "2025-06-18", capabilities: {}, clientInfo: { name: "bench", version: "1.0.0" } } };
    if (initialize) child.stdin.write(`${JSON.stringify(request)}\n`);
    else child.stdin.end();
  });
}

/**
 * Serve start: from launching `subs agent serve` (one connection with a static token)
 * and `subs mcp proxy` (that connection, its server answering at once) to the answer of the
 * `initialize` the client wrote at launch, each against `node -e 0` from launch to exit, run by
 * run in turn; then four `subs agent serve` launched at once (what a client that starts its
 * servers together does), the last of their answers against one alone, in turn.
 */
export async function benchServeStart(runs: number, bin: string): Promise<BenchRow[]> {
  const upstream = await startUpstream();
  const dir = mkdtempSync(path.join(tmpdir(), "subs-bench-serve-start-"));
  writeFileSync(path.join(dir, "substructure.toml"), `[mcp.up]\nurl = "${upstream.url}"\nauth = { token_env = "BENCH_TOKEN" }\n\n[agent.bench]\nmcp = ["up"]\n`);
  const env = { BENCH_TOKEN: "bench" };
  const cases = {
    [FLOOR]: () => launch(["-e", "0"], dir, env, false),
    agent: () => launch([bin, "agent", "serve", "bench"], dir, env, true),
    proxy: () => launch([bin, "mcp", "proxy", "up"], dir, env, true),
    four: async () => Math.max(...(await Promise.all(Array.from({ length: 4 }, () => launch([bin, "agent", "serve", "bench"], dir, env, true))))),
  };
  const times: Record<keyof typeof cases, number[]> = { [FLOOR]: [], agent: [], proxy: [], four: [] };
  try {
    // The first run of a command writes the code cache its next runs load (bin/subs.cjs).
    for (const run of Object.values(cases)) await run();
    for (let i = 0; i < runs; i++) for (const [name, run] of Object.entries(cases)) times[name as keyof typeof cases].push(await run());
  } finally {
    upstream.stop();
    rmSync(dir, { recursive: true, force: true });
  }
  const floor = median(times[FLOOR]);
  const agent = median(times.agent);
  const proxy = median(times.proxy);
  const four = median(times.four);
  const node = `${FLOOR}: launch to exit, beside serve start`;
  const alone = "subs agent serve: initialize answered";
  return [
    { name: node, ms: floor, ratio: 1, against: node, target: null },
    { name: alone, ms: agent, ratio: agent / floor, against: node, target: 2 },
    { name: "subs mcp proxy: initialize answered", ms: proxy, ratio: proxy / floor, against: node, target: 2 },
    { name: "4 × subs agent serve at once: the last initialize answered", ms: four, ratio: four / agent, against: alone, target: 4 },
  ];
}

/** The serve process's resident memory before the 10,000 calls after the measured ones, and after them: a figure, not a target. */
export const serveRss = (b: ServeBench): ServeRss => ({
  calls: b.rssKiB.every * (b.rssKiB.samples.length - 1),
  start: b.rssKiB.samples[0]!,
  end: b.rssKiB.samples.at(-1)!,
});

/**
 * Every serve figure of `npm run bench`, `runs` runs each where they are timed run by run: what
 * serve adds to a call and its memory over 10,000 calls more (printed), and the rows of serve start.
 */
export async function serveBenchRows(runs: number, bin: string): Promise<{ calls: ServeBench; rss: ServeRss; rows: BenchRow[] }> {
  const calls = await benchServe();
  printServeBench(calls);
  const start = await benchSessionStart(20, 200, Math.max(3, Math.floor(runs / 3)));
  return {
    calls,
    rss: serveRss(calls),
    rows: [
      ...(await benchServeStart(runs, bin)),
      { name: "subs agent serve: first tools/list, 20 servers at 200 ms", ms: start.all, ratio: start.ratio, against: "the same with 1 server", target: 1.2 },
      ...(await benchLockedCalls()),
    ],
  };
}

export function printServeBench(b: ServeBench): void {
  const ms = (x: number) => `${x.toFixed(2)} ms`;
  console.log(`subs agent serve, ${b.calls} calls with ${b.inFlight} in flight (per call):`);
  console.log(`  direct SDK client   median ${ms(b.direct.median)}   p99 ${ms(b.direct.p99)}`);
  console.log(`  through serve       median ${ms(b.served.median)}   p99 ${ms(b.served.p99)}`);
  console.log(
    `  added               median ${ms(b.added.median)} (target ≤1 ms${b.added.median <= 1 ? " ok" : " MISSED"})   p99 ${ms(b.added.p99)} (target ≤3 ms${b.added.p99 <= 3 ? " ok" : " MISSED"})`,
  );
  console.log(`  one call at a time: direct median ${ms(b.single.direct)}, through serve ${ms(b.single.served)}, added ${ms(b.single.added)}`);
  console.log(`  serve's CPU time per call: ${ms(b.cpuMsPerCall)}`);
  console.log(`  serve's RSS every ${b.rssKiB.every} calls: ${b.rssKiB.samples.map((k) => `${(k / 1024).toFixed(1)}`).join(" → ")} MiB`);
}

/**
 * The fastest MCP server that is still one: JSON-RPC over Streamable HTTP with JSON answers, no
 * session, a tool that echoes its arguments. The test server (test/support/mcp-server.ts) builds
 * an SDK server per request, whose own cost would hide what is measured here.
 */
async function fastUpstream(): Promise<string> {
  const { createServer } = await import("node:http");
  const tools = [{ name: "echo", description: "echoes its arguments", inputSchema: { type: "object", properties: {} } }];
  const answer = (message: { id?: unknown; method?: string; params?: { protocolVersion?: string; arguments?: unknown } }) => {
    switch (message.method) {
      case "initialize":
        return { protocolVersion: message.params?.protocolVersion, capabilities: { tools: {} }, serverInfo: { name: "bench", version: "1.0.0" } };
      case "tools/list":
        return { tools };
      case "tools/call":
        return { content: [{ type: "text", text: JSON.stringify(message.params?.arguments ?? {}) }] };
      default:
        return {};
    }
  };
  const server = createServer((req, res) => {
    if (req.method !== "POST") return void res.writeHead(405).end();
    const chunks: Buffer[] = [];
    req.on("data", (c: Buffer) => chunks.push(c));
    req.on("end", () => {
      const message = JSON.parse(Buffer.concat(chunks).toString("utf8"));
      if (message.id === undefined) return void res.writeHead(202).end();
      res.writeHead(200, { "content-type": "application/json" }).end(JSON.stringify({ jsonrpc: "2.0", id: message.id, result: answer(message) }));
    });
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  return `http://127.0.0.1:${(server.address() as { port: number }).port}/mcp`;
}

if (process.argv[2] === "--upstream") {
  process.stdout.write(`${await fastUpstream()}\n`);
} else if (process.argv[1] && path.resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  ensureBuilt();
  const { rows, rss } = await serveBenchRows(Number(process.env.BENCH_RUNS ?? 15), BIN);
  for (const r of rows) {
    const verdict = r.target === null ? "" : r.ratio <= r.target ? " met" : " MISSED";
    console.log(`${r.name}: ${r.ms.toFixed(1)} ms, ${r.ratio.toFixed(2)} × ${r.against}${r.target === null ? "" : ` (target ≤${r.target}${verdict})`}`);
  }
  console.log(`subs agent serve's RSS before and after ${rss.calls} calls: ${(rss.start / 1024).toFixed(1)} → ${(rss.end / 1024).toFixed(1)} MiB`);
}
