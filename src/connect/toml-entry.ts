// One `[mcp_servers.<name>]` table in Codex's config.toml, edited as text with the section scanner
// `subs mcp add` uses (src/config/edit.ts): a TOML library would rewrite the whole file, and
// Codex's own `mcp add` re-serializes every MCP table, comments lost. A new table goes after the
// last MCP table when a blank line follows it, else at the end of the file, so that cutting it
// again (with the one blank line that separated it) leaves every byte as it was, a file without a
// final newline included.
import { parse, TomlError } from "smol-toml";
import { ownedRange, scanLines, type Line } from "../config/edit.ts";
import { FileShapeError } from "./json-entry.ts";

const GROUP = "mcp_servers";

/** A value subs writes: a string, or an array of strings and inline tables (`env_vars` may hold `{ name = "B", source = "local" }`). */
export type TomlValue = string | readonly (string | Readonly<Record<string, string>>)[];

/** The file parsed, or a FileShapeError naming only a line and column (the text may hold tokens). */
function parsed(text: string): Record<string, unknown> {
  try {
    return parse(text, { maxDepth: 64 }) as Record<string, unknown>;
  } catch (error) {
    if (error instanceof TomlError) throw new FileShapeError(`is not valid TOML (line ${error.line}, column ${error.column})`);
    throw new FileShapeError("is not valid TOML");
  }
}

/** The table `[mcp_servers.<name>]` as parsed, or undefined when absent. */
export function readTable(text: string, name: string): { value: unknown } | undefined {
  const servers = parsed(text)[GROUP];
  if (servers === undefined) return undefined;
  if (typeof servers !== "object" || servers === null || Array.isArray(servers)) throw new FileShapeError(`has \`${GROUP}\` that is not a table`);
  return Object.hasOwn(servers, name) ? { value: (servers as Record<string, unknown>)[name] } : undefined;
}

const bareKey = (key: string) => (/^[A-Za-z0-9_-]+$/.test(key) ? key : JSON.stringify(key));
// JSON's string escapes are all TOML basic-string escapes.
const tomlString = (value: string | Readonly<Record<string, string>>): string =>
  typeof value === "string" ? JSON.stringify(value) : `{ ${Object.entries(value).map(([k, v]) => `${bareKey(k)} = ${JSON.stringify(v)}`).join(", ")} }`;
const tomlValue = (value: TomlValue) => (typeof value === "string" ? JSON.stringify(value) : `[${value.map(tomlString).join(", ")}]`);
const eolOf = (text: string) => (text.includes("\r\n") ? "\r\n" : "\n");
const lineText = (text: string, line: Line) => text.slice(line.start, line.end);
const isExactBlank = (text: string, line: Line | undefined) => line !== undefined && /^\r?\n$/.test(lineText(text, line));

/** The indexes of the header lines of `[mcp_servers.<name>]` and of its sub-tables. */
const tableHeaders = (lines: readonly Line[], name: string) =>
  lines.flatMap((line, n) => (line.header && line.header.length >= 2 && line.header[0] === GROUP && line.header[1] === name ? [n] : []));

type Cut = { from: number; to: number; content: string };
const applied = (text: string, edits: Cut[]) => [...edits].sort((a, b) => b.from - a.from).reduce((t, e) => t.slice(0, e.from) + e.content + t.slice(e.to), text);

/**
 * `text` with `[mcp_servers.<name>]` holding `value`'s keys. A new table is added (see above); an
 * existing one defined by its header has each of these keys replaced where it is, or added after
 * its last key, its other keys and sub-tables kept. `replace`: the existing table and its
 * sub-tables are cut first (an entry subs did not write, overwritten with --force).
 */
