// Bounded waits for the tests. Each has a deadline and, past it, fails saying what it waited for,
// so a regression that makes the awaited thing never happen fails the test with a reason instead of
// hanging it (the runner's per-test limit, scripts/test-limits.mjs, is the last resort, and names
// only the test). Deadlines are generous: they bound a hang, they do not measure speed.
import type { ChildProcess } from "node:child_process";

/** The deadline of a wait that names none: far above what any wait takes on a loaded machine. */
export const WAIT_MS = 60_000;

type What = string | (() => string);
const said = (what: What) => (typeof what === "string" ? what : what());

/**
 * Polls `check` every `everyMs` until it returns something other than `undefined` or `false`, and
 * resolves with that; past `ms`, rejects with "timed out after … waiting for <what>".
 */
export async function waitFor<T>(check: () => T | undefined | false | Promise<T | undefined | false>, what: What, ms = WAIT_MS, everyMs = 20): Promise<T> {
  const deadline = Date.now() + ms;
  for (;;) {
    const found = await check();
    if (found !== undefined && found !== false) return found;
    if (Date.now() > deadline) throw new Error(`timed out after ${ms / 1000} s waiting for ${said(what)}`);
    await new Promise((r) => setTimeout(r, everyMs));
  }
}

/** `promise`'s outcome, or past `ms` an error naming `what`. The timer never keeps the process alive. */
export function within<T>(promise: Promise<T>, what: What, ms = WAIT_MS): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`timed out after ${ms / 1000} s waiting for ${said(what)}`)), ms);
    timer.unref();
  });
  return Promise.race([promise, late]).finally(() => clearTimeout(timer));
}

/**
 * Ends `child` as an operator would: `signal` (SIGTERM), then the exit, for at most `ms`. A child
 * that has not exited by then is killed (SIGKILL) and the wait fails, naming `what`: a test that
 * checks a clean shutdown sees its failure instead of waiting for ever. Resolves with the exit code
 * (null when a signal ended it).
 */
export async function stopChild(child: ChildProcess, what: What, options: { signal?: NodeJS.Signals; ms?: number } = {}): Promise<number | null> {
  const exited = exitOf(child);
  if (child.exitCode === null && child.signalCode === null) child.kill(options.signal ?? "SIGTERM");
  try {
    return await within(exited, () => `${said(what)} to exit after ${options.signal ?? "SIGTERM"}`, options.ms ?? WAIT_MS);
  } catch (error) {
    child.kill("SIGKILL");
    await exited;
    throw error;
  }
}

/** Resolves with `child`'s exit code once it has exited (at once when it already has). */
export function exitOf(child: ChildProcess): Promise<number | null> {
  if (child.exitCode !== null || child.signalCode !== null) return Promise.resolve(child.exitCode);
  return new Promise((resolve) => child.once("exit", (code) => resolve(code)));
}
