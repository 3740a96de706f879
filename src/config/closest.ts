// "Did you mean": the known names nearest a mistyped one. Apart from load.ts, whose full check of a
// file loads zod, so that naming a connection or an agent that is not there (lookup.ts) costs a
// run none of it.

/** The known word within edit distance 2 of `word`, for "did you mean". Linear in the candidates:
 *  each comparison is a band of the edit-distance table that stops once it exceeds 2. */
export function closest(word: string, candidates: Iterable<string>): string | undefined {
  let best: string | undefined;
  let bestDistance = 3;
  for (const candidate of candidates) {
    const d = editDistanceUpTo2(word, candidate);
    if (d < bestDistance) {
      best = candidate;
      bestDistance = d;
      if (d === 0) break;
    }
  }
  return best;
}

/**
 * Up to `max` of `candidates` nearest to `word`: within an edit distance of 2, else those that
 * contain it or that it contains (a tool `search` for `search_notes`), nearest first.
 */
export function closestNames(word: string, candidates: readonly string[], max: number): string[] {
  const lower = word.toLowerCase();
  const ranked: Array<[distance: number, name: string]> = [];
  for (const name of candidates) {
    const d = editDistanceUpTo2(lower, name.toLowerCase());
    if (d <= 2) ranked.push([d, name]);
    else if (lower.length >= 3 && (name.toLowerCase().includes(lower) || lower.includes(name.toLowerCase()))) ranked.push([3, name]);
  }
  return ranked.sort((a, b) => a[0] - b[0] || a[1].localeCompare(b[1])).slice(0, max).map(([, name]) => name);
}

/** Levenshtein distance when it is at most 2, else 3. Only the band |i - j| <= 2 of the table is
 *  computed, in two rows, and a row past 2 everywhere ends it: O(length) per pair. The rows are
 *  kept between calls (a file of thousands of dangling names compares each with every candidate:
 *  two fresh arrays per pair were most of that time). */
let rows = [new Uint8Array(64), new Uint8Array(64)] as const;
function editDistanceUpTo2(a: string, b: string): number {
  const FAR = 3;
  if (Math.abs(a.length - b.length) >= FAR) return FAR;
  if (rows[0].length <= b.length) rows = [new Uint8Array(b.length * 2 + 1), new Uint8Array(b.length * 2 + 1)];
  let [prev, row] = rows;
  // Cells outside the band are never written after this fill, so they read as FAR.
  prev.fill(FAR, 0, b.length + 1);
  row.fill(FAR, 0, b.length + 1);
  for (let j = 0; j <= Math.min(b.length, 2); j++) prev[j] = j;
  for (let i = 1; i <= a.length; i++) {
    const lo = Math.max(1, i - 2);
    const hi = Math.min(b.length, i + 2);
    row[lo - 1] = lo === 1 ? Math.min(i, FAR) : FAR;
    let rowMin: number = row[lo - 1]!;
    for (let j = lo; j <= hi; j++) {
      const d = Math.min(FAR, prev[j]! + 1, row[j - 1]! + 1, prev[j - 1]! + (a.charCodeAt(i - 1) === b.charCodeAt(j - 1) ? 0 : 1));
      row[j] = d;
      if (d < rowMin) rowMin = d;
    }
    if (rowMin >= FAR) return FAR;
    [prev, row] = [row, prev];
  }
  return prev[b.length]!;
}