export function putTable(text: string, name: string, value: Readonly<Record<string, TomlValue>>, options: { replace?: boolean } = {}): string {
  const existing = readTable(text, name);
  if (existing !== undefined && options.replace) return putTable(deleteTable(text, name), name, value);
  const eol = eolOf(text);
  const lines = scanLines(text);
  const keyLine = (key: string) => `${bareKey(key)} = ${tomlValue(value[key]!)}`;
  if (existing === undefined) {
    const block = [`[${GROUP}.${bareKey(name)}]`, ...Object.keys(value).map(keyLine)].join(eol) + eol;
    return insertTable(text, lines, block, eol);
  }
  const header = lines.findIndex((line) => line.header?.length === 2 && line.header[0] === GROUP && line.header[1] === name);
  if (header === -1) throw new FileShapeError(`declares \`${GROUP}.${name}\` without its own [${GROUP}.${name}] table (inline or with dotted keys)`);
  let next = header + 1;
  while (next < lines.length && lines[next]!.kind !== "header") next++;
  // Each key of the table: its first line, and the lines its value goes on over.
  const items: Array<{ key: string | undefined; from: number; to: number }> = [];
  for (let n = header + 1; n < next; n++) {
    const line = lines[n]!;
    if (line.kind !== "content" || line.continued) continue;
    let end = n + 1;
    while (end < next && lines[end]!.continued) end++;
    items.push({ key: keyOfLine(lineText(text, line)), from: line.start, to: lines[end - 1]!.end });
  }
  const edits: Cut[] = [];
  const missing: string[] = [];
  for (const key of Object.keys(value)) {
    const item = items.find((i) => i.key === key);
    if (!item) {
      missing.push(key);
      continue;
    }
    const ending = /\r?\n$/.exec(text.slice(item.from, item.to))?.[0] ?? "";
    const wanted = keyLine(key) + ending;
    // A key whose value is already this one is left as written (its spacing, its comment).
    if (sameValue((existing.value as Record<string, unknown> | undefined)?.[key], value[key]!)) continue;
    if (text.slice(item.from, item.to) !== wanted) edits.push({ from: item.from, to: item.to, content: wanted });
  }
  if (missing.length > 0) {
    const at = items.length > 0 ? items[items.length - 1]!.to : lines[header]!.end;
    const open = at === text.length && !text.endsWith("\n");
    const added = missing.map(keyLine);
    edits.push({ from: at, to: at, content: open ? eol + added.join(eol) : added.join(eol) + eol });
  }
  return applied(text, edits);
}

const sameValue = (a: unknown, b: TomlValue) => JSON.stringify(a) === JSON.stringify(b);

/** The key a `key = value` line starts with (bare or quoted, not dotted), else undefined. */
function keyOfLine(line: string): string | undefined {
  const m = /^[ \t]*(?:"((?:[^"\\]|\\.)*)"|'([^']*)'|([A-Za-z0-9_-]+))[ \t]*=/.exec(line);
  if (!m) return undefined;
  if (m[1] !== undefined) {
    try {
      return JSON.parse(`"${m[1]}"`) as string;
    } catch {
      return undefined;
    }
  }
  return m[2] ?? m[3];
}

/** `block` (complete lines) put in as a new table: after the last MCP table when a blank line follows it, else at the end. */
function insertTable(text: string, lines: readonly Line[], block: string, eol: string): string {
  if (text.length === 0) return block;
  let last = -1;
  for (let n = 0; n < lines.length; n++) if (lines[n]!.header?.[0] === GROUP) last = n;
  if (last !== -1) {
    const { to } = ownedRange(lines, last);
    if (to < lines.length && lines[to]!.kind === "blank") {
      const at = lines[to]!.start;
      return text.slice(0, at) + eol + block + text.slice(at);
    }
  }
  // At the end: a file without a final newline stays without one.
  if (!text.endsWith("\n")) return text + eol + eol + block.slice(0, block.length - eol.length);
  return text + eol + block;
}

/**
 * `text` without `[mcp_servers.<name>]` and its sub-tables (unchanged when absent), each cut with
 * the one blank line insertTable put beside it: the one after it when that is a bare line break,
 * else, the one before it (and at the end of a file without a final newline, the line break
 * before that too).
 */
export function deleteTable(text: string, name: string): string {
  if (readTable(text, name) === undefined) return text;
  const lines = scanLines(text);
  const headers = tableHeaders(lines, name);
  if (headers.length === 0) throw new FileShapeError(`declares \`${GROUP}.${name}\` without its own [${GROUP}.${name}] table (inline or with dotted keys)`);
  const cuts: Cut[] = [];
  for (const h of headers) {
    const { from, to } = ownedRange(lines, h);
    let start = lines[from]!.start;
    let end = to < lines.length ? lines[to]!.start : text.length;
    if (to < lines.length && isExactBlank(text, lines[to])) end = lines[to]!.end;
    else if (isExactBlank(text, lines[from - 1])) {
      start = lines[from - 1]!.start;
      const before = lines[from - 2];
      if (to === lines.length && !text.endsWith("\n") && before) start = before.end - (/\r?\n$/.exec(lineText(text, before))?.[0].length ?? 0);
    }
    cuts.push({ from: start, to: end, content: "" });
  }
  // Cuts of neighbouring sub-tables may share a blank line: merged, each byte cut once.
  cuts.sort((a, b) => a.from - b.from);
  const merged: Cut[] = [];
  for (const c of cuts) {
    const last = merged[merged.length - 1];
    if (last && c.from <= last.to) last.to = Math.max(last.to, c.to);
    else merged.push({ ...c });
  }
  return applied(text, merged);
}
