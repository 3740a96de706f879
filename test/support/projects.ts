import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { after } from "node:test";

/**
 * Call at the top level of a test file (its after() hook must belong to the file): a function that
 * makes a temporary directory holding `substructure.toml` with the given text, and returns it.
 * Every one is removed when the file's tests are done.
 */
export function projectsForThisFile(prefix: string): (toml: string) => string {
  const dirs: string[] = [];
  after(() => dirs.forEach((d) => rmSync(d, { recursive: true, force: true })));
  return (toml) => {
    const dir = mkdtempSync(path.join(tmpdir(), `subs-${prefix}-`));
    dirs.push(dir);
    writeFileSync(path.join(dir, "substructure.toml"), toml);
    return dir;
  };
}
