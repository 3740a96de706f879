// commander's own parse errors ("error: unknown option '--jsn'") in the words and shape of every
// other usage error subs prints, on stderr and as a --json error object.
import type { Context } from "../context.ts";
import { styleFor } from "./style.ts";

/**
 * commander's "error: unknown option '--jsn'\n(Did you mean --json?)" in subs's own words: the
 * message, and a hint (one style for every suggestion, commander's included) that names the
 * suggestion as every other "did you mean" does, then the command's --help. Also the --json error object.
 */
export function parseMistakeJson({ message, path }: { message: string; path: string }): { code: "usage"; message: string; hint: string } {
  const [first = "", ...rest] = message.trim().split("\n");
  const help = `run \`${path} --help\` for its usage and examples`;
  const meant = rest.map((line) => /^\(Did you mean (one of )?(.*)\?\)$/.exec(line.trim())).find((m) => m !== null);
  // A command is named whole (`subs mcp list`), as the hints for habits name it.
  const whole = (word: string) => (first.startsWith("error: unknown command") ? `${path} ${word}` : word);
  const suggestion = meant ? `did you mean ${meant[1] ?? ""}${meant[2]!.split(", ").map((word) => `\`${whole(word)}\``).join(", ")}? ` : "";
  return { code: "usage", message: first.replace(/^error: /, ""), hint: `${suggestion}${help}` };
}

/** A parse mistake on stderr, as renderError writes every other usage error. */
export function parseMistakeText(ctx: Context, mistake: { message: string; path: string }): string {
  const style = styleFor(ctx.stderrColor);
  const { message, hint } = parseMistakeJson(mistake);
  return `${style.red("error:")} ${message}\n${style.dim("hint:")} ${hint}\n`;
}
