// The official MCP conformance suite's *server* scenarios (docs/conformance.md, "Server scenarios through
// `subs mcp proxy`"): `conformance server --url`
// against the suite's reference "everything server" (vendored in test/support/everything-server/),
// and, with --via, against a command serving MCP over HTTP in front of it, such as
// `subs mcp proxy everything --http 127.0.0.1:0 --token-file FILE`. The goal is the same result
// for every scenario through the command as directly. The harness needs Node 22: it is the one in
// tools/conformance, installed from its lock file as scripts/conformance.mjs does.
//
//   node scripts/conformance-server.mjs                          # every server scenario, directly
//   node scripts/conformance-server.mjs --scenario ping          # one scenario
//   node scripts/conformance-server.mjs --proxy                  # and again through `subs mcp proxy --http`
//   node scripts/conformance-server.mjs --proxy-stdio            # the same, the proxy's upstream a local (stdio) server
//   node scripts/conformance-server.mjs --via "CMD" [--via-setup "CMD"]   # through any such command
//   node scripts/conformance-server.mjs --via "node --import {tsx} {root}/test/support/forwarding-server.ts {upstream} --http 127.0.0.1:0 --token-file {tokenFile}"
//                                          # through the tests' throwaway forwarder (checks this script)
//
// --via CMD runs in a temporary directory whose substructure.toml declares the everything server
// as [mcp.everything]; in CMD, {tokenFile} is a path in that directory, {upstream} the everything
// server's URL, {root} this repository and {tsx} tsx's loader (for `node --import {tsx} file.ts`,
// since the directory is not in this repository). CMD must print `serving MCP on <url>` on stderr (src/serve/http.ts does) and write
// its bearer token to {tokenFile}. --via-setup runs once before it, in the same directory (e.g.
// `subs mcp login everything`, which finds that the server needs no credential).
//
// The bearer token: the harness's server scenarios connect with a plain StreamableHTTPClientTransport
// and have no option for a header or a token (conformance 0.1.16, `server --help`), and subs's HTTP
// mode has no way to turn its token off. So the harness talks to a reverse proxy of this script's
// own, on loopback, that adds `Authorization: Bearer <the token from {tokenFile}>` to every request
// and forwards it otherwise unchanged: Host and Origin included, so the dns-rebinding-protection
// scenario still reaches the command's own checks.
//
// Exits 1 when a scenario not listed in tools/conformance/expected-server-failures.json fails or
// warns, a listed one passes, or (with --via) any scenario's result through the command differs from
// its result directly. Results: tools/conformance/results/server/{direct,via}/.
import { spawn, spawnSync } from "node:child_process";
import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { request as httpRequest, createServer } from "node:http";
import { tmpdir } from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { ensureNode22Tools, NODE22 as node22 } from "./node22-tools.mjs";

const root = fileURLToPath(new URL("..", import.meta.url));
const toolsDir = path.join(root, "tools", "conformance");
const harnessEntry = path.join(toolsDir, "node_modules", "@modelcontextprotocol", "conformance", "dist", "index.js");
const resultsDir = path.join(toolsDir, "results", "server");
const expectedFile = path.join(toolsDir, "expected-server-failures.json");
const everythingServer = path.join(root, "test", "support", "everything-server", "everything-server.ts");
const START_TIMEOUT_MS = 30_000;
const RUN_TIMEOUT_MS = 300_000;
/** What `--proxy` means once `subs mcp proxy` serves HTTP. */
const PROXY_SETUP = `${process.execPath} ${path.join(root, "bin", "subs.cjs")} mcp login everything`;
const PROXY_VIA = `${process.execPath} ${path.join(root, "bin", "subs.cjs")} mcp proxy everything --http 127.0.0.1:0 --token-file {tokenFile}`;

/** Run at exit, however it comes: temporary directories to remove. */
const cleanups = [];

function fail(message) {
  process.stderr.write(`conformance-server: ${message}\n`);
  for (const cleanup of cleanups.splice(0)) cleanup();
  process.exit(2);
}

function parseArgs(argv) {
  const options = { scenario: undefined, via: undefined, viaSetup: undefined, stdio: false };
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i];
    if (arg === "--proxy") {
      options.via = PROXY_VIA;
      options.viaSetup = PROXY_SETUP;
    } else if (arg === "--proxy-stdio") {
      options.via = PROXY_VIA;
      options.stdio = true;
    } else if (arg === "--scenario" && argv[i + 1]) options.scenario = argv[++i];
    else if (arg === "--via" && argv[i + 1]) options.via = argv[++i];
    else if (arg === "--via-setup" && argv[i + 1]) options.viaSetup = argv[++i];
    else fail(`unknown argument ${arg} (use --scenario NAME, --proxy, --proxy-stdio, --via CMD, --via-setup CMD)`);
  }
  return options;
}

