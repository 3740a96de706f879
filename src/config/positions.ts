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
  return new Scanner(source).scan();
}

/** A cursor over the source that keeps the line and column of where it is. */
class Scanner {
  readonly index = new PositionIndex();
  private i = 0;
  private line = 1;
  private lineStart = 0;

  constructor(private readonly source: string) {}

  scan(): PositionIndex {
    const { source } = this;
    const arrayTableCounts = new Map<string, number>();
    let table: (string | number)[] = [];
    while (this.i < source.length) {
      this.skipBlank();
      if (this.i >= source.length) break;
      if (this.peek("[[")) {
        const at = this.pos();
        this.advance(2);
        const header = this.readDottedKey([]);
        const key = pathKey(header);
        const n = arrayTableCounts.get(key) ?? 0;
        arrayTableCounts.set(key, n + 1);
        table = [...header, n];
        this.index.set(table, at, true);
        this.skipLine();
      } else if (source[this.i] === "[") {
        const at = this.pos();
        this.advance();
        table = this.readDottedKey([]);
        this.index.set(table, at, true);
        this.skipLine();
      } else {
        const keyPath = this.readDottedKey(table);
        this.skipSpaces();
        if (source[this.i] === "=") this.advance();
        this.readValue(keyPath);
        this.skipLine();
      }
    }
    return this.index;
  }

  private pos(at = this.i): Position {
    return { line: this.line, col: at - this.lineStart + 1 };
  }

  private peek(s: string): boolean {
    return this.source.startsWith(s, this.i);
  }

  private advance(n = 1): void {
    for (let k = 0; k < n && this.i < this.source.length; k++) {
      if (this.source[this.i] === "\n") {
        this.line++;
        this.lineStart = this.i + 1;
      }
      this.i++;
    }
  }

  private skipLine(): void {
    while (this.i < this.source.length && this.source[this.i] !== "\n") this.advance();
  }

  private skipSpaces(): void {
    while (this.i < this.source.length && (this.source[this.i] === " " || this.source[this.i] === "\t")) this.advance();
  }

  /** Whitespace, newlines and comments: allowed between array elements. */
  private skipBlank(): void {
    for (;;) {
      const before = this.i;
      this.skipSpaces();
      if (this.source[this.i] === "#") this.skipLine();
      if (this.source[this.i] === "\n" || this.source[this.i] === "\r") this.advance();
      if (this.i === before) return;
    }
  }

  private readString(): string {
    const { source } = this;
    if (this.peek('"""') || this.peek("'''")) {
      const quote = source.slice(this.i, this.i + 3);
      this.advance(3);
      const start = this.i;
      while (this.i < source.length && !this.peek(quote)) this.advance(source[this.i] === "\\" && quote === '"""' ? 2 : 1);
      const text = source.slice(start, this.i);
      this.advance(3);
      while (source[this.i] === quote[0]) this.advance(); // up to two quotes may close a multi-line string
      return text;
    }
    const quote = source[this.i];
    this.advance();
    let text = "";
    while (this.i < source.length && source[this.i] !== quote && source[this.i] !== "\n") {
      if (quote === '"' && source[this.i] === "\\") {
        const next = source[this.i + 1];
        if (next === "u" || next === "U") {
          const len = next === "u" ? 4 : 8;
          text += String.fromCodePoint(parseInt(source.slice(this.i + 2, this.i + 2 + len), 16) || 0xfffd);
          this.advance(2 + len);
          continue;
        }
        text += ESCAPES[next ?? ""] ?? next ?? "";
        this.advance(2);
        continue;
      }
      text += source[this.i];
      this.advance();
    }
    this.advance();
    return text;
  }

  private readKeyPart(): string {
    const { source } = this;
    if (source[this.i] === '"' || source[this.i] === "'") return this.readString();
    const start = this.i;
    while (this.i < source.length && /[A-Za-z0-9_-]/.test(source[this.i]!)) this.advance();
    if (this.i === start) this.advance(); // never stall on unexpected input
    return source.slice(start, this.i);
  }

  /** Reads `a."b".c`, recording the position of each prefix. */
  private readDottedKey(base: (string | number)[]): (string | number)[] {
    const path = [...base];
    for (;;) {
      this.skipSpaces();
      const at = this.pos();
      path.push(this.readKeyPart());
      // A header a million keys deep is refused at depth 64 (load.ts); recording every prefix of it
      // would cost its depth squared.
      if (path.length <= MAX_INDEXED_DEPTH) this.index.set(path, at);
      this.skipSpaces();
      if (this.source[this.i] !== ".") return path;
      this.advance();
    }
  }

  private readValue(path: (string | number)[]): void {
    this.skipSpaces();
    const c = this.source[this.i];
    if (c === '"' || c === "'") this.readString();
    else if (c === "[") this.readArray(path);
    else if (c === "{") this.readInlineTable(path);
    else while (this.i < this.source.length && !/[,\]}\n#]/.test(this.source[this.i]!)) this.advance();
  }

  private readArray(path: (string | number)[]): void {
    this.advance();
    for (let n = 0; ; n++) {
      this.skipBlank();
      if (this.source[this.i] === "]" || this.i >= this.source.length) break;
      this.index.set([...path, n], this.pos());
      this.readValue([...path, n]);
      this.skipBlank();
      if (this.source[this.i] === ",") this.advance();
    }
    this.advance();
  }

  private readInlineTable(path: (string | number)[]): void {
    this.advance();
    for (;;) {
      this.skipSpaces();
      if (this.source[this.i] === "}" || this.source[this.i] === "\n" || this.i >= this.source.length) break;
      const keyPath = this.readDottedKey(path);
      this.skipSpaces();
      if (this.source[this.i] === "=") this.advance();
      this.readValue(keyPath);
      this.skipSpaces();
      if (this.source[this.i] === ",") this.advance();
    }
    this.advance();
  }
}

const ESCAPES: Record<string, string> = { n: "\n", t: "\t", r: "\r", b: "\b", f: "\f", '"': '"', "\\": "\\" };
