// `subs mcp add` and `subs mcp remove` edit substructure.toml as text: a TOML library
// would rewrite the whole file, losing the comments and layout people wrote. So the text is
// scanned for its table headers and only the lines of one section are inserted or cut; every
// other byte stays as it was. The result is checked like any file before it is written.
import { chmodSync, closeSync, fchownSync, fsyncSync, openSync, realpathSync, renameSync, rmSync, statSync, writeSync } from "node:fs";
import { randomBytes } from "node:crypto";
import path from "node:path";
import type { Context } from "../context.ts";
import { ConfigError, SubsError, refused, usage } from "../errors.ts";
import type { Reporter } from "../report.ts";
import { findConfigPath } from "./find.ts";
import { displayPathOf, loadConfigText } from "./load.ts";
import { assertLockHeld, withConfigLock } from "./lock.ts";
import { CONFIG_MAX_BYTES, readConfigFile } from "./read.ts";
import type { Config } from "./types.ts";

type LineKind = "blank" | "comment" | "header" | "content";
/** One line of a TOML text: where it is, what it is, its table's key for a header; `continued` when it goes on a value begun above (an array, a multi-line string). */
export type Line = { start: number; end: number; kind: LineKind; header?: string[]; continued?: true };

/**
 * The file's lines, each classified. Lines inside a multi-line string or array are content, so
 * a `[` starting one of them is never taken for a header. Assumes valid TOML (the file was loaded
 * before it is edited).
 */
export function scanLines(text: string): Line[] {
  const lines: Line[] = [];
  let i = 0;
  let depth = 0;
  let multiline: '"""' | "'''" | undefined;
  const at = (s: string) => text.startsWith(s, i);
  // Consumes value text up to the end of the line, tracking strings and brackets across lines.
  const consumeValue = () => {
    while (i < text.length && text[i] !== "\n") {
      if (multiline) {
        if (multiline === '"""' && text[i] === "\\") i += 2;
        else if (at(multiline)) {
          i += 3;
          while (text[i] === multiline[0]) i++;
          multiline = undefined;
        } else i++;
        continue;
      }
      const c = text[i]!;
      if (at('"""') || at("'''")) {
        multiline = text.slice(i, i + 3) as '"""' | "'''";
        i += 3;
      } else if (c === '"' || c === "'") {
        i++;
        while (i < text.length && text[i] !== c && text[i] !== "\n") i += c === '"' && text[i] === "\\" ? 2 : 1;
        i++;
      } else if (c === "#") {
        while (i < text.length && text[i] !== "\n") i++;
      } else {
        if (c === "[" || c === "{") depth++;
        else if (c === "]" || c === "}") depth--;
        i++;
      }
    }
  };
  while (i < text.length) {
    const start = i;
    let kind: LineKind;
    let header: string[] | undefined;
    const continued = multiline !== undefined || depth > 0;
    if (continued) {
      kind = "content";
      consumeValue();
    } else {
      while (text[i] === " " || text[i] === "\t") i++;
      if (i >= text.length || text[i] === "\n" || at("\r\n")) kind = "blank";
      else if (text[i] === "#") kind = "comment";
      else if (text[i] === "[") {
        kind = "header";
        i += at("[[") ? 2 : 1;
        header = readKey();
      } else kind = "content";
      if (kind === "content") consumeValue();
      else while (i < text.length && text[i] !== "\n") i++;
    }
    if (i < text.length) i++; // the "\n"
    lines.push({ start, end: i, kind, ...(header ? { header } : {}), ...(continued ? { continued: true as const } : {}) });
  }
  return lines;

  function readKey(): string[] {
    const parts: string[] = [];
    for (;;) {
      while (text[i] === " " || text[i] === "\t") i++;
      const c = text[i];
      if (c === '"' || c === "'") {
        const from = ++i;
        let raw = "";
        while (i < text.length && text[i] !== c && text[i] !== "\n") {
          if (c === '"' && text[i] === "\\") {
            raw += text.slice(i, i + 2);
            i += 2;
          } else raw += text[i++];
        }
        i++;
        parts.push(c === '"' ? unescapeBasic(raw) : text.slice(from, i - 1));
      } else {
        const from = i;
        while (i < text.length && /[A-Za-z0-9_-]/.test(text[i]!)) i++;
        parts.push(text.slice(from, i));
        if (i === from) return parts;
      }
      while (text[i] === " " || text[i] === "\t") i++;
      if (text[i] !== ".") return parts;
      i++;
    }
  }
}

