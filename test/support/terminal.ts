// The real CLI as a person at a terminal runs it: under a pseudo-terminal made by util-linux
// `script` (in Debian's essential packages), so stdin, stdout and stderr are a TTY and what the
// CLI does only on a terminal (spinners, marks, questions) happens. Asynchronous: the test's own
// servers run in the test's process.
import { spawn } from "node:child_process";
import { BIN, ensureBuilt } from "./cli.ts";
import { WAIT_MS } from "./wait.ts";

export type TerminalRun = { code: number | null; screen: string };

/**
 * Runs `subs <argv>` on a pseudo-terminal in `cwd` with `env` (and PATH, HOME = cwd, TERM). `typed`
 * is written to the terminal once `prompt` has appeared on it (a person answering a question).
 * `screen` is what the terminal showed, stdout and stderr together, colours and cursor movement
 * taken out. A run that has not ended within `timeoutMs` (the prompt never came, or the CLI waits
 * on after the answer) is killed, and the promise rejects saying which, with the screen so far.
 */
export function onTerminal(argv: string[], options: { cwd: string; env?: Record<string, string>; typed?: string; prompt?: RegExp; timeoutMs?: number }): Promise<TerminalRun> {
  ensureBuilt();
  const quote = (word: string) => `'${word.replaceAll("'", `'\\''`)}'`;
  const command = [process.execPath, BIN, ...argv].map(quote).join(" ");
  const child = spawn("script", ["-qec", command, "/dev/null"], {
    cwd: options.cwd,
    env: { PATH: process.env.PATH, HOME: options.cwd, TERM: "xterm", ...options.env },
    stdio: ["pipe", "pipe", "pipe"],
  });
  let screen = "";
  let typed = options.typed === undefined;
  child.stdout.on("data", (d) => {
    screen += d;
    if (!typed && (!options.prompt || options.prompt.test(screen))) {
      typed = true;
      child.stdin.write(options.typed!);
    }
  });
  const seen = () => screen.replace(/\x1b\[[0-9;?]*[A-Za-z]/g, "").replaceAll("\r\n", "\n");
  return new Promise((resolve, reject) => {
    const ms = options.timeoutMs ?? WAIT_MS;
    // Killing `script` hangs up its terminal, which ends the CLI on it.
    const timer = setTimeout(() => {
      child.kill("SIGKILL");
      const waiting = typed ? "it to exit" : `the prompt ${options.prompt} (to type ${JSON.stringify(options.typed)})`;
      reject(new Error(`subs ${argv.join(" ")} on a terminal: timed out after ${ms / 1000} s waiting for ${waiting}; the screen:\n${seen()}`));
    }, ms);
    child.on("close", (code) => {
      clearTimeout(timer);
      child.stdin.destroy();
      resolve({ code, screen: seen() });
    });
  });
}
