// Runs every test/**/*.test.ts with Node's own runner. Node 20's --test takes no globs, so the
// files are listed here. Extra arguments go to the runner (e.g. --test-name-pattern).
import { spawnSync } from "node:child_process";
import { readdirSync } from "node:fs";
import { availableParallelism } from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";

const root = fileURLToPath(new URL("..", import.meta.url));
const files = readdirSync(path.join(root, "test"), { recursive: true })
  .map(String)
  .filter((f) => f.endsWith(".test.ts"))
  .sort()
  .map((f) => path.join("test", f));
// Files run one more at a time than there are cores: about a third of a file's time is spent
// waiting (for a token to expire, a server to start, a child to exit), so with one file per core
// a 2-core machine idles (timed file by file on a shared 2-core machine, the files' CPU time was
// about two thirds of their wall-clock time). SUBS_TEST_CONCURRENCY sets it (1 to run the files one by one).
const concurrency = Number(process.env.SUBS_TEST_CONCURRENCY) || Math.max(2, availableParallelism() + 1);
const args = process.argv.slice(2);
const named = args.filter((a) => a.endsWith(".ts"));
const result = spawnSync(
  process.execPath,
  ["--import", "tsx", "--test", `--test-concurrency=${concurrency}`, ...args.filter((a) => !a.endsWith(".ts")), ...(named.length ? named : files)],
  { cwd: root, stdio: "inherit" },
);
process.exit(result.status ?? 1);
