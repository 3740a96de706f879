// The package as users get it: `npm pack`, then `npm install -g` of that tarball into an empty
// prefix (dependencies from the npm registry, better-sqlite3 built as on their machine), then
// the installed `subs` run outside the source tree. Also: every relative link of every document
// in the tarball leads to a file in the tarball. The install costs a minute and the registry, and
// only the package files can break it: it runs with SUBS_TEST_PACKAGE=1, which .ci/run sets when
// they changed since it last passed (scripts/package-stamp.mjs; CONTRIBUTING.md, "The package
// check"); without it the runner reports it skipped, saying so. Once passed, it records the stamp.
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { existsSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import { homedir, tmpdir } from "node:os";
import path from "node:path";
import { after, before, describe, test } from "node:test";
import { ensureBuilt, REPO } from "./support/cli.ts";

describe("the packed package, installed", { timeout: 600_000 }, () => {
  const work = mkdtempSync(path.join(tmpdir(), "subs-package-"));
  const prefix = path.join(work, "prefix");
  const unpacked = path.join(work, "unpacked");
  let files: string[] = [];
  let tarball = "";
  // npm's own cache, so the registry is asked only for what it does not hold yet.
  const npmEnv = { ...process.env, npm_config_cache: process.env.npm_config_cache ?? path.join(homedir(), ".npm"), npm_config_update_notifier: "false" };

  before(() => {
    ensureBuilt();
    const packed = spawnSync("npm", ["pack", "--json", "--ignore-scripts", "--pack-destination", work], { cwd: REPO, encoding: "utf8", env: npmEnv });
    assert.equal(packed.status, 0, packed.stderr);
    const [info] = JSON.parse(packed.stdout) as Array<{ filename: string; files: Array<{ path: string }> }>;
    files = info!.files.map((f) => f.path);
    tarball = path.join(work, info!.filename);
    spawnSync("mkdir", ["-p", unpacked]);
    assert.equal(spawnSync("tar", ["-xzf", tarball, "-C", unpacked, "--strip-components=1"]).status, 0);
  });
  after(() => rmSync(work, { recursive: true, force: true }));

  test("it is `substructure`, its command `subs`, and it holds the bundle, the schema, the documents and the license, no code cache", () => {
    assert.match(path.basename(tarball), /^substructure-\d+\.\d+\.\d+\.tgz$/);
    const manifest = JSON.parse(readFileSync(path.join(unpacked, "package.json"), "utf8")) as { bin: Record<string, string>; license: string; engines: { node: string } };
    assert.deepEqual(Object.keys(manifest.bin), ["subs"]);
    assert.equal(manifest.license, "MIT");
    assert.ok(manifest.engines.node);
    for (const file of ["bin/subs.cjs", "dist/subs.cjs", "substructure.schema.json", "README.md", "LICENSE", "CHANGELOG.md", "SECURITY.md", "docs/commands.md", "docs/serve.md"]) {
      assert.ok(files.includes(file), `${file} is not in the package (${files.join(", ")})`);
    }
    assert.deepEqual(files.filter((f) => /\.cache/.test(f) || f.startsWith("src/") || f.startsWith("test/")), []);
  });

  test("every relative link in the packed documents reaches a packed file", () => {
    const broken: string[] = [];
    for (const doc of files.filter((f) => f.endsWith(".md"))) {
      const text = readFileSync(path.join(unpacked, doc), "utf8").replace(/```[\s\S]*?```/g, "").replace(/`[^`\n]*`/g, "");
      for (const m of text.matchAll(/\]\(([^)\s]+)\)/g)) {
        const target = m[1]!.split("#")[0]!;
        if (target === "" || /^[a-z][a-z0-9+.-]*:/i.test(target)) continue;
        const resolved = path.posix.normalize(path.posix.join(path.posix.dirname(doc), decodeURIComponent(target)));
        if (!files.includes(resolved) && !files.some((f) => f.startsWith(`${resolved}/`))) broken.push(`${doc} -> ${target}`);
      }
    }
    assert.deepEqual(broken, []);
  });

  const install = process.env.SUBS_TEST_PACKAGE === "1" ? false : "the global install runs with SUBS_TEST_PACKAGE=1; .ci/run sets it when the package files changed (CONTRIBUTING.md, \"The package check\")";
  test("npm install -g of the tarball gives a `subs` that works outside the source tree", { skip: install }, () => {
    const installed = spawnSync("npm", ["install", "-g", "--prefix", prefix, "--no-audit", "--no-fund", tarball], { cwd: work, encoding: "utf8", env: npmEnv });
    assert.equal(installed.status, 0, installed.stderr);
    const subs = path.join(prefix, "bin", "subs");
    assert.ok(existsSync(subs));
    const project = mkdtempSync(path.join(tmpdir(), "subs-package-project-"));
    // A clean environment: nothing of this checkout (no SUBS_CONFIG, no NODE_PATH), a home of its own.
    const env = { PATH: `${path.join(prefix, "bin")}:${path.dirname(process.execPath)}:/usr/bin:/bin`, HOME: project };
    const run = (...argv: string[]) => spawnSync(subs, argv, { cwd: project, encoding: "utf8", env });
    const version = run("--version");
    assert.equal(version.status, 0, version.stderr);
    assert.equal(version.stdout.trim(), JSON.parse(readFileSync(path.join(REPO, "package.json"), "utf8")).version);
    const help = run("--help");
    assert.equal(help.status, 0, help.stderr);
    assert.match(help.stdout, /^Usage: subs /);
    const init = run("init", "sentry=https://mcp.sentry.dev/mcp");
    assert.equal(init.status, 0, init.stderr);
    const list = run("mcp", "list", "--json");
    assert.equal(list.status, 0, list.stderr);
    assert.deepEqual((JSON.parse(list.stdout) as Array<{ id: string; status: string }>).map((c) => [c.id, c.status]), [["sentry", "needs_login"]]);
    const schema = run("schema");
    assert.equal(schema.status, 0, schema.stderr);
    assert.equal((JSON.parse(schema.stdout) as { $schema?: string }).$schema !== undefined, true);
    rmSync(project, { recursive: true, force: true });
    // Passed: the package files as they are now are the ones last checked.
    const stamped = spawnSync(process.execPath, [path.join(REPO, "scripts", "package-stamp.mjs"), "--write"], { encoding: "utf8" });
    assert.equal(stamped.status, 0, stamped.stderr);
  });
});
