// The text edits behind `subs agent connect` on many shapes of client file: an entry put in and
// taken out again leaves every byte as it was; what is put in reads back as the entry; a file
// subs cannot edit as text is refused, never rewritten.
import assert from "node:assert/strict";
import { test } from "node:test";
import { maskJson, maskToml, unifiedDiff } from "../src/connect/diff.ts";
import { deleteEntry, FileShapeError, putEntry, readEntry } from "../src/connect/json-entry.ts";
import { deleteTable, putTable, readTable } from "../src/connect/toml-entry.ts";

const ENTRY = { command: "/usr/bin/node", args: ["/opt/subs/bin/subs.cjs", "agent", "serve", "support", "--config", "/w/substructure.toml"], env: { T: "$T" } };

const JSON_FILES: Record<string, string> = {
  "missing (empty)": "",
  "other keys only": '{\n  "theme": "x"\n}\n',
  "empty container": '{\n  "mcpServers": {}\n}',
  "empty container in the middle": '{\n  "a": 1,\n  "mcpServers": {},\n  "z": 2\n}\n',
  "one line": '{"mcpServers": {"a": {"command": "x"}}, "z": [1, 2]}',
  "one-line container": '{\n  "mcpServers": { "a": { "command": "x" } },\n  "z": 2\n}\n',
  "four spaces, comments": '{\n    // mine\n    "ui": { "theme": "Dracula" },\n    "mcpServers": {\n        "a": { "command": "x" } // the a server\n        /* more later */\n    }\n}\n',
  "tabs, CRLF": '{\r\n\t"servers": {\r\n\t\t"gh": {\r\n\t\t\t"type": "http"\r\n\t\t}\r\n\t},\r\n\t"inputs": []\r\n}\r\n',
  "trailing commas": '{\n  "mcpServers": {\n    "a": { "command": "x" },\n  },\n}\n',
  "byte-order mark": '\ufeff{\n  "mcpServers": {\n    "a": { "command": "x" }\n  }\n}\n',
  "comment only inside": '{\n  "mcpServers": { /* none yet */ }\n}\n',
  "deep, absent project": '{\n  "projects": {\n    "/other": { "mcpServers": {} }\n  },\n  "userID": "x"\n}',
  "deep, project present": '{\n  "projects": {\n    "/p": {\n      "allowedTools": [],\n      "mcpServers": {},\n      "hasTrustDialogAccepted": true\n    }\n  }\n}',
};

for (const [shape, original] of Object.entries(JSON_FILES)) {
  test(`JSON, ${shape}: put then delete gives back every byte; the entry reads back; the rest of the file is unchanged`, () => {
    const container = shape.startsWith("deep") ? ["projects", "/p", "mcpServers"] : shape.startsWith("tabs") ? ["servers"] : ["mcpServers"];
    const added = putEntry(original, container, "support", ENTRY);
    assert.deepEqual(readEntry(added, container, "support")?.value, ENTRY, added);
    for (const [key, value] of Object.entries(readEntry(original, [], "z") ? { z: readEntry(original, [], "z")!.value } : {})) assert.deepEqual(readEntry(added, [], key)?.value, value);
    assert.equal(putEntry(added, container, "support", ENTRY), added, "a second put changes nothing");
    const back = deleteEntry(added, container, "support");
    assert.equal(back ?? "", original, JSON.stringify(added));
  });
}

test("JSON: an entry that is not the last is cut with its separator; a comment beside the only entry is kept, the JSON valid", () => {
  const text = '{\n  "mcpServers": {\n    "support": { "command": "x" },\n    "b": { "command": "y" }\n  }\n}\n';
  assert.equal(deleteEntry(text, ["mcpServers"], "support"), '{\n  "mcpServers": {\n    "b": { "command": "y" }\n  }\n}\n');
  const commented = '{\n  "mcpServers": {\n    // ours\n    "support": { "command": "x" },\n  }\n}\n';
  const cut = deleteEntry(commented, ["mcpServers"], "support")!;
  assert.match(cut, /\/\/ ours/);
  assert.equal(readEntry(cut, ["mcpServers"], "support"), undefined);
  assert.deepEqual(readEntry(cut, [], "mcpServers")?.value, {});
});

