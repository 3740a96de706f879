// The lock beside a substructure.toml, read and checked; undefined when there is none (then
// nothing is withheld). A lock that cannot be read or is wrong is an error: a broken lock never
// means "no lock". zod (in tool-lock-parse.ts) is loaded only when there is a lock to check
// (CONTRIBUTING.md, rule 7).
import { lockPathOf, readLockSource, type ToolLock } from "./tool-lock.ts";

export async function readToolLock(configPath: string, cwd: string): Promise<ToolLock | undefined> {
  const file = lockPathOf(configPath);
  const source = readLockSource(file, cwd);
  return source === undefined ? undefined : (await import("./tool-lock-parse.ts")).parseToolLock(source, { path: file, cwd });
}
