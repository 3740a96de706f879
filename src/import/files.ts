// Reading another client's config file (issue 15, `subs mcp import`). These files hold secrets
// (tokens pasted into headers), so nothing read here is ever quoted back: a parse error names a
// line and column only. JSON.parse and smol-toml put a piece of the text into their messages, which
// would print the very token subs promises never to print.
import { closeSync, constants, fstatSync, openSync, readSync } from "node:fs";
import { parse as parseToml, TomlError } from "smol-toml";

/**
 * The largest client file read. ~/.claude.json also keeps Claude Code's per-project history and
 * grows to megabytes; this is far above that and far below memory trouble.
 */
export const CLIENT_FILE_MAX_BYTES = 64 * 1024 * 1024;

export type ReadResult = { ok: true; value: unknown } | { ok: false; missing: boolean; problem: string };

/** The parsed file at `file` (JSON with comments, or TOML), or why it could not be read. */
export function readClientFile(file: string, format: "json" | "toml"): ReadResult {
  const text = readBounded(file);
  if (typeof text !== "string") return { ok: false, ...text };
  return format === "toml" ? parseTomlQuietly(text) : parseJsonc(text);
}

/**
 * The text of `file`, or why not; `missing` when nothing is there (a client not installed, not an
 * error). Opened without blocking and checked to be a regular file, as substructure.toml is.
 */
export function readBounded(file: string): string | { missing: boolean; problem: string } {
  let fd: number;
  try {
    // O_NONBLOCK: a FIFO at that path would otherwise block the open forever (src/config/read.ts).
    fd = openSync(file, constants.O_RDONLY | constants.O_NONBLOCK | constants.O_NOCTTY);
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code ?? "error";
    return { missing: code === "ENOENT" || code === "ENOTDIR", problem: `cannot be read (${code})` };
  }
  try {
    const stats = fstatSync(fd);
    if (!stats.isFile()) return { missing: false, problem: "is not a regular file" };
    if (stats.size > CLIENT_FILE_MAX_BYTES) return { missing: false, problem: `is larger than ${CLIENT_FILE_MAX_BYTES / 1024 / 1024} MiB` };
    const buffer = Buffer.alloc(stats.size);
    let length = 0;
    while (length < buffer.length) {
      const n = readSync(fd, buffer, length, buffer.length - length, null);
      if (n === 0) break;
      length += n;
    }
    return buffer.toString("utf8", 0, length);
  } catch (error) {
    return { missing: false, problem: `cannot be read (${(error as NodeJS.ErrnoException).code ?? "error"})` };
  } finally {
    closeSync(fd);
  }
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
  const source = stripJsonc(text.charCodeAt(0) === 0xfeff ? ` ${text.slice(1)}` : text);
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
  const out = text.split("");
  const blank = (from: number, to: number) => {
    for (let k = from; k < to; k++) if (out[k] !== "\n" && out[k] !== "\r") out[k] = " ";
  };
  let lastComma = -1;
  for (let i = 0; i < text.length; i++) {
    const c = text[i]!;
    if (c === '"') {
      lastComma = -1;
      for (i++; i < text.length && text[i] !== '"'; i++) if (text[i] === "\\") i++;
    } else if (c === "/" && text[i + 1] === "/") {
      const end = text.indexOf("\n", i);
      const to = end === -1 ? text.length : end;
      blank(i, to);
      i = to - 1;
    } else if (c === "/" && text[i + 1] === "*") {
      const end = text.indexOf("*/", i + 2);
      const to = end === -1 ? text.length : end + 2;
      blank(i, to);
      i = to - 1;
    } else if (c === ",") lastComma = i;
    else if (c === "}" || c === "]") {
      if (lastComma !== -1) out[lastComma] = " ";
      lastComma = -1;
    } else if (!/\s/.test(c)) lastComma = -1;
  }
  return out.join("");
}
