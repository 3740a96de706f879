// The shape ARCHITECTURE.md and CONTRIBUTING.md give the source, read from src/ itself: every part
// of src/ in one of ARCHITECTURE.md's layers (read from that document, not from a copy), imports
// pointing down them (static, dynamic and type imports alike), no circle between modules or between
// folders, no command importing another's code, each command written once (nothing named for local
// or remote at any depth of src/commands/), small functions, and comments that give a reason
// rather than a ticket's number. Each rule is also run on a small tree built to break it the way
// the code once did, so a rule that could never fail is caught here.
import assert from "node:assert/strict";
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { describe, test } from "node:test";
import {
  importCircles,
  importsBetweenCommands,
  importsUpward,
  issueNumbersInComments,
  layersIn,
  longFunctions,
  partCircles,
  placeTwins,
  readModules,
  unplacedParts,
  type Layer,
} from "./support/architecture.ts";

const SRC = path.join(import.meta.dirname, "..", "src");
const LAYERS = layersIn(readFileSync(path.join(import.meta.dirname, "..", "ARCHITECTURE.md"), "utf8"));
const CLI_MAX_LINES = 200;
const FUNCTION_MAX_LINES = 150;

const modules = readModules(SRC);

const lineCount = (file: string) => readFileSync(file, "utf8").split("\n").length - (readFileSync(file, "utf8").endsWith("\n") ? 1 : 0);

