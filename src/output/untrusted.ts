// Text subs did not write itself (tool names, descriptions and results, progress messages, error
// messages and error_description from servers, issuers, deployment ids, urls and messages) made
// harmless for a terminal and for piped human output (issue 14, item 1). A server's `\r\e[2K`
// hid a destructive tool's row, OSC 2 retitled the window, OSC 52 wrote the clipboard, an OSC 8
// cut mid-sequence swallowed the rest of the output. Nothing is interpreted: every control
// character is shown as a visible escape, so the sequence can still be read, never run.
// `--json` never goes through here: JSON.stringify already escapes control characters, and the
// document stays exactly what the server sent.

/**
 * Unicode format characters that reorder or hide text (Trojan Source, CVE-2021-42574): bidi
 * embeddings, overrides and isolates (U+202A–202E, U+2066–2069), the directional marks U+200E,
 * U+200F, U+061C, and the line and paragraph separators U+2028/2029 some terminals break on.
 */
const INVISIBLE = /[\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069\u2028\u2029]/;

/** Any character `visible` escapes (the `u` flag matches a surrogate only when it is unpaired). */
const UNSAFE = /[\x00-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069\u2028\u2029\ud800-\udfff]/u;
const UNSAFE_IN_LINES = /[\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069\u2028\u2029\ud800-\udfff]/u;

const NAMED: Record<string, string> = { "\n": "\\n", "\r": "\\r", "\t": "\\t" };

/** The visible form of one code point: itself when harmless, else an escape such as `\x1b` or `\u202e`. */
function visible(char: string, multiline: boolean): string {
  const code = char.codePointAt(0)!;
  if (multiline && (char === "\n" || char === "\t")) return char;
  // C0 controls, DEL and C1 controls (0x80–0x9f: 0x9b is a one-byte CSI, 0x9d a one-byte OSC).
  if (code < 0x20 || (code >= 0x7f && code <= 0x9f)) return NAMED[char] ?? `\\x${code.toString(16).padStart(2, "0")}`;
  if (INVISIBLE.test(char)) return `\\u${code.toString(16).padStart(4, "0")}`;
  // A lone surrogate (an unpaired half of a UTF-16 pair) is not text; a cut could leave one.
  if (code >= 0xd800 && code <= 0xdfff) return `\\u${code.toString(16)}`;
  return char;
}

export type ShownOptions = {
  /**
   * Keep line breaks and tabs as they are, for text shown as a block of its own lines (a tool's
   * result in `mcp call`). Everywhere else a field is one line, and `\n` is shown as `\n`.
   */
  multiline?: boolean;
  /** At most this many code points shown, `…` included; the cut falls between visible forms, never inside one. */
  max?: number;
};

/** `text` as it may be shown on a terminal or in piped human output: see the file's header. */
export function shown(text: string, options: ShownOptions = {}): string {
  const multiline = options.multiline ?? false;
  // The common case, and a tool's long result: nothing to escape, nothing to cut.
  if (!(multiline ? UNSAFE_IN_LINES : UNSAFE).test(text) && (options.max === undefined || text.length <= options.max)) return text;
  // for…of walks code points, so a surrogate pair stays whole and a cut never splits one; the cut
  // is made on the visible forms, so it never falls inside an escape either.
  const forms: string[] = [];
  let total = 0;
  for (const char of text) {
    const form = visible(char, multiline);
    forms.push(form);
    total += form === char ? 1 : form.length;
  }
  const max = options.max;
  if (max === undefined || total <= max) return forms.join("");
  let out = "";
  let length = 0;
  for (const form of forms) {
    const formLength = [...form].length;
    if (length + formLength > max - 1) break;
    out += form;
    length += formLength;
  }
  return `${out}…`;
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
