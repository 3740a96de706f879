import { spawnSync } from "node:child_process";
import path from "node:path";

/**
 * A warning when `dbPath` sits in a git work tree that does not ignore it: the db holds
 * credentials (connectors.md: "A local database holds credentials. Add `*.db*` to .gitignore").
 */
export function unignoredDbWarning(dbPath: string): string | undefined {
  const dir = path.dirname(dbPath);
  const inside = spawnSync("git", ["rev-parse", "--is-inside-work-tree"], { cwd: dir, encoding: "utf8" });
  if (inside.status !== 0 || inside.stdout.trim() !== "true") return undefined;
  const ignored = spawnSync("git", ["check-ignore", "-q", "--", path.basename(dbPath)], { cwd: dir });
  if (ignored.status === 0) return undefined;
  return `${path.basename(dbPath)} holds credentials and is not ignored by git: add \`*.db*\` to .gitignore`;
}
