// The shape CONTRIBUTING.md's rules give the source, read from src/ itself: imports run one way
// (no circle; the core never reaches up into output/ or commands/), each command written once,
// small functions, and comments that give a reason rather than a ticket's number. Each rule is
// also run on a small tree built to break it, so a rule that could never fail is caught here.
import assert from "node:assert/strict";
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { readFileSync, readdirSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { describe, test } from "node:test";
import { importCircles, importsAcross, issueNumbersInComments, longFunctions, readModules } from "./support/architecture.ts";

const SRC = path.join(import.meta.dirname, "..", "src");

/** The folders that compute: they return values, diagnostics and typed errors, and never word, sanitise or print them. */
const CORE = ["config", "auth", "store", "status", "mcp", "agents", "clients", "import", "connect", "apply", "remote", "http", "serve"];
/** Where words, sanitising and printing live (with cli.ts, run.ts, main.ts and report.ts, the shell). */
const SHELL_FOLDERS = ["output", "commands"];
const CLI_MAX_LINES = 200;
const FUNCTION_MAX_LINES = 150;

const modules = readModules(SRC);

function remoteTwins(root: string): string[] {
  return readdirSync(path.join(root, "commands")).filter((name) => /-remote\.ts$/.test(name));
}

const lineCount = (file: string) => readFileSync(file, "utf8").split("\n").length - (readFileSync(file, "utf8").endsWith("\n") ? 1 : 0);

describe("src/", () => {
  test("no import circle among its modules (static, dynamic and type imports alike)", () => {
    assert.deepEqual(importCircles(modules), [], "each circle is listed as the path that closes it");
  });

  test(`the core folders (${CORE.join(", ")}) never import output/ or commands/`, () => {
    assert.deepEqual(importsAcross(modules, CORE, SHELL_FOLDERS), []);
  });

  test("no src/commands/*-remote.ts: each command is written once, whichever place holds the credentials", () => {
    assert.deepEqual(remoteTwins(SRC), []);
  });

  test(`src/cli.ts is under ${CLI_MAX_LINES} lines`, () => {
    const lines = lineCount(path.join(SRC, "cli.ts"));
    assert.ok(lines < CLI_MAX_LINES, `src/cli.ts has ${lines} lines`);
  });

  test(`no function in src/ is over ${FUNCTION_MAX_LINES} lines`, () => {
    assert.deepEqual(longFunctions(modules, FUNCTION_MAX_LINES), []);
  });

  test('no comment in src/ cites an issue number ("issue 16", "issue #16"): it gives the reason or a docs section', () => {
    assert.deepEqual(issueNumbersInComments(modules), []);
  });
});

describe("each rule fails on a tree that breaks it", () => {
  const tree = (files: Record<string, string>) => {
    const root = mkdtempSync(path.join(tmpdir(), "subs-architecture-"));
    for (const [file, text] of Object.entries(files)) {
      mkdirSync(path.dirname(path.join(root, file)), { recursive: true });
      writeFileSync(path.join(root, file), text);
    }
    return root;
  };

  test("a circle through a dynamic import() and a type import is found, with its path", () => {
    const root = tree({
      "auth/a.ts": 'export async function a() { return (await import("./b.ts")).b; }\n',
      "auth/b.ts": 'import type { C } from "./c.ts";\nexport const b = (c: C) => c;\n',
      "auth/c.ts": 'import { a } from "./a.ts";\nexport type C = typeof a;\n',
      "auth/d.ts": 'import { a } from "./a.ts";\nexport const d = a;\n',
    });
    try {
      assert.deepEqual(importCircles(readModules(root)), ["auth/a.ts → auth/b.ts → auth/c.ts → auth/a.ts"]);
    } finally {
      rmSync(root, { recursive: true, force: true });
    }
  });

  test("a core module importing output/ or commands/ is found, an output/ module importing the core is not", () => {
    const root = tree({
      "config/find.ts": 'export { shellWord } from "../output/shell-word.ts";\n',
      "import/clients/x.ts": 'const run = () => import("../../commands/mcp-list.ts");\nexport { run };\n',
      "output/shell-word.ts": 'import { CONFIG } from "../config/names.ts";\nexport const shellWord = (w: string) => w + CONFIG;\n',
      "commands/mcp-list.ts": "export const run = 1;\n",
    });
    try {
      assert.deepEqual(importsAcross(readModules(root), CORE, SHELL_FOLDERS), [
        "config/find.ts imports output/shell-word.ts",
        "import/clients/x.ts imports commands/mcp-list.ts",
      ]);
    } finally {
      rmSync(root, { recursive: true, force: true });
    }
  });

  test("a *-remote.ts command is found", () => {
    const root = tree({ "commands/mcp-list.ts": "", "commands/mcp-list-remote.ts": "", "commands/remote.ts": "" });
    try {
      assert.deepEqual(remoteTwins(root), ["mcp-list-remote.ts"]);
    } finally {
      rmSync(root, { recursive: true, force: true });
    }
  });

  test("a file's lines are counted as an editor counts them", () => {
    const root = tree({ "a.ts": "x\n".repeat(CLI_MAX_LINES), "b.ts": "x\n".repeat(CLI_MAX_LINES - 1) + "x" });
    try {
      assert.equal(lineCount(path.join(root, "a.ts")), CLI_MAX_LINES);
      assert.equal(lineCount(path.join(root, "b.ts")), CLI_MAX_LINES);
    } finally {
      rmSync(root, { recursive: true, force: true });
    }
  });

  test("a function, an arrow and a method over the limit are found, each by its name; one at the limit is not", () => {
    const body = (n: number) => "  x();\n".repeat(n - 2);
    const root = tree({
      "a.ts": [
        `export function atLimit() {\n${body(FUNCTION_MAX_LINES)}}`,
        `export function tooLong() {\n${body(FUNCTION_MAX_LINES + 1)}}`,
        `export const arrow = () => {\n${body(FUNCTION_MAX_LINES + 1)}};`,
        `export class K {\n  method() {\n${body(FUNCTION_MAX_LINES + 1)}  }\n}`,
        "declare function x(): void;\n",
      ].join("\n"),
    });
    try {
      const found = longFunctions(readModules(root), FUNCTION_MAX_LINES).map((line) => line.replace(/^a\.ts:\d+ /, ""));
      assert.deepEqual(found, [`tooLong: ${FUNCTION_MAX_LINES + 1} lines`, `arrow: ${FUNCTION_MAX_LINES + 1} lines`, `method: ${FUNCTION_MAX_LINES + 1} lines`]);
    } finally {
      rmSync(root, { recursive: true, force: true });
    }
  });

  test("an issue number in a line, block or JSDoc comment is found, in a string or a name it is not", () => {
    const root = tree({
      "a.ts": [
        "// Why this is so (issue 16).",
        "/** Each step (issue #3, item 2). */",
        "export const f = (a: number) => {",
        "  return a; /* Issues 4 and 5 */",
        "};",
        'export const s = "issue 16 is a string";',
        "export const issue16 = 1; // RFC 6749 §4.1",
        "export const g = { a: 1, // see issue 7",
        "};",
      ].join("\n"),
    });
    try {
      assert.deepEqual(issueNumbersInComments(readModules(root)), ["a.ts:1: issue 16", "a.ts:2: issue #3", "a.ts:4: Issues 4", "a.ts:8: issue 7"]);
    } finally {
      rmSync(root, { recursive: true, force: true });
    }
  });
});
