// Colours for human output. chalk is loaded only when some output may be coloured: piped runs
// and --json (scripts, CI) never pay for its start-up, about 1.5 ms of every command.
import type { ChalkInstance } from "chalk";

/**
 * The one success mark and the one failure mark of everything subs prints: the same
 * glyphs the spinner ends its lines with (yocto-spinner's ✔ and ✖), so a finished step looks the
 * same whether a spinner or a plain line reports it.
 */
export const MARK = { success: "✔", failure: "✖" } as const;

export type Style = Record<"bold" | "dim" | "green" | "red" | "yellow", (text: string) => string>;

const same = (text: string) => text;
const PLAIN: Style = { bold: same, dim: same, green: same, red: same, yellow: same };

let chalk: ChalkInstance | undefined;

/** Loads chalk; run() awaits it before any command when the context allows colour. */
export async function loadStyles(): Promise<void> {
  if (chalk) return;
  const { Chalk } = await import("chalk");
  chalk = new Chalk({ level: 1 });
}

export function styleFor(color: boolean): Style {
  if (!color) return PLAIN;
  // A coloured context always went through run(), which loaded chalk first.
  if (!chalk) throw new Error("styleFor(true) before loadStyles()");
  return chalk;
}
