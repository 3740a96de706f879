// The real CLI as a person at a terminal runs it: under a pseudo-terminal made by util-linux
// `script` (in Debian's essential packages), so stdin, stdout and stderr are a TTY and what the
// CLI does only on a terminal (spinners, marks, questions) happens. Asynchronous: the test's own
// servers run in the test's process.
import { spawn } from "node:child_process";
import { BIN, ensureBuilt } from "./cli.ts";

export type TerminalRun = { code: number | null; screen: string };

/**
 * Runs `subs <argv>` on a pseudo-terminal in `cwd` with `env` (and PATH, HOME = cwd, TERM). `typed`
 * is written to the terminal once `prompt` has appeared on it (a person answering a question).
 * `screen` is what the terminal showed, stdout and stderr together, colours and cursor movement
 * taken out.
 */
export function onTerminal(argv: string[], options: { cwd: string; env?: Record<string, string>; typed?: string; prompt?: RegExp }): Promise<TerminalRun> {
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
  return new Promise((resolve) =>
    child.on("close", (code) => {
      child.stdin.destroy();
      resolve({ code, screen: screen.replace(/\x1b\[[0-9;?]*[A-Za-z]/g, "").replaceAll("\r\n", "\n") });
    }),
  );
}
