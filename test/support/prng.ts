// A seeded PRNG for the fuzzers: the same seed gives the same cases on every machine, so a failure
// names a case that can be run again.

/** mulberry32: small, fast, deterministic; a float in [0, 1). */
export function prng(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/** Helpers over one PRNG: an integer in [0, n), an item, a chance. */
export function picker(random: () => number) {
  const int = (n: number) => Math.floor(random() * n);
  return {
    random,
    int,
    pick: <T>(items: readonly T[]): T => items[int(items.length)]!,
    chance: (p: number) => random() < p,
  };
}
