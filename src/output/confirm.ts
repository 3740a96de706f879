// A yes/no question to the person at the terminal: `subs apply` asks before a plan that removes,
// locally and with [remote]. The answer is one line from the terminal's stdin. Only "y" or "yes" is
// a yes: Enter alone, anything else, or the end of input (Ctrl-D) is the default, no. Ctrl-C ends
// the wait as an interrupt.
import type { Context } from "../context.ts";
import { declined, interrupted } from "../errors.ts";
import { shown } from "./untrusted.ts";

/**
 * On a terminal (stdin and stderr), a plan that removes something asks first: a removed
 * credential is gone for good (revoked at its server), and getting it back costs a new consent.
 * `yes` (`--yes`), or no terminal (CI, a script), goes on without asking. A "no" changes nothing
 * and fails with `declined` (exit 1). `removed` and `from` may be a server's words: shown.
 */
export async function confirmRemovals(
  ctx: Pick<Context, "stderr" | "stderrIsTTY" | "terminalStdin" | "signal">,
  options: { removed: readonly string[]; from: string; yes: boolean },
): Promise<void> {
  if (options.yes || !ctx.stderrIsTTY || options.removed.length === 0) return;
  const stdin = await ctx.terminalStdin?.();
  if (!stdin) return;
  ctx.stderr.write(`This removes from ${shown(options.from)}:\n${options.removed.map((r) => `  - ${shown(r)}\n`).join("")}Apply? [y/N] `);
  if (await readYes(stdin, ctx.signal)) return;
  const where = /^https?:\/\//.test(options.from) ? `on ${options.from}` : `in ${options.from}`;
  throw declined(`not applied: nothing was changed ${where}`, { hint: "`subs apply --yes` applies without asking; `subs apply --dry-run` shows the plan only" });
}

export function readYes(stdin: NodeJS.ReadableStream, signal: AbortSignal): Promise<boolean> {
  if (signal.aborted) return Promise.reject(interrupted());
  return new Promise((resolve, reject) => {
    let buffer = "";
    const done = (answer: boolean | undefined) => {
      stdin.off("data", onData);
      stdin.off("end", onEnd);
      signal.removeEventListener("abort", onAbort);
      // Let go of the terminal, or the process would stay alive reading it.
      (stdin as NodeJS.ReadStream).pause?.();
      if (answer === undefined) reject(interrupted());
      else resolve(answer);
    };
    const onData = (chunk: Buffer | string) => {
      buffer += chunk.toString();
      const newline = buffer.indexOf("\n");
      if (newline !== -1) done(/^y(es)?$/i.test(buffer.slice(0, newline).trim()));
    };
    const onEnd = () => done(false);
    const onAbort = () => done(undefined);
    stdin.on("data", onData);
    stdin.on("end", onEnd);
    signal.addEventListener("abort", onAbort, { once: true });
    (stdin as NodeJS.ReadStream).resume?.();
  });
}
