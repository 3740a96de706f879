// The user documentation stays true to the repository and to the CLI: every relative link (and
// #anchor) in README.md, CONTRIBUTING.md, SECURITY.md and docs/*.md reaches something that exists;
// the README's command list and `subs --help` name the same commands, both ways; user documents
// say what the behaviour is, never which issue or internal rule asked for it.
import assert from "node:assert/strict";
import { existsSync, mkdtempSync, mkdirSync, readdirSync, readFileSync, statSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { test } from "node:test";
import { REPO, runCli } from "./support/cli.ts";

const docsIn = (root: string) =>
  existsSync(path.join(root, "docs"))
    ? readdirSync(path.join(root, "docs"))
        .filter((f) => f.endsWith(".md"))
        .map((f) => path.join("docs", f))
    : [];
/** What users read: no issue numbers, no internal rule numbers. */
const userDocs = (root: string) => ["README.md", "SECURITY.md", ...docsIn(root)].filter((f) => existsSync(path.join(root, f)));
/** Every document whose links are checked. */
const linkedDocs = (root: string) => [...userDocs(root), "CONTRIBUTING.md"].filter((f) => existsSync(path.join(root, f)));

/** The text outside fenced code blocks, line numbers kept (fenced lines become empty). */
function prose(text: string): string[] {
  let fence: string | undefined;
  return text.split("\n").map((line) => {
    const marker = /^\s*(```+|~~~+)/.exec(line)?.[1];
    if (marker && (fence === undefined || marker.startsWith(fence))) {
      fence = fence === undefined ? marker : undefined;
      return "";
    }
    return fence === undefined ? line : "";
  });
}

/** GitHub's anchor for a heading: lower case, punctuation dropped, each space a hyphen. */
function slug(heading: string): string {
  return heading
    .replace(/\[([^\]]*)\]\([^)]*\)/g, "$1")
    .toLowerCase()
    .replace(/[^\p{L}\p{N} _-]/gu, "")
    .replace(/ /g, "-");
}

function anchorsOf(file: string): Set<string> {
  const anchors = new Set<string>();
  const seen = new Map<string, number>();
  for (const line of prose(readFileSync(file, "utf8"))) {
    const heading = /^#{1,6}\s+(.*?)\s*#*\s*$/.exec(line)?.[1];
    if (heading === undefined) continue;
    const base = slug(heading);
    const n = seen.get(base) ?? 0;
    seen.set(base, n + 1);
    anchors.add(n === 0 ? base : `${base}-${n}`);
  }
  for (const m of readFileSync(file, "utf8").matchAll(/<a\s+(?:name|id)="([^"]+)"/g)) anchors.add(m[1]!);
  return anchors;
}

/** Every relative link of the documents under `root` that does not reach a file (or an anchor in it). */
function brokenLinks(root: string, files: readonly string[]): string[] {
  const broken: string[] = [];
  for (const file of files) {
    const lines = prose(readFileSync(path.join(root, file), "utf8"));
    lines.forEach((line, n) => {
      // Inline code is not a link: `[mcp.<id>]` (…) must not read as one.
      const text = line.replace(/``.+?``|`[^`]*`/g, "code");
      for (const m of text.matchAll(/\]\(\s*<?([^)\s>]+)>?(?:\s+"[^"]*")?\s*\)/g)) {
        const target = m[1]!;
        if (/^[a-z][a-z0-9+.-]*:/i.test(target)) continue; // https:, mailto:: not a file of the repository
        const [pathPart = "", anchor] = target.split("#", 2) as [string, string | undefined];
        const where = `${file}:${n + 1}: ${target}`;
        const resolved = pathPart === "" ? path.join(root, file) : path.resolve(path.join(root, path.dirname(file)), decodeURIComponent(pathPart));
        if (!resolved.startsWith(path.resolve(root)) || !existsSync(resolved)) {
          broken.push(`${where} (no such file)`);
          continue;
        }
        if (anchor !== undefined && anchor !== "" && statSync(resolved).isFile() && resolved.endsWith(".md") && !anchorsOf(resolved).has(decodeURIComponent(anchor))) {
          broken.push(`${where} (no such heading in ${path.relative(root, resolved)})`);
        }
      }
    });
  }
  return broken;
}

/** Lines of user documents that name an issue or an internal rule by number. */
function internalReferences(root: string, files: readonly string[]): string[] {
  const found: string[] = [];
  for (const file of files) {
    readFileSync(path.join(root, file), "utf8")
      .split("\n")
      .forEach((line, n) => {
        if (/\bissues? #?\d+|\brules? \d/i.test(line)) found.push(`${file}:${n + 1}: ${line.trim()}`);
      });
  }
  return found;
}

/** The commands the README's "## Commands" list names: `- \`subs mcp add <id> <url>\`: …` gives "mcp add". */
function readmeCommands(readme: string): string[] {
  const start = readme.indexOf("\n## Commands\n");
  assert.ok(start !== -1, "README.md has a ## Commands section");
  const end = readme.indexOf("\n## ", start + 1);
  const section = readme.slice(start, end === -1 ? undefined : end);
  const commands: string[] = [];
  for (const m of section.matchAll(/^- `subs ([^`]*)`/gm)) {
    const words: string[] = [];
    for (const word of m[1]!.split(/\s+/)) {
      if (!/^[a-z][a-z-]*$/.test(word)) break;
      words.push(word);
    }
    commands.push(words.join(" "));
  }
  return commands;
}

/** The names a commander help lists under "Commands:". */
function helpCommands(help: string): string[] {
  const start = help.indexOf("\nCommands:\n");
  if (start === -1) return [];
  const names: string[] = [];
  for (const line of help.slice(start + "\nCommands:\n".length).split("\n")) {
    if (line.trim() === "") break;
    const name = /^ {2}(\S+)/.exec(line)?.[1];
    if (name) names.push(name);
  }
  return names;
}

test("every relative link in README.md, CONTRIBUTING.md, SECURITY.md and docs/*.md reaches a file, and its #anchor a heading", () => {
  const files = linkedDocs(REPO);
  assert.ok(files.includes("README.md") && files.includes("CONTRIBUTING.md") && files.includes("docs/commands.md"), files.join(", "));
  assert.deepEqual(brokenLinks(REPO, files), []);
});

test("the link check finds a missing file, a missing anchor and a link out of the repository; it ignores code and URLs", () => {
  const root = mkdtempSync(path.join(tmpdir(), "subs-docs-"));
  mkdirSync(path.join(root, "docs"));
  writeFileSync(path.join(root, "docs", "a.md"), "# A page\n\n## `subs mcp login` with `[remote]`\n");
  writeFileSync(
    path.join(root, "README.md"),
    [
      "[fine](docs/a.md) [fine](docs/a.md#a-page) [fine](docs/a.md#subs-mcp-login-with-remote) [fine](#top-of-it)",
      "# Top of it",
      "[gone](docs/b.md) [no heading](docs/a.md#b-page) [outside](../x.md) [self](#nowhere)",
      "`[code](not-a-link.md)` and [web](https://example.com/missing.md)",
      "```",
      "[fenced](also-not-a-link.md)",
      "```",
    ].join("\n"),
  );
  assert.deepEqual(brokenLinks(root, ["README.md", "docs/a.md"]), [
    "README.md:3: docs/b.md (no such file)",
    "README.md:3: docs/a.md#b-page (no such heading in docs/a.md)",
    "README.md:3: ../x.md (no such file)",
    "README.md:3: #nowhere (no such heading in README.md)",
  ]);
});

