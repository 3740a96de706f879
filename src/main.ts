// The process entry, bundled into dist/subs.cjs and started by bin/subs.cjs: builds the real
// context, runs, and owns the exit. Ctrl-C (SIGINT), and SIGTERM (a cancelled CI job, a
// supervisor), abort the context's signal so a command can close its listener and leave nothing
// half-written; a second one exits at once. Exit 130 after SIGINT, 143 (128 + 15) after SIGTERM.
import { processContext as contextOfProcess, type Context } from "./context.ts";
import { run } from "./run.ts";

let directFetch: typeof globalThis.fetch | undefined;
/**
 * The process's fetch: what follows its own redirects (MCP, OAuth, a deployment) over node:http
 * (src/http/mcp-fetch.ts), anything else through Node's fetch. Loaded on the first request: most
 * runs (`subs mcp list`) make none.
 */
const processFetch: typeof globalThis.fetch = async (input, init) => {
  directFetch ??= (await import("./http/mcp-fetch.ts")).directFetch(globalThis.fetch);
  return directFetch(input, init);
};

/** The context of the real process, with the process's fetch. */
export const processContext = (signal: AbortSignal, onBrokenPipe?: () => void): Promise<Context> => contextOfProcess(signal, processFetch, onBrokenPipe);

export async function main(argv: readonly string[]): Promise<never> {
  // `subs … | head` closes the pipe early: that is the reader's choice, not an error to report.
  const quietOnBrokenPipe = () => process.exit(process.exitCode ?? 0);
  const controller = new AbortController();
  let terminated = false;
  const stop = (signal: "SIGINT" | "SIGTERM", code: number) =>
    process.once(signal, () => {
      terminated ||= signal === "SIGTERM";
      controller.abort();
      process.once(signal, () => process.exit(code));
    });
  stop("SIGINT", 130);
  stop("SIGTERM", 143);
  const ctx = await processContext(controller.signal, quietOnBrokenPipe);
  // Local MCP servers run in process groups of their own (src/mcp/local-server.ts): a command ends
  // them as it finishes, and any still running when this process exits, by whatever way (a second
  // Ctrl-C, a crash, process.exit below), are killed with it.
  const groups = new Set<number>();
  ctx.processGroups = groups;
  process.once("exit", () => {
    for (const pid of groups) {
      try {
        process.kill(-pid, "SIGKILL");
      } catch {}
    }
  });
  const ran = await run(argv, ctx);
  // run() answers an abort with 130, Ctrl-C's code; a SIGTERM ends the same way with its own.
  const code = ran === 130 && terminated ? 143 : ran;
  // The command is done: best-effort work it gave up on (a capped revocation, a DNS lookup) must
  // not hold the process open. Everything printed was written before `write` returned (fdOutput, and
  // Node's terminal streams are synchronous), so nothing is lost.
  process.exit(code);
}

// scripts/warm-code-cache.cjs runs commands in-process with these (and processContext, above), so
// the V8 code cache written at build time holds the functions real commands compile (docs/speed.md,
// "What makes start-up cheap"). openStore seeds the db of a long list; loaded on that call, as a command loads the
// store, so start-up never initializes it.
export { run };
export const openStore = async (...options: Parameters<typeof import("./store/store.ts").openStore>) => (await import("./store/store.ts")).openStore(...options);
