// The unified diff `subs agent connect --dry-run` prints: what the client's file would become. The
// clients' files hold other servers' tokens (a header pasted in, an `env` literal), and a diff shows
// the lines around a change: so in every line shown, a string value or comment that subs did not
// write itself is replaced by `…`. Keys, numbers and the punctuation stay, so the shape is
// still clear; what subs writes (paths, names of variables) is shown whole.

/** Every string value and comment of `text` replaced by `…`, unless it is one of `shown`. Lines and their count are kept. */
export type Masker = (text: string, shown: ReadonlySet<string>) => string;

/**
 * JSON (with comments): a string is a value unless a `:` follows it. Scanned by hand rather than
 * parsed, so a file that is not valid JSON is masked too.
 */
export const maskJson: Masker = (text, shown) => {
  let out = "";
  let i = 0;
  while (i < text.length) {
    const c = text[i]!;
    if (c === '"') {
      let end = i + 1;
      while (end < text.length && text[end] !== '"' && text[end] !== "\n") end += text[end] === "\\" ? 2 : 1;
      const literal = text.slice(i, Math.min(end + 1, text.length));
      const isKey = /^\s*:/.test(text.slice(end + 1, end + 64));
      out += isKey || shown.has(decoded(literal)) ? literal : '"…"';
      i = end + 1;
    } else if (c === "/" && text[i + 1] === "/") {
      const end = text.indexOf("\n", i);
      out += "//…";
      i = end === -1 ? text.length : end;
    } else if (c === "/" && text[i + 1] === "*") {
      const close = text.indexOf("*/", i + 2);
      const end = close === -1 ? text.length : close + 2;
      out += `/*…${"\n".repeat(text.slice(i, end).split("\n").length - 1)}*/`;
      i = end;
    } else {
      out += c;
      i++;
    }
  }
  return out;
};

function decoded(literal: string): string {
  try {
    return JSON.parse(literal) as string;
  } catch {
    return literal;
  }
}

/**
 * TOML: a string is a value unless it is part of a key (a `=` or `.` follows it, or it is in a header); a
 * multi-line string's lines are masked whole, line breaks kept.
 */
export const maskToml: Masker = (text, shown) => {
  let out = "";
  let i = 0;
  while (i < text.length) {
    const c = text[i]!;
    if (text.startsWith('"""', i) || text.startsWith("'''", i)) {
      const quote = text.slice(i, i + 3);
      let end = i + 3;
      while (end < text.length && !text.startsWith(quote, end)) end += quote === '"""' && text[end] === "\\" ? 2 : 1;
      end = Math.min(end + 3, text.length);
      while (text[end] === quote[0]) end++;
      out += `${quote}…${"\n".repeat(text.slice(i, end).split("\n").length - 1)}${quote}`;
      i = end;
    } else if (c === '"' || c === "'") {
      let end = i + 1;
      while (end < text.length && text[end] !== c && text[end] !== "\n") end += c === '"' && text[end] === "\\" ? 2 : 1;
      const literal = text.slice(i, Math.min(end + 1, text.length));
      // A key: before `=` or `.`, or in a table header (`[a."b"]`, the line has no `=` before it).
      const next = text.slice(end + 1, end + 64);
      const lineBefore = text.slice(text.lastIndexOf("\n", i) + 1, i);
      const isKey = /^[ \t]*[=.]/.test(next) || (/^[ \t]*\]/.test(next) && /^[ \t]*\[/.test(lineBefore) && !lineBefore.includes("="));
      out += isKey || shown.has(c === '"' ? decoded(literal) : literal.slice(1, -1)) ? literal : `${c}…${c}`;
      i = end + 1;
    } else if (c === "#") {
      const end = text.indexOf("\n", i);
      out += "#…";
      i = end === -1 ? text.length : end;
    } else {
      out += c;
      i++;
    }
  }
  return out;
};

/** Lines with their own ending ("\r" stays in a CRLF file's lines, as `diff` shows it). */
function linesOf(text: string): string[] {
  if (text === "") return [];
  const lines = text.split("\n");
  if (lines[lines.length - 1] === "") lines.pop();
  return lines;
}

type Op = { kind: " " | "-" | "+"; line: string; a: number; b: number };