/** A command line split on spaces, as the harness splits --command; no quoting. */
const words = (line, vars) => line.trim().split(/\s+/).map((w) => w.replace(/\{(\w+)\}/g, (m, name) => vars[name] ?? m));

/** Starts a child and resolves with it and the first match of `pattern` in its output. */
function startChild(argv, { cwd, env, pattern, stream, name }) {
  const child = spawn(argv[0], argv.slice(1), { cwd, env, stdio: ["pipe", "pipe", "pipe"] });
  let output = "";
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`${name} did not start within ${START_TIMEOUT_MS} ms:\n${output}`)), START_TIMEOUT_MS);
    const onData = (chunk) => {
      output += chunk;
      const match = pattern.exec(output);
      if (match) {
        clearTimeout(timer);
        resolve({ child, match, output: () => output });
      }
    };
    child.stdout.setEncoding("utf8").on("data", (c) => (stream === "stdout" ? onData(c) : (output += c)));
    child.stderr.setEncoding("utf8").on("data", (c) => (stream === "stderr" ? onData(c) : (output += c)));
    child.on("exit", (code, signal) => {
      clearTimeout(timer);
      reject(new Error(`${name} exited (${code ?? signal}) before it was ready:\n${output}`));
    });
    child.on("error", (error) => reject(new Error(`${name} could not start: ${error.message}`)));
  });
}

/** Sends SIGTERM and waits for the exit: a server that ignores it is a failure of its own. */
function stop(child, name, graceMs = 10_000) {
  if (child.exitCode !== null || child.signalCode !== null) return Promise.resolve({ code: child.exitCode, signal: child.signalCode, clean: false, early: true });
  return new Promise((resolve) => {
    const timer = setTimeout(() => {
      child.kill("SIGKILL");
      resolve({ code: null, signal: "SIGKILL", clean: false, early: false, message: `${name} did not end within ${graceMs} ms of SIGTERM` });
    }, graceMs);
    child.once("exit", (code, signal) => {
      clearTimeout(timer);
      resolve({ code, signal, clean: true, early: false });
    });
    child.kill("SIGTERM");
  });
}

/**
 * The test-only reverse proxy: every request forwarded to `target` with the bearer token added,
 * everything else (method, path, Host, Origin, body, the streamed answer) as it came.
 */
function startTokenProxy(target, token) {
  const server = createServer((req, res) => {
    const headers = { ...req.headers, authorization: `Bearer ${token}` };
    const upstream = httpRequest({ host: target.hostname.replace(/^\[|\]$/g, ""), port: target.port, method: req.method, path: req.url, headers }, (answer) => {
      res.writeHead(answer.statusCode ?? 502, answer.headers);
      answer.pipe(res);
    });
    upstream.on("error", () => {
      if (!res.headersSent) res.writeHead(502).end();
      else res.destroy();
    });
    res.on("close", () => upstream.destroy());
    req.pipe(upstream);
  });
  return new Promise((resolve) => server.listen(0, "127.0.0.1", () => resolve(server)));
}

/** <dir>/server-<scenario>-<ISO timestamp with - for :.>/checks.json, by scenario. */
function checksByScenario(dir) {
  const found = new Map();
  if (!existsSync(dir)) return found;
  for (const entry of readdirSync(dir, { withFileTypes: true })) {
    const match = /^server-(.*)-\d{4}-\d{2}-\d{2}T\d{2}-\d{2}-\d{2}-\d{3}Z$/.exec(entry.name);
    const file = path.join(dir, entry.name, "checks.json");
    if (entry.isDirectory() && match && existsSync(file)) found.set(match[1], JSON.parse(readFileSync(file, "utf8")));
  }
  return found;
}

/** Failing and warning checks of one scenario: `STATUS id: message`, sorted. */
const problemsOf = (checks) =>
  checks
    .filter((c) => c.status === "FAILURE" || c.status === "WARNING")
    .map((c) => `${c.status} ${c.id}${c.errorMessage ? `: ${c.errorMessage}` : ""}`)
    .sort();

