import type { Context } from "../context.ts";
import type { Reporter } from "../report.ts";
import { startProgress } from "./progress.ts";
import { styleFor } from "./style.ts";

/** Writes the core's notices to stderr; stdout stays data only. */
export function stderrReporter(ctx: Context): Reporter {
  const style = styleFor(ctx.stderrColor);
  return {
    info: (message) => ctx.stderr.write(`${message}\n`),
    warn: (message) => ctx.stderr.write(`${style.yellow("warning:")} ${message}\n`),
    progress: (text) => startProgress(ctx, text),
  };
}
