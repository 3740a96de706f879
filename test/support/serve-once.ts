// `subs deployment serve` from the built CLI, run until it says it is listening (then stopped with
// SIGTERM) or until it exits by itself: for the tests of what it refuses or warns about at start.
// Bounded: a process that neither listens nor exits is killed, and the test fails on its code.
// With `how` "in-process", the same `run()` in this process with a test-built Context: stopped as
// SIGTERM stops the process (src/main.ts aborts ctx.signal), on its `listening` line or at the bound.
import { run } from "../../src/run.ts";
import { runCli, testContext, type How, type RunResult } from "./cli.ts";

export type ServedOnce = RunResult & {
  /** The JSON `listening` log line, when it got that far. */
  listening: Record<string, unknown> | undefined;
};

const BOUND_MS = 60_000;

export function serveOnce(args: string[], options: { cwd: string; env?: Record<string, string>; how?: How }): Promise<ServedOnce> {
  const argv = ["deployment", "serve", "--listen", "127.0.0.1:0", ...args];
  let listening: Record<string, unknown> | undefined;
  if (options.how === "in-process") return servedInProcess(argv, options);
  return runCli(argv, {
    cwd: options.cwd,
    ...(options.env ? { env: options.env } : {}),
    timeoutMs: BOUND_MS,
    onSpawn: (child) => {
      let seen = "";
      child.stdout!.on("data", (d) => {
        seen += d;
        const line = seen.split("\n").find((l) => l.includes('"msg":"listening"'));
        if (line && !listening) {
          listening = JSON.parse(line);
          child.kill("SIGTERM");
        }
      });
    },
  }).then((result) => ({ ...result, listening }));
}

async function servedInProcess(argv: string[], options: { cwd: string; env?: Record<string, string> }): Promise<ServedOnce> {
  const stop = new AbortController();
  const bound = setTimeout(() => stop.abort(), BOUND_MS);
  let listening: Record<string, unknown> | undefined;
  let stdout = "";
  // HOME is `cwd`, as the child gets it.
  const t = testContext({ cwd: options.cwd, env: { HOME: options.cwd, ...options.env }, signal: stop.signal });
  t.ctx.stdout = {
    write: (text: string) => {
      stdout += text;
      const line = stdout.split("\n").find((l) => l.includes('"msg":"listening"'));
      if (line && !listening) {
        listening = JSON.parse(line);
        stop.abort();
      }
    },
  };
  try {
    const code = await run(argv, t.ctx);
    return { code, stdout, stderr: t.stderr(), listening };
  } finally {
    clearTimeout(bound);
  }
}
