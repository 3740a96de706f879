// Ratio checks of cost (n against 8n, few values against many): the two sides are timed in turns,
// a, b, a, b, …, and each keeps its least time. Taking turns puts both under the same load; the
// least drops the runs a busy moment slowed. No absolute figure, which a loaded machine breaks.

/** The least time of each side over `rounds` turns; each side times itself (what it prepares is not counted). */
export async function inTurns(a: () => number | Promise<number>, b: () => number | Promise<number>, rounds = 3): Promise<{ a: number; b: number }> {
  const as: number[] = [];
  const bs: number[] = [];
  for (let round = 0; round < rounds; round++) {
    as.push(await a());
    bs.push(await b());
  }
  return { a: Math.min(...as), b: Math.min(...bs) };
}

/** How long `work` takes, in milliseconds. */
export async function timed(work: () => unknown): Promise<number> {
  const started = performance.now();
  await work();
  return performance.now() - started;
}
