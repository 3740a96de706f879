// One object carries every outside effect a command may use. The CLI builds it from the real
// process (processContext); tests build their own (DEVELOPERS.md, "How the code should look" 2).

import { isatty } from "node:tty";

export type Output = { write(chunk: string): unknown };

export type Context = {
  stdout: Output;
  stderr: Output;
  /** stdout is a terminal: tables instead of plain lines. */
  stdoutIsTTY: boolean;
  /** stderr is a terminal: progress may animate. */
  stderrIsTTY: boolean;
  /** stdin is a terminal: we may ask (e.g. paste the redirect URL under --no-browser). */
  stdinIsTTY: boolean;
  /**
   * stdin, built on first call: process.stdin constructs a stream (a few ms), and only a pasted
   * redirect URL ever reads it (issue 6). A function, not a getter, so copying the context
   * (`{ ...ctx }`) does not build it.
   */
  stdin?: () => NodeJS.ReadableStream;
  /** Colour for human output on stdout (false under NO_COLOR or when piped). */
  color: boolean;
  /** Colour for messages on stderr (decided by stderr's own terminal). */
  stderrColor: boolean;
  env: Readonly<Record<string, string | undefined>>;
  cwd: string;
  now: () => number;
  fetch: typeof globalThis.fetch;
  /** Opens a URL for a person: `$BROWSER <url>` or the `open` package. */
  openBrowser: (url: string) => Promise<void>;
  /** Aborted on Ctrl-C; long waits listen to it. */
  signal: AbortSignal;
};

export function colorWanted(env: Context["env"], isTTY: boolean): boolean {
  // https://no-color.org: any non-empty NO_COLOR disables colour; FORCE_COLOR forces it.
  if (env.NO_COLOR !== undefined && env.NO_COLOR !== "") return false;
  if (env.FORCE_COLOR !== undefined && env.FORCE_COLOR !== "0") return true;
  return isTTY && env.TERM !== "dumb";
}

export async function defaultOpenBrowser(env: Context["env"], url: string): Promise<void> {
  const browser = env.BROWSER;
  if (browser) {
    const { spawn } = await import("node:child_process");
    // $BROWSER may carry arguments ("firefox --new-window"); the URL is passed as one argv
    // element, never through a shell, so a hostile URL cannot inject commands.
    const [command, ...args] = browser.split(/\s+/).filter(Boolean);
    if (!command) return;
    await new Promise<void>((resolve, reject) => {
      // The browser's own chatter (GPU, D-Bus warnings) would bury our output; it is not ours to show.
      const child = spawn(command, [...args, url], { stdio: "ignore", env: { ...env } as NodeJS.ProcessEnv });
      child.on("error", reject);
      child.on("spawn", () => resolve());
      child.unref();
    });
    return;
  }
  const { default: open } = await import("open");
  await open(url, { wait: false });
}

export function processContext(signal: AbortSignal): Context {
  const env = process.env;
  return {
    stdout: process.stdout,
    stderr: process.stderr,
    stdoutIsTTY: Boolean(process.stdout.isTTY),
    stderrIsTTY: Boolean(process.stderr.isTTY),
    // isatty(0), not process.stdin.isTTY: touching process.stdin builds a stream (a few ms of every
    // start-up), and only a pasted redirect URL ever reads it (issue 6).
    stdinIsTTY: isatty(0),
    stdin: () => process.stdin,
    color: colorWanted(env, Boolean(process.stdout.isTTY)),
    stderrColor: colorWanted(env, Boolean(process.stderr.isTTY)),
    env,
    cwd: process.cwd(),
    now: () => Date.now(),
    fetch: globalThis.fetch,
    openBrowser: (url) => defaultOpenBrowser(env, url),
    signal,
  };
}
