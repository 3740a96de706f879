// The process entry: builds the real context, runs, and owns the exit. Ctrl-C aborts the
// context's signal so a command can close its listener and leave nothing half-written; a second
// Ctrl-C exits at once.
import { processContext } from "./context.ts";
import { run } from "./cli.ts";

const controller = new AbortController();
process.once("SIGINT", () => {
  controller.abort();
  process.once("SIGINT", () => process.exit(130));
});
const code = await run(process.argv.slice(2), processContext(controller.signal));
process.exitCode = code;
