// `subs mcp add`, `subs mcp import` and `subs mcp remove` edit substructure.toml as text, with
// values that come from a command line or from another program's file. Nothing in an id, a url, a
// client id or a scope may become TOML of its own (a `[remote]` that sends the deployment token
// elsewhere, an agent, a key): each value is written as exactly that value, or refused with the file
// untouched. And a removal cuts only the section's own lines, whatever its neighbours look like:
// a prefix of its id, a look-alike header inside a multi-line string, a sub-table further down.
// In-process: the same code the built CLI runs, with a test's Context, since each case is one run
// (about 250 of them; as child processes they took 30 s of CPU). test/mcp-add-remove.e2e.test.ts
// runs add, import and remove through the built CLI. The result is read back with a TOML parser.
import assert from "node:assert/strict";
import { mkdtempSync, readFileSync, rmSync, statSync, utimesSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { describe, it } from "node:test";
import { parse } from "smol-toml";
import { runInProcess, type RunResult } from "../support/cli.ts";

const BEFORE = `# kept as it is
[mcp.kept]
url = "https://kept.example/mcp"

[agent.a]
mcp = ["kept"]
`;

/** One run of subs in this process, in `dir`, whose HOME is `dir` too. */
const runCli = (argv: string[], options: { cwd: string; env?: Record<string, string> }): Promise<RunResult> =>
  runInProcess(argv, { cwd: options.cwd, env: { HOME: options.cwd, ...options.env } });

type Parsed = { remote?: unknown; mcp: Record<string, Record<string, unknown>>; agent: Record<string, unknown>; [key: string]: unknown };

/** The file's value as plain JSON (smol-toml's tables have no prototype, which deepEqual tells apart). */
const tomlValue = (text: string) => JSON.parse(JSON.stringify(parse(text))) as Parsed;

function project(text: string) {
  const dir = mkdtempSync(path.join(tmpdir(), "subs-edits-"));
  const file = path.join(dir, "substructure.toml");
  writeFileSync(file, text);
  const old = new Date("2020-01-01T00:00:00Z");
  utimesSync(file, old, old);
  return { dir, file, read: () => readFileSync(file, "utf8"), untouched: () => readFileSync(file, "utf8") === text && statSync(file).mtimeMs === old.getTime() };
}

/**
 * The file after an edit that added `id`: the same top-level keys and agents as before, the same
 * connections plus `id`, whose table is `expected` exactly. Nothing else came into being.
 */
function onlyAdded(text: string, id: string, expected: Record<string, unknown>, what: string): void {
  const before = tomlValue(BEFORE);
  const after = tomlValue(text);
  assert.deepEqual(Object.keys(after).sort(), Object.keys(before).sort(), `${what}: a new top-level key`);
  assert.deepEqual(after.agent, before.agent, `${what}: the agents changed`);
  assert.deepEqual(Object.keys(after.mcp).sort(), [...Object.keys(before.mcp), id].sort(), `${what}: other connections`);
  assert.deepEqual(after.mcp.kept, before.mcp.kept);
  assert.deepEqual(after.mcp[id], expected, `${what}: the values were not written as given`);
  assert.ok(text.startsWith(BEFORE.slice(0, BEFORE.indexOf("\n[agent.a]"))) && text.endsWith("\n[agent.a]\nmcp = [\"kept\"]\n"), `${what}: other bytes moved`);
}

describe("no TOML injection through the values of an edit", () => {
  it("mcp add: an id, a url, a client id or a scope holding quotes, newlines, ], \"\"\", a backslash or a control character is written as exactly that value, or refused (exit 2) with the file untouched", async () => {
    const hostile = [
      '"]\n[remote]\nurl = "https://evil.example',
      '"\n[agent.evil]\nmcp = ["kept"]\n#',
      '"]',
      '"""',
      "'''",
      "\\",
      '\\"',
      "#",
      "\u007f",
      "\u2028",
      "\r\n[remote]\r\n",
    ];
    const cases: Array<{ argv: string[]; expected: Record<string, unknown> }> = [];
    for (const bad of hostile) {
      cases.push({ argv: [`x${bad}`, "https://a.example/mcp"], expected: { url: "https://a.example/mcp" } });
      cases.push({ argv: ["x", `https://a.example/mcp${bad}`], expected: { url: `https://a.example/mcp${bad}` } });
      cases.push({ argv: ["x", `https://a.example/mcp?q=${bad}`], expected: { url: `https://a.example/mcp?q=${bad}` } });
      cases.push({ argv: ["x", "https://a.example/mcp", "--client-id", `abc${bad}`], expected: { url: "https://a.example/mcp", oauth: { client_id: `abc${bad}` } } });
      // --scopes is a comma-separated list, each scope trimmed.
      cases.push({ argv: ["x", "https://a.example/mcp", "--scopes", `read${bad}`], expected: { url: "https://a.example/mcp", oauth: { scopes: [`read${bad}`.trim()] } } });
      cases.push({ argv: ["x", "https://a.example/mcp", "--token-env", `T${bad}`], expected: { url: "https://a.example/mcp", auth: { token_env: `T${bad}` } } });
      cases.push({ argv: ["x", "https://a.example/mcp", "--client-secret-env", `S${bad}`], expected: { url: "https://a.example/mcp", oauth: { client_secret_env: `S${bad}` } } });
    }
    let written = 0;
    for (const { argv, expected } of cases) {
      const p = project(BEFORE);
      try {
        const r = await runCli(["mcp", "add", ...argv], { cwd: p.dir });
        const what = JSON.stringify(argv);
        if (r.code === 0) {
          written++;
          onlyAdded(p.read(), argv[0]!, expected, what);
          const list = await runCli(["mcp", "list", "--json"], { cwd: p.dir });
          assert.equal(list.code, 0, `${what}: the file written does not load: ${list.stderr}`);
        } else {
          assert.equal(r.code, 2, `${what}: ${r.stderr}`);
          assert.ok(p.untouched(), `${what}: refused, yet the file changed`);
        }
      } finally {
        rmSync(p.dir, { recursive: true, force: true });
      }
    }
    assert.ok(written >= 10, `the control: values that are only unusual are written (${written} were)`);
  });

  it("mcp import: a server name, url or header reference in another client's file holding the same is imported as exactly that (a name made a valid id), or refused with the file untouched", async () => {
    const hostile = ['"\n[remote]\nurl = "https://evil.example', '"]\n[remote]\nurl = "https://evil.example', '"]', '"""', "'''", "\\", "#", "\u007f", "\u2028", "\r\n[agent.evil]\r\n"];
    const cases: Array<{ name: string; server: Record<string, unknown>; url: string }> = [];
    for (const bad of hostile) {
      cases.push({ name: `name${bad}`, server: { type: "http", url: "https://name.example/mcp" }, url: "https://name.example/mcp" });
      cases.push({ name: "url", server: { type: "http", url: `https://url.example/mcp${bad}` }, url: `https://url.example/mcp${bad}` });
      cases.push({ name: "header", server: { type: "http", url: "https://header.example/mcp", headers: { Authorization: `Bearer \${T${bad}}` } }, url: "https://header.example/mcp" });
    }
    let written = 0;
    for (const { name, server, url } of cases) {
      const what = JSON.stringify({ name, server });
      const p = project(BEFORE);
      try {
        writeFileSync(path.join(p.dir, ".mcp.json"), JSON.stringify({ mcpServers: { [name]: server } }));
        const r = await runCli(["mcp", "import"], { cwd: p.dir, env: { HOME: p.dir } });
        if (r.code !== 0) {
          assert.equal(r.code, 2, `${what}: ${r.stderr}`);
          assert.ok(p.untouched(), `${what}: refused, yet the file changed`);
          continue;
        }
        const added = Object.keys(tomlValue(p.read()).mcp).filter((id) => id !== "kept");
        if (added.length === 0) {
          assert.ok(p.untouched(), `${what}: skipped, yet the file changed`);
          continue;
        }
        written++;
        assert.equal(added.length, 1, what);
        const id = added[0]!;
        assert.match(id, /^[a-z0-9][a-z0-9_-]*$/, `${what}: an id subs made valid`);
        // A header naming a variable subs can use becomes auth.token_env; nothing else is written.
        const auth = tomlValue(p.read()).mcp[id]!.auth as { token_env: string } | undefined;
        if (auth !== undefined) assert.match(auth.token_env, /^[A-Za-z_][A-Za-z0-9_]*$/, what);
        onlyAdded(p.read(), id, { url, ...(auth !== undefined ? { auth } : {}) }, what);
        const list = await runCli(["mcp", "list", "--json"], { cwd: p.dir });
        assert.equal(list.code, 0, `${what}: the file written does not load: ${list.stderr}`);
      } finally {
        rmSync(p.dir, { recursive: true, force: true });
      }
    }
    assert.ok(written >= 10, `the control: entries that are only unusual are imported (${written} were)`);
  });
});

describe("subs mcp remove cuts exactly the section's own lines", () => {
  // A prefix neighbour before and after, the section's header spaced and quoted, comments among,
  // after and above its neighbours, a sub-table of it further down, and its header inside another
  // table's multi-line string and inside a multi-line array.
  const FILE = [
    "# Servers, the team's.",
    "[mcp.linear-b]   # a prefix of the id, not the section",
    'url = "https://lb.example/mcp"',
    "",
    '[ mcp . "linear" ]\t# spaced and quoted: the section',
    'url = "https://l.example/mcp"',
    "# among its keys",
    "prefix_tools = false",
    "# right after its keys",
    "",
    "# about linearx, kept",
    "[mcp.linearx]",
    'url = "https://lx.example/mcp"',
    "",
    "[mcp.linearx.oauth]",
    // A line-ending backslash (then a space): the string holds no line break, a control character the file may not hold.
    'client_id = """\\ ',
    "[mcp.linear] \\ ",
    '"""',
    "",
    "[mcp.'linear'.oauth]",
    'client_id = "abc"',
    "scopes = [",
    '  "read",',
    '  "write",',
    "]",
    "",
    "[agent.notes]",
    'mcp = ["linear-b", "linearx"]',
    'tools = ["""\\',
    "[mcp.linear] \\",
    'url = "https://fake.example/mcp" \\',
    '""", "tail"]',
    "# the end",
    "",
  ].join("\n");
  const AFTER = [
    "# Servers, the team's.",
    "[mcp.linear-b]   # a prefix of the id, not the section",
    'url = "https://lb.example/mcp"',
    "",
    "# about linearx, kept",
    "[mcp.linearx]",
    'url = "https://lx.example/mcp"',
    "",
    "[mcp.linearx.oauth]",
    'client_id = """\\ ',
    "[mcp.linear] \\ ",
    '"""',
    "",
    "[agent.notes]",
    'mcp = ["linear-b", "linearx"]',
    'tools = ["""\\',
    "[mcp.linear] \\",
    'url = "https://fake.example/mcp" \\',
    '""", "tail"]',
    "# the end",
    "",
  ].join("\n");

  for (const [name, eol] of [["LF", "\n"], ["CRLF", "\r\n"]] as const) {
    it(`only [mcp.linear] and its sub-table go; neighbours, comments and look-alikes stay byte for byte (${name})`, async () => {
      const p = project(FILE.replaceAll("\n", eol));
      try {
        const r = await runCli(["mcp", "remove", "linear"], { cwd: p.dir });
        assert.equal(r.code, 0, r.stderr);
        assert.equal(p.read(), AFTER.replaceAll("\n", eol));
        const list = await runCli(["mcp", "list", "--json"], { cwd: p.dir });
        assert.deepEqual(JSON.parse(list.stdout).map((c: { id: string }) => c.id), ["linear-b", "linearx"]);
        // Once gone, a second removal finds nothing and writes nothing.
        const again = await runCli(["mcp", "remove", "linear"], { cwd: p.dir });
        assert.equal(again.code, 2);
        assert.equal(p.read(), AFTER.replaceAll("\n", eol));
      } finally {
        rmSync(p.dir, { recursive: true, force: true });
      }
    });
  }

  it("a file without a final newline: the last section's lines go, the comment above its header and the neighbour's own comment stay", async () => {
    const p = project('[mcp.a]\nurl = "https://a.example/mcp"\n# a note on a\n\n# about b\n[mcp.b]\nurl = "https://b.example/mcp"');
    try {
      const r = await runCli(["mcp", "remove", "b"], { cwd: p.dir });
      assert.equal(r.code, 0, r.stderr);
      assert.equal(p.read(), '[mcp.a]\nurl = "https://a.example/mcp"\n# a note on a\n\n# about b\n');
      const a = await runCli(["mcp", "remove", "a"], { cwd: p.dir });
      assert.equal(a.code, 0, a.stderr);
      assert.equal(p.read(), "# about b\n");
    } finally {
      rmSync(p.dir, { recursive: true, force: true });
    }
  });
});
