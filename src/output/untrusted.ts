// Text subs did not write itself (tool names, descriptions and results, progress messages, error
// messages and error_description from servers, issuers, deployment ids, urls and messages) made
// harmless for a terminal and for piped human output (SECURITY.md, "What subs shows of server
// text"). A server's `\r\e[2K` hid a destructive tool's row, OSC 2 retitled the window, OSC 52
// wrote the clipboard, an OSC 8 cut mid-sequence swallowed the rest of the output. Nothing is
// interpreted: every control character is shown as a visible escape, so the sequence can still be
// read, never run. `--json` never goes through here: JSON.stringify already escapes control
// characters, and the document stays exactly what the server sent.

import { UNSAFE, UNSAFE_IN_LINES, visible } from "../text/unsafe.ts";

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
