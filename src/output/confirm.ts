// A yes/no question to the person at the terminal (issue 15: `subs apply` with [remote] asks before
// a plan that removes). The question itself is written by the caller, on stderr; this reads the
// answer, one line, from the terminal's stdin. Only "y" or "yes" is a yes: Enter alone, anything
// else, or the end of input (Ctrl-D) is the default, no. Ctrl-C ends the wait as an interrupt.
import { interrupted } from "../errors.ts";

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
