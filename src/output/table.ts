// On a terminal: aligned columns with a header. Piped: one tab-separated line per row and no
// header, like `gh`, so `cut -f1` works (scripts that want structure use --json). On a terminal
// the table fits its width: the longest columns are shortened with `…`, never the next step a
// cell names after ` · `; piped values stay whole.
import { shown } from "./untrusted.ts";
import { displayWidth, truncateToWidth } from "./width.ts";

// subs's own colours (style.ts: chalk at level 1 writes only SGR sequences).
const SGR = /\x1b\[[0-9;]*m/g;

/**
 * A cell with everything but subs's own colours shown visibly: cells carry server text (tool
 * names, descriptions, urls), and one `\r` or tab would redraw or shift the rows. The
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

export type TableOptions = {
  tty: boolean;
  style?: (s: string) => string;
  /** The terminal's width (ctx.stdoutColumns); unknown: columns as wide as their widest cell. */
  columns?: number | undefined;
  /** Columns never shortened: what a person types next (an id, a tool name). The first by default. */
  whole?: readonly number[];
  /** The least each column may be shortened to (columnWidths never goes below its header either). */
  floors?: readonly number[];
};

/**
 * What follows the last ` · ` of a cell is the next step a person types (`needs login · subs mcp
 * login sentry`, `reachable · needs login`): a shortened cell loses what is before it, never it.
 */
const HINT = " · ";
const hintAt = (cell: string) => cell.lastIndexOf(HINT);

/** The least a cell can be shortened to: its hint whole, after one character and `…`. */
function cellFloor(cell: string): number {
  const at = hintAt(cell);
  return at === -1 ? 0 : displayWidth(cell.slice(at)) + 2;
}

/** `cell` in at most `width` columns, its hint (if any) kept whole. */
function fitted(cell: string, width: number): string {
  if (displayWidth(cell) <= width) return cell;
  const at = hintAt(cell);
  if (at === -1) return truncateToWidth(cell, width);
  const tail = cell.slice(at);
  return truncateToWidth(cell.slice(0, at), Math.max(1, width - displayWidth(tail))) + tail;
}

const GAP = 2;
/** A shortened column keeps at least its header, and this many columns. */
const MIN_COLUMN = 6;

/**
 * Each column's width: as wide as its widest cell, then, while the line is wider than `columns`,
 * the widest column that may shrink loses one, down to its header (or MIN_COLUMN). A table whose
 * whole columns alone are too wide still overflows: those are never cut.
 */
export function columnWidths(natural: readonly number[], header: readonly string[], options: Pick<TableOptions, "columns" | "whole" | "floors">): number[] {
  const widths = [...natural];
  if (options.columns === undefined) return widths;
  const whole = new Set(options.whole ?? [0]);
  const least = natural.map((n, col) => (whole.has(col) ? n : Math.min(n, Math.max(displayWidth(header[col] ?? ""), MIN_COLUMN, options.floors?.[col] ?? 0))));
  let excess = widths.reduce((a, b) => a + b, 0) + GAP * (widths.length - 1) - options.columns;
  while (excess > 0) {
    let widest = -1;
    for (let col = 0; col < widths.length; col++) {
      if (widths[col]! > least[col]! && (widest === -1 || widths[col]! > widths[widest]!)) widest = col;
    }
    if (widest === -1) break;
    widths[widest]!--;
    excess--;
  }
  return widths;
}

export function renderTable(header: string[], givenRows: string[][], options: TableOptions): string {
  const rows = givenRows.map((row) => row.map(safeCell));
  if (!options.tty) return rows.map((row) => row.map((cell) => cell.replace(SGR, "")).join("\t") + "\n").join("");
  const natural = header.map((h, col) => Math.max(displayWidth(h), ...rows.map((row) => displayWidth(row[col] ?? ""))));
  // Cells with a next step give way last: first the other columns shrink as if those were whole;
  // only when that is not enough do they lose what comes before their ` · `.
  const floors = header.map((_, col) => Math.max(0, ...rows.map((row) => cellFloor(row[col] ?? ""))));
  const total = (w: readonly number[]) => w.reduce((a, b) => a + b, 0) + GAP * (w.length - 1);
  const first = columnWidths(natural, header, { ...options, floors: floors.map((f, col) => (f > 0 ? natural[col]! : 0)) });
  const widths = options.columns === undefined || total(first) <= options.columns ? first : columnWidths(natural, header, { ...options, floors });
  const line = (cells: string[]) =>
    cells
      .map((given, col) => {
        const cell = fitted(given, widths[col]!);
        return col === cells.length - 1 ? cell : cell + " ".repeat(Math.max(0, widths[col]! - displayWidth(cell)));
      })
      .join(" ".repeat(GAP))
      .trimEnd() + "\n";
  const headerLine = line(header);
  return (options.style ? options.style(headerLine.trimEnd()) + "\n" : headerLine) + rows.map(line).join("");
}
