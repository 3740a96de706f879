// `subs deployment serve` from the built CLI, run until it says it is listening (then stopped with
// SIGTERM) or until it exits by itself: for the tests of what it refuses or warns about at start.
// Bounded: a process that neither listens nor exits is killed, and the test fails on its code.
import { runCli, type RunResult } from "./cli.ts";

export type ServedOnce = RunResult & {
  /** The JSON `listening` log line, when it got that far. */
  listening: Record<string, unknown> | undefined;
};

export function serveOnce(args: string[], options: { cwd: string; env?: Record<string, string> }): Promise<ServedOnce> {
  let listening: Record<string, unknown> | undefined;
  return runCli(["deployment", "serve", "--listen", "127.0.0.1:0", ...args], {
    ...options,
    timeoutMs: 60_000,
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
