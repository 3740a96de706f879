// smol-toml gives values but no positions. To point every error at `file:LINE:COL`, this scanner
// walks the same (already syntax-checked) source and records where each key, table header and
// array element starts. It only runs when there is an error to place, so it costs nothing on the
// happy path.

export type Position = { line: number; col: number };
export type KeyPath = ReadonlyArray<string | number>;

/** Deeper than any path an error is reported at (load.ts refuses files nested past 64). */
const MAX_INDEXED_DEPTH = 100;

const pathKey = (path: KeyPath) => path.join("\u0000");

export class PositionIndex {
  private readonly positions = new Map<string, Position>();

  set(path: KeyPath, pos: Position, overwrite = false) {
    const key = pathKey(path);
    if (overwrite || !this.positions.has(key)) this.positions.set(key, pos);
  }

  /** Where `path` was written, else its nearest written ancestor, else the top of the file. */
  locate(path: KeyPath): Position {
    for (let n = path.length; n > 0; n--) {
      const found = this.positions.get(pathKey(path.slice(0, n)));
      if (found) return found;
    }
    return { line: 1, col: 1 };
  }

  has(path: KeyPath): boolean {
    return this.positions.has(pathKey(path));
  }
}

export function indexPositions(source: string): PositionIndex {
  const index = new PositionIndex();
  let i = 0;
  let line = 1;
  let lineStart = 0;
  const arrayTableCounts = new Map<string, number>();
  let table: (string | number)[] = [];

  const pos = (at = i): Position => ({ line, col: at - lineStart + 1 });
  const peek = (s: string) => source.startsWith(s, i);
  const advance = (n = 1) => {
    for (let k = 0; k < n && i < source.length; k++) {
      if (source[i] === "\n") {
        line++;
        lineStart = i + 1;
      }
      i++;
    }
  };
  const skipSpaces = () => {
    while (i < source.length && (source[i] === " " || source[i] === "\t")) advance();
  };
  const skipComment = () => {
    if (source[i] === "#") while (i < source.length && source[i] !== "\n") advance();
  };
  // Whitespace, newlines and comments: allowed between array elements.
  const skipBlank = () => {
    for (;;) {
      const before = i;
      skipSpaces();
      skipComment();
      if (source[i] === "\n" || source[i] === "\r") advance();
      if (i === before) return;
    }
  };

  const readString = (): string => {
    if (peek('"""') || peek("'''")) {
      const quote = source.slice(i, i + 3);
      advance(3);
      const start = i;
      while (i < source.length && !peek(quote)) advance(source[i] === "\\" && quote === '"""' ? 2 : 1);
      const text = source.slice(start, i);
      advance(3);
      while (source[i] === quote[0]) advance(); // up to two quotes may close a multi-line string
      return text;
    }
    const quote = source[i];
    advance();
    let text = "";
    while (i < source.length && source[i] !== quote && source[i] !== "\n") {
      if (quote === '"' && source[i] === "\\") {
        const next = source[i + 1];
        const escapes: Record<string, string> = { n: "\n", t: "\t", r: "\r", b: "\b", f: "\f", '"': '"', "\\": "\\" };
        if (next === "u" || next === "U") {
          const len = next === "u" ? 4 : 8;
          text += String.fromCodePoint(parseInt(source.slice(i + 2, i + 2 + len), 16) || 0xfffd);
          advance(2 + len);
          continue;
        }
        text += escapes[next ?? ""] ?? next ?? "";
        advance(2);
        continue;
      }
      text += source[i];
      advance();
    }
    advance();
    return text;
  };

  const readKeyPart = (): string => {
    if (source[i] === '"' || source[i] === "'") return readString();
    const start = i;
    while (i < source.length && /[A-Za-z0-9_-]/.test(source[i]!)) advance();
    if (i === start) advance(); // never stall on unexpected input
    return source.slice(start, i);
  };

  /** Reads `a."b".c`, recording the position of each prefix. */
  const readDottedKey = (base: (string | number)[]): (string | number)[] => {
    const path = [...base];
    for (;;) {
      skipSpaces();
      const at = pos();
      path.push(readKeyPart());
      // A header a million keys deep is refused at depth 64 (load.ts); recording every prefix of it
      // would cost its depth squared.
      if (path.length <= MAX_INDEXED_DEPTH) index.set(path, at);
      skipSpaces();
      if (source[i] !== ".") return path;
      advance();
    }
  };

  const readValue = (path: (string | number)[]) => {
    skipSpaces();
    const c = source[i];
    if (c === '"' || c === "'") {
      readString();
    } else if (c === "[") {
      advance();
      let n = 0;
      for (;;) {
        skipBlank();
        if (source[i] === "]" || i >= source.length) break;
        index.set([...path, n], pos());
        readValue([...path, n]);
        n++;
        skipBlank();
        if (source[i] === ",") advance();
      }
      advance();
    } else if (c === "{") {
      advance();
      for (;;) {
        skipSpaces();
        if (source[i] === "}" || source[i] === "\n" || i >= source.length) break;
        const keyPath = readDottedKey(path);
        skipSpaces();
        if (source[i] === "=") advance();
        readValue(keyPath);
        skipSpaces();
        if (source[i] === ",") advance();
      }
      advance();
    } else {
      while (i < source.length && !/[,\]}\n#]/.test(source[i]!)) advance();
    }
  };

  while (i < source.length) {
    skipBlank();
    if (i >= source.length) break;
    if (peek("[[")) {
      const at = pos();
      advance(2);
      const header = readDottedKey([]);
      const key = pathKey(header);
      const n = arrayTableCounts.get(key) ?? 0;
      arrayTableCounts.set(key, n + 1);
      table = [...header, n];
      index.set(table, at, true);
      while (i < source.length && source[i] !== "\n") advance();
    } else if (source[i] === "[") {
      const at = pos();
      advance();
      table = readDottedKey([]);
      index.set(table, at, true);
      while (i < source.length && source[i] !== "\n") advance();
    } else {
      const keyPath = readDottedKey(table);
      skipSpaces();
      if (source[i] === "=") advance();
      readValue(keyPath);
      while (i < source.length && source[i] !== "\n") advance();
    }
  }
  return index;
}
