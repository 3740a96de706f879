import type { Output } from "../context.ts";

export function writeJson(out: Output, value: unknown): void {
  out.write(JSON.stringify(value, null, 2) + "\n");
}
