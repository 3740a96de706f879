// Progress on stderr: a spinner with the elapsed time on a terminal; plain lines when
// stderr is piped or in CI, so logs stay readable and carry no control characters.
import type { Context } from "../context.ts";
import type { Progress } from "../report.ts";
import { shortDuration } from "./time.ts";
import { shown } from "./untrusted.ts";

type SpinnerFactory = typeof import("yocto-spinner").default;
let yoctoSpinner: SpinnerFactory | undefined;

/**
 * Whether progress animates: the same test yocto-spinner makes from process.env (a TTY, TERM not
 * "dumb", no CI). Deciding it here from ctx keeps the two in step, so a spinner we start always
 * animates.
 */
export function animates(ctx: Pick<Context, "stderrIsTTY" | "env">): boolean {
  return ctx.stderrIsTTY && ctx.env.TERM !== "dumb" && !("CI" in ctx.env);
}

/**
 * Loads yocto-spinner; run() awaits it before any command when progress animates. It loads
 * node:tty and node:net with it, ~1.5 ms that a piped run, which never animates, skips.
 */
export async function loadSpinner(): Promise<void> {
  yoctoSpinner ??= (await import("yocto-spinner")).default;
}

export function startProgress(ctx: Pick<Context, "stderr" | "stderrIsTTY" | "stderrColor" | "env" | "now">, given: string): Progress {
  const started = ctx.now();
  // A progress line quotes servers (a tool's progress message): one line, shown, never
  // interpreted; a `\r` in it would redraw the spinner's line.
  const line = (text: string) => shown(text);
  const text = line(given);
  if (!animates(ctx)) {
    ctx.stderr.write(`${text}\n`);
    return {
      update: () => {},
      succeed: (final) => ctx.stderr.write(`${line(final)}\n`),
      fail: (final) => ctx.stderr.write(`${line(final)}\n`),
    };
  }
  if (!yoctoSpinner) throw new Error("startProgress on a terminal before loadSpinner()");
  let current = text;
  const label = () => `${current} ${shortDuration(ctx.now() - started)}`;
  // handleSignals: false — Ctrl-C belongs to the command, which closes what it opened first.
  const spinner = yoctoSpinner({ text: label(), stream: ctx.stderr as NodeJS.WriteStream, handleSignals: false, ...(ctx.stderrColor ? { color: "cyan" as const } : {}) }).start();
  const tick = setInterval(() => (spinner.text = label()), 1000);
  tick.unref();
  const end = (method: "success" | "error", final: string) => {
    clearInterval(tick);
    spinner[method](`${line(final)} (${shortDuration(ctx.now() - started)})`);
  };
  return {
    update: (next) => {
      current = line(next);
      spinner.text = label();
    },
    succeed: (final) => end("success", final),
    fail: (final) => end("error", final),
  };
}