function unescapeBasic(raw: string): string {
  const escapes: Record<string, string> = { n: "\n", t: "\t", r: "\r", b: "\b", f: "\f", e: "\u001b", '"': '"', "\\": "\\" };
  return raw.replace(/\\(u[0-9A-Fa-f]{4}|U[0-9A-Fa-f]{8}|.)/g, (_, e: string) =>
    e.length > 1 ? String.fromCodePoint(parseInt(e.slice(1), 16)) : (escapes[e] ?? e),
  );
}

const isSection = (header: string[] | undefined, id: string) => header !== undefined && header[0] === "mcp" && header[1] === id;

/**
 * The lines a table owns: its header, its keys and the comments among them, and the comments
 * right after its last key up to the first blank line. A comment block after a blank line, or
 * directly above the next header, is about what follows and is kept; so is every comment above
 * the header (it may describe more than this one section).
 */
export function ownedRange(lines: readonly Line[], headerIndex: number): { from: number; to: number } {
  let next = headerIndex + 1;
  while (next < lines.length && lines[next]!.kind !== "header") next++;
  let to = next;
  if (next < lines.length) while (to - 1 > headerIndex && lines[to - 1]!.kind === "comment") to--;
  let lastContent = headerIndex;
  for (let n = headerIndex + 1; n < to; n++) if (lines[n]!.kind === "content") lastContent = n;
  let end = lastContent + 1;
  while (end < to && lines[end]!.kind === "comment") end++;
  return { from: headerIndex, to: end };
}

/**
 * The text without the section of `id` ([mcp.<id>] and any [mcp.<id>.*] sub-table). One blank
 * line that separated it from its neighbours goes with it, so no double gap is left behind.
 * Undefined when the file has no header for it (declared some other way, e.g. `[mcp]` with
 * `<id> = { ... }`: the caller refuses, as the text is not one subs edits).
 */
export function removeSection(text: string, id: string): string | undefined {
  const lines = scanLines(text);
  const ranges = lines.flatMap((line, n) => (isSection(line.header, id) ? [ownedRange(lines, n)] : []));
  if (ranges.length === 0) return undefined;
  const cut = new Set<number>();
  for (const { from, to } of ranges) {
    for (let n = from; n < to; n++) cut.add(n);
    const blankBefore = from === 0 || lines[from - 1]!.kind === "blank";
    if (blankBefore) {
      let n = to;
      while (n < lines.length && lines[n]!.kind === "blank") cut.add(n++);
      // At the end of the file, the blank lines before it would be left trailing.
      if (n === lines.length) for (let b = from - 1; b >= 0 && lines[b]!.kind === "blank"; b--) cut.add(b);
    }
  }
  return lines.filter((_, n) => !cut.has(n)).map((line) => text.slice(line.start, line.end)).join("");
}

/**
 * The text with `section` (complete lines, "\n"-ended) added after the last [mcp.*] section, or at
 * the end of the file when there is none, a blank line before it. The file's own line ending is
 * kept (CRLF stays CRLF).
 */
export function appendSection(text: string, section: string): string {
  const eol = /\r\n/.test(text) ? "\r\n" : "\n";
  const block = section.replace(/\n/g, eol);
  const lines = scanLines(text);
  let last = -1;
  for (let n = 0; n < lines.length; n++) if (lines[n]!.header?.[0] === "mcp") last = n;
  if (last === -1) {
    if (text.length === 0) return block;
    const ended = text.endsWith("\n") ? text : text + eol;
    return ended + (lines[lines.length - 1]?.kind === "blank" && text.endsWith("\n") ? "" : eol) + block;
  }
  const { to } = ownedRange(lines, last);
  const at = to < lines.length ? lines[to]!.start : text.length;
  const before = text.slice(0, at);
  const head = before.endsWith("\n") || before.length === 0 ? before : before + eol;
  const after = text.slice(at);
  // What follows (a comment or header) stays separated from the new section by a blank line.
  const gap = after.length > 0 && lines[to]!.kind !== "blank" ? eol : "";
  return `${head}${eol}${block}${gap}${after}`;
}

