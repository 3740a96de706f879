// `subs mcp add` and `subs mcp remove` edit substructure.toml as text. Every byte outside
// the added or removed section stays as it was, the result is checked before it is written, a
// mistake writes nothing, and `remove` disconnects: the credential is deleted and revoked.
// The first `mcp add` test (with the `mcp list` that loads what it wrote) and the `mcp remove` that
// revokes a stored credential run the built CLI (bin/subs.cjs) as a person does; the rest run the
// same `run()` in this process, where what is checked is the file and the output, not the process.
import assert from "node:assert/strict";
import { chmodSync, mkdtempSync, readFileSync, readdirSync, statSync, utimesSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { test } from "node:test";
import { runCli, runInProcess } from "./support/cli.ts";
import { credential, environment, leakedTokens } from "./auth/harness.ts";
import { appendSection, removeSection } from "../src/config/edit.ts";

function project(toml: string): { dir: string; file: string; read: () => string } {
  const dir = mkdtempSync(path.join(tmpdir(), "subs-edit-"));
  const file = path.join(dir, "substructure.toml");
  writeFileSync(file, toml);
  return { dir, file, read: () => readFileSync(file, "utf8") };
}

const HEAD = `#:schema ./substructure.schema.json
# Our servers.   (odd  spacing kept)
db = "substructure.db"

# Sentry, for triage
[mcp.sentry]
url = "https://s.example/mcp"   # trailing comment
# auth = { token_env = "X" }  (a key kept for later)
`;
const TAIL = `
# Agents below
[agent.triage]
mcp = [
  "sentry",
]
`;

test("mcp add: the new section right after the last [mcp.*] one; every other byte kept; the file's mode kept; it loads", async () => {
  const p = project(HEAD + TAIL);
  chmodSync(p.file, 0o640);
  const r = await runCli(["mcp", "add", "linear", "https://l.example/mcp", "--client-id", "abc", "--scopes", "read,write", "--scopes", "admin"], { cwd: p.dir });
  assert.equal(r.code, 0, r.stderr);
  assert.equal(r.stdout, "");
  assert.equal(
    p.read(),
    HEAD + `\n[mcp.linear]\nurl = "https://l.example/mcp"\noauth = { client_id = "abc", scopes = ["read", "write", "admin"] }\n` + TAIL,
  );
  assert.equal(statSync(p.file).mode & 0o777, 0o640);
  assert.match(r.stderr, /Added \[mcp\.linear\] to substructure\.toml\.\nNext: `subs mcp login linear`/);
  // No temporary file is left beside it.
  assert.deepEqual(readdirSync(p.dir), ["substructure.toml"]);
  const list = await runCli(["mcp", "list", "--json"], { cwd: p.dir });
  assert.equal(list.code, 0, list.stderr);
  assert.deepEqual(
    JSON.parse(list.stdout).map((c: { id: string }) => c.id),
    ["sentry", "linear"],
  );

  const token = await runCli(["mcp", "add", "github", "https://g.example/mcp/", "--token-env", "GITHUB_TOKEN"], { cwd: p.dir });
  assert.equal(token.code, 0, token.stderr);
  assert.ok(p.read().includes(`[mcp.github]\nurl = "https://g.example/mcp/"\nauth = { token_env = "GITHUB_TOKEN" }\n`));
  assert.ok(p.read().startsWith(HEAD) && p.read().endsWith(TAIL));
});

test("mcp add: without any [mcp.*] section it goes at the end; CRLF files stay CRLF", () => {
  assert.equal(appendSection('db = "x.db"\n', '[mcp.a]\nurl = "https://a.example"\n'), 'db = "x.db"\n\n[mcp.a]\nurl = "https://a.example"\n');
  assert.equal(appendSection('db = "x.db"', '[mcp.a]\nurl = "u"\n'), 'db = "x.db"\n\n[mcp.a]\nurl = "u"\n');
  assert.equal(appendSection("", '[mcp.a]\nurl = "u"\n'), '[mcp.a]\nurl = "u"\n');
  assert.equal(appendSection('[mcp.b]\r\nurl = "v"\r\n', '[mcp.a]\nurl = "u"\n'), '[mcp.b]\r\nurl = "v"\r\n\r\n[mcp.a]\r\nurl = "u"\r\n');
  // A `[` at the start of a line inside a multi-line string or array is no header.
  const tricky = '[mcp.b]\nurl = "v"\n[agent.x]\nmcp = [\n["b"][0],\n]\nnote = """\n[mcp.fake]\n"""\n';
  assert.equal(appendSection(tricky, "[mcp.a]\n"), '[mcp.b]\nurl = "v"\n\n[mcp.a]\n\n[agent.x]\nmcp = [\n["b"][0],\n]\nnote = """\n[mcp.fake]\n"""\n');
});

/** Each command is exit 2 with its message, echoes no SECRETVALUE, and leaves the file as it was (and its mtime, when given). */
async function refusedUnwritten(p: ReturnType<typeof project>, cases: Array<[string[], RegExp]>, mtimeMs?: number) {
  for (const [argv, message] of cases) {
    const r = await runInProcess(argv, { cwd: p.dir });
    assert.equal(r.code, 2, `${argv.join(" ")}: ${r.stderr}`);
    assert.match(r.stderr, message, argv.join(" "));
    assert.doesNotMatch(r.stderr + r.stdout, /SECRETVALUE/, argv.join(" "));
    assert.equal(p.read(), HEAD + TAIL, argv.join(" "));
    if (mtimeMs !== undefined) assert.equal(statSync(p.file).mtimeMs, mtimeMs, argv.join(" "));
  }
}

test("mcp add: a mistake writes nothing (same bytes, same mtime); exit 2; a secret is never taken", async () => {
  const p = project(HEAD + TAIL);
  const old = new Date("2020-01-01T00:00:00Z");
  utimesSync(p.file, old, old);
  const cases: Array<[string[], RegExp]> = [
    [["mcp", "add", "sentry", "https://other.example/mcp"], /`sentry` is already declared in substructure\.toml; nothing was written/],
    [["mcp", "add", "Bad__Id", "https://x.example/mcp"], /`Bad__Id` is not a connection id/],
    [["mcp", "add", "x", "ftp://x.example/mcp"], /the url of x /],
    [["mcp", "add", "x", "https://x.example/mcp", "--token", "ghp_SECRETVALUE"], /subs never writes a token in the file\nhint: export it and name the variable: --token-env/],
    [["mcp", "add", "x", "https://x.example/mcp", "--client-secret", "SECRETVALUE"], /never writes a client secret/],
    [["mcp", "add", "x", "https://x.example/mcp", "--token-env", "ghp-SECRETVALUE"], /--token-env takes the name of an environment variable/],
    [["mcp", "add", "x", "https://x.example/mcp", "--token-env", "T", "--scopes", "a"], /--token-env declares a static token/],
  ];
  await refusedUnwritten(p, cases, old.getTime());
  // Under a CI pin every later command would refuse a token sent elsewhere: so is the edit.
  const pinned = await runInProcess(["mcp", "add", "x", "https://x.example/mcp", "--token-env", "T"], { cwd: p.dir, env: { SUBS_ALLOWED_TOKEN_HOSTS: "s.example" } });
  assert.equal(pinned.code, 2, pinned.stderr);
  assert.match(pinned.stderr, /SUBS_ALLOWED_TOKEN_HOSTS/);
  assert.equal(p.read(), HEAD + TAIL);
  // A result that would not load (the file declares its connections in an inline table) is refused
  // by the check, without a line number: the lines would be those of a file that was never written.
  const inline = project('mcp = { a = { url = "https://a.example/mcp" } }\n');
  const r = await runInProcess(["mcp", "add", "b", "https://b.example/mcp"], { cwd: inline.dir });
  assert.equal(r.code, 2, r.stderr);
  assert.match(r.stderr, /substructure\.toml as edited would be refused: invalid TOML: .*; nothing was written/);
  assert.doesNotMatch(r.stderr, /substructure\.toml:\d+/);
  assert.equal(inline.read(), 'mcp = { a = { url = "https://a.example/mcp" } }\n');
});

test("mcp add -- <command> [args...]: a local server as Claude Code's and Codex's `mcp add` take one (--env, --cwd); --header on a url; it loads and lists", async () => {
  const p = project(HEAD + TAIL);
  const local = await runCli(["mcp", "add", "fs", "--env", "API_TOKEN=${FS_TOKEN}", "--env", "LOG_LEVEL=info", "--cwd", "docs", "--", "npx", "-y", "@modelcontextprotocol/server-filesystem", "--root", "."], { cwd: p.dir, env: { FS_TOKEN: "" } });
  assert.equal(local.code, 0, local.stderr);
  assert.match(local.stderr, /Added \[mcp\.fs\] to substructure\.toml\.\nNext: `subs mcp tools fs`\./, "its one variable is set: nothing to export, no login");
  const keyed = await runInProcess(["mcp", "add", "exa", "https://mcp.exa.ai/mcp", "--header", "X-API-Key: ${EXA_API_KEY}", "--header", "X-Client:subs"], { cwd: p.dir });
  assert.equal(keyed.code, 0, keyed.stderr);
  assert.match(keyed.stderr, /Next: export EXA_API_KEY, then `subs mcp tools exa`\./);
  assert.equal(
    p.read(),
    HEAD +
      `\n[mcp.fs]\ncommand = "npx"\nargs = ["-y", "@modelcontextprotocol/server-filesystem", "--root", "."]\nenv = { API_TOKEN = "\${FS_TOKEN}", LOG_LEVEL = "info" }\ncwd = "docs"\n` +
      `\n[mcp.exa]\nurl = "https://mcp.exa.ai/mcp"\nheaders = { X-API-Key = "\${EXA_API_KEY}", X-Client = "subs" }\n` +
      TAIL,
  );
  const list = await runCli(["mcp", "list", "--json"], { cwd: p.dir });
  assert.equal(list.code, 0, list.stderr);
  assert.deepEqual(
    JSON.parse(list.stdout).map((c: { id: string; command: string | null; unset_env: string[] }) => [c.id, c.command, c.unset_env]),
    [
      ["sentry", null, []],
      ["fs", "npx", ["FS_TOKEN"]],
      ["exa", null, ["EXA_API_KEY"]],
    ],
  );
});

test("mcp add: a local server's or a header's mistakes write nothing; a secret given as a value is refused and never echoed; a local server under [remote] is refused", async () => {
  const p = project(HEAD + TAIL);
  const cases: Array<[string[], RegExp]> = [
    [["mcp", "add", "x", "--env", "GITHUB_TOKEN=ghp_SECRETVALUE", "--", "npx", "x"], /--env GITHUB_TOKEN would write a secret in the file; nothing was written\nhint: name the variable that holds it: --env 'GITHUB_TOKEN=\$\{GITHUB_TOKEN\}'/],
    [["mcp", "add", "x", "https://x.example/mcp", "--header", "X-Api-Key: SECRETVALUE"], /--header X-Api-Key would write a secret in the file.*\nhint: .*--header 'X-Api-Key: \$\{X_API_KEY\}'/],
    [["mcp", "add", "x", "https://x.example/mcp", "--header", "Authorization: Bearer SECRETVALUE"], /`Authorization` is the credential's header/],
    [["mcp", "add", "x", "https://x.example/mcp", "--header", "no colon SECRETVALUE"], /--header takes "Name: value"/],
    [["mcp", "add", "x", "https://x.example/mcp", "--header", "X-A: ${NOT CLOSED"], /--header X-A has `\$\{NOT CLOSED\}`|--header X-A has a `\$\{`/],
    [["mcp", "add", "x", "https://x.example/mcp", "extra"], /a url takes no arguments/],
    [["mcp", "add", "x", "https://x.example/mcp", "--env", "A=b"], /--env is for a local server; x is a url/],
    [["mcp", "add", "x", "--token-env", "T", "--", "npx", "x"], /--token-env is for a server reached by url; x is a local server/],
    [["mcp", "add", "x", "--env", "1BAD=x", "--", "npx"], /--env takes NAME=value/],
    [["mcp", "add", "x"], /missing required argument|give the MCP server's url/],
  ];
  await refusedUnwritten(p, cases);
  const remote = project(`[remote]\nurl = "https://deploy.example"\n`);
  const refusedThere = await runInProcess(["mcp", "add", "fs", "--", "npx", "x"], { cwd: remote.dir });
  assert.equal(refusedThere.code, 2, refusedThere.stderr);
  assert.match(refusedThere.stderr, /the deployment in \[remote\] of substructure\.toml cannot run it; nothing was written/);
  const keyedThere = await runInProcess(["mcp", "add", "exa", "https://mcp.exa.ai/mcp", "--header", "X-API-Key: ${EXA_API_KEY}"], { cwd: remote.dir });
  assert.equal(keyedThere.code, 0, keyedThere.stderr);
  assert.match(keyedThere.stderr, /Next: `subs mcp login exa`\./, "with [remote] the login hands the value to the deployment");
});

const REMOVE_BEFORE = `# Servers
[mcp.sentry]
url = "https://s.example/mcp"

# Linear: the team's tracker
[mcp.linear]
# comment among its keys
url = "https://l.example/mcp"
oauth = { client_id = "abc" }
# scopes = ["later"]

# GitHub, static token
[mcp.github]
url = "https://g.example/mcp"
[mcp.github.auth]
token_env = "GITHUB_TOKEN"

[agent.triage]
mcp = ["sentry"]
`;

test("mcp remove: exactly that section goes (its keys, the comments among and right after them); every other byte kept", async () => {
  const p = project(REMOVE_BEFORE);
  const r = await runInProcess(["mcp", "remove", "linear"], { cwd: p.dir });
  assert.equal(r.code, 0, r.stderr);
  assert.equal(
    p.read(),
    REMOVE_BEFORE.replace(`[mcp.linear]\n# comment among its keys\nurl = "https://l.example/mcp"\noauth = { client_id = "abc" }\n# scopes = ["later"]\n`, ""),
  );
  assert.match(r.stderr, /Removed \[mcp\.linear\] from substructure\.toml\./);
  // Its sub-tables go with it, wherever they are; the blank line before [agent] stays single.
  const github = await runInProcess(["mcp", "remove", "github"], { cwd: p.dir });
  assert.equal(github.code, 0, github.stderr);
  assert.equal(
    p.read(),
    `# Servers\n[mcp.sentry]\nurl = "https://s.example/mcp"\n\n# Linear: the team's tracker\n\n# GitHub, static token\n\n[agent.triage]\nmcp = ["sentry"]\n`,
  );
  assert.deepEqual(readdirSync(p.dir), ["substructure.toml"]);
  // The last section at the end of a file leaves no trailing blank lines.
  assert.equal(removeSection('a = 1\n\n[mcp.x]\nurl = "u"\n', "x"), "a = 1\n");
  assert.equal(removeSection('[mcp.x]\nurl = "u"\n\n[mcp.y]\nurl = "v"\n', "x"), '[mcp.y]\nurl = "v"\n');
  assert.equal(removeSection('[mcp."x"]\r\nurl = "u"\r\n\r\n[mcp.y]\r\nurl = "v"\r\n', "x"), '[mcp.y]\r\nurl = "v"\r\n');
  assert.equal(removeSection('[mcp]\nx = { url = "u" }\n', "x"), undefined);
});

test("mcp remove: refused, nothing written, when an agent still uses the id, when it is not declared, or not under its own header", async () => {
  const p = project(REMOVE_BEFORE);
  const old = new Date("2020-01-01T00:00:00Z");
  utimesSync(p.file, old, old);
  const used = await runInProcess(["mcp", "remove", "sentry"], { cwd: p.dir });
  assert.equal(used.code, 2);
  assert.match(used.stderr, /agent `triage` still uses `sentry`; nothing was written\nhint: remove "sentry" from the mcp list of \[agent\.triage\] first/);
  const unknown = await runInProcess(["mcp", "remove", "linaer"], { cwd: p.dir });
  assert.equal(unknown.code, 2);
  assert.match(unknown.stderr, /`linaer` is not declared in substructure\.toml\nhint: did you mean `linear`\?/);
  // Nothing close: no advice to declare what is being removed.
  const far = await runInProcess(["mcp", "remove", "jira"], { cwd: p.dir });
  assert.equal(far.code, 2);
  assert.match(far.stderr, /hint: declared: [^\n]*; a credential still stored for it is deleted by `subs apply`/);
  assert.doesNotMatch(far.stderr, /declare it with/);
  assert.equal(p.read(), REMOVE_BEFORE);
  assert.equal(statSync(p.file).mtimeMs, old.getTime());
  const json = await runInProcess(["mcp", "remove", "sentry", "--config", "substructure.toml"], { cwd: p.dir });
  assert.equal(json.code, 2);
  const inline = project('[mcp]\nx = { url = "https://x.example/mcp" }\n');
  const r = await runInProcess(["mcp", "remove", "x"], { cwd: inline.dir });
  assert.equal(r.code, 2);
  assert.match(r.stderr, /not declared under its own \[mcp\.x\] header/);
  assert.equal(inline.read(), '[mcp]\nx = { url = "https://x.example/mcp" }\n');
});

test("mcp remove, locally: the stored credential is deleted from the db and revoked at the authorization server", async () => {
  const env = await environment({ toml: (url) => `# kept\n[mcp.demo]\nurl = "${url}"\n\n[mcp.other]\nurl = "${url}"\n` });
  try {
    const login = await env.subs(["mcp", "login", "demo"]);
    assert.equal(login.code, 0, login.stderr);
    assert.ok(credential(env, "demo"));
    const before = env.as.counters.revocations;
    const r = await runCli(["mcp", "remove", "demo"], { cwd: env.dir });
    env.outputs.push(r.stdout, r.stderr);
    assert.equal(r.code, 0, r.stderr);
    assert.equal(credential(env, "demo"), undefined);
    assert.ok(env.as.counters.revocations > before, "the revocation reached the authorization server");
    assert.match(r.stderr, /Deleted the stored credential of demo from substructure\.db\.\nRevoked the credential of demo at the authorization server\./);
    assert.equal(readFileSync(path.join(env.dir, "substructure.toml"), "utf8"), `# kept\n\n[mcp.other]\nurl = "${env.mcp.url}"\n`);
    assert.deepEqual(leakedTokens(env), []);
  } finally {
    await env.close();
  }
});

test("mcp remove with [remote]: the section goes from the file; `subs apply` is named to remove it from the deployment", async () => {
  const p = project('[remote]\nurl = "https://deploy.example"\ntoken_env = "T"\n\n[mcp.a]\nurl = "https://a.example/mcp"\n\n[mcp.b]\nurl = "https://b.example/mcp"\n');
  const r = await runInProcess(["mcp", "remove", "a"], { cwd: p.dir });
  assert.equal(r.code, 0, r.stderr);
  assert.equal(p.read(), '[remote]\nurl = "https://deploy.example"\ntoken_env = "T"\n\n[mcp.b]\nurl = "https://b.example/mcp"\n');
  assert.match(r.stderr, /Next: `subs apply` removes a and its credential from the deployment\./);
  assert.deepEqual(readdirSync(p.dir), ["substructure.toml"]);
});
