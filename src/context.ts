// One object carries every outside effect a command may use. The CLI builds it from the real
// process (processContext); tests build their own (DEVELOPERS.md, "How the code should look" 2).

import { fstatSync } from "node:fs";

export type Output = { write(chunk: string): unknown };

export type Context = {
  stdout: Output;
  stderr: Output;
  /** stdout is a terminal: tables instead of plain lines. */
  stdoutIsTTY: boolean;
  /** stderr is a terminal: progress may animate. */
  stderrIsTTY: boolean;
  /**
   * stdin when it is a terminal a person can paste into (the redirected URL under --no-browser),
   * else undefined. Asked only by the one command that can use it: checking for a terminal loads
   * node:tty and building process.stdin a stream, a few ms no other command needs (issue 6). A
   * function, not a getter, so copying the context (`{ ...ctx }`) does not build it.
   */
  terminalStdin?: () => Promise<NodeJS.ReadableStream | undefined>;
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

/**
 * Whether `fd` is a terminal, without loading node:tty (and node:net behind it, ~1.5 ms) for a
 * pipe or a file: only a character device can be a terminal (issue 6).
 */
async function isTerminal(fd: number): Promise<boolean> {
  try {
    if (!fstatSync(fd).isCharacterDevice()) return false;
  } catch {
    return false;
  }
  const { isatty } = await import("node:tty");
  return isatty(fd);
}

/**
 * The context of the real process. `prepare` is called on each of stdout and stderr as it is
 * built (main.ts makes EPIPE quiet there).
 */
export async function processContext(signal: AbortSignal, prepare: (stream: NodeJS.WriteStream) => void = () => {}): Promise<Context> {
  const env = process.env;
  const stdout = process.stdout;
  prepare(stdout);
  // stderr is built on first write when it is not a terminal: a piped stderr is a socket stream
  // (node:net and the stream machinery, ~1.5 ms), and `subs mcp list --json | jq` in a script
  // usually writes nothing there (issue 6). On a terminal the spinner needs the real stream.
  const stderrIsTTY = await isTerminal(2);
  let built: NodeJS.WriteStream | undefined;
  const stderr = () => {
    if (!built) prepare((built = process.stderr));
    return built;
  };
  return {
    stdout,
    stderr: stderrIsTTY ? stderr() : { write: (chunk: string) => stderr().write(chunk) },
    stdoutIsTTY: Boolean(stdout.isTTY),
    stderrIsTTY,
    terminalStdin: async () => ((await isTerminal(0)) ? process.stdin : undefined),
    color: colorWanted(env, Boolean(stdout.isTTY)),
    stderrColor: colorWanted(env, stderrIsTTY),
    env,
    cwd: process.cwd(),
    now: () => Date.now(),
    fetch: globalThis.fetch,
    openBrowser: (url) => defaultOpenBrowser(env, url),
    signal,
  };
}
