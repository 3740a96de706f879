// The package check's stamp. A global install of the packed tarball (test/package.e2e.test.ts,
// with SUBS_TEST_PACKAGE=1) costs a minute and the npm registry, and only the files that make the
// package can break it: the manifest and its `files` list, the lock file, the bundler and its
// externals, the launcher, and the check itself. .ci/package-checked holds a hash of them as they
// were when the check last passed; .ci/run runs the check when the hash differs (CONTRIBUTING.md,
// "The package check"). By content, not by history: it reads the same on a shallow clone.
//   node scripts/package-stamp.mjs           the current hash
//   node scripts/package-stamp.mjs --check   exit 0 when the stamp matches, 1 (and why) when not
//   node scripts/package-stamp.mjs --write   record the current hash (the check does, once passed)
import { createHash } from "node:crypto";
import { existsSync, readdirSync, readFileSync, writeFileSync } from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";

const root = fileURLToPath(new URL("..", import.meta.url));
const STAMP = path.join(root, ".ci", "package-checked");
const FILES = ["package.json", "package-lock.json", "scripts/build.mjs", "scripts/package-stamp.mjs", "test/package.e2e.test.ts"];
const DIRS = ["bin"];

function packageFiles() {
  const inDirs = DIRS.flatMap((dir) =>
    readdirSync(path.join(root, dir), { recursive: true, withFileTypes: true })
      .filter((e) => e.isFile())
      .map((e) => path.relative(root, path.join(e.parentPath ?? e.path, e.name)).split(path.sep).join("/")),
  );
  return [...FILES, ...inDirs].sort();
}

function packageHash() {
  const hash = createHash("sha256");
  for (const file of packageFiles()) hash.update(`${file}\0`).update(readFileSync(path.join(root, file))).update("\0");
  return hash.digest("hex");
}

const [mode] = process.argv.slice(2);
if (mode === "--write") {
  writeFileSync(STAMP, `${packageHash()}\n`);
} else if (mode === "--check") {
  const recorded = existsSync(STAMP) ? readFileSync(STAMP, "utf8").trim() : "(none)";
  const now = packageHash();
  if (recorded === now) {
    process.stderr.write(`package files unchanged since the package check last passed (${now.slice(0, 12)})\n`);
  } else {
    process.stderr.write(`the package files (${packageFiles().join(", ")}) changed since the package check last passed (.ci/package-checked ${recorded.slice(0, 12)}, now ${now.slice(0, 12)})\n`);
    process.exitCode = 1;
  }
} else if (mode === undefined) {
  process.stdout.write(`${packageHash()}\n`);
} else {
  process.stderr.write("usage: node scripts/package-stamp.mjs [--check | --write]\n");
  process.exitCode = 2;
}
