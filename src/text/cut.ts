// A server's words shortened for a message. Where the cut falls is marked, so Secrets.scrub
// (src/secrets.ts) can find the start of a secret a cut ended.

/** How a shortened text ends (`cut`, a table's column): Secrets.scrub looks before it for the start of a secret. */
export const CUT = "…";

/** `text` in at most `max` characters and a `…` that marks the cut, for a server's words in a message. */
export function cut(text: string, max: number): string {
  return text.length <= max ? text : `${text.slice(0, max)}${CUT}`;
}
