import { Chalk, type ChalkInstance } from "chalk";

/** Colours for human output; level 0 (none) when the context says no colour. */
export function styleFor(color: boolean): ChalkInstance {
  return new Chalk({ level: color ? 1 : 0 });
}