/** One harness run against `url`; resolves to the scenarios it ran and their checks. */
async function runHarness(url, outDir, selection, baseline) {
  rmSync(outDir, { recursive: true, force: true });
  mkdirSync(outDir, { recursive: true });
  const args = [harnessEntry, "server", "--url", url, ...selection, "-o", outDir, "--expected-failures", baseline];
  process.stdout.write(`\n=== harness: server --url ${url} ${selection.join(" ")} ===\n`);
  const harness = spawn(node22, args, { cwd: root, env: { ...process.env, NO_COLOR: "1" }, stdio: ["ignore", "pipe", "inherit"] });
  let out = "";
  harness.stdout.setEncoding("utf8").on("data", (chunk) => {
    out += chunk;
    process.stdout.write(chunk);
  });
  const timer = setTimeout(() => harness.kill("SIGKILL"), RUN_TIMEOUT_MS);
  const code = await new Promise((resolve) => harness.on("close", (c, signal) => resolve(c ?? (signal ? 128 : 1))));
  clearTimeout(timer);
  const ran = [...out.matchAll(/^=== Running scenario: (\S+) ===$/gm)].map((m) => m[1]);
  const checks = checksByScenario(outDir);
  return { code, scenarios: ran.length > 0 ? ran : [...checks.keys()], checks };
}


const options = parseArgs(process.argv.slice(2));
let node22Version;
try {
  node22Version = ensureNode22Tools("conformance-server");
} catch (error) {
  fail(error.message);
}
const expected = JSON.parse(readFileSync(expectedFile, "utf8"));
mkdirSync(resultsDir, { recursive: true });
const baseline = path.join(resultsDir, "expected-failures.yml");
writeFileSync(baseline, `server:\n${Object.keys(expected).map((s) => `  - ${JSON.stringify(s)}\n`).join("")}`);
// Every server scenario, pending ones too: server-sse-polling and json-schema-2020-12 are pending.
const selection = options.scenario ? ["--scenario", options.scenario] : ["--suite", "all"];

const children = [];
process.on("exit", () => {
  for (const child of children) if (child.exitCode === null && child.signalCode === null) child.kill("SIGKILL");
});

const everything = await startChild([process.execPath, "--import", "tsx", everythingServer], {
  cwd: root,
  env: { ...process.env, PORT: "0" },
  pattern: /running on (http:\/\/localhost:(\d+))/,
  stream: "stdout",
  name: "the everything server",
}).catch((error) => fail(error.message));
children.push(everything.child);
// Bound to 127.0.0.1 only; the URL the harness and the command use says so.
const upstream = `http://127.0.0.1:${everything.match[2]}/mcp`;
process.stderr.write(`conformance-server: harness on Node ${node22Version}; everything server at ${upstream}\n`);

const direct = await runHarness(upstream, path.join(resultsDir, "direct"), selection, baseline);

let via;
if (options.via) {
  // A --via command may run bin/subs.cjs (--proxy does), which runs dist/: build it from src/ first.
  const build = spawnSync(process.execPath, [path.join(root, "scripts", "build.mjs")], { stdio: "inherit" });
  if (build.status !== 0) fail("build failed");
  const dir = mkdtempSync(path.join(tmpdir(), "subs-conformance-server-"));
  cleanups.push(() => rmSync(dir, { recursive: true, force: true }));
  // --proxy-stdio: the same server as a local one, which subs starts over stdio (one per proxied session).
  const declared = options.stdio
    ? `[mcp.everything]\ncommand = ${JSON.stringify(process.execPath)}\nargs = ["--import", ${JSON.stringify(import.meta.resolve("tsx"))}, ${JSON.stringify(everythingServer)}]\nenv = { EVERYTHING_STDIO = "1", PORT = "0" }\n`
    : `[mcp.everything]\nurl = ${JSON.stringify(upstream)}\n`;
  writeFileSync(path.join(dir, "substructure.toml"), declared);
  const vars = { tokenFile: path.join(dir, "subs-token"), upstream, root: root.replace(/\/$/, ""), tsx: import.meta.resolve("tsx") };
  // XDG_STATE_HOME: the local server's log (src/mcp/local-server.ts) goes to this run's directory,
  // removed with it, not to the runner's ~/.local/state.
  const env = { ...process.env, BROWSER: "false", NO_COLOR: "1", XDG_STATE_HOME: dir };
  if (options.viaSetup) {
    const argv = words(options.viaSetup, vars);
    const setup = spawnSync(argv[0], argv.slice(1), { cwd: dir, env, encoding: "utf8", timeout: START_TIMEOUT_MS });
    if (setup.status !== 0) fail(`--via-setup exited ${setup.status ?? setup.signal}:\n${setup.stdout}${setup.stderr}`);
  }
  const served = await startChild(words(options.via, vars), { cwd: dir, env, pattern: /serving MCP on (http:\/\/\S+)/, stream: "stderr", name: "the --via command" }).catch((error) =>
    fail(error.message),
  );
  children.push(served.child);
  const token = existsSync(vars.tokenFile) ? readFileSync(vars.tokenFile, "utf8").trim() : "";
  if (!token) fail(`the --via command wrote no token to ${vars.tokenFile}`);
  if (served.output().includes(token)) fail("the --via command printed its token although it wrote it to {tokenFile}");
  const proxy = await startTokenProxy(new URL(served.match[1]), token);
  const proxyUrl = `http://127.0.0.1:${proxy.address().port}${new URL(served.match[1]).pathname}`;
  process.stderr.write(`conformance-server: --via serves ${served.match[1]}; the harness reaches it through ${proxyUrl} (adds the bearer token)\n`);
  via = await runHarness(proxyUrl, path.join(resultsDir, "via"), selection, baseline);
  proxy.close();
  proxy.closeAllConnections();
  via.stopped = await stop(served.child, "the --via command");
  via.stderr = served.output();
  if (options.stdio) {
    // The proxy names the upstream it connected each session to: the local server, never a url.
    const sessions = via.stderr.match(/connected to the local server/g)?.length ?? 0;
    if (sessions === 0 || /connected to http/.test(via.stderr)) fail(`--proxy-stdio: the proxy did not connect to the local server:\n${via.stderr}`);
    process.stderr.write(`conformance-server: --proxy-stdio: ${sessions} proxied sessions, each with the everything server started over stdio\n`);
  }
}
await stop(everything.child, "the everything server");
for (const cleanup of cleanups.splice(0)) cleanup();

