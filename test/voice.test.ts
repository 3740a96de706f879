// One voice: one success mark and one failure mark, possessives right, one
// style for suggestions. Some of it is a property of every message in src/, checked here on the
// source itself; the rest on what commands print.
import assert from "node:assert/strict";
import { readdirSync, readFileSync } from "node:fs";
import path from "node:path";
import { describe, test } from "node:test";
import { describeClaimant, describeDropped } from "../src/agents/describe.ts";
import { possessive } from "../src/text/possessive.ts";
import { MARK } from "../src/output/style.ts";
import { REPO, runInProcess } from "./support/cli.ts";
import { seedCredentials } from "./support/credentials.ts";
import { projectsForThisFile } from "./support/projects.ts";

const project = projectsForThisFile("voice");

/** Every line of code in src/, comments left out, with where it is. */
function codeLines(): Array<{ where: string; line: string }> {
  const out: Array<{ where: string; line: string }> = [];
  const walk = (dir: string) => {
    for (const entry of readdirSync(dir, { withFileTypes: true })) {
      const full = path.join(dir, entry.name);
      if (entry.isDirectory()) walk(full);
      else if (entry.name.endsWith(".ts")) {
        readFileSync(full, "utf8")
          .split("\n")
          .forEach((line, n) => {
            const code = line.trim();
            if (code.startsWith("//") || code.startsWith("*") || code.startsWith("/*")) return;
            out.push({ where: `${path.relative(REPO, full)}:${n + 1}`, line: line.replace(/\s\/\/ .*$/, "") });
          });
      }
    }
  };
  walk(path.join(REPO, "src"));
  return out;
}

describe("marks", () => {
  test("the spinner's marks are the marks", () => {
    assert.deepEqual(MARK, { success: "✔", failure: "✖" });
  });

  test("no other check or cross in any message; ✔ and ✖ written only through MARK", () => {
    const other = /[✓✗✘✕☑☒✅❌❎×]/;
    const found = codeLines().filter(({ where, line }) => other.test(line) || (/[✔✖]/.test(line) && !where.startsWith(path.join("src", "output", "style.ts"))));
    assert.deepEqual(found, []);
  });
});

describe("possessives", () => {
  test("a name ending in s takes the apostrophe alone", () => {
    assert.equal(possessive("docs"), "docs'");
    assert.equal(possessive("sentry"), "sentry's");
    assert.equal(possessive("github-issues"), "github-issues'");
  });

  test("no message builds a possessive by hand from a name (`${id}'s`), nor writes \"s's\"", () => {
    const found = codeLines().filter(({ where, line }) => !where.startsWith(path.join("src", "text", "possessive.ts")) && (/\}'s\b/.test(line) || /[a-z]s's\b/.test(line)));
    assert.deepEqual(found, []);
  });

  test("what agent tools says of a connection named docs", () => {
    assert.equal(describeClaimant({ kind: "connector", connection: "docs", tool: "search" }), "docs' `search`");
    assert.equal(
      describeDropped({ name: "search", connection: "docs", tool: "search", reason: "connector_tool", with: [{ kind: "connector", connection: "sentry", tool: "search" }] } as Parameters<typeof describeDropped>[0]),
      "docs' `search` would be `search`; sentry's `search` has the same name, and both lose it",
    );
  });
});

describe("what a command says it did", () => {
  test("a broken file: \"nothing was changed\" only after a command that would have changed something", async () => {
    const dir = project('[mcp.a]\nurl = "https://a.example/mcp\n');
    for (const argv of [["mcp", "list"], ["agent", "list"], ["apply", "--dry-run"], ["mcp", "tools", "a"]]) {
      const r = await runInProcess(argv, { cwd: dir });
      assert.equal(r.code, 2, argv.join(" "));
      assert.match(r.stderr, /^1 error in substructure\.toml\.$/m, argv.join(" "));
      assert.doesNotMatch(r.stderr, /nothing was changed/, argv.join(" "));
    }
    for (const argv of [["apply"], ["mcp", "login", "a"], ["mcp", "remove", "a"]]) {
      const r = await runInProcess(argv, { cwd: dir });
      assert.equal(r.code, 2, argv.join(" "));
      assert.match(r.stderr, /^1 error in substructure\.toml; nothing was changed\.$/m, argv.join(" "));
    }
  });

  test("local apply without a db: no \"the local db matches\"", async () => {
    const dir = project('[mcp.a]\nurl = "https://a.example/mcp"\n');
    const r = await runInProcess(["apply"], { cwd: dir });
    assert.equal(r.code, 0, r.stderr);
    assert.equal(r.stdout, "");
    assert.equal(r.stderr, "Nothing to do: nothing is stored yet (no substructure.db).\n");
  });

  test("local apply: the changes on stdout, the summary on stderr, a dry run said as with [remote]", async () => {
    const dir = project('[mcp.a]\nurl = "https://a.example/mcp"\n');
    await seedCredentials(path.join(dir, "substructure.db"), [{ id: "a", url: "https://a.example/mcp" }, { id: "gone", url: "https://gone.example/mcp" }]);
    const dry = await runInProcess(["apply", "--dry-run"], { cwd: dir });
    assert.equal(dry.code, 0, dry.stderr);
    assert.equal(dry.stdout, "- gone: would delete its credential (no longer declared)\n");
    assert.equal(dry.stderr, "Would delete 1 credential in substructure.db. Dry run: nothing was changed.\n");
    const done = await runInProcess(["apply"], { cwd: dir });
    assert.equal(done.stdout, "- gone: deleted its credential (no longer declared)\n");
    assert.match(done.stderr, /^Deleted 1 credential in substructure\.db\.$/m);
    const again = await runInProcess(["apply"], { cwd: dir });
    assert.equal(again.stderr, "Nothing to do: the local db matches substructure.toml.\n");
  });
});
