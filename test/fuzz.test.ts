// A fuzzer over what a hostile repository or a hostile caller controls: the file's bytes,
// `--args` of `mcp call`, and the ids given on the command line. Cases come from fixed seeds (a
// failure names its seed and case, and runs again the same), in-process through the CLI's run()
// for speed, a few through the built CLI. Every run must end in an expected exit code in bounded
// time, with no stack trace and no "unexpected" error; where the right answer is known (a reserved
// name, nesting past 64, a file over 1 MiB, JSON that is or is not an object) it is checked too.
import assert from "node:assert/strict";
import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { describe, test } from "node:test";
import { ensureBuilt, runCli, runInProcess, type RunResult } from "./support/cli.ts";
import { annotatedTool, startMcpServer } from "./support/mcp-server.ts";
import { CONTROL, fileCase, RESERVED, UNICODE, type Expect } from "./support/file-cases.ts";
import { picker, prng } from "./support/prng.ts";

const FILE_CASES = 1000;
const ARGS_CASES = 800;
const ID_CASES = 500;
/** Per case, wall clock: generous on a loaded 2-core machine; a quadratic path or a hang goes far past it. */
const CASE_MS = 5_000;
/** The in-process cases together, in CPU time (wall time on a shared CI machine says little). */
const TOTAL_CPU_MS = 30_000;
/** Memory after each batch: a file or argument that grows without bound shows here. */
const MAX_RSS_BYTES = 1.5 * 1024 ** 3;
const cpuAtStart = process.cpuUsage();

function checkMemory(batch: string) {
  const rss = process.memoryUsage().rss;
  assert.ok(rss < MAX_RSS_BYTES, `${batch}: rss ${Math.round(rss / 1024 ** 2)} MiB`);
}

function checkRun(result: RunResult, expect: Expect, elapsed: number, context: string) {
  const where = `${context}\nexit ${result.code} after ${elapsed} ms\n${result.stderr.slice(0, 600)}`;
  assert.ok(expect.codes.includes(result.code), `expected exit ${expect.codes.join(" or ")}: ${where}`);
  assert.doesNotMatch(result.stderr, /^\s+at /m, `stack trace: ${where}`);
  assert.doesNotMatch(result.stderr, /unexpected:/, where);
  if (expect.stderr) assert.match(result.stderr, expect.stderr, where);
  assert.ok(elapsed < CASE_MS, `slow: ${where}`);
}

async function timed(argv: string[], cwd: string, env: Record<string, string> = {}): Promise<[RunResult, number]> {
  const started = performance.now();
  const result = await runInProcess(argv, { cwd, env });
  return [result, Math.round(performance.now() - started)];
}

// --- the file: test/support/file-cases.ts makes the cases --------------------------------------

describe("fuzz: the file", () => {
  test(`${FILE_CASES} mutated files through mcp list --json and agent list (seed 0x14f1)`, async () => {
    const p = picker(prng(0x14f1));
    const dir = mkdtempSync(path.join(tmpdir(), "subs-fuzz-file-"));
    const counts: Record<string, number> = {};
    const started = Date.now();
    for (let n = 0; n < FILE_CASES; n++) {
      const { source, expect } = fileCase(p);
      writeFileSync(path.join(dir, "substructure.toml"), source);
      const argv = p.chance(0.5) ? ["mcp", "list", "--json"] : ["agent", "list"];
      const [result, elapsed] = await timed(argv, dir);
      checkRun(result, expect ?? { codes: [0, 2] }, elapsed, `file case ${n}: ${argv.join(" ")}\n${String(source).slice(-300)}`);
      if (result.code === 0 && argv[1] === "list" && argv[0] === "mcp") assert.ok(Array.isArray(JSON.parse(result.stdout)), `file case ${n}`);
      if (result.code === 2) assert.match(result.stderr, /^(substructure\.toml:\d+:\d+: |error: )/m, `file case ${n}: ${result.stderr.slice(0, 300)}`);
      counts[result.code] = (counts[result.code] ?? 0) + 1;
    }
    // Both outcomes must be exercised, or the fuzzer proves little.
    assert.ok((counts[0] ?? 0) > 150 && (counts[2] ?? 0) > 500, JSON.stringify(counts));
    console.log(`file outcomes: ${JSON.stringify(counts)} in ${Date.now() - started} ms`);
    checkMemory("files");
  });
});

// --- --args -------------------------------------------------------------------------------------

function jsonValue(p: ReturnType<typeof picker>, depth: number): unknown {
  const leaves: Array<() => unknown> = [
    () => p.int(1e6) - 5e5,
    () => p.random() * 1e308,
    () => p.pick([true, false, null]),
    () => Array.from({ length: p.int(20) }, () => p.pick([...CONTROL, ...UNICODE, "a", "\"", "\\", "'"])).join(""),
    () => "s".repeat(p.int(20_000)),
  ];
  if (depth <= 0 || p.chance(0.4)) return p.pick(leaves)();
  if (p.chance(0.5)) return Array.from({ length: p.int(4) }, () => jsonValue(p, depth - 1));
  return Object.fromEntries(Array.from({ length: p.int(4) }, () => [p.pick(["q", "", "__proto__", "constructor", ...UNICODE, ...CONTROL]), jsonValue(p, depth - 1)]));
}