test("user documents name no issue number and no internal rule", () => {
  const files = userDocs(REPO);
  assert.ok(files.includes("SECURITY.md") && files.includes("docs/speed.md"), files.join(", "));
  assert.deepEqual(internalReferences(REPO, files), []);
  // The check itself: it would catch both.
  const root = mkdtempSync(path.join(tmpdir(), "subs-docs-"));
  writeFileSync(path.join(root, "README.md"), "fixed in issue 13\nas Development, rule 5 requires\nan issuer 7 is fine\n");
  assert.deepEqual(internalReferences(root, ["README.md"]), ["README.md:1: fixed in issue 13", "README.md:2: as Development, rule 5 requires"]);
});

test("the README's command list and `subs --help` name the same commands, both ways", async () => {
  const cwd = mkdtempSync(path.join(tmpdir(), "subs-docs-"));
  const top = await runCli(["--help"], { cwd });
  assert.equal(top.code, 0, top.stderr);
  const inHelp: string[] = [];
  for (const name of helpCommands(top.stdout)) {
    if (name === "help") {
      inHelp.push("help");
      continue;
    }
    const sub = await runCli([name, "--help"], { cwd });
    assert.equal(sub.code, 0, `${name} --help: ${sub.stderr}`);
    // A group's own `help` is `subs help <group> …`, listed once as `subs help`.
    const children = helpCommands(sub.stdout).filter((child) => child !== "help");
    if (children.length === 0) inHelp.push(name);
    else for (const child of children) inHelp.push(`${name} ${child}`);
  }
  assert.ok(inHelp.includes("mcp login") && inHelp.includes("agent tools") && inHelp.includes("init"), inHelp.join(", "));
  const inReadme = readmeCommands(readFileSync(path.join(REPO, "README.md"), "utf8"));
  assert.deepEqual(
    inHelp.filter((c) => !inReadme.includes(c)),
    [],
    "commands in --help missing from the README's list",
  );
  assert.deepEqual(
    inReadme.filter((c) => !inHelp.includes(c)),
    [],
    "commands in the README's list that --help does not show",
  );
  assert.equal(new Set(inReadme).size, inReadme.length, `one line per command: ${inReadme.join(", ")}`);
  // Each command has its section in docs/commands.md.
  const anchors = anchorsOf(path.join(REPO, "docs", "commands.md"));
  assert.deepEqual(
    inHelp.filter((c) => c !== "help" && !anchors.has(slug(`\`subs ${c}\``))),
    [],
    "commands without a section in docs/commands.md",
  );
});

