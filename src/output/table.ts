// On a terminal: aligned columns with a header. Piped: one tab-separated line per row and no
// header, like `gh`, so `cut -f1` works (scripts that want structure use --json).

const ANSI = /\x1b\[[0-9;]*m/g;
const visibleLength = (s: string) => s.replace(ANSI, "").length;

export function renderTable(header: string[], rows: string[][], options: { tty: boolean; style?: (s: string) => string }): string {
  if (!options.tty) return rows.map((row) => row.map((cell) => cell.replace(ANSI, "")).join("\t") + "\n").join("");
  const widths = header.map((h, col) => Math.max(visibleLength(h), ...rows.map((row) => visibleLength(row[col] ?? ""))));
  const line = (cells: string[]) =>
    cells
      .map((cell, col) => (col === cells.length - 1 ? cell : cell + " ".repeat(widths[col]! - visibleLength(cell))))
      .join("  ")
      .trimEnd() + "\n";
  const headerLine = line(header);
  return (options.style ? options.style(headerLine.trimEnd()) + "\n" : headerLine) + rows.map(line).join("");
}
