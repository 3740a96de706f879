// How many terminal columns text takes, and text cut to a number of columns (issue 15: tables fit
// the terminal). Counted per grapheme cluster (UAX #29, Intl.Segmenter): a combining accent, a
// variation selector or a ZWJ emoji sequence adds nothing of its own. East Asian Wide and
// Fullwidth characters (UAX #11) and emoji shown as emoji take two columns. subs's own colours
// (SGR sequences, style.ts) take none and are never cut.

import { lazily } from "../lazy.ts";

const SGR = /\x1b\[[0-9;]*m/g;

/**
 * Code point ranges of East Asian Wide (W) and Fullwidth (F) characters, as terminals draw them
 * (the ranges wcwidth implementations use; UAX #11).
 */
const WIDE: ReadonlyArray<readonly [number, number]> = [
  [0x1100, 0x115f],
  [0x231a, 0x231b],
  [0x2329, 0x232a],
  [0x2e80, 0x303e],
  [0x3041, 0x33ff],
  [0x3400, 0x4dbf],
  [0x4e00, 0x9fff],
  [0xa000, 0xa4cf],
  [0xa960, 0xa97f],
  [0xac00, 0xd7a3],
  [0xf900, 0xfaff],
  [0xfe10, 0xfe19],
  [0xfe30, 0xfe6f],
  [0xff00, 0xff60],
  [0xffe0, 0xffe6],
  [0x16fe0, 0x18aff],
  [0x1b000, 0x1b2ff],
  [0x1f200, 0x1f2ff],
  [0x20000, 0x2fffd],
  [0x30000, 0x3fffd],
];

// Built on first use: a pattern of Unicode properties is compiled when it is made (the bundle makes
// it with `new RegExp`), about 0.3 ms of every command that loads this module, tables or not.
const EMOJI = lazily(() => /\p{Emoji_Presentation}|\p{Extended_Pictographic}\ufe0f|\p{Regional_Indicator}/u);
const ZERO = lazily(() => /^(?:\p{Mn}|\p{Me}|\p{Cf}|\p{Cc})+$/u);

function isWide(code: number): boolean {
  let low = 0;
  let high = WIDE.length - 1;
  while (low <= high) {
    const mid = (low + high) >> 1;
    const [start, end] = WIDE[mid]!;
    if (code < start) high = mid - 1;
    else if (code > end) low = mid + 1;
    else return true;
  }
  return false;
}

let segmenter: Intl.Segmenter | undefined;

function graphemes(text: string): Iterable<string> {
  // ASCII (most cells: ids, urls, statuses) needs no segmenter.
  if (/^[\x20-\x7e]*$/.test(text)) return text;
  segmenter ??= new Intl.Segmenter(undefined, { granularity: "grapheme" });
  return [...segmenter.segment(text)].map((s) => s.segment);
}

/** Columns one grapheme cluster takes: 0, 1 or 2. */
function clusterWidth(cluster: string): number {
  const code = cluster.codePointAt(0)!;
  if (code >= 0x20 && code < 0x7f) return 1;
  if (ZERO().test(cluster)) return 0;
  if (EMOJI().test(cluster) || isWide(code)) return 2;
  return 1;
}

/** Columns `text` takes on a terminal, SGR sequences not counted. */
export function displayWidth(text: string): number {
  let width = 0;
  for (const cluster of graphemes(text.replace(SGR, ""))) width += clusterWidth(cluster);
  return width;
}

/**
 * `text` in at most `width` columns: unchanged when it fits, else cut between grapheme clusters
 * and ended with `…`. Every SGR sequence is kept, those after the cut too, so a colour the text
 * opened is still closed and the cut never falls inside one.
 */
export function truncateToWidth(text: string, width: number): string {
  if (displayWidth(text) <= width) return text;
  if (width <= 0) return (text.match(SGR) ?? []).join("");
  const budget = width - 1;
  let out = "";
  let used = 0;
  let full = false;
  let last = 0;
  const take = (plain: string) => {
    for (const cluster of graphemes(plain)) {
      if (full) return;
      const w = clusterWidth(cluster);
      if (used + w > budget) {
        out += "…";
        full = true;
        return;
      }
      out += cluster;
      used += w;
    }
  };
  for (const match of text.matchAll(SGR)) {
    take(text.slice(last, match.index));
    out += match[0];
    last = match.index + match[0].length;
  }
  take(text.slice(last));
  return full ? out : `${out}…`;
}
