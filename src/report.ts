/**
 * How core code tells the user something without printing: the command passes a Reporter that
 * writes to stderr (progress, warnings), so stdout stays data only.
 */
export type Reporter = {
  info(message: string): void;
  warn(message: string): void;
  /** A wait the user should see (consent, polling, fetching); ends with succeed or fail. */
  progress(text: string): Progress;
};

export type Progress = {
  update(text: string): void;
  succeed(text: string): void;
  fail(text: string): void;
};

export const silentProgress: Progress = { update() {}, succeed() {}, fail() {} };
/**
 * A spinner while something is fetched, on a terminal only: a fetch is short, and piped output or
 * a CI log gains nothing from two more lines.
 */
export function fetchingProgress(ctx: { stderrIsTTY: boolean; env: Readonly<Record<string, string | undefined>> }, reporter: Reporter, text: string): Progress {
  return ctx.stderrIsTTY && !ctx.env.CI ? reporter.progress(text) : silentProgress;
}

export const silentReporter: Reporter = { info() {}, warn() {}, progress: () => silentProgress };
