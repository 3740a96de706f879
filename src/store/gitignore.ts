import { spawnSync } from "node:child_process";
import path from "node:path";

/** Whether git would commit `dbPath`: inside a work tree and not ignored. */
export function dbUnignoredByGit(dbPath: string): boolean {
  const dir = path.dirname(dbPath);
  const inside = spawnSync("git", ["rev-parse", "--is-inside-work-tree"], { cwd: dir, encoding: "utf8" });
  if (inside.status !== 0 || inside.stdout.trim() !== "true") return false;
  const ignored = spawnSync("git", ["check-ignore", "-q", "--", path.basename(dbPath)], { cwd: dir });
  return ignored.status !== 0;
}

/**
 * A warning when `dbPath` sits in a git work tree that does not ignore it: the db holds
 * credentials (connectors.md: "A local database holds credentials. Add `*.db*` to .gitignore").
 */
export function unignoredDbWarning(dbPath: string): string | undefined {
  if (!dbUnignoredByGit(dbPath)) return undefined;
  return `${path.basename(dbPath)} holds credentials and is not ignored by git: add \`*.db*\` to .gitignore`;
}
