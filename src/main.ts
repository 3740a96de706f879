// The process entry, bundled into dist/subs.cjs and started by bin/subs.cjs: builds the real
// context, runs, and owns the exit. Ctrl-C aborts the context's signal so a command can close its
// listener and leave nothing half-written; a second Ctrl-C exits at once.
import { processContext } from "./context.ts";
import { run } from "./cli.ts";

export async function main(argv: readonly string[]): Promise<never> {
  // `subs … | head` closes the pipe early: that is the reader's choice, not an error to report.
  const quietOnBrokenPipe = () => process.exit(process.exitCode ?? 0);
  const controller = new AbortController();
  process.once("SIGINT", () => {
    controller.abort();
    process.once("SIGINT", () => process.exit(130));
  });
  const code = await run(argv, await processContext(controller.signal, quietOnBrokenPipe));
  // The command is done: best-effort work it gave up on (a capped revocation, a DNS lookup) must
  // not hold the process open. Everything printed was written before `write` returned (fdOutput, and
  // Node's terminal streams are synchronous), so nothing is lost.
  process.exit(code);
}

// scripts/warm-code-cache.cjs runs commands in-process with these, so the V8 code cache written
// at build time holds the functions real commands compile (issue 6).
export { processContext, run };