/**
 * Writes `text` over the config file at `file` atomically: a temporary file beside it, with the
 * file's mode, renamed over it (rename(2) is atomic within a directory), so a reader sees the old
 * file or the new one, never half of one. A symlinked file is written where it points. The caller
 * holds the file's lock (src/config/lock.ts) from before its read; as a second line, for an editor
 * that takes no lock, the file must still hold `expected` (what was read and edited).
 */
export function writeConfigAtomically(file: string, expected: string, text: string, shown: string): void {
  let target: string;
  try {
    target = realpathSync(file);
  } catch (error) {
    throw usage(`cannot write ${shown}: ${(error as NodeJS.ErrnoException).code ?? "error"}`);
  }
  assertLockHeld(target, shown);
  if (readConfigFile(target, shown) !== expected) {
    throw refused(`${shown} changed while subs was editing it; nothing was written`, { hint: "run the command again", code: "config_changed" });
  }
  try {
    replaceFile(target, text, { mode: statSync(target).mode & 0o7777 });
  } catch (error) {
    throw usage(`cannot write ${shown}: ${(error as NodeJS.ErrnoException).code ?? "error"}; nothing was written`);
  }
}

/**
 * Puts `text` at `target` atomically: a temporary file beside it, renamed over it (rename(2) is
 * atomic within a directory), so a reader sees the old file or the new one, never half of one.
 * `mode` is set exactly (openSync's is narrowed by the umask); `owner` is given back to the file
 * when it differs from the writer's (root editing a user's file), where the system allows it.
 * Without a mode the new file gets the usual one (0666 less the umask). Throws the system's error.
 */
export function replaceFile(target: string, text: string, options: { mode?: number; owner?: { uid: number; gid: number } } = {}): void {
  const temp = path.join(path.dirname(target), `.${path.basename(target)}.${process.pid}.${randomBytes(4).toString("hex")}.tmp`);
  let fd: number | undefined;
  try {
    fd = openSync(temp, "wx", options.mode ?? 0o666);
    writeSync(fd, text);
    fsyncSync(fd);
    if (options.owner && (options.owner.uid !== process.getuid?.() || options.owner.gid !== process.getgid?.())) {
      try {
        fchownSync(fd, options.owner.uid, options.owner.gid);
      } catch {
        // Not permitted for an ordinary user: the file is then the writer's, as any editor leaves it.
      }
    }
    closeSync(fd);
    fd = undefined;
    if (options.mode !== undefined) chmodSync(temp, options.mode);
    renameSync(temp, target);
  } catch (error) {
    if (fd !== undefined) closeSync(fd);
    rmSync(temp, { force: true });
    throw error;
  }
}

/**
 * Runs `edit` on the config file every command would read (--config, $SUBS_CONFIG, the nearest
 * upward) while holding its lock: `edit` gets the text as read under the lock and what it
 * declares, checks, and writes with writeConfigAtomically before the lock is released.
 */
export async function editConfig<T>(
  ctx: Pick<Context, "env" | "cwd" | "signal">,
  configPath: string | undefined,
  reporter: Pick<Reporter, "info"> | undefined,
  edit: (current: { text: string; config: Config }) => T,
): Promise<T> {
  const file = findConfigPath({ explicit: configPath, env: ctx.env, cwd: ctx.cwd });
  return withConfigLock(file, { shown: displayPathOf(file, ctx.cwd), signal: ctx.signal, ...(reporter ? { reporter } : {}) }, () => {
    const text = readConfigFile(file);
    return edit({ text, config: loadConfigText(file, text, ctx) });
  });
}

/**
 * The edited text checked as every command checks the file (its size, its syntax and rules, where
 * its tokens may go), before it is written. A mistake is reported without a line number: the
 * lines are those of a file that was never written, and would point nowhere.
 */
