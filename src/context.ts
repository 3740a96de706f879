// One object carries every outside effect a command may use. The CLI builds it from the real
// process (processContext); tests build their own (CONTRIBUTING.md, rule 2).

import type { ChildProcess } from "node:child_process";
import { fstatSync, realpathSync, statSync, writeSync } from "node:fs";

export type Output = { write(chunk: string): unknown };

export type Context = {
  stdout: Output;
  stderr: Output;
  /** stdout is a terminal: tables instead of plain lines. */
  stdoutIsTTY: boolean;
  /**
   * The width of stdout's terminal in columns, when stdout is one and its width is known: tables
   * fit it. $COLUMNS, when set, wins over the terminal's own answer. Undefined when piped.
   */
  stdoutColumns?: number;
  /** stderr is a terminal: progress may animate. */
  stderrIsTTY: boolean;
  /**
   * stdin when it is a terminal a person can paste into (the redirected URL under --no-browser),
   * else undefined. Asked only by the one command that can use it: checking for a terminal loads
   * node:tty and building process.stdin a stream, a few ms no other command needs. A
   * function, not a getter, so copying the context (`{ ...ctx }`) does not build it.
   */
  terminalStdin?: () => Promise<NodeJS.ReadableStream | undefined>;
  /** All of stdin, for a command told to read its input there (`mcp call --args -`). */
  readStdin?: () => Promise<string>;
  /**
   * stdin and stdout as byte streams, for a command that speaks a protocol on them instead of
   * printing (MCP over stdio: `subs agent serve`, `subs mcp proxy`). Such a command
   * writes nothing else to stdout: every message of its own goes to stderr.
   */
  protocolStreams?: () => { input: NodeJS.ReadableStream; output: NodeJS.WritableStream };
  /** Colour for human output on stdout (false under NO_COLOR or when piped). */
  color: boolean;
  /** Colour for messages on stderr (decided by stderr's own terminal). */
  stderrColor: boolean;
  env: Readonly<Record<string, string | undefined>>;
  cwd: string;
  /**
   * This installation, as an MCP client must start it: the node binary running subs and subs's own
   * entry script (bin/subs.cjs), both absolute and real (`subs agent connect` writes them). A
   * function: only that command asks, and the script's real path costs a lookup.
   */
  installation?: () => { node: string; subs: string };
  now: () => number;
  fetch: typeof globalThis.fetch;
  /** Opens a URL for a person: `$BROWSER <url>` or the `open` package. */
  openBrowser: (url: string) => Promise<void>;
  /** Aborted on Ctrl-C; long waits listen to it. */
  signal: AbortSignal;
  /**
   * The run's secret values, removed from everything printed (src/secrets.ts; SECURITY.md,
   * "Redaction"). `run` sets it, and its fetch learns every secret a request carries or a token
   * answer issues; code that holds a secret it has not sent yet and may print near one can add it
   * here.
   */
  /**
   * The process groups of the local MCP servers this process started (src/mcp/local-server.ts),
   * while they run. main.ts kills every group still in it when the process exits, however it exits.
   */
  processGroups?: Set<number>;
  /** Under --debug: a line of the run's trace for stderr (scrubbed there). Unset otherwise. */
  debugLog?: (text: string) => void;
  secrets?: {
    add(value: string | null | undefined): void;
    /** `text` with every known secret replaced, for text that leaves by another way than stdout and stderr (an MCP message). */
    scrub(text: string): string;
  };
};

export function colorWanted(env: Context["env"], isTTY: boolean): boolean {
  // https://no-color.org: any non-empty NO_COLOR disables colour; FORCE_COLOR forces it.
  if (env.NO_COLOR !== undefined && env.NO_COLOR !== "") return false;
  if (env.FORCE_COLOR !== undefined && env.FORCE_COLOR !== "0") return true;
  return isTTY && env.TERM !== "dumb";
}

/** The width tables fit: $COLUMNS when it is a positive integer, else what the terminal says. */
export function terminalColumns(env: Context["env"], reported: number | undefined): number | undefined {
  const fromEnv = env.COLUMNS?.trim();
  if (fromEnv && /^\d+$/.test(fromEnv) && Number(fromEnv) > 0) return Number(fromEnv);
  return reported !== undefined && Number.isInteger(reported) && reported > 0 ? reported : undefined;
}

/**
 * How long an opener may run before it counts as having opened the page. `open` resolves once
 * xdg-open is spawned, so an xdg-open that then finds no browser (exit 3) went unnoticed and login
 * waited its whole timeout. xdg-open exits soon after handing the URL to a GUI browser;
 * a terminal browser (www-browser = lynx) keeps running in the foreground, so one still running
 * after this long is taken to be showing the page.
 */
export const OPENER_SETTLE_MS = 3000;