/** Every file under `dir` whose name ends in `.ts`. */
function sources(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((entry) => {
    const full = path.join(dir, entry.name);
    return entry.isDirectory() ? sources(full) : entry.name.endsWith(".ts") ? [full] : [];
  });
}

test("every environment variable subs reads is in docs/environment.md", () => {
  const read = new Set<string>();
  for (const file of sources(path.join(REPO, "src"))) {
    const text = readFileSync(file, "utf8");
    for (const m of text.matchAll(/\benv\.([A-Z][A-Z0-9_]+)\b/g)) read.add(m[1]!);
    for (const m of text.matchAll(/\benv\[["']([A-Z][A-Z0-9_]+)["']\]/g)) read.add(m[1]!);
    // Names kept in constants (`env[MAX_ANSWER_ENV]`): subs's own all start with SUBS_.
    for (const m of text.matchAll(/["'`](SUBS_[A-Z0-9_]+)["'`]/g)) read.add(m[1]!);
  }
  assert.ok(read.has("SUBS_CONFIG") && read.has("CODEX_HOME"), "the scan finds what it looks for");
  const documented = readFileSync(path.join(REPO, "docs", "environment.md"), "utf8");
  const missing = [...read].filter((name) => !documented.includes(`\`${name}\``)).sort();
  assert.deepEqual(missing, [], `read in src/ but not in docs/environment.md: ${missing.join(", ")}`);
});

test("every YAML block in the documents parses (the CI workflow a team copies), and the workflow installs subs and runs apply", async () => {
  const { parse } = await import("yaml");
  const blocks: Array<{ doc: string; text: string }> = [];
  for (const doc of ["README.md", ...readdirSync(path.join(REPO, "docs")).filter((f) => f.endsWith(".md")).map((f) => `docs/${f}`)]) {
    for (const m of readFileSync(path.join(REPO, doc), "utf8").matchAll(/```ya?ml\n([\s\S]*?)```/g)) blocks.push({ doc, text: m[1]! });
  }
  assert.ok(blocks.length > 0, "the documents hold a YAML block");
  for (const { doc, text } of blocks) assert.doesNotThrow(() => parse(text, { strict: true, uniqueKeys: true }), doc);
  const workflow = blocks.map(({ text }) => parse(text) as { jobs?: Record<string, { steps?: Array<{ run?: string }> }> }).find((y) => y.jobs);
  const runs = Object.values(workflow?.jobs ?? {}).flatMap((job) => (job.steps ?? []).map((step) => step.run ?? ""));
  assert.ok(runs.some((r) => /npm install -g substructure@\d/.test(r)), runs.join(" | "));
  assert.ok(runs.some((r) => /^subs apply --dry-run/.test(r)) && runs.some((r) => /^subs apply --json/.test(r)), runs.join(" | "));
});

test("docs/speed.md's benchmark table is the one `npm run bench:docs` makes from the results it quotes, never typed", async () => {
  const { quotedRegion, speedRegion } = await import("../scripts/bench-docs.ts");
  const { region, results } = quotedRegion(readFileSync(path.join(REPO, "docs", "speed.md"), "utf8"));
  assert.equal(region, speedRegion(results));
  // A figure typed into the table is caught.
  const typed = region.replace(/\| (\d+)\.(\d) ms \|/, (_, whole: string, tenth: string) => `| ${whole}.${(Number(tenth) + 1) % 10} ms |`);
  assert.notEqual(typed, region);
  assert.notEqual(typed, speedRegion(quotedRegion(typed).results));
});
