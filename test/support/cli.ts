// Runs subs the two ways tests need: in-process with a test-built Context (fast, most cases),
// and as the real CLI in a child process (end-to-end). The child runs bin/subs.cjs, the file users
// run; dist/ is rebuilt here first whenever a source file is newer, so no test needs a manual build.
import { spawn, spawnSync } from "node:child_process";
import { mkdirSync, readdirSync, rmdirSync, statSync } from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";
import type { Context } from "../../src/context.ts";
import { directFetch } from "../../src/http/mcp-fetch.ts";
import { run } from "../../src/run.ts";
import { browserCommand, consentingBrowser } from "./browser.ts";

export const REPO = fileURLToPath(new URL("../..", import.meta.url));
export const BIN = path.join(REPO, "bin", "subs.cjs");

export type RunResult = { code: number; stdout: string; stderr: string };

export type TestContextOptions = Partial<Omit<Context, "stdout" | "stderr">> & { cwd: string };

// The fetch the real process gives its context (src/main.ts): what follows its own redirects over
// node:http (src/http/mcp-fetch.ts), the rest through Node's fetch. With Node's fetch alone, an
// in-process run's requests, redirects and failures would take another path than the CLI's.
const processFetch = directFetch(globalThis.fetch);

/** A Context for in-process runs: captured output, no terminal, an empty environment by default, the process's fetch. */
export function testContext(options: TestContextOptions) {
  let stdout = "";
  let stderr = "";
  const opened: string[] = [];
  const ctx: Context = {
    stdout: { write: (s: string) => (stdout += s) },
    stderr: { write: (s: string) => (stderr += s) },
    stdoutIsTTY: false,
    stderrIsTTY: false,
    color: false,
    stderrColor: false,
    env: {},
    installation: () => ({ node: process.execPath, subs: BIN }),
    now: () => Date.now(),
    fetch: processFetch,
    openBrowser: async (url) => {
      opened.push(url);
    },
    signal: new AbortController().signal,
    ...options,
  };
  return { ctx, stdout: () => stdout, stderr: () => stderr, opened };
}

export async function runInProcess(argv: string[], options: TestContextOptions): Promise<RunResult> {
  const t = testContext(options);
  const code = await run(argv, t.ctx);
  return { code, stdout: t.stdout(), stderr: t.stderr() };
}

function newestMtime(dir: string): number {
  let newest = 0;
  for (const entry of readdirSync(dir, { withFileTypes: true })) {
    const full = path.join(dir, entry.name);
    newest = Math.max(newest, entry.isDirectory() ? newestMtime(full) : statSync(full).mtimeMs);
  }
  return newest;
}

let built = false;
/** Rebuilds dist/ when src/ changed since the last build; test files running at once take turns. */
export function ensureBuilt(): void {
  if (built) return;
  const lock = path.join(REPO, ".build-lock");
  const deadline = Date.now() + 60_000;
  for (;;) {
    try {
      mkdirSync(lock);
      break;
    } catch {
      if (Date.now() > deadline) throw new Error("timed out waiting for another test process to build dist/");
      spawnSync("sleep", ["0.1"]);
    }
  }
  try {
    let distTime = 0;
    try {
      distTime = statSync(path.join(REPO, "dist", "subs.cjs")).mtimeMs;
    } catch {}
    const sourceTime = Math.max(newestMtime(path.join(REPO, "src")), statSync(path.join(REPO, "package.json")).mtimeMs);
    if (sourceTime > distTime) {
      const result = spawnSync(process.execPath, [path.join(REPO, "scripts", "build.mjs")], { encoding: "utf8" });
      if (result.status !== 0) throw new Error(`build failed: ${result.stderr}`);
    }
    built = true;
  } finally {
    rmdirSync(lock);
  }
}

export type ChildOptions = {
  cwd: string;
  env?: Record<string, string | undefined>;
  input?: string;
  timeoutMs?: number;
  /** Called with the child once spawned (to send signals, read output as it comes). */
  onSpawn?: (child: ReturnType<typeof spawn>) => void;
};

/** The environment a run of subs starts from here, child or in-process: PATH, and `home` as HOME. */
export const baseEnv = (home: string): Record<string, string> => ({ PATH: process.env.PATH ?? "/usr/bin:/bin", HOME: home });

/** Runs the real CLI (`bin/subs.cjs`) as a child process with a clean environment. */
export function runCli(argv: string[], options: ChildOptions): Promise<RunResult> {
  ensureBuilt();
  return new Promise((resolve, reject) => {
    const env = baseEnv(options.cwd);
    for (const [k, v] of Object.entries(options.env ?? {})) if (v !== undefined) env[k] = v;
    const child = spawn(process.execPath, [BIN, ...argv], { cwd: options.cwd, env, stdio: ["pipe", "pipe", "pipe"] });
    let stdout = "";
    let stderr = "";
    child.stdout.on("data", (d) => (stdout += d));
    child.stderr.on("data", (d) => (stderr += d));
    const timer = setTimeout(() => child.kill("SIGKILL"), options.timeoutMs ?? 30_000);
    child.on("error", reject);
    child.on("close", (code, signal) => {
      clearTimeout(timer);
      resolve({ code: code ?? (signal === "SIGINT" ? 130 : 128), stdout, stderr });
    });
    options.onSpawn?.(child);
    if (options.input !== undefined) child.stdin.end(options.input);
    else child.stdin.end();
  });
}

/** How a test runs subs: the built CLI (bin/subs.cjs) as a child, as a person does, or `run()` in this process. */
export type How = "cli" | "in-process";

/**
 * Runs subs as `how` says, in `cwd` with `env` either way. With `consents`, a person consents to
 * what a login opens: the child's $BROWSER is the redirect-following script (browser.mjs), the
 * in-process opener does what that script does (consentingBrowser), and SUBS_TEST_BROWSER=ignore in
 * `env` makes either only record the URL. `onSpawn` is given the child, when there is one.
 */
export function runAs(
  how: How,
  argv: string[],
  options: { cwd: string; env?: Record<string, string | undefined>; consents?: boolean; onSpawn?: ChildOptions["onSpawn"] },
): Promise<RunResult> {
  const { cwd, env = {}, consents = false, onSpawn } = options;
  if (how === "cli") return runCli(argv, { cwd, env: consents ? { BROWSER: browserCommand(), ...env } : env, ...(onSpawn ? { onSpawn } : {}) });
  const follows = consents && env.SUBS_TEST_BROWSER !== "ignore";
  return runInProcess(argv, { cwd, env, ...(follows ? { openBrowser: consentingBrowser() } : {}) });
}

/**
 * An `onSpawn` that sends one signal when stderr first shows `marker`. One only: a second Ctrl-C
 * means "exit now" and would skip the clean shutdown a test is checking.
 */
export function signalOnce(marker: string | RegExp, signal: NodeJS.Signals = "SIGINT") {
  /** `stderrBefore`: what stderr had shown when the signal was sent (what came after is the run's answer to it). */
  const state: { sent: boolean; sentAt?: number; stderrBefore?: string } = { sent: false };
  const onSpawn = (child: ReturnType<typeof spawn>) => {
    let stderr = "";
    child.stderr?.on("data", (d) => {
      stderr += d;
      if (!state.sent && (typeof marker === "string" ? stderr.includes(marker) : marker.test(stderr))) {
        state.sent = true;
        state.sentAt = Date.now();
        state.stderrBefore = stderr;
        child.kill(signal);
      }
    });
  };
  return { onSpawn, state };
}
