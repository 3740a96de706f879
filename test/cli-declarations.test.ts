// Each command declares itself (arguments, options, help, examples, the action) in its own module,
// src/commands/<group>/<command>/command.ts, and src/cli.ts only assembles the tree from them.
// cli.ts is loaded by every run that parses argv, so the declarations must stay cheap: the run
// code of a command (the MCP SDK, the db, the OAuth flow) is imported inside its action only.
import assert from "node:assert/strict";
import { existsSync, readFileSync } from "node:fs";
import path from "node:path";
import { test } from "node:test";
import { COMMAND_TREE } from "../src/run.ts";

const SRC = path.join(import.meta.dirname, "..", "src");

/** Each command path of the tree with the module that should declare it. */
const declarations = Object.entries(COMMAND_TREE).flatMap(([group, commands]) => [
  { words: [group], file: path.join(SRC, "commands", group, "command.ts") },
  ...commands.map((command) => ({ words: [group, command], file: path.join(SRC, "commands", group, command, "command.ts") })),
]);

/**
 * The module of src/commands/<group>/[<command>/]command.ts: an import whose path is written out
 * around the names (not a computed file URL), so the bundle of this test (scripts/test-bundle.mjs)
 * holds every such module.
 */
const declarationOf = ([group, command]: string[]): Promise<Record<string, unknown>> =>
  command === undefined ? import(`../src/commands/${group}/command.ts`) : import(`../src/commands/${group}/${command}/command.ts`);

test("every command of the tree is declared in src/commands/<group>/<command>/command.ts, a group naming its commands in help order", async () => {
  for (const { words, file } of declarations) {
    assert.ok(existsSync(file), `\`subs ${words.join(" ")}\` is declared in ${path.relative(SRC, file)}`);
    const exported = Object.values(await declarationOf(words)) as Array<{ name?: unknown; commands?: Array<{ name: string }> }>;
    const declaration = exported.find((value) => value?.name === words.at(-1));
    assert.ok(declaration, `${path.relative(SRC, file)} exports the declaration of \`${words.at(-1)}\``);
    if (words.length === 1) assert.deepEqual(declaration.commands?.map((c) => c.name) ?? [], COMMAND_TREE[words[0]!], `\`subs ${words[0]}\` names its commands`);
  }
});

test("src/cli.ts only assembles the tree: under 200 lines, no run code, no command's arguments", () => {
  const cli = readFileSync(path.join(SRC, "cli.ts"), "utf8");
  const lines = cli.split("\n").length;
  assert.ok(lines < 200, `src/cli.ts is ${lines} lines`);
  assert.doesNotMatch(cli, /import\("\.\/commands\//, "cli.ts loads no command's run code; its declaration does, in its action");
  assert.doesNotMatch(cli, /\.argument\(/, "a command's arguments are declared beside it, not in cli.ts");
});

/** The modules a file imports for their values, at load time (`import type` and `import()` left out). */
function staticImports(source: string): string[] {
  const found: string[] = [];
  for (const match of source.matchAll(/^import\s+(type\s+)?([^;]*?)\s+from\s+"([^"]+)";/gms)) {
    const [, typeOnly, names = "", specifier = ""] = match;
    // `import { type A, type B } from` is erased as well.
    const allTypes = /^\{[^}]*\}$/s.test(names.trim()) && names.replace(/[{}\s]/g, "").split(",").filter(Boolean).every((n) => n.startsWith("type"));
    if (!typeOnly && !allTypes) found.push(specifier);
  }
  return found;
}

test("a declaration imports at load time only commander, the shared options and flag parsers, mcp list's action (shared with run.ts), errors.ts and the declarations of its commands", () => {
  // errors.ts has already been loaded when the tree is built, as has commander's parser; mcp list's action imports only the flag parsers.
  const allowed = (specifier: string) =>
    specifier === "commander" || /(^|\/)(options|flags|action|errors)\.ts$/.test(specifier) || /^\.\/[\w-]+\/command\.ts$/.test(specifier);
  const files = [...declarations.map((d) => d.file), path.join(SRC, "commands", "options.ts")];
  for (const file of files) {
    const heavy = staticImports(readFileSync(file, "utf8")).filter((specifier) => !allowed(specifier));
    assert.deepEqual(heavy, [], `${path.relative(SRC, file)} loads its run code only in its action`);
  }
});