test("JSON, where the bytes cannot be told apart: an empty object written `{ }` comes back `{}`; a file of `{}` keeps the emptied container, or, written as subs writes a new file, goes", () => {
  const spaced = '{\n  "mcpServers": { },\n  "z": 2\n}\n';
  assert.equal(deleteEntry(putEntry(spaced, ["mcpServers"], "support", ENTRY), ["mcpServers"], "support"), '{\n  "mcpServers": {},\n  "z": 2\n}\n');
  assert.equal(deleteEntry(putEntry("{}", ["mcpServers"], "support", ENTRY), ["mcpServers"], "support"), '{\n  "mcpServers": {}\n}');
  assert.equal(putEntry("{}\n", ["mcpServers"], "support", ENTRY), putEntry("", ["mcpServers"], "support", ENTRY));
  assert.equal(deleteEntry(putEntry("{}\n", ["mcpServers"], "support", ENTRY), ["mcpServers"], "support"), undefined);
});

test("JSON: a file that is not valid JSON, a container that is not an object, a name written twice: refused, saying where and never quoting", () => {
  assert.throws(() => putEntry('{\n  "mcpServers": { "a": "Bearer ghp_x" \n', ["mcpServers"], "support", ENTRY), (e: Error) => e instanceof FileShapeError && /line 3, column \d+/.test(e.message) && !e.message.includes("ghp_x"));
  assert.throws(() => putEntry('{"mcpServers": []}', ["mcpServers"], "support", ENTRY), /"mcpServers" that is not an object/);
  assert.throws(() => putEntry("[1]", ["mcpServers"], "support", ENTRY), /does not hold a JSON object/);
  assert.throws(() => readEntry('{"mcpServers": {"support": {}, "support": {}}}', ["mcpServers"], "support"), /"mcpServers" › "support" twice/);
});

/** smol-toml's tables have no prototype; compared as plain JSON. */
const plain = (value: unknown) => JSON.parse(JSON.stringify(value)) as unknown;

const TABLE = { command: "/usr/bin/node", args: ["/opt/subs/bin/subs.cjs", "agent", "serve", "support"], env_vars: ["T"] };

const TOML_FILES: Record<string, string> = {
  "missing (empty)": "",
  "no final newline": 'model = "o3"',
  "a blank line at the end": 'model = "o3"\n\n',
  "inline servers table": '[mcp_servers]\nother = { command = "x" }\n',
  "tables, then a profile": '[mcp_servers.a]\ncommand = "x"\n\n[profiles.p]\nmodel = "o4"\n',
  "a table right before a profile": '[mcp_servers.a]\ncommand = "x"\n[profiles.p]\nmodel = "o4"\n',
  "a comment above the next table": '[mcp_servers.a]\ncommand = "x"\n# profiles\n[profiles.p]\nmodel = "o4"\n',
  "whitespace on the blank line": '[mcp_servers.a]\ncommand = "x"\n  \n[profiles.p]\n',
  "multi-line array and string": '[mcp_servers.a]\nargs = [\n  "1",\n  "[not.a.header]",\n]\nnote = """\n[nor.this]\n"""\n\n[x]\n',
  "CRLF, no final newline": '# c\r\n[mcp_servers.a]\r\ncommand = "x"\r\n\r\n[p]\r\nk = 1',
};

for (const [shape, original] of Object.entries(TOML_FILES)) {
  test(`TOML, ${shape}: put then delete gives back every byte; the table reads back`, () => {
    const added = putTable(original, "support", TABLE);
    assert.deepEqual(plain(readTable(added, "support")?.value), TABLE, added);
    assert.equal(putTable(added, "support", TABLE), added);
    assert.equal(deleteTable(added, "support"), original, JSON.stringify(added));
  });
}