describe("src/", () => {
  test("ARCHITECTURE.md names its six layers, top first, each with the parts of src/ it holds", () => {
    assert.deepEqual(
      LAYERS.map((l) => l.name),
      ["Shell", "Commands", "Output", "Backend", "Engine", "Foundations"],
    );
    for (const layer of LAYERS) assert.ok(layer.parts.length > 0, `${layer.name} names no part of src/`);
  });

  test("every top-level file and folder of src/ is in one layer of ARCHITECTURE.md, and every part it names exists", () => {
    assert.deepEqual(unplacedParts(SRC, LAYERS), []);
  });

  test("no module imports a layer above its own (static, dynamic and type imports alike)", () => {
    assert.deepEqual(importsUpward(modules, LAYERS), []);
  });

  test("no import circle among its modules (static, dynamic and type imports alike)", () => {
    assert.deepEqual(importCircles(modules), [], "each circle is listed as the path that closes it");
  });

  test("no import circle among its parts (two folders importing each other through different modules)", () => {
    assert.deepEqual(partCircles(modules), []);
  });

  test("no command's folder imports another command's code", () => {
    assert.deepEqual(importsBetweenCommands(modules), []);
  });

  test("each command is written once: nothing under src/commands/, at any depth, is named for local or remote", () => {
    assert.deepEqual(placeTwins(SRC), []);
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

  /** A page written as ARCHITECTURE.md is, for the layers the checks below are given. */
  const layersPage = [
    "# Architecture",
    "",
    "## Layers",
    "",
    "Prose before the list, with `src/` in backticks that names no part.",
    "",
    "- **A rule** in a bullet (`not/`): not a layer.",
    "",
    "1. **Shell** (`main.ts`, `run.ts`): the entry.",
    "2. **Commands** (`commands/`): a folder per command,",
    "   going on over two lines with `src/commands/options.ts` in them.",
    "3. **Output** (`output/`): words.",
    "4. **Backend** (`backend/`): where credentials live.",
    "5. **Engine** (`auth/`, `http/`, `mcp/`,",
    "   `serve/`, `config/`): the work, its list over two lines.",
    "6. **Foundations** (`context.ts`, `text/`): imported by everything.",
    "",
    "## Invariants",
    "",
    "1. **Not a layer** (`nothing/`): a list of another section.",
    "",
  ].join("\n");
  const LAYERS_OF_PAGE: Layer[] = [
    { name: "Shell", parts: ["main.ts", "run.ts"] },
    { name: "Commands", parts: ["commands/"] },
    { name: "Output", parts: ["output/"] },
    { name: "Backend", parts: ["backend/"] },
    { name: "Engine", parts: ["auth/", "http/", "mcp/", "serve/", "config/"] },
    { name: "Foundations", parts: ["context.ts", "text/"] },
  ];

  test("the layers are read from the numbered items of the Layers section, each part from the item's parenthesis", () => {
    assert.deepEqual(layersIn(layersPage), LAYERS_OF_PAGE);
  });

  test("a part of src/ in no layer or in two, and a part the page names that is not there, are each found with where to fix it", () => {
    const root = tree({
      "main.ts": "",
      "run.ts": "",
      "commands/x.ts": "",
      "output/x.ts": "",
      "backend/x.ts": "",
      "auth/x.ts": "",
      "http/x.ts": "",
      "mcp/x.ts": "",
      "serve/x.ts": "",
      "context.ts": "",
      "text/x.ts": "",
      // A file and a folder added without a word in the page.
      "report.ts": "",
      "newpart/x.ts": "",
      "README.txt": "",
    });
    try {
      const twice = LAYERS_OF_PAGE.map((l) => (l.name === "Output" ? { ...l, parts: [...l.parts, "text/"] } : l));
      assert.deepEqual(unplacedParts(root, twice), [
        'src/newpart/ is in no layer: name it in the list of its layer in ARCHITECTURE.md, "Layers"',
        'src/report.ts is in no layer: name it in the list of its layer in ARCHITECTURE.md, "Layers"',
        'src/text/ is named by 2 layers (Output, Foundations) in ARCHITECTURE.md, "Layers": a part sits in one',
        'ARCHITECTURE.md, "Layers", names src/config/ in Engine: there is no such file or folder',
      ]);
    } finally {
      rmSync(root, { recursive: true, force: true });
    }
  });

  test("an import up the layers is found, static, dynamic or type-only, naming both files and the rule; one down, within a layer or out of src/ is not", () => {
    const root = tree({
      // Where the code once was: the backend wording a login and showing server text through
      // output/, and the context loading the MCP requests' fetch from http/ lazily.
      "backend/deployment.ts": 'import { loginWords } from "../output/login-words.ts";\nexport const a = loginWords;\n',
      "backend/local.ts": 'import { shown } from "../output/untrusted.ts";\nimport type { LoginStep } from "../auth/login.ts";\nexport const b = (s: LoginStep) => shown(String(s));\n',
      "context.ts": 'export const fetch = async () => (await import("./http/mcp-fetch.ts")).directFetch;\n',
      // A type alone is an import: the engine naming a shape that output/ or backend/ owns.
      "mcp/open.ts": 'import type { Style } from "../output/style.ts";\nexport type S = Style;\n',
      "serve/x.ts": 'export type B = typeof import("../backend/local.ts");\nexport { a } from "../mcp/step.ts";\n',
      "text/possessive.ts": 'import { CUT } from "../commands/options.ts";\nexport const possessive = CUT;\n',
      // Down, within a layer, or out of src/: none is reported.
      "text/cut.ts": 'import { possessive } from "./possessive.ts";\nimport pkg from "../../package.json" with { type: "json" };\nexport const c = possessive + pkg.version;\n',
      "commands/options.ts": 'import { shown } from "../output/untrusted.ts";\nimport { deadline } from "../http/deadline.ts";\nexport const CUT = shown + deadline;\n',
      "output/login-words.ts": 'import type { LoginStep } from "../backend/types.ts";\nimport { cut } from "../text/cut.ts";\nexport const loginWords = (s: LoginStep) => cut;\n',
      "output/untrusted.ts": 'import { escaped } from "../text/unsafe.ts";\nexport const shown = escaped;\n',
      "main.ts": 'import { run } from "./run.ts";\nconst f = () => import("./http/mcp-fetch.ts");\nexport { run, f };\n',
      "mcp/step.ts": 'import { login } from "../auth/login.ts";\nexport const a = login;\n',
    });
    try {
      assert.deepEqual(importsUpward(readModules(root), LAYERS_OF_PAGE), [
        "backend/deployment.ts imports output/login-words.ts (import): Backend (layer 4) may not import Output (layer 3), a layer above it",
        "backend/local.ts imports output/untrusted.ts (import): Backend (layer 4) may not import Output (layer 3), a layer above it",
        "context.ts imports http/mcp-fetch.ts (import()): Foundations (layer 6) may not import Engine (layer 5), a layer above it",
        "mcp/open.ts imports output/style.ts (import type): Engine (layer 5) may not import Output (layer 3), a layer above it",
        "serve/x.ts imports backend/local.ts (import type): Engine (layer 5) may not import Backend (layer 4), a layer above it",
        "text/possessive.ts imports commands/options.ts (import): Foundations (layer 6) may not import Commands (layer 2), a layer above it",
      ]);
    } finally {
      rmSync(root, { recursive: true, force: true });
    }
  });

  test("two folders importing each other through different modules are a circle, though no module is in one", () => {
    const root = tree({
      // Where the code once was: mcp/ took subs's client name and a hand-opened session's type
      // from serve/, which builds on mcp/.
      "mcp/connect.ts": 'import { SUBS_CLIENT_INFO } from "../serve/handshake.ts";\nimport type { UpstreamHandshake } from "../serve/upstream-handshake.ts";\nexport const c = (h: UpstreamHandshake) => [h, SUBS_CLIENT_INFO];\n',
      "mcp/answer-cap.ts": "export const answerLimit = 1;\n",
      "serve/handshake.ts": "export const SUBS_CLIENT_INFO = {};\n",
      "serve/upstream-handshake.ts": 'import { answerLimit } from "../mcp/answer-cap.ts";\nexport type UpstreamHandshake = typeof answerLimit;\n',
      "auth/login.ts": 'import { answerLimit } from "../mcp/answer-cap.ts";\nexport const login = answerLimit;\n',
    });
    try {
      const found = readModules(root);
      assert.deepEqual(importCircles(found), []);
      assert.deepEqual(partCircles(found), ["mcp/ → serve/ → mcp/"]);
    } finally {
      rmSync(root, { recursive: true, force: true });
    }
  });

  test("a command importing another command's code is found; its own files, the shared files around it and a group's declarations are not", () => {
    const rule = "one command's folder may not import another's; what two commands share goes in a file of a folder around both (src/commands/, or their group's folder)";
    const root = tree({
      // Where the code once was: `mcp call` took a helper from `mcp tools`' run code.
      "commands/mcp/call/run.ts":
        'import { withRequestTimeoutHint } from "../tools/run.ts";\nimport { flag } from "../../flags.ts";\nimport { shared } from "../shared.ts";\nexport const r = [withRequestTimeoutHint, flag, shared];\n',
      "commands/mcp/call/command.ts": 'const run = () => import("./run.ts");\nexport const c = run;\n',
      "commands/mcp/tools/run.ts": "export const withRequestTimeoutHint = 1;\n",
      "commands/mcp/tools/command.ts": 'import type { T } from "../../deployment/token/create/command.ts";\nexport const c = 1 as unknown as T;\n',
      "commands/mcp/shared.ts": "export const shared = 1;\n",
      "commands/mcp/command.ts": 'import { c as call } from "./call/command.ts";\nimport { c as tools } from "./tools/command.ts";\nexport const c = [call, tools];\n',
      "commands/deployment/token/create/command.ts": 'import { settings } from "../../options.ts";\nexport type T = typeof settings;\n',
      "commands/deployment/options.ts": "export const settings = 1;\n",
      "commands/flags.ts": "export const flag = 1;\n",
      "commands/options.ts": 'import { r } from "./mcp/call/run.ts";\nexport const o = r;\n',
    });
    try {
      assert.deepEqual(importsBetweenCommands(readModules(root)), [
        `commands/mcp/call/run.ts imports commands/mcp/tools/run.ts (import): ${rule}`,
        `commands/mcp/tools/command.ts imports commands/deployment/token/create/command.ts (import type): ${rule}`,
        `commands/options.ts imports commands/mcp/call/run.ts (import): ${rule}`,
      ]);
    } finally {
      rmSync(root, { recursive: true, force: true });
    }
  });

  test("a command's twin named for local or remote is found at any depth of src/commands/, as a file or a folder", () => {
    const root = tree({
      // The nested layout: a twin two levels down as a folder, as a file beside run.ts, as a
      // folder inside a command, and the old top-level file.
      "commands/mcp/list/command.ts": "",
      "commands/mcp/list/run.ts": "",
      "commands/mcp/list-remote/command.ts": "",
      "commands/mcp/login/run.ts": "",
      "commands/mcp/login/remote.ts": "",
      "commands/mcp/call/local/run.ts": "",
      "commands/agent/tools/run-local.ts": "",
      "commands/mcp-list-remote.ts": "",
      // Not named for a place: none is reported.
      "commands/deployment/token/create/run.ts": "",
      "commands/mcp/proxy/localhost.ts": "",
      "commands/options.ts": "",
      "backend/remote.ts": "",
    });
    try {
      const rule = "a command's code named for where credentials live; write the command once against Backend (src/backend/types.ts), local and remote differ behind it";
      assert.deepEqual(placeTwins(root), [
        `commands/agent/tools/run-local.ts: ${rule}`,
        `commands/mcp/call/local/: ${rule}`,
        `commands/mcp/list-remote/: ${rule}`,
        `commands/mcp/login/remote.ts: ${rule}`,
        `commands/mcp-list-remote.ts: ${rule}`,
      ]);
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