export type OpenerOptions = {
  /** How long a running opener is waited for (OPENER_SETTLE_MS). */
  settleMs?: number;
  signal?: AbortSignal;
};

type OpenFunction = (target: string, options: { wait: boolean }) => Promise<unknown>;

/**
 * The `open` function from what loading the package gave. The bundle require()s the ES module
 * `open` through esbuild's interop helper, which wraps the module namespace once more: the
 * function is then `mod.default.default`, and calling `mod.default` failed on every machine as
 * "r is not a function". Plain ESM import gives `mod.default`.
 */
export function openFunction(mod: unknown): OpenFunction {
  let candidate = mod;
  for (let depth = 0; depth < 3 && typeof candidate !== "function"; depth++) {
    candidate = candidate !== null && typeof candidate === "object" ? (candidate as { default?: unknown }).default : undefined;
  }
  if (typeof candidate !== "function") throw new Error("the `open` package loaded without its open() function");
  return candidate as OpenFunction;
}

/** xdg-open's documented exit codes (xdg-utils, xdg-open(1)), for a message that says why. */
const XDG_OPEN_EXITS: Record<number, string> = {
  1: "syntax error",
  2: "file does not exist",
  3: "no browser found",
  4: "the browser failed",
};

/**
 * Resolves once the opener has run `settleMs` or exited 0, or `signal` aborts (Ctrl-C is the
 * caller's to handle, not to be held up by); rejects, naming the opener, when it could not start
 * or exited otherwise before that.
 */
function settled(child: ChildProcess, name: string, options: OpenerOptions): Promise<void> {
  const outcome = (code: number | null, signal: NodeJS.Signals | null): Error | undefined => {
    if (code === 0) return undefined;
    if (code === null) return new Error(`${name} was stopped by ${signal ?? "a signal"}`);
    const why = name === "xdg-open" ? XDG_OPEN_EXITS[code] : undefined;
    return new Error(`${name} exited with code ${code}${why ? `: ${why}` : ""}`);
  };
  if (child.exitCode !== null || child.signalCode !== null) {
    const error = outcome(child.exitCode, child.signalCode);
    return error ? Promise.reject(error) : Promise.resolve();
  }
  return new Promise<void>((resolve, reject) => {
    const finish = (error: Error | undefined) => {
      clearTimeout(timer);
      child.off("exit", onExit);
      child.off("error", onError);
      options.signal?.removeEventListener("abort", onAbort);
      if (error) reject(error);
      else resolve();
    };
    const onExit = (code: number | null, signal: NodeJS.Signals | null) => finish(outcome(code, signal));
    const onError = (error: Error) => finish(new Error(`${name} could not be started: ${(error as NodeJS.ErrnoException).code ?? error.message}`));
    const onAbort = () => finish(undefined);
    const timer = setTimeout(() => finish(undefined), options.settleMs ?? OPENER_SETTLE_MS);
    child.once("exit", onExit);
    child.once("error", onError);
    if (options.signal?.aborted) onAbort();
    else options.signal?.addEventListener("abort", onAbort, { once: true });
  });
}

/**
 * Opens a URL for a person: `$BROWSER <url>` when set, else the system's opener through the `open`
 * package (xdg-open on Linux, open on macOS). Rejects with a message naming the opener when it
 * could not start or failed at once, so login can say so instead of waiting.
 */
export async function defaultOpenBrowser(env: Context["env"], url: string, options: OpenerOptions = {}): Promise<void> {
  const browser = env.BROWSER?.trim();
  if (browser) {
    const { spawn } = await import("node:child_process");
    // $BROWSER may carry arguments ("firefox --new-window"); the URL is passed as one argv
    // element, never through a shell, so a hostile URL cannot inject commands.
    const [command, ...args] = browser.split(/\s+/) as [string, ...string[]];
    const name = `$BROWSER (${command})`;
    let child;
    try {
      // The browser's own chatter (GPU, D-Bus warnings) would bury our output; it is not ours to show.
      child = spawn(command, [...args, url], { stdio: "ignore", env: { ...env } as NodeJS.ProcessEnv });
    } catch (error) {
      throw new Error(`${name} could not be started: ${error instanceof Error ? error.message : String(error)}`);
    }
    // A browser that keeps running must not keep subs alive after the login ends.
    child.unref();
    return settled(child, name, options);
  }
  const open = openFunction(await import("open"));
  const child = await open(url, { wait: false }).catch((error: unknown) => {
    throw new Error(`the system opener could not be started: ${error instanceof Error ? error.message : String(error)}`);
  });
  // open() gives the launcher's ChildProcess (xdg-open, open, PowerShell); the name shown is its
  // command's, not the path of the copy bundled in node_modules/open.
  if (child === null || typeof child !== "object" || !("once" in child)) return;
  const launcher = child as ChildProcess;
  const name = (launcher.spawnfile || "the system opener").split(/[\\/]/).pop() || "the system opener";
  return settled(launcher, name, options);
}

