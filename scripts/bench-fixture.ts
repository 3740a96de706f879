// What scripts/bench.ts and scripts/bench-phases.ts both measure on: a file of N
// connections, one agent using up to 50 of them, and a db holding a credential for each.
import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { seedCredentials } from "../test/support/credentials.ts";

export async function benchEnvironment(connections: number, prefix: string): Promise<string> {
  const dir = mkdtempSync(path.join(tmpdir(), `${prefix}-${connections}-`));
  const lines: string[] = [];
  for (let i = 0; i < connections; i++) lines.push(`[mcp.c${i}]\nurl = "https://s${i}.example.com/mcp"\n`);
  lines.push(`[agent.all]\nmcp = [${Array.from({ length: Math.min(connections, 50) }, (_, i) => `"c${i}"`).join(", ")}]\n`);
  writeFileSync(path.join(dir, "substructure.toml"), lines.join("\n"));
  await seedCredentials(
    path.join(dir, "substructure.db"),
    Array.from({ length: connections }, (_, i) => ({ id: `c${i}`, url: `https://s${i}.example.com/mcp` })),
  );
  return dir;
}

export function median(xs: readonly number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  return s.length % 2 ? s[(s.length - 1) / 2]! : (s[s.length / 2 - 1]! + s[s.length / 2]!) / 2;
}