test("TOML: an update sets each key where it is (a multi-line array included), keeps the others and the sub-tables; --force's replace cuts them", () => {
  const text = '[mcp_servers.support]\ncommand = "/old/node"\nargs = [\n  "a",\n]\nstartup_timeout_sec = 20 # mine\n\n[mcp_servers.support.tools.x]\napproval_mode = "approve"\n';
  const updated = putTable(text, "support", TABLE);
  assert.equal(
    updated,
    `[mcp_servers.support]\ncommand = "/usr/bin/node"\nargs = ["/opt/subs/bin/subs.cjs", "agent", "serve", "support"]\nstartup_timeout_sec = 20 # mine\nenv_vars = ["T"]\n\n[mcp_servers.support.tools.x]\napproval_mode = "approve"\n`,
  );
  const replaced = putTable(text, "support", TABLE, { replace: true });
  assert.deepEqual(plain(readTable(replaced, "support")?.value), TABLE);
  assert.equal(deleteTable(updated, "support"), "");
});

test("TOML: a server declared inline or with dotted keys is refused, not rewritten; invalid TOML says where only", () => {
  const inline = '[mcp_servers]\nsupport = { command = "x" }\n';
  assert.throws(() => putTable(inline, "support", TABLE), /without its own \[mcp_servers\.support\] table/);
  assert.throws(() => deleteTable(inline, "support"), /without its own/);
  assert.throws(() => putTable('mcp_servers.support.command = "x"\n', "support", TABLE), /without its own/);
  assert.throws(() => readTable('token = "sk-abc\n', "support"), (e: Error) => /line 1, column \d+/.test(e.message) && !e.message.includes("sk-abc"));
});

test("masking: string values and comments not written by subs become …, keys and what subs wrote stay; lines are kept", () => {
  const shown = new Set(["/usr/bin/node"]);
  assert.equal(maskJson('{ "a": "secret", "b": ["x", "/usr/bin/node"], // note\n "n": 1 /* c\nc */ }', shown), '{ "a": "…", "b": ["…", "/usr/bin/node"], //…\n "n": 1 /*…\n*/ }');
  assert.equal(
    maskToml('[a."b c"]\nk = "secret"   # note\nx = [ "1", \'lit\' ]\n"q" = 1\ns = """\nline\n"""\nc = "/usr/bin/node"\n', shown),
    '[a."b c"]\nk = "…"   #…\nx = [ "…", \'…\' ]\n"q" = 1\ns = """…\n\n"""\nc = "/usr/bin/node"\n',
  );
});

test("unified diff: hunks with three lines of context, a new file from /dev/null, a missing final newline marked", () => {
  const before = "1\n2\n3\n4\n5\n6\n7\n8\n9\n10\n11\n12";
  const after = "1\n2\nthree\n4\n5\n6\n7\n8\n9\n10\n11\n12\n";
  const identity = (text: string) => text;
  assert.equal(
    unifiedDiff("f", before, after, identity, new Set()),
    ["--- f", "+++ f", "@@ -1,6 +1,6 @@", " 1", " 2", "-3", "+three", " 4", " 5", " 6", "@@ -9,4 +9,4 @@", " 9", " 10", " 11", "-12", "\\ No newline at end of file", "+12", ""].join("\n"),
  );
  assert.equal(unifiedDiff("f", undefined, "a\n", identity, new Set()), "--- /dev/null\n+++ f\n@@ -0,0 +1 @@\n+a\n");
  assert.equal(unifiedDiff("f", "a\n", undefined, identity, new Set()), "--- f\n+++ /dev/null\n@@ -1 +0,0 @@\n-a\n");
  assert.equal(unifiedDiff("f", "same", "same", identity, new Set()), "");
});
