// On a terminal: aligned columns with a header. Piped: one tab-separated line per row and no
// header, like `gh`, so `cut -f1` works (scripts that want structure use --json).
import { shown } from "./untrusted.ts";

// subs's own colours (style.ts: chalk at level 1 writes only SGR sequences).
const SGR = /\x1b\[[0-9;]*m/g;
const visibleLength = (s: string) => [...s.replace(SGR, "")].length;

/**
 * A cell with everything but subs's own colours shown visibly: cells carry server text (tool
 * names, descriptions, urls), and one `\r` or tab would redraw or shift the rows (issue 14). The
 * commands already pass such text through `shown`; this is the net under them. Server text that
 * passed `shown` holds no ESC, so every SGR left here is subs's own.
 */
const safeCell = (cell: string) => {
  let out = "";
  let last = 0;
  for (const match of cell.matchAll(SGR)) {
    out += shown(cell.slice(last, match.index)) + match[0];
    last = match.index + match[0].length;
  }
  return out + shown(cell.slice(last));
};

export function renderTable(header: string[], givenRows: string[][], options: { tty: boolean; style?: (s: string) => string }): string {
  const rows = givenRows.map((row) => row.map(safeCell));
  if (!options.tty) return rows.map((row) => row.map((cell) => cell.replace(SGR, "")).join("\t") + "\n").join("");
  const widths = header.map((h, col) => Math.max(visibleLength(h), ...rows.map((row) => visibleLength(row[col] ?? ""))));
  const line = (cells: string[]) =>
    cells
      .map((cell, col) => (col === cells.length - 1 ? cell : cell + " ".repeat(widths[col]! - visibleLength(cell))))
      .join("  ")
      .trimEnd() + "\n";
  const headerLine = line(header);
  return (options.style ? options.style(headerLine.trimEnd()) + "\n" : headerLine) + rows.map(line).join("");
}
