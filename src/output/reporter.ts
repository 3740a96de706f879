import type { Context } from "../context.ts";
import type { Progress, Reporter } from "../report.ts";
import { animates, startProgress } from "./progress.ts";
import { styleFor } from "./style.ts";
import { shown } from "./untrusted.ts";

/** Writes the core's notices to stderr; stdout stays data only. */
export function stderrReporter(ctx: Context): Reporter {
  const style = styleFor(ctx.stderrColor);
  const animated = animates(ctx);
  // One spinner at a time: a wait inside another (a step-up consent while tools are fetched) is
  // shown on the outer spinner's line, and its end as a plain line above it.
  let active: { progress: Progress; text: string } | undefined;
  const progress = (text: string): Progress => {
    const outer = animated ? active : undefined;
    if (outer) {
      outer.progress.update(text);
      const end = (final: string) => {
        ctx.stderr.write(`${shown(final)}\n`);
        outer.progress.update(outer.text);
      };
      return { update: (next) => outer.progress.update(next), succeed: end, fail: end };
    }
    const started = startProgress(ctx, text);
    const entry = { progress: started, text };
    active = entry;
    const release = () => {
      if (active === entry) active = undefined;
    };
    return {
      update: (next) => {
        entry.text = next;
        started.update(next);
      },
      succeed: (final) => {
        release();
        started.succeed(final);
      },
      fail: (final) => {
        release();
        started.fail(final);
      },
    };
  };
  return {
    // Notices quote servers (an issuer, a deployment's message): shown, never interpreted; a notice
    // may span lines of its own (SECURITY.md, "What subs shows of server text").
    info: (message) => ctx.stderr.write(`${shown(message, { multiline: true })}\n`),
    warn: (message) => ctx.stderr.write(`${style.yellow("warning:")} ${shown(message, { multiline: true })}\n`),
    progress,
  };
}