/** `--args` text: valid objects, other JSON, deep nesting and broken JSON. */
function argsCase(p: ReturnType<typeof picker>): string {
  const object = () => JSON.stringify(Object.fromEntries([["query", jsonValue(p, 4)]]));
  const deep = p.pick([62, 63, 64, 100, 10_000, 100_000]);
  const generators: Array<() => string> = [
    object,
    () => JSON.stringify(jsonValue(p, 3)),
    () => `{"a":${"[".repeat(deep)}${"]".repeat(deep)}}`,
    () => `{"a":${'{"a":'.repeat(deep)}1${"}".repeat(deep)}}`,
    () => `${"[".repeat(deep)}${"]".repeat(deep)}`,
    () => {
      const text = object();
      return text.slice(0, p.int(text.length));
    },
    () => {
      const chars = [...object()];
      for (let k = 1 + p.int(4); k > 0; k--) chars[p.int(chars.length)] = p.pick([...CONTROL, "{", "}", "[", '"', ",", ":", "\\"]);
      return chars.join("");
    },
    () => p.pick(["", " ", "{}", "[]", "null", "0", '"x"', "{", "}", '{"a":1,}', "{'a':1}", "NaN", "-", "@", "@nope.json", "\u0000", "{\"a\":1}\u0000"]),
  ];
  return p.pick(generators)();
}

/** What `mcp call` must answer: a JSON object passes and the call needs a token (4), anything else is a usage error (2). */
function argsExpectation(text: string): Expect {
  if (text === "-" || text.startsWith("@")) return { codes: [2], stderr: /^error: --args/m };
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch {
    return { codes: [2], stderr: /^error: --args is not valid JSON/m };
  }
  if (value === null || typeof value !== "object" || Array.isArray(value)) return { codes: [2], stderr: /^error: --args must be a JSON object/m };
  if (depthOf(value) > 64) return { codes: [2], stderr: /^error: --args is nested deeper than 64 levels/m };
  return { codes: [4], stderr: /SUBS_FUZZ_UNSET is not set/ };
}

/** Levels of objects and arrays, the outermost counted as 1. */
function depthOf(root: unknown): number {
  let deepest = 0;
  const stack: Array<[unknown, number]> = [[root, 1]];
  while (stack.length > 0) {
    const [value, depth] = stack.pop()!;
    if (value === null || typeof value !== "object") continue;
    deepest = Math.max(deepest, depth);
    for (const child of Object.values(value)) stack.push([child, depth + 1]);
  }
  return deepest;
}

// A connection whose token is named by a variable the run does not have: a call with valid
// arguments ends in exit 4 before any request, so the fuzzer exercises the parsing, not the network.
const CALL_FILE = '[mcp.locked]\nurl = "https://locked.example/mcp"\nauth = { token_env = "SUBS_FUZZ_UNSET" }\n[agent.a]\nmcp = ["locked"]\n';

describe("fuzz: --args of mcp call", () => {
  test(`${ARGS_CASES} argument texts (seed 0xa265); exit 2 unless a JSON object, then 4 (needs a token)`, async () => {
    const p = picker(prng(0xa265));
    const dir = mkdtempSync(path.join(tmpdir(), "subs-fuzz-args-"));
    writeFileSync(path.join(dir, "substructure.toml"), CALL_FILE);
    const counts: Record<string, number> = {};
    for (let n = 0; n < ARGS_CASES; n++) {
      const text = argsCase(p);
      const [result, elapsed] = await timed(["mcp", "call", "locked", "search", "--args", text], dir);
      checkRun(result, argsExpectation(text), elapsed, `args case ${n}: ${JSON.stringify(text.slice(0, 200))}`);
      counts[result.code] = (counts[result.code] ?? 0) + 1;
    }
    assert.ok((counts[2] ?? 0) > 200 && (counts[4] ?? 0) > 150, JSON.stringify(counts));
    checkMemory("--args");
  });

  test("deep --args against a server that answers: 64 levels are sent, 65 and 5,000 are a usage error before any request", async () => {
    const mcp = await startMcpServer({ tools: [{ ...annotatedTool("echo"), reply: (args) => `depth ${depthOf(args)}` }] });
    try {
      const dir = mkdtempSync(path.join(tmpdir(), "subs-fuzz-deep-args-"));
      writeFileSync(path.join(dir, "substructure.toml"), `[mcp.open]\nurl = "${mcp.url}"\nauth = { token_env = "SUBS_FUZZ_TOKEN" }\n`);
      const call = (levels: number) =>
        timed(["mcp", "call", "open", "echo", "--args", `{"a":${"[".repeat(levels - 1)}${"]".repeat(levels - 1)}}`], dir, { SUBS_FUZZ_TOKEN: "t" });
      const [ok, okMs] = await call(64);
      checkRun(ok, { codes: [0] }, okMs, "64 levels");
      assert.equal(ok.stdout, "depth 64\n");
      for (const levels of [65, 5000]) {
        const [refused, ms] = await call(levels);
        checkRun(refused, { codes: [2], stderr: /^error: --args is nested deeper than 64 levels/m }, ms, `${levels} levels`);
      }
      assert.equal(mcp.requests.filter((m) => m === "tools/call").length, 1, "only the 64-level call was sent");
    } finally {
      await mcp.close();
    }
  });
});

