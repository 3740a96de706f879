// A value a person types at the terminal without it being shown: `subs mcp login` with [remote]
// asks this way for the values of a connection's header variables, which go to the deployment
// (docs/remote.md, "subs mcp login with [remote]"). While it reads, the terminal is in raw mode:
// its echo is off, and nothing typed is written back, not even as stars (their count would tell
// the value's length). Enter ends the value; Backspace takes back a character and Ctrl-U the
// whole line; escape sequences (arrow keys) are dropped. Raw mode delivers Ctrl-C as a byte, not
// a signal: it interrupts, as the run's signal does. The end of input (Ctrl-D on an empty line)
// ends the value as it is.
import { StringDecoder } from "node:string_decoder";
import type { Context } from "../context.ts";
import { interrupted } from "../errors.ts";

const ENTER = new Set(["\r", "\n"]);
const CTRL_C = "\u0003";
const CTRL_D = "\u0004";
const CTRL_U = "\u0015";
const BACKSPACE = new Set(["\u007f", "\b"]);
const ESC = "\u001b";

/**
 * A reader of hidden values from `stdin` (a terminal), one per command: what was typed after one
 * value's Enter (two values pasted at once) is the start of the next. Each call writes `prompt` to
 * stderr, reads one value and ends the line it left open.
 */
export function hiddenInput(ctx: Pick<Context, "stderr" | "signal">, stdin: NodeJS.ReadableStream): (prompt: string) => Promise<string> {
  let pending = "";
  const decoder = new StringDecoder("utf8");
  return (prompt) => {
    if (ctx.signal.aborted) return Promise.reject(interrupted());
    const tty = stdin as Partial<NodeJS.ReadStream>;
    const raw = typeof tty.setRawMode === "function";
    const wasRaw = tty.isRaw === true;
    // The echo goes off before the question shows: nothing typed as soon as it appears is echoed.
    if (raw) tty.setRawMode!(true);
    ctx.stderr.write(prompt);
    return new Promise<string>((resolve, reject) => {
      let value = "";
      let escape: "none" | "esc" | "sequence" = "none";
      let finished = false;
      const done = (result: string | undefined, rest: string) => {
        finished = true;
        pending = rest;
        stdin.off("data", onData);
        stdin.off("end", onEnd);
        ctx.signal.removeEventListener("abort", onAbort);
        if (raw) tty.setRawMode!(wasRaw);
        // Let go of the terminal, or the process would stay alive reading it.
        tty.pause?.();
        // Enter was not echoed: what follows starts on a line of its own.
        ctx.stderr.write("\n");
        if (result === undefined) reject(interrupted());
        else resolve(result);
      };
      const take = (text: string) => {
        const chars = [...text];
        for (const [n, char] of chars.entries()) {
          if (escape === "esc") {
            // CSI (ESC [) and SS3 (ESC O) go on to a final byte; any other ends with this one.
            escape = char === "[" || char === "O" ? "sequence" : "none";
            continue;
          }
          if (escape === "sequence") {
            if (char >= "@" && char <= "~") escape = "none";
            continue;
          }
          const rest = () => chars.slice(n + 1).join("");
          if (ENTER.has(char)) return done(value, rest().replace(/^\n/, ""));
          if (char === CTRL_C) return done(undefined, "");
          if (char === CTRL_D) {
            if (value === "") return done(value, rest());
            continue;
          }
          if (BACKSPACE.has(char)) value = [...value].slice(0, -1).join("");
          else if (char === CTRL_U) value = "";
          else if (char === ESC) escape = "esc";
          // Other control characters are keys, not text (a header value holds none but a tab).
          else if (char >= " " || char === "\t") value += char;
        }
      };
      const onData = (chunk: Buffer | string) => take(typeof chunk === "string" ? chunk : decoder.write(chunk));
      const onEnd = () => done(value, "");
      const onAbort = () => done(undefined, "");
      stdin.on("data", onData);
      stdin.on("end", onEnd);
      ctx.signal.addEventListener("abort", onAbort, { once: true });
      const typedAhead = pending;
      pending = "";
      if (typedAhead) take(typedAhead);
      if (!finished) stdin.resume();
    });
  };
}