export function checkedEdit(config: Pick<Config, "path" | "displayPath">, edited: string, options: { cwd: string; env: Readonly<Record<string, string | undefined>> }): Config {
  if (Buffer.byteLength(edited) > CONFIG_MAX_BYTES) {
    throw refused(`${config.displayPath} would be larger than ${CONFIG_MAX_BYTES / 1024 / 1024} MiB, the most subs reads; nothing was written`, {
      hint: "declare fewer servers in it",
      code: "config_too_large",
    });
  }
  try {
    return loadConfigText(config.path, edited, options);
  } catch (error) {
    if (!(error instanceof ConfigError)) throw error;
    const why = error.diagnostics.map((d) => d.message).join("; ") || error.message;
    const hint = error.diagnostics[0]?.hint;
    throw new SubsError(error.kind, `${config.displayPath} as edited would be refused: ${why}; nothing was written`, {
      ...(hint !== undefined ? { hint } : {}),
      code: error.code ?? "edit_invalid",
    });
  }
}

/**
 * The sections of `connections` appended to `text` (the file `config` was loaded from, read under
 * its lock), after the last [mcp.*] section, in one pass over the text however many there are, and
 * checked (checkedEdit): a mistake throws. Returns the file as it would be after the edit, and
 * `write`, which writes it atomically; the caller may look at Ctrl-C between the two. Shared by
 * `subs mcp add` and `subs mcp import`.
 */
export function appendConnections(
  config: Pick<Config, "path" | "displayPath">,
  text: string,
  connections: readonly NewConnection[],
  options: { cwd: string; env: Readonly<Record<string, string | undefined>> },
): { after: Config; write: () => void } {
  const edited = connections.length === 0 ? text : appendSection(text, connections.map(connectionSection).join("\n"));
  const after = checkedEdit(config, edited, options);
  return { after, write: () => writeConfigAtomically(config.path, text, edited, config.displayPath) };
}

/** What `subs mcp add` declares. Secrets are only ever named by an environment variable. */
export type NewConnection = {
  id: string;
  tokenEnv?: string;
  clientId?: string;
  clientSecretEnv?: string;
  scopes?: readonly string[];
  headers?: Readonly<Record<string, string>>;
} & ({ url: string; local?: undefined } | { url?: undefined; local: { command: string; args: readonly string[]; env: Readonly<Record<string, string>>; cwd?: string } });

/** The `[mcp.<id>]` section for `c`, written as a person would write it. */
export function connectionSection(c: NewConnection): string {
  const q = (s: string) => JSON.stringify(s);
  const key = (k: string) => (/^[A-Za-z0-9_-]+$/.test(k) ? k : q(k));
  const table = (t: Readonly<Record<string, string>>) => `{ ${Object.entries(t).map(([k, v]) => `${key(k)} = ${q(v)}`).join(", ")} }`;
  if (c.local) {
    const lines = [`[mcp.${c.id}]`, `command = ${q(c.local.command)}`];
    if (c.local.args.length > 0) lines.push(`args = [${c.local.args.map(q).join(", ")}]`);
    if (Object.keys(c.local.env).length > 0) lines.push(`env = ${table(c.local.env)}`);
    if (c.local.cwd !== undefined) lines.push(`cwd = ${q(c.local.cwd)}`);
    return `${lines.join("\n")}\n`;
  }
  const lines = [`[mcp.${c.id}]`, `url = ${q(c.url)}`];
  if (c.headers !== undefined && Object.keys(c.headers).length > 0) lines.push(`headers = ${table(c.headers)}`);
  if (c.tokenEnv !== undefined) lines.push(`auth = { token_env = ${q(c.tokenEnv)} }`);
  const oauth: string[] = [];
  if (c.clientId !== undefined) oauth.push(`client_id = ${q(c.clientId)}`);
  if (c.clientSecretEnv !== undefined) oauth.push(`client_secret_env = ${q(c.clientSecretEnv)}`);
  if (c.scopes !== undefined && c.scopes.length > 0) oauth.push(`scopes = [${c.scopes.map(q).join(", ")}]`);
  if (oauth.length > 0) lines.push(`oauth = { ${oauth.join(", ")} }`);
  return `${lines.join("\n")}\n`;
}