// --- ids ----------------------------------------------------------------------------------------

function idCase(p: ReturnType<typeof picker>): string {
  const alphabet = ["a", "z", "0", "-", "_", "__", ".", "/", " ", "'", '"', "$(", "`", "*", "[", "]", "=", ...CONTROL, ...UNICODE, ...RESERVED];
  const generators: Array<() => string> = [
    () => Array.from({ length: 1 + p.int(12) }, () => p.pick(alphabet)).join(""),
    () => `locked${p.pick(alphabet)}`,
    () => p.pick(["lockd", "Locked", "locked ", " locked", "locked\u0000", "l\u202eocked", "x".repeat(100_000), ...RESERVED, "sentry__search"]),
  ];
  for (;;) {
    const id = p.pick(generators)();
    // `locked` is declared; the options commander answers by itself are not ids.
    if (id !== "locked" && id !== "a" && !/^-/.test(id)) return id;
  }
}

describe("fuzz: ids on the command line", () => {
  test(`${ID_CASES} ids (seed 0x1d5) for mcp tools, mcp call and agent tools: always exit 2`, async () => {
    const p = picker(prng(0x1d5));
    const dir = mkdtempSync(path.join(tmpdir(), "subs-fuzz-ids-"));
    writeFileSync(path.join(dir, "substructure.toml"), CALL_FILE);
    for (let n = 0; n < ID_CASES; n++) {
      const id = idCase(p);
      const argv = p.pick([
        ["mcp", "tools", id],
        ["mcp", "call", id, "search"],
        ["agent", "tools", id],
        ["mcp", "login", id],
      ]);
      const [result, elapsed] = await timed(argv, dir);
      checkRun(result, { codes: [2], stderr: /is not declared|no agent/ }, elapsed, `id case ${n}: ${JSON.stringify(argv).slice(0, 200)}`);
    }
    checkMemory("ids");
    const cpu = process.cpuUsage(cpuAtStart);
    const cpuMs = (cpu.user + cpu.system) / 1000;
    assert.ok(cpuMs < TOTAL_CPU_MS, `the in-process fuzz used ${Math.round(cpuMs)} ms of CPU`);
  });
});

// --- a few through the built CLI ----------------------------------------------------------------

describe("fuzz: the built CLI", () => {
  test("hostile cases end the same in the real binary", async () => {
    const dir = mkdtempSync(path.join(tmpdir(), "subs-fuzz-cli-"));
    const file = path.join(dir, "substructure.toml");
    const cases: Array<[source: string, argv: string[], expect: Expect]> = [
      [`[${Array.from({ length: 10_000 }, () => "a").join(".")}]\n`, ["mcp", "list", "--json"], { codes: [2], stderr: /nested deeper than 64 levels/ }],
      [`x = ${"[".repeat(100_000)}${"]".repeat(100_000)}\n`, ["agent", "list"], { codes: [2], stderr: /nested deeper than 64 levels/ }],
      [`[mcp.__proto__]\nurl = "https://p.example/mcp"\n`, ["mcp", "list"], { codes: [2], stderr: /`__proto__` is a reserved name/ }],
      [CALL_FILE, ["mcp", "call", "locked", "search", "--args", '{"a":'.repeat(20_000)], { codes: [2], stderr: /--args is not valid JSON/ }],
      [CALL_FILE, ["mcp", "call", "locked", "search", "--args", `{"a":${"[".repeat(30_000)}${"]".repeat(30_000)}}`], { codes: [2], stderr: /--args is nested deeper than 64 levels/ }],
      [CALL_FILE, ["mcp", "tools", "lock\u001b]2;x\u0007ed"], { codes: [2], stderr: /is not declared/ }],
    ];
    ensureBuilt();
    for (const [source, argv, expect] of cases) {
      writeFileSync(file, source);
      const started = Date.now();
      const result = await runCli(argv, { cwd: dir, timeoutMs: 20_000 });
      checkRun(result, expect, Date.now() - started, `built CLI: ${argv.join(" ").slice(0, 100)}`);
    }
  });
});
