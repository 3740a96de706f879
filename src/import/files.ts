// Reading another client's config file (`subs mcp import`). These files hold secrets
// (tokens pasted into headers), so nothing read here is ever quoted back: a parse error names a
// line and column only. JSON.parse and smol-toml put a piece of the text into their messages, which
// would print the very token subs promises never to print.
import { JSON_MAX_BYTES, readBounded, TOML_MAX_BYTES } from "../clients/read.ts";
import { parse as parseToml, TomlError } from "smol-toml";

/**
 * The most values (objects, arrays, and the items and members after the first) a JSON client file
 * may hold: a file of tiny values is parsed ten times slower per byte than one of strings, and in
 * one synchronous call that Ctrl-C cannot cut short: a million members of one object, the slowest
 * to parse, take half a second.
 */
export const JSON_MAX_VALUES = 1_000_000;

export type ReadResult = { ok: true; value: unknown } | { ok: false; missing: boolean; problem: string };

/**
 * The parsed file at `file` (JSON with comments, or TOML), or why it could not be read;
 * `onLarge` is told the size of a file of LARGE_FILE_BYTES or more before it is read.
 */
export function readClientFile(file: string, format: "json" | "toml", onLarge?: (bytes: number) => void): ReadResult {
  const text = readBounded(file, format === "toml" ? TOML_MAX_BYTES : JSON_MAX_BYTES, onLarge);
  if (typeof text !== "string") return { ok: false, ...text };
  return format === "toml" ? parseTomlQuietly(text) : parseJsonc(text);
}

function parseTomlQuietly(text: string): ReadResult {
  try {
    return { ok: true, value: parseToml(text, { maxDepth: 64 }) };
  } catch (error) {
    if (error instanceof TomlError) return { ok: false, missing: false, problem: `is not valid TOML (line ${error.line}, column ${error.column})` };
    return { ok: false, missing: false, problem: "is not valid TOML" };
  }
}

/**
 * JSON as VS Code and Cursor write it ("JSON with Comments": // and /* *\/ comments, trailing
 * commas), parsed after blanking those out. Blanked, not removed: positions stay those of the
 * file, so an error can name its line and column.
 */
export function parseJsonc(text: string): ReadResult {
  const scanned = scanJsonc(text.charCodeAt(0) === 0xfeff ? ` ${text.slice(1)}` : text, JSON_MAX_VALUES);
  if (scanned.values > JSON_MAX_VALUES) {
    return { ok: false, missing: false, problem: `holds more than ${JSON_MAX_VALUES.toLocaleString("en-US")} JSON values, the most subs reads` };
  }
  const source = scanned.source;
  try {
    return { ok: true, value: JSON.parse(source) };
  } catch (error) {
    // Only the position is kept from the message (never the text around it).
    const at = /position (\d+)/.exec(error instanceof Error ? error.message : "");
    if (!at) return { ok: false, missing: false, problem: "is not valid JSON" };
    const before = source.slice(0, Number(at[1]));
    const line = before.split("\n").length;
    const column = before.length - before.lastIndexOf("\n");
    return { ok: false, missing: false, problem: `is not valid JSON (line ${line}, column ${column})` };
  }
}

/** `text` with comments and trailing commas replaced by spaces (line breaks kept). */
export function stripJsonc(text: string): string {
  return scanJsonc(text).source;
}

/**
 * One pass over `text`: its comments and trailing commas blanked (`source`; `text` itself when it
 * has none), and how many values it holds, counted up to one past `maxValues`. Strings are
 * skipped with indexOf, so a file of long strings costs little more than its copy; the pass stops
 * as soon as the count is over.
 */
function scanJsonc(text: string, maxValues = Infinity): { source: string; values: number } {
  const blanks: Array<[number, number]> = [];
  let values = 0;
  let lastComma = -1;
  let i = 0;
  while (i < text.length) {
    const c = text.charCodeAt(i);
    if (c === 0x22 /* " */) {
      i = stringEnd(text, i);
      lastComma = -1;
      continue;
    }
    if (c === 0x2f /* / */ && (text.charCodeAt(i + 1) === 0x2f || text.charCodeAt(i + 1) === 0x2a)) {
      const line = text.charCodeAt(i + 1) === 0x2f;
      const end = line ? text.indexOf("\n", i) : text.indexOf("*/", i + 2);
      const to = end === -1 ? text.length : line ? end : end + 2;
      blanks.push([i, to]);
      i = to;
      continue;
    }
    if (c === 0x2c /* , */) {
      lastComma = i;
      if (++values > maxValues) return { source: text, values };
    } else if (c === 0x7b /* { */ || c === 0x5b /* [ */) {
      lastComma = -1;
      if (++values > maxValues) return { source: text, values };
    } else if (c === 0x7d /* } */ || c === 0x5d /* ] */) {
      if (lastComma !== -1) blanks.push([lastComma, lastComma + 1]);
      lastComma = -1;
    } else if (c !== 0x20 && c !== 0x0a && c !== 0x0d && c !== 0x09) lastComma = -1;
    i++;
  }
  if (blanks.length === 0) return { source: text, values };
  // A trailing comma is found after the comments that follow it.
  blanks.sort((a, b) => a[0] - b[0]);
  const parts: string[] = [];
  let at = 0;
  for (const [from, to] of blanks) {
    parts.push(text.slice(at, from), text.slice(from, to).replace(/[^\r\n]/g, " "));
    at = to;
  }
  parts.push(text.slice(at));
  return { source: parts.join(""), values };
}

/** The index after the string that starts at `start` (its closing quote not escaped), or the end of the text. */
function stringEnd(text: string, start: number): number {
  let quote = start;
  for (;;) {
    quote = text.indexOf('"', quote + 1);
    if (quote === -1) return text.length;
    let backslash = quote - 1;
    while (text.charCodeAt(backslash) === 0x5c) backslash--;
    if ((quote - 1 - backslash) % 2 === 0) return quote + 1;
  }
}
