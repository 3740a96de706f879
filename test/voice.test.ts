// One voice (issue 15, part 4): one success mark and one failure mark, possessives right, one
// style for suggestions. Some of it is a property of every message in src/, checked here on the
// source itself; the rest on what commands print.
import assert from "node:assert/strict";
import { readdirSync, readFileSync } from "node:fs";
import path from "node:path";
import { describe, test } from "node:test";
import { describeClaimant, describeDropped } from "../src/agents/describe.ts";
import { possessive } from "../src/output/possessive.ts";
import { MARK } from "../src/output/style.ts";
import { REPO } from "./support/cli.ts";

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
    const found = codeLines().filter(({ where, line }) => !where.startsWith(path.join("src", "output", "possessive.ts")) && (/\}'s\b/.test(line) || /[a-z]s's\b/.test(line)));
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