/**
 * Whether `fd` is a terminal, without loading node:tty (and node:net behind it, ~1.5 ms) for a
 * pipe, a file or /dev/null (`subs apply >/dev/null`): only a character device can be a terminal,
 * and /dev/null is one that is not.
 */
async function isTerminal(fd: number): Promise<boolean> {
  try {
    const stat = fstatSync(fd);
    if (!stat.isCharacterDevice() || isDevNull(stat.rdev)) return false;
  } catch {
    return false;
  }
  const { isatty } = await import("node:tty");
  return isatty(fd);
}

function isDevNull(rdev: number): boolean {
  try {
    return statSync("/dev/null").rdev === rdev;
  } catch {
    return false;
  }
}

export type FdOutputOptions = {
  /** The reader went away (`subs … | head`): main.ts ends the process quietly. */
  onBrokenPipe: () => void;
  write?: (fd: number, bytes: Uint8Array, offset: number, length: number) => number;
  /** Blocks for `ms`; only while a non-blocking pipe is full. */
  pause?: (ms: number) => void;
};

const blockFor = (ms: number) => Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, ms);

/**
 * Output written straight to a file or pipe with write(2), for stdout and stderr when they are not
 * terminals. process.stdout would be a stream (node:stream and its ten modules, ~1.5 ms of every
 * command) around the same synchronous write. Each chunk is written whole before `write`
 * returns, so `process.exit` right after loses nothing: a partial write goes on from where it
 * stopped, and a pipe some other program left non-blocking (EAGAIN when full) is waited on, as
 * pino's sonic-boom does, instead of queued behind the exit.
 */
export function fdOutput(fd: number, options: FdOutputOptions): Output {
  const write = options.write ?? writeSync;
  const pause = options.pause ?? blockFor;
  return {
    write(chunk: string) {
      const bytes = Buffer.from(chunk, "utf8");
      let offset = 0;
      while (offset < bytes.length) {
        try {
          offset += write(fd, bytes, offset, bytes.length - offset);
        } catch (error) {
          const code = (error as NodeJS.ErrnoException).code;
          if (code === "EAGAIN") {
            pause(1);
            continue;
          }
          if (code === "EPIPE") options.onBrokenPipe();
          throw error;
        }
      }
      return true;
    },
  };
}

/**
 * The context of the real process, its requests sent with `fetch` (main.ts gives the one that sends
 * MCP requests over node:http: what sends a request is the caller's to choose, and this file stays
 * below the code that does). `onBrokenPipe` runs when stdout's or stderr's reader has gone
 * (main.ts exits quietly: that is the reader's choice, not an error to report).
 */
export async function processContext(signal: AbortSignal, fetch: typeof globalThis.fetch, onBrokenPipe: () => void = () => {}): Promise<Context> {
  const env = process.env;
  const [stdoutIsTTY, stderrIsTTY] = [await isTerminal(1), await isTerminal(2)];
  // A terminal gets Node's own stream: the spinner redraws through it, and it knows the width.
  const terminal = (stream: NodeJS.WriteStream) =>
    stream.on("error", (error: NodeJS.ErrnoException) => {
      if (error.code === "EPIPE") onBrokenPipe();
      throw error;
    });
  const stdoutColumns = stdoutIsTTY ? terminalColumns(env, process.stdout.columns) : undefined;
  return {
    stdout: stdoutIsTTY ? terminal(process.stdout) : fdOutput(1, { onBrokenPipe }),
    stderr: stderrIsTTY ? terminal(process.stderr) : fdOutput(2, { onBrokenPipe }),
    stdoutIsTTY,
    ...(stdoutColumns !== undefined ? { stdoutColumns } : {}),
    stderrIsTTY,
    terminalStdin: async () => ((await isTerminal(0)) ? process.stdin : undefined),
    readStdin: async () => {
      let text = "";
      for await (const chunk of process.stdin.setEncoding("utf8")) text += chunk;
      return text;
    },
    protocolStreams: () => ({ input: process.stdin, output: process.stdout }),
    color: colorWanted(env, stdoutIsTTY),
    stderrColor: colorWanted(env, stderrIsTTY),
    env,
    cwd: process.cwd(),
    // bin/subs.cjs is the main script whenever main() runs; through a symlink (npm's bin link) its real path.
    installation: () => ({ node: process.execPath, subs: realpathSync(process.argv[1] ?? "") }),
    now: () => Date.now(),
    fetch,
    openBrowser: (url) => defaultOpenBrowser(env, url, { signal }),
    signal,
  };
}