// Judging: a scenario passes with no FAILURE and no WARNING check (as the harness's baseline does).
const out = ["", "=== subs conformance: server scenarios ===", ""];
let ok = true;
const scenarios = [...new Set([...direct.scenarios, ...(via?.scenarios ?? [])])];
const verdict = (run, scenario) => {
  const checks = run.checks.get(scenario);
  if (!checks) return { pass: false, problems: ["no checks.json: the scenario did not run to the end"] };
  const problems = problemsOf(checks);
  return { pass: problems.length === 0, problems };
};
const label = (v, scenario) => (v.pass ? (scenario in expected ? "XPASS" : "PASS") : scenario in expected ? "XFAIL" : "FAIL");
for (const scenario of scenarios) {
  const d = verdict(direct, scenario);
  const dl = label(d, scenario);
  if (dl === "FAIL" || dl === "XPASS") ok = false;
  let line = `${dl.padEnd(5)}  ${scenario}`;
  if (via) {
    const v = verdict(via, scenario);
    const same = v.pass === d.pass && JSON.stringify(v.problems) === JSON.stringify(d.problems);
    if (!same) ok = false;
    line = `${dl.padEnd(5)}  ${(same ? "same" : "DIFFERENT").padEnd(9)}  ${scenario}`;
    out.push(line);
    if (!same) for (const p of v.problems) out.push(`        via: ${p}`);
  } else out.push(line);
  if (!d.pass) {
    if (scenario in expected) out.push(`        expected to fail: ${expected[scenario]}`);
    for (const p of d.problems) out.push(`        direct: ${p}`);
  }
}
for (const scenario of Object.keys(expected)) if (!scenarios.includes(scenario) && !options.scenario) out.push(`(expected failure ${scenario} was not part of this run)`);
if (direct.code !== 0) {
  ok = false;
  out.push(`the harness exited ${direct.code} on the direct run: see its output above`);
}
if (via) {
  if (via.code !== 0) {
    ok = false;
    out.push(`the harness exited ${via.code} through --via: see its output above`);
  }
  if (!via.stopped.clean) {
    ok = false;
    out.push(via.stopped.early ? `the --via command had ended before the run did (${via.stopped.code ?? via.stopped.signal}):\n${via.stderr}` : via.stopped.message);
  } else out.push(`the --via command ended on SIGTERM with ${via.stopped.code ?? via.stopped.signal}`);
}
const count = (l) => scenarios.filter((s) => label(verdict(direct, s), s) === l).length;
out.push("", `results: ${path.relative(root, resultsDir)}/ (direct/${via ? ", via/" : ""}: checks.json per scenario)`);
out.push(
  `conformance-server: ${count("PASS")} passed, ${count("FAIL")} failed, ${count("XFAIL")} expected failures, ${count("XPASS")} unexpected passes directly` +
    (via ? `; through --via: ${scenarios.filter((s) => { const d = verdict(direct, s), v = verdict(via, s); return v.pass === d.pass && JSON.stringify(v.problems) === JSON.stringify(d.problems); }).length} of ${scenarios.length} the same` : ""),
);
process.stdout.write(out.join("\n") + "\n");
process.exit(ok ? 0 : 1);