/** The edit script from `a` to `b`: common ends, then a longest common subsequence of what is between (bounded). */
function script(a: readonly string[], b: readonly string[]): Op[] {
  let head = 0;
  while (head < a.length && head < b.length && a[head] === b[head]) head++;
  let tail = 0;
  while (tail < a.length - head && tail < b.length - head && a[a.length - 1 - tail] === b[b.length - 1 - tail]) tail++;
  const ops: Op[] = [];
  for (let n = 0; n < head; n++) ops.push({ kind: " ", line: a[n]!, a: n, b: n });
  const midA = a.slice(head, a.length - tail);
  const midB = b.slice(head, b.length - tail);
  if (midA.length * midB.length <= 4_000_000) {
    // lcs[i][j]: the longest common subsequence of midA[i..] and midB[j..].
    const lcs = Array.from({ length: midA.length + 1 }, () => new Uint32Array(midB.length + 1));
    for (let i = midA.length - 1; i >= 0; i--) for (let j = midB.length - 1; j >= 0; j--) lcs[i]![j] = midA[i] === midB[j] ? lcs[i + 1]![j + 1]! + 1 : Math.max(lcs[i + 1]![j]!, lcs[i]![j + 1]!);
    let i = 0;
    let j = 0;
    while (i < midA.length || j < midB.length) {
      if (i < midA.length && j < midB.length && midA[i] === midB[j]) {
        ops.push({ kind: " ", line: midA[i]!, a: head + i++, b: head + j++ });
      } else if (i < midA.length && (j === midB.length || lcs[i + 1]![j]! >= lcs[i]![j + 1]!)) {
        // Removed lines before added ones, as diff(1) prints them.
        ops.push({ kind: "-", line: midA[i]!, a: head + i++, b: head + j });
      } else {
        ops.push({ kind: "+", line: midB[j]!, a: head + i, b: head + j++ });
      }
    }
  } else {
    midA.forEach((line, n) => ops.push({ kind: "-", line, a: head + n, b: head }));
    midB.forEach((line, n) => ops.push({ kind: "+", line, a: a.length - tail, b: head + n }));
  }
  for (let n = 0; n < tail; n++) ops.push({ kind: " ", line: a[a.length - tail + n]!, a: a.length - tail + n, b: b.length - tail + n });
  return ops;
}

const CONTEXT = 3;

/**
 * The unified diff from `before` to `after` of `file` (undefined: the file does not exist), both
 * masked; "" when they are the same. `--- /dev/null` for a file created, `+++ /dev/null` for one deleted.
 */
export function unifiedDiff(file: string, before: string | undefined, after: string | undefined, mask: Masker, shown: ReadonlySet<string>): string {
  if (before === after) return "";
  const a = linesOf(mask(before ?? "", shown));
  const b = linesOf(mask(after ?? "", shown));
  // A file without a final newline: its last line says so, as diff(1) does.
  const openA = before !== undefined && before !== "" && !before.endsWith("\n");
  const openB = after !== undefined && after !== "" && !after.endsWith("\n");
  if (openA && a.length > 0) a[a.length - 1] += "\0";
  if (openB && b.length > 0) b[b.length - 1] += "\0";
  const ops = script(a, b);
  const out = [`--- ${before === undefined ? "/dev/null" : file}`, `+++ ${after === undefined ? "/dev/null" : file}`];
  let n = 0;
  while (n < ops.length) {
    if (ops[n]!.kind === " ") {
      n++;
      continue;
    }
    // A hunk: CONTEXT lines before the first change, up to CONTEXT after the last change that is
    // less than 2 * CONTEXT unchanged lines from the next.
    let start = n;
    while (start > 0 && n - start < CONTEXT && ops[start - 1]!.kind === " ") start--;
    let end = n;
    for (;;) {
      while (end < ops.length && ops[end]!.kind !== " ") end++;
      let gap = end;
      while (gap < ops.length && ops[gap]!.kind === " ") gap++;
      if (gap < ops.length && gap - end <= 2 * CONTEXT) end = gap;
      else {
        end = Math.min(end + CONTEXT, gap);
        break;
      }
    }
    const hunk = ops.slice(start, end);
    const oldLines = hunk.filter((o) => o.kind !== "+").length;
    const newLines = hunk.filter((o) => o.kind !== "-").length;
    const first = hunk[0]!;
    const range = (from: number, count: number) => (count === 0 ? `${from},0` : count === 1 ? `${from + 1}` : `${from + 1},${count}`);
    out.push(`@@ -${range(first.a, oldLines)} +${range(first.b, newLines)} @@`);
    for (const op of hunk) {
      const open = op.line.endsWith("\0");
      out.push(`${op.kind}${open ? op.line.slice(0, -1) : op.line}`);
      if (open) out.push("\\ No newline at end of file");
    }
    n = end;
  }
  return `${out.join("\n")}\n`;
}
