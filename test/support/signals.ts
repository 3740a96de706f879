// What an AbortSignal keeps of the signals made from it: Node 20 keeps the dependants of
// AbortSignal.any() in a set under the symbol kDependantSignals (src/http/deadline.ts says why that
// matters). Read from Node's internals, so in one place.

/** How many signals of AbortSignal.any() `signal` keeps as dependants (0 where Node keeps no such set). */
export function dependantsOf(signal: AbortSignal): number {
  const key = Object.getOwnPropertySymbols(signal).find((s) => s.description === "kDependantSignals");
  const dependants = key === undefined ? undefined : (signal as unknown as Record<symbol, Set<unknown> | undefined>)[key];
  return dependants?.size ?? 0;
}
