// Runs every test/**/*.test.ts with Node's own runner. Node 20's --test takes no globs, so the
// files are listed here. Extra arguments go to the runner (e.g. --test-name-pattern).
import { spawnSync } from "node:child_process";
import { readdirSync } from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";

const root = fileURLToPath(new URL("..", import.meta.url));
const files = readdirSync(path.join(root, "test"), { recursive: true })
  .map(String)
  .filter((f) => f.endsWith(".test.ts"))
  .sort()
  .map((f) => path.join("test", f));
const args = process.argv.slice(2);
const named = args.filter((a) => a.endsWith(".ts"));
const result = spawnSync(
  process.execPath,
  ["--import", "tsx", "--test", "--test-concurrency=2", ...args.filter((a) => !a.endsWith(".ts")), ...(named.length ? named : files)],
  { cwd: root, stdio: "inherit" },
);
process.exit(result.status ?? 1);
