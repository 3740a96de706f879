// The characters a terminal would act on or hide rather than show, and the visible form of each:
// the file refuses them (config/), and the output layer escapes them (output/untrusted.ts, which
// says why). One definition, so what is refused and what is escaped cannot differ.

/**
 * Unicode format characters that reorder or hide text (Trojan Source, CVE-2021-42574): bidi
 * embeddings, overrides and isolates (U+202A–202E, U+2066–2069), the directional marks U+200E,
 * U+200F, U+061C, and the line and paragraph separators U+2028/2029 some terminals break on.
 */
const INVISIBLE = /[\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069\u2028\u2029]/;

/** Any character `visible` escapes (the `u` flag matches a surrogate only when it is unpaired). */
export const UNSAFE = /[\x00-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069\u2028\u2029\ud800-\udfff]/u;
export const UNSAFE_IN_LINES = /[\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069\u2028\u2029\ud800-\udfff]/u;

const NAMED: Record<string, string> = { "\n": "\\n", "\r": "\\r", "\t": "\\t" };

/** The visible form of one code point: itself when harmless, else an escape such as `\x1b` or `\u202e`. */
export function visible(char: string, multiline: boolean): string {
  const code = char.codePointAt(0)!;
  if (multiline && (char === "\n" || char === "\t")) return char;
  // C0 controls, DEL and C1 controls (0x80–0x9f: 0x9b is a one-byte CSI, 0x9d a one-byte OSC).
  if (code < 0x20 || (code >= 0x7f && code <= 0x9f)) return NAMED[char] ?? `\\x${code.toString(16).padStart(2, "0")}`;
  if (INVISIBLE.test(char)) return `\\u${code.toString(16).padStart(4, "0")}`;
  // A lone surrogate (an unpaired half of a UTF-16 pair) is not text; a cut could leave one.
  if (code >= 0xd800 && code <= 0xdfff) return `\\u${code.toString(16)}`;
  return char;
}

/**
 * `text` with each character `hasUnsafe` finds written as its visible form (what output/untrusted.ts
 * shows for it): for naming a refused key or value in a message, in the notation the message gives
 * its character in.
 */
export function escaped(text: string): string {
  if (!UNSAFE.test(text)) return text;
  let out = "";
  for (const char of text) out += visible(char, false);
  return out;
}

/** Whether `text` holds any character `shown` would escape: one test of the text, for every string of the file on every run. */
export const hasUnsafe = (text: string): boolean => UNSAFE.test(text);

/** The first character `shown` would escape in `text`, with its visible form (for refusing such strings in the file). */
export function firstUnsafe(text: string): { index: number; form: string } | undefined {
  if (!UNSAFE.test(text)) return undefined;
  let index = 0;
  for (const char of text) {
    const form = visible(char, false);
    if (form !== char) return { index, form };
    index += char.length;
  }
  return undefined;
}
