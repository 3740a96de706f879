// `subs mcp import` brings the remote MCP servers of Claude Code, Codex, Cursor, VS Code
// and Gemini CLI into substructure.toml. Real files in temp dirs; HOME points at a temp dir through
// the environment (of the child process for the real CLI, of the Context in process). A token
// written in a client's file never reaches the file, stdout, stderr or --json.
// Each client's test (Claude Code's with the `subs mcp list` that loads what it wrote) runs the
// built CLI (bin/subs.cjs) as a person does, and SIGTERM the process; the rest run the same `run()`
// in this process, where what is checked is the file written and what is printed, not the process
// (a tenth of the CPU: a child costs a Node start-up and the bundle's load per run).
import assert from "node:assert/strict";
import { mkdirSync, mkdtempSync, readFileSync, readdirSync, statSync, utimesSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { test } from "node:test";
import { runCli, runInProcess, signalOnce, type RunResult } from "./support/cli.ts";
import { inTurns, timed } from "./support/ratio.ts";
import { planImport, uniqueId, validId } from "../src/import/plan.ts";
import { parseJsonc } from "../src/import/files.ts";
import { referenceIn, suggestedVariable } from "../src/import/values.ts";

/** A project directory and a home directory; `~/`-paths go to the home, the rest to the project. */
function fixture(files: Record<string, string>) {
  const root = mkdtempSync(path.join(tmpdir(), "subs-import-"));
  const home = path.join(root, "home");
  const dir = path.join(root, "project");
  mkdirSync(home);
  mkdirSync(dir);
  for (const [name, text] of Object.entries(files)) {
    const file = name.startsWith("~/") ? path.join(home, name.slice(2)) : path.join(dir, name);
    mkdirSync(path.dirname(file), { recursive: true });
    writeFileSync(file, text);
  }
  const toml = path.join(dir, "substructure.toml");
  return { root, home, dir, toml, read: () => readFileSync(toml, "utf8") };
}

// The built CLI runs the first client's import (and the SIGTERM test's); the other clients' imports
// run the same command in this process: each client's reader is part of the one module the CLI
// loads for `mcp import` (no reader is loaded apart), so a child for each would check nothing more.
const cli = (f: ReturnType<typeof fixture>, argv: string[], env: Record<string, string> = {}) => runCli(["mcp", "import", ...argv], { cwd: f.dir, env: { HOME: f.home, ...env } });
const inProcess = (f: ReturnType<typeof fixture>, argv: string[], env: Record<string, string> = {}) =>
  runInProcess(["mcp", "import", ...argv], { cwd: f.dir, env: { HOME: f.home, ...env } });

/** The secret appears nowhere, and nothing was redacted either (the scrubber would hide a leak). */
function assertNoSecret(secret: string, r: RunResult, file?: string) {
  for (const [what, text] of [["stdout", r.stdout], ["stderr", r.stderr], ["the file", file ?? ""]] as const) {
    assert.ok(!text.includes(secret), `the secret is in ${what}:\n${text}`);
    assert.ok(!text.includes("[redacted]"), `something was redacted from ${what} (a leak the scrubber caught):\n${text}`);
  }
}

const EXISTING = `#:schema ./substructure.schema.json
# Our servers   (odd  spacing kept)

[mcp.sentry]
url = "https://mcp.sentry.dev/mcp"   # trailing comment

# Agents below
[agent.triage]
mcp = [
  "sentry",
]
`;

test("Claude Code: .mcp.json and ~/.claude.json (user and this project's local servers); bearer from a variable is token_env; a local (stdio) server comes over", async () => {
  const f = fixture({
    "substructure.toml": EXISTING,
    ".mcp.json": JSON.stringify({
      mcpServers: {
        linear: { type: "http", url: "https://mcp.linear.app/mcp", headers: { Authorization: "Bearer ${LINEAR_TOKEN}" } },
        files: { command: "npx", args: ["-y", "@modelcontextprotocol/server-filesystem", "."] },
        // A default after :- may be the token itself: dropped, never written or shown.
        asana: { type: "sse", url: "https://mcp.asana.com/sse", headers: { Authorization: "Bearer ${ASANA_TOKEN:-asana_DEFAULT_SECRET_1}" } },
      },
    }),
  });
  writeFileSync(
    path.join(f.home, ".claude.json"),
    JSON.stringify({
      numStartups: 12,
      mcpServers: { notion: { type: "http", url: "https://mcp.notion.com/mcp" } },
      projects: {
        [f.dir]: { mcpServers: { stripe: { type: "http", url: "https://mcp.stripe.com" } } },
        "/elsewhere": { mcpServers: { other: { type: "http", url: "https://other.example/mcp" } } },
      },
    }),
  );
  const r = await cli(f, []);
  assert.equal(r.code, 0, r.stderr);
  assert.equal(r.stdout, "");
  assert.equal(
    f.read(),
    EXISTING.replace(
      "\n# Agents below",
      `
[mcp.linear]
url = "https://mcp.linear.app/mcp"
auth = { token_env = "LINEAR_TOKEN" }

[mcp.files]
command = "npx"
args = ["-y", "@modelcontextprotocol/server-filesystem", "."]

[mcp.asana]
url = "https://mcp.asana.com/sse"
auth = { token_env = "ASANA_TOKEN" }

[mcp.notion]
url = "https://mcp.notion.com/mcp"

[mcp.stripe]
url = "https://mcp.stripe.com"

# Agents below`,
    ),
  );
  assert.match(r.stderr, /Read \.mcp\.json \(claude, 3 servers\), ~\/\.claude\.json \(claude, 2 servers\)\./);
  assert.match(r.stderr, /\+ files {3}local: npx -y @modelcontextprotocol\/server-filesystem \. {2}\(claude \.mcp\.json: "files"\)/);
  assert.doesNotMatch(r.stderr, /Skipped/);
  assert.match(r.stderr, /✔ Added 5 connections to substructure\.toml\.\nNext: export LINEAR_TOKEN, ASANA_TOKEN, then `subs mcp login notion stripe`, then `subs mcp list`\./);
  assert.doesNotMatch(r.stderr, /other\.example/, "another project's local servers are not this project's");
  assertNoSecret("asana_DEFAULT_SECRET_1", r, f.read());
  // What it wrote loads.
  const list = await runCli(["mcp", "list", "--json"], { cwd: f.dir, env: { HOME: f.home } });
  assert.equal(list.code, 0, list.stderr);
  assert.deepEqual(
    JSON.parse(list.stdout).map((c: { id: string }) => c.id),
    ["sentry", "linear", "files", "asana", "notion", "stripe"],
  );
});

test("Codex: ~/.codex/config.toml and .codex/config.toml; bearer_token_env_var is token_env; literal and env headers never copied as values", async () => {
  const f = fixture({
    "substructure.toml": "",
    ".codex/config.toml": `[mcp_servers.docs]\nurl = "https://docs.example/mcp"\n`,
    "~/.codex/config.toml": `model = "o3"

[mcp_servers.github]
url = "https://api.githubcopilot.com/mcp/"
bearer_token_env_var = "GITHUB_PAT"

[mcp_servers.legacy]
url = "https://legacy.example/mcp"
bearer_token = "codex_LITERAL_SECRET_42"

[mcp_servers.catalog]
url = "https://catalog.example/mcp"
http_headers = { "X-Client" = "release-review", "X-Api-Key" = "codex_HEADER_SECRET_77" }
env_http_headers = { "Authorization" = "CATALOG_AUTH" }

[mcp_servers.off]
url = "https://off.example/mcp"
enabled = false

[mcp_servers.local]
command = "uvx"
args = ["mcp-server-git"]
`,
  });
  const r = await inProcess(f, ["--from", "codex", "--json"]);
  assert.equal(r.code, 0, r.stderr);
  const out = JSON.parse(r.stdout);
  assert.deepEqual(
    out.added.map((a: { id: string; token_env: string | null; notes: Array<{ kind: string; header?: string; name?: string }> }) => [a.id, a.token_env, a.notes.map((n) => `${n.kind}:${n.header ?? n.name}`)]),
    [
      ["docs", null, []],
      ["github", "GITHUB_PAT", []],
      ["legacy", null, ["secret_left_out:Authorization"]],
      ["catalog", null, ["value_left_out:X-Client", "value_left_out:X-Api-Key", "header_from_env:Authorization"]],
      ["local", null, []],
    ],
  );
  assert.deepEqual(
    out.skipped.map((s: { from: { name: string }; reason: string }) => [s.from.name, s.reason]),
    [["off", "disabled"]],
  );
  // Header values written in Codex's file come over as templates to export, never as values.
  assert.equal(
    f.read(),
    `[mcp.docs]\nurl = "https://docs.example/mcp"\n\n[mcp.github]\nurl = "https://api.githubcopilot.com/mcp/"\nauth = { token_env = "GITHUB_PAT" }\n\n[mcp.legacy]\nurl = "https://legacy.example/mcp"\n\n[mcp.catalog]\nurl = "https://catalog.example/mcp"\nheaders = { X-Client = "\${X_CLIENT}", X-Api-Key = "\${X_API_KEY}" }\n\n[mcp.local]\ncommand = "uvx"\nargs = ["mcp-server-git"]\n`,
  );
  assert.match(r.stderr, /Authorization held a token written in the file: not copied\. Export it as LEGACY_TOKEN and add `auth = \{ token_env = "LEGACY_TOKEN" \}` to \[mcp\.legacy\]/);
  assert.match(r.stderr, /Authorization is the whole of \$CATALOG_AUTH; subs sends "Bearer <token>"/);
  assert.match(r.stderr, /header X-Api-Key: Codex holds its value written in its file; not copied: the entry reads \$\{X_API_KEY\}: export X_API_KEY/);
  assert.match(r.stderr, /header X-Client: Codex holds its value written in its file; not copied: the entry reads \$\{X_CLIENT\}: export X_CLIENT/);
  for (const secret of ["codex_LITERAL_SECRET_42", "codex_HEADER_SECRET_77", "release-review"]) assertNoSecret(secret, r, f.read());
});

test("Cursor: .cursor/mcp.json and ~/.cursor/mcp.json; ${env:NAME} is token_env", async () => {
  const f = fixture({
    "substructure.toml": "",
    ".cursor/mcp.json": JSON.stringify({ mcpServers: { userjot: { url: "https://api.userjot.com/v1/mcp", headers: { Authorization: "Bearer ${env:USERJOT_API_TOKEN}" } } } }),
    "~/.cursor/mcp.json": JSON.stringify({
      mcpServers: { geonode: { url: "https://scraper.geonode.io/mcp", headers: { Authorization: "Bearer cursor_PASTED_TOKEN_9" } }, time: { command: "uvx", args: ["mcp-server-time"] } },
    }),
  });
  const r = await inProcess(f, ["--from", "cursor"]);
  assert.equal(r.code, 0, r.stderr);
  assert.equal(
    f.read(),
    `[mcp.userjot]\nurl = "https://api.userjot.com/v1/mcp"\nauth = { token_env = "USERJOT_API_TOKEN" }\n\n[mcp.geonode]\nurl = "https://scraper.geonode.io/mcp"\n\n[mcp.time]\ncommand = "uvx"\nargs = ["mcp-server-time"]\n`,
  );
  assert.match(r.stderr, /Read \.cursor\/mcp\.json \(cursor, 1 server\), ~\/\.cursor\/mcp\.json \(cursor, 2 servers\)\./);
  assert.match(r.stderr, /Export it as GEONODE_TOKEN and add `auth = \{ token_env = "GEONODE_TOKEN" \}` to \[mcp\.geonode\], or log in with OAuth: `subs mcp login geonode`/);
  assertNoSecret("cursor_PASTED_TOKEN_9", r, f.read());
});

test("VS Code: .vscode/mcp.json (JSON with comments, inputs) and the user profile's mcp.json and settings.json mcp.servers", async () => {
  const f = fixture({
    "substructure.toml": "",
    ".vscode/mcp.json": `{
  // Prompted once, then kept by VS Code
  "inputs": [{ "type": "promptString", "id": "github_token", "description": "GitHub PAT", "password": true }],
  "servers": {
    "github": { "type": "http", "url": "https://api.githubcopilot.com/mcp/", "headers": { "Authorization": "Bearer \${input:github_token}" } },
    /* an SSE server */
    "Perplexity Search": { "type": "sse", "url": "https://sse.example/sse", "headers": { "Authorization": "Bearer \${env:PPLX_KEY}", }, },
    "py": { "type": "stdio", "command": "python", "args": ["server.py"] },
  },
}
`,
    "~/.config/Code/User/mcp.json": JSON.stringify({ servers: { context7: { type: "http", url: "https://mcp.context7.com/mcp" } } }),
    "~/.config/Code/User/settings.json": `{ "editor.fontSize": 14, "mcp": { "servers": { "deepwiki": { "type": "http", "url": "https://mcp.deepwiki.com/mcp" } } } }`,
  });
  const r = await inProcess(f, ["--from", "vscode", "--json"]);
  assert.equal(r.code, 0, r.stderr);
  const out = JSON.parse(r.stdout);
  assert.deepEqual(
    out.added.map((a: { id: string; transport: string | null; token_env: string | null }) => [a.id, a.transport, a.token_env]),
    [
      ["github", "http", null],
      ["perplexity-search", "sse", "PPLX_KEY"],
      ["py", null, null],
      ["context7", "http", null],
      ["deepwiki", "http", null],
    ],
  );
  assert.deepEqual(out.added[0].notes, [{ kind: "prompted_input", header: "Authorization", input: "github_token", suggested_env: "GITHUB_TOKEN" }]);
  assert.deepEqual(out.skipped, []);
  assert.deepEqual([out.added[2].command, out.added[2].args], ["python", ["server.py"]]);
  assert.match(r.stderr, /VS Code prompts for Authorization \(\$\{input:github_token\}\); subs reads a variable: export GITHUB_TOKEN/);
  assert.match(f.read(), /\[mcp\.perplexity-search\]\nurl = "https:\/\/sse\.example\/sse"\nauth = \{ token_env = "PPLX_KEY" \}\n/);
});

test("Gemini CLI: .gemini/settings.json and ~/.gemini/settings.json; httpUrl and url (SSE); $VAR headers", async () => {
  const f = fixture({
    "substructure.toml": "",
    ".gemini/settings.json": JSON.stringify({ theme: "Dracula", mcpServers: { talaria: { httpUrl: "https://api.newtalaria.com/mcp", headers: { Authorization: "Bearer $TALARIA_MCP_TOKEN" } } } }),
    "~/.gemini/settings.json": JSON.stringify({
      mcpServers: {
        github: { httpUrl: "https://api.githubcopilot.com/mcp/", headers: { Authorization: "gemini_RAW_PAT_123456" }, timeout: 5000 },
        events: { url: "https://events.example/sse" },
        git: { command: "uvx", args: ["mcp-server-git"] },
      },
    }),
  });
  const r = await inProcess(f, ["--from", "gemini", "--json"]);
  assert.equal(r.code, 0, r.stderr);
  const out = JSON.parse(r.stdout);
  assert.deepEqual(
    out.added.map((a: { id: string; transport: string | null; token_env: string | null; notes: Array<{ kind: string }> }) => [a.id, a.transport, a.token_env, a.notes.map((n) => n.kind)]),
    [
      ["talaria", "http", "TALARIA_MCP_TOKEN", []],
      ["github", "http", null, ["secret_left_out", "setting_left_out"]],
      ["events", "sse", null, []],
      ["git", null, null, []],
    ],
  );
  assertNoSecret("gemini_RAW_PAT_123456", r, f.read());
});

test("a literal secret never reaches the file, stdout, stderr, --json or --debug, whatever the client, nor from a file that does not parse", async () => {
  const secret = "sk_live_DO_NOT_PRINT_5f3a9c";
  const f = fixture({
    "substructure.toml": EXISTING,
    ".mcp.json": JSON.stringify({ mcpServers: { pay: { type: "http", url: "https://pay.example/mcp", headers: { Authorization: `Bearer ${secret}`, "X-Api-Key": secret } } } }),
    // Not valid JSON: the parser's message would quote the text around the mistake.
    ".cursor/mcp.json": `{"mcpServers": {"a": {"url": "https://a.example/mcp", "headers": {"Authorization": "Bearer ${secret}"} x }}}`,
    // Not valid TOML either: smol-toml's message quotes the line.
    ".codex/config.toml": `[mcp_servers.b]\nurl = "https://b.example/mcp"\nbearer_token = "${secret}" oops\n`,
    // A url with the key in its query.
    ".gemini/settings.json": JSON.stringify({ mcpServers: { q: { httpUrl: `https://q.example/mcp?api_key=${secret}` } } }),
  });
  for (const argv of [["--dry-run"], ["--dry-run", "--json"], ["--dry-run", "--debug"], ["--json"]]) {
    const r = await inProcess(f, argv, { SUBS_DEBUG: "1" });
    assert.equal(r.code, 0, `${argv.join(" ")}: ${r.stderr}`);
    assertNoSecret(secret, r, f.read());
  }
  const r = await inProcess(f, ["--dry-run"]);
  assert.match(r.stderr, /warning: \.cursor\/mcp\.json is not valid JSON \(line 1, column \d+\); its servers were not read/);
  assert.match(r.stderr, /warning: \.codex\/config\.toml is not valid TOML \(line 3, column \d+\); its servers were not read/);
  assert.match(r.stderr, /- gemini \.gemini\/settings\.json: "q": its url carries a credential/);
  assert.match(f.read(), /\[mcp\.pay\]\nurl = "https:\/\/pay\.example\/mcp"\n/);
  // Named on the command line, a file that does not parse is the command's failure (exit 2), still without the secret.
  const named = await inProcess(f, ["--from", ".cursor/mcp.json"]);
  assert.equal(named.code, 2);
  assert.match(named.stderr, /mcp\.json is not valid JSON \(line 1, column \d+\)/);
  assertNoSecret(secret, named, f.read());
});

test("ids are made valid and unique (against the file's sections and each other); a url already declared is reported, not added twice", async () => {
  const f = fixture({
    "substructure.toml": `[mcp.linear]\nurl = "https://other.example/mcp"\n\n[mcp.docs]\nurl = "https://docs.example/mcp/"\n`,
    ".mcp.json": JSON.stringify({
      mcpServers: {
        Linear: { type: "http", url: "https://mcp.linear.app/mcp" },
        "My Server!": { type: "http", url: "https://my.example/mcp" },
        "a__b": { type: "http", url: "https://ab.example/mcp" },
        "日本": { type: "http", url: "https://jp.example/mcp" },
        // Declared as https://docs.example/mcp/ already: the same server.
        "docs-again": { type: "http", url: "https://DOCS.example/mcp" },
      },
    }),
    "~/.cursor/mcp.json": JSON.stringify({ mcpServers: { linear: { url: "https://mcp.linear.app/mcp" }, "my-server": { url: "https://my2.example/mcp" } } }),
  });
  const r = await inProcess(f, ["--json"]);
  assert.equal(r.code, 0, r.stderr);
  const out = JSON.parse(r.stdout);
  assert.deepEqual(
    out.added.map((a: { id: string; from: { name: string } }) => [a.from.name, a.id]),
    [
      ["Linear", "linear-2"],
      ["My Server!", "my-server"],
      ["a__b", "a_b"],
      ["日本", "server"],
      ["my-server", "my-server-2"],
    ],
  );
  assert.deepEqual(
    out.already_declared.map((d: { id: string; by: string; from: { name: string } }) => [d.from.name, d.id, d.by]),
    [
      ["docs-again", "docs", "file"],
      ["linear", "linear-2", "import"],
    ],
  );
  assert.match(r.stderr, /= claude \.mcp\.json: "docs-again": its url is \[mcp\.docs\] in substructure\.toml/);
  const list = await runInProcess(["mcp", "list", "--json"], { cwd: f.dir, env: { HOME: f.home } });
  assert.equal(list.code, 0, list.stderr);
  assert.equal(JSON.parse(list.stdout).length, 7);
  // A second run finds every url declared: nothing to add, the file untouched.
  const before = f.read();
  const again = await inProcess(f, []);
  assert.equal(again.code, 0, again.stderr);
  assert.match(again.stderr, /Nothing to add\./);
  assert.equal(f.read(), before);
});

test("--dry-run writes nothing (same bytes, same mtime) and creates no file; the --json shape", async () => {
  const f = fixture({ "substructure.toml": EXISTING, ".mcp.json": JSON.stringify({ mcpServers: { linear: { type: "http", url: "https://mcp.linear.app/mcp" } } }) });
  const old = new Date("2020-01-01T00:00:00Z");
  utimesSync(f.toml, old, old);
  const r = await inProcess(f, ["--dry-run", "--json"]);
  assert.equal(r.code, 0, r.stderr);
  assert.equal(f.read(), EXISTING);
  assert.equal(statSync(f.toml).mtimeMs, old.getTime());
  assert.deepEqual(JSON.parse(r.stdout), {
    config: f.toml,
    created: false,
    dry_run: true,
    written: false,
    read: [{ client: "claude", scope: "project", file: path.join(f.dir, ".mcp.json"), servers: 1 }],
    unreadable: [],
    added: [
      {
        id: "linear",
        url: "https://mcp.linear.app/mcp",
        command: null,
        args: [],
        env: {},
        cwd: null,
        headers: {},
        transport: "http",
        token_env: null,
        oauth: null,
        from: { client: "claude", scope: "project", file: path.join(f.dir, ".mcp.json"), name: "linear" },
        notes: [],
      },
    ],
    already_declared: [],
    skipped: [],
  });
  assert.match(r.stderr, /Would add to substructure\.toml:\n {2}\+ linear {2}https:\/\/mcp\.linear\.app\/mcp/);
  assert.match(r.stderr, /Dry run: 1 connection would be added; nothing was written\./);
  assert.deepEqual(readdirSync(f.dir).sort(), [".mcp.json", "substructure.toml"]);

  const none = fixture({ ".mcp.json": JSON.stringify({ mcpServers: { linear: { type: "http", url: "https://mcp.linear.app/mcp" } } }) });
  const dry = await inProcess(none, ["--dry-run"]);
  assert.equal(dry.code, 0, dry.stderr);
  assert.deepEqual(readdirSync(none.dir), [".mcp.json"]);
});

test("no substructure.toml: written as `subs init` writes it, with the servers declared; it loads", async () => {
  const f = fixture({ ".mcp.json": JSON.stringify({ mcpServers: { linear: { type: "http", url: "https://mcp.linear.app/mcp", headers: { Authorization: "Bearer ${LINEAR_TOKEN}" } } } }) });
  const r = await inProcess(f, []);
  assert.equal(r.code, 0, r.stderr);
  assert.match(r.stderr, /Adding to substructure\.toml \(a new file, as `subs init` writes it\):/);
  assert.match(r.stderr, /✔ Wrote substructure\.toml with 1 connection\./);
  const text = f.read();
  assert.match(text, /^# substructure\.toml: the MCP servers your agents connect to/);
  assert.match(text, /\n\[mcp\.linear\]\nurl = "https:\/\/mcp\.linear\.app\/mcp"\nauth = \{ token_env = "LINEAR_TOKEN" \}\n/);
  const list = await runInProcess(["mcp", "list", "--json"], { cwd: f.dir, env: { HOME: f.home } });
  assert.equal(list.code, 0, list.stderr);
  assert.deepEqual(JSON.parse(list.stdout).map((c: { id: string }) => c.id), ["linear"]);
});

test("nothing found: a clear message, exit 0, no file created; an unknown --from path is exit 2", async () => {
  const f = fixture({});
  const r = await inProcess(f, []);
  assert.equal(r.code, 0, r.stderr);
  assert.equal(r.stdout, "");
  assert.match(r.stderr, /^No MCP config of Claude Code, Codex, Cursor, VS Code, Gemini CLI found \(looked for \.mcp\.json \(and in every directory above\), ~\/\.claude\.json, /);
  assert.deepEqual(readdirSync(f.dir), []);
  const json = await inProcess(f, ["--from", "claude", "--json"]);
  assert.equal(json.code, 0);
  assert.deepEqual(JSON.parse(json.stdout).read, []);
  const missing = await inProcess(f, ["--from", "nope.json"]);
  assert.equal(missing.code, 2);
  assert.match(missing.stderr, /nope\.json: no such file/);
  const unknown = fixture({ "x.json": JSON.stringify({ hello: 1 }) });
  const shape = await inProcess(unknown, ["--from", "x.json", "--json"]);
  assert.equal(shape.code, 2);
  assert.match(shape.stderr, /x\.json is not an MCP config file subs knows/);
  assert.equal(JSON.parse(shape.stdout).error.code, "usage");
});

test("--from PATH: a client file given directly, its format told by its name or shape", async () => {
  const f = fixture({
    "substructure.toml": "",
    "exports/claude-desktop-style.json": JSON.stringify({ mcpServers: { a: { type: "http", url: "https://a.example/mcp" } } }),
    "exports/vscode.json": JSON.stringify({ servers: { b: { type: "sse", url: "https://b.example/sse" } } }),
    "exports/gemini.json": JSON.stringify({ mcpServers: { c: { httpUrl: "https://c.example/mcp" } } }),
    "exports/codex.toml": `[mcp_servers.d]\nurl = "https://d.example/mcp"\n`,
  });
  const expected: Array<[string, string, string]> = [
    ["exports/claude-desktop-style.json", "claude", "a"],
    ["exports/vscode.json", "vscode", "b"],
    ["exports/gemini.json", "gemini", "c"],
    ["exports/codex.toml", "codex", "d"],
  ];
  for (const [file, client, id] of expected) {
    const r = await inProcess(f, ["--from", file, "--json", "--dry-run"]);
    assert.equal(r.code, 0, r.stderr);
    const out = JSON.parse(r.stdout);
    assert.deepEqual([out.read[0].client, out.added[0].id], [client, id], file);
  }
});

test("with [remote]: no `auth` is written (the deployment holds credentials); the report says so", async () => {
  const toml = `[remote]\nurl = "https://deploy.example"\n`;
  const f = fixture({ "substructure.toml": toml, ".mcp.json": JSON.stringify({ mcpServers: { linear: { type: "http", url: "https://mcp.linear.app/mcp", headers: { Authorization: "Bearer ${LINEAR_TOKEN}" } } } }) });
  const r = await inProcess(f, []);
  assert.equal(r.code, 0, r.stderr);
  assert.equal(f.read(), `${toml}\n[mcp.linear]\nurl = "https://mcp.linear.app/mcp"\n`);
  assert.match(r.stderr, /token from \$LINEAR_TOKEN not written: with \[remote\] the deployment holds credentials; authorize there with `subs mcp login linear`/);
});

test("an invalid substructure.toml is refused as every command refuses it; nothing is written", async () => {
  const bad = `[mcp.x]\nurl = "ftp://x.example"\n`;
  const f = fixture({ "substructure.toml": bad, ".mcp.json": JSON.stringify({ mcpServers: { a: { type: "http", url: "https://a.example/mcp" } } }) });
  const r = await inProcess(f, []);
  assert.equal(r.code, 2);
  assert.match(r.stderr, /substructure\.toml:2:1: `url` must be an http\(s\) URL\n1 error in substructure\.toml; nothing was changed\./);
  assert.equal(f.read(), bad);
});

test("plan and values: references, ids, suggested variables, JSON with comments", () => {
  assert.deepEqual(referenceIn("${env:A_B}"), { env: "A_B" });
  assert.deepEqual(referenceIn("${TOKEN:-fallback}"), { env: "TOKEN" });
  assert.deepEqual(referenceIn("$TOKEN"), { env: "TOKEN" });
  assert.deepEqual(referenceIn("${input:pat}"), { input: "pat" });
  assert.equal(referenceIn("${A}${B}"), undefined);
  assert.equal(referenceIn("sk-${A}"), undefined);
  assert.equal(validId("  GitHub Copilot (beta) "), "github-copilot-beta");
  assert.equal(validId("x__y___z"), "x_y_z");
  assert.equal(validId("--"), "server");
  assert.equal(uniqueId("a", new Set(["a", "a-2"])), "a-3");
  assert.equal(suggestedVariable("my-server"), "MY_SERVER_TOKEN");
  assert.equal(suggestedVariable("1password"), "MCP_1PASSWORD_TOKEN");
  assert.equal(suggestedVariable("gh", "github-pat"), "GITHUB_PAT");
  const parsed = parseJsonc('{\n  // c\n  "a": "http://x//y", /* b */ "b": [1, 2,],\n}\n');
  assert.deepEqual(parsed, { ok: true, value: { a: "http://x//y", b: [1, 2] } });
  const secrets: string[] = [];
  const plan = planImport({
    found: [
      {
        origin: { client: "claude", scope: "project", file: "/p/.mcp.json" },
        servers: [
          { name: "s", kind: "remote", url: "https://s.example/mcp", transport: "http", headers: [{ name: "Authorization", value: "Bearer abcdef123456" }] },
          { name: "plain", kind: "remote", url: "http://internal.example/mcp", transport: undefined, headers: [] },
        ],
      },
    ],
    existing: [],
    remote: false,
    secret: (v) => secrets.push(v),
  });
  assert.deepEqual(secrets, ["Bearer abcdef123456", "abcdef123456"], "every literal is handed to the run's scrubber");
  assert.deepEqual(plan.skipped.map((s) => [s.from.name, s.reason]), [["plain", "invalid_url"]]);
});

test("run in the home directory, a file that is both the project's and the user's is read once, as the user's", async () => {
  const f = fixture({ "~/substructure.toml": "", "~/.cursor/mcp.json": JSON.stringify({ mcpServers: { a: { url: "https://a.example/mcp" } } }) });
  const r = await runInProcess(["mcp", "import", "--json", "--dry-run"], { cwd: f.home, env: { HOME: f.home } });
  assert.equal(r.code, 0, r.stderr);
  const out = JSON.parse(r.stdout);
  assert.deepEqual(out.read, [{ client: "cursor", scope: "user", file: path.join(f.home, ".cursor", "mcp.json"), servers: 1 }]);
  assert.deepEqual(out.already_declared, []);
});

// A project's `.codex/config.toml` comes with the repository: every value in it is another
// program's text. Printed, it is shown (escapes visible, never run); a variable name that is not one
// (escape sequences, a token pasted where the name goes) keeps its server out, and is never printed.
test("values from another program's file are shown escaped; a header variable that is not a variable name skips its server, unprinted", async () => {
  const osc = "\u001b]52;c;SGVsbG8=\u0007\u001b]2;pwned\u0007\u001b[2K\r";
  const token = "sk-live-PASTED_WHERE_THE_NAME_GOES_1234";
  const f = fixture({
    "substructure.toml": "",
    ".codex/config.toml": `[mcp_servers.escapes]
url = "https://escapes.example/mcp"
env_http_headers = { "Authorization" = "${osc.replace(/\u001b/g, "\\u001b").replace(/\u0007/g, "\\u0007").replace(/\r/g, "\\r")}" }

[mcp_servers.pasted]
url = "https://pasted.example/mcp"
env_http_headers = { "Authorization" = "${token}" }

[mcp_servers.bearer]
url = "https://bearer.example/mcp"
bearer_token_env_var = "\\u001b[2KTOKEN"

[mcp_servers."na\\u001b]2;me\\u0007"]
url = "https://named.example/mcp"
http_headers = { "X-\\u001b[31mEvil" = "v" }
env_http_headers = { "Authorization" = "CATALOG_AUTH" }
`,
  });
  const r = await inProcess(f, ["--from", "codex"]);
  assert.equal(r.code, 0, r.stderr);
  for (const raw of ["\u001b", "\u0007", "\r"]) assert.ok(!r.stderr.includes(raw), `a raw ${JSON.stringify(raw)} reached stderr:\n${JSON.stringify(r.stderr)}`);
  assertNoSecret(token, r, f.read());
  assert.ok(!r.stderr.includes("SGVsbG8") && !r.stderr.includes("pwned"), r.stderr);
  for (const name of ["escapes", "pasted", "bearer"]) {
    assert.match(r.stderr, new RegExp(`"${name}": its Authorization header is to come from a variable, but what names the variable is not a variable name`));
  }
  // The one that names a real variable is imported; its name and header names are shown escaped.
  assert.match(r.stderr, /\+ na-2-me +https:\/\/named\.example\/mcp +\(codex \.codex\/config\.toml: "na\\x1b\]2;me\\x07"\)/);
  assert.match(r.stderr, /header X-\\x1b\[31mEvil not imported/);
  assert.match(r.stderr, /Authorization is the whole of \$CATALOG_AUTH/);
  assert.equal(f.read(), `[mcp.na-2-me]\nurl = "https://named.example/mcp"\n`);
  const json = JSON.parse((await inProcess(f, ["--from", "codex", "--dry-run", "--json"])).stdout);
  assert.deepEqual(
    json.skipped.map((s: { from: { name: string }; reason: string }) => [s.from.name, s.reason]),
    [
      ["escapes", "invalid_variable"],
      ["pasted", "invalid_variable"],
      ["bearer", "invalid_variable"],
    ],
  );
});

// A secret can be the url itself: a fragment or a signed url's signature, or a path segment that
// is a key (hosted servers that give each user a url of their own). None is copied or printed; the
// urls of ordinary servers, short tenant ids and readable slugs still import.
test("urls carrying a secret in a fragment, a signature parameter or a random path segment are skipped, unprinted; ordinary MCP urls import", async () => {
  const secrets = {
    fragment: ["https://frag.example/mcp#access_token=FRAGMENT_SECRET_9a8b7c", "FRAGMENT_SECRET_9a8b7c"],
    sas: ["https://acct.blob.core.windows.net/mcp?sv=2022-11-02&sp=r&sig=AZURE_SAS_SIG_5d4c3b2a1", "AZURE_SAS_SIG_5d4c3b2a1"],
    amz: ["https://s3.example/mcp?X-Amz-Algorithm=AWS4-HMAC-SHA256&X-Amz-Signature=AMZ_SIGNATURE_ab12cd34", "AMZ_SIGNATURE_ab12cd34"],
    goog: ["https://storage.example/mcp?X-Goog-Signature=GOOG_SIGNATURE_ef56ab78", "GOOG_SIGNATURE_ef56ab78"],
    token: ["https://t.example/mcp?token=QUERY_TOKEN_1f2e3d", "QUERY_TOKEN_1f2e3d"],
    key: ["https://k.example/mcp?key=QUERY_KEY_4c5b6a", "QUERY_KEY_4c5b6a"],
    zapier: ["https://mcp.zapier.com/api/mcp/s/NjM5ZTU4YjQtMmQzZC00ZjA1LWE2ZDUtYjQ4ZWE5ZTYyZTk2OjE2YjU2ZjM2/mcp", "NjM5ZTU4YjQtMmQzZC00ZjA1LWE2ZDUtYjQ4ZWE5ZTYyZTk2OjE2YjU2ZjM2"],
    uuid: ["https://mcp.pipedream.example/3f2a6c1e-8b7d-4e5f-9a0b-1c2d3e4f5a6b/gmail", "3f2a6c1e-8b7d-4e5f-9a0b-1c2d3e4f5a6b"],
    apikey: ["https://hooks.example/mcp/sk_live_51HbQkRLx0ZfVx8Qj3pZ9yT2mN4wK7vB/sse", "sk_live_51HbQkRLx0ZfVx8Qj3pZ9yT2mN4wK7vB"],
  };
  const ordinary = {
    sentry: "https://mcp.sentry.dev/mcp",
    github: "https://api.githubcopilot.com/mcp/",
    linear: "https://mcp.linear.app/sse",
    atlassian: "https://mcp.atlassian.com/v1/sse",
    smithery: "https://server.smithery.ai/@org/name/mcp",
    context7: "https://server.smithery.ai/@upstash/context7-mcp/mcp",
    tenant: "https://mcp.example.com/t/8f3k2a/mcp",
    slug: "https://mcp.example.com/my-company-internal-knowledge-base/mcp",
    camel: "https://mcp.example.com/MCPServerForGitHubV2/mcp",
    dated: "https://mcp.example.com/v2025-06-18/mcp",
    project: "https://mcp.supabase.com/mcp?project_ref=abcdefghijklmnopqrst&read_only=true",
  };
  const servers = Object.fromEntries([
    ...Object.entries(secrets).map(([name, [url]]) => [name, { type: "http", url }]),
    ...Object.entries(ordinary).map(([name, url]) => [name, { type: "http", url }]),
  ]);
  const f = fixture({ "substructure.toml": "", ".mcp.json": JSON.stringify({ mcpServers: servers }) });
  const r = await inProcess(f, ["--from", "claude", "--json"]);
  assert.equal(r.code, 0, r.stderr);
  const out = JSON.parse(r.stdout);
  assert.deepEqual(out.added.map((a: { id: string }) => a.id), Object.keys(ordinary));
  const reasons = Object.fromEntries(out.skipped.map((s: { from: { name: string }; reason: string }) => [s.from.name, s.reason]));
  assert.deepEqual(reasons, {
    fragment: "url_has_credential",
    sas: "url_has_credential",
    amz: "url_has_credential",
    goog: "url_has_credential",
    token: "url_has_credential",
    key: "url_has_credential",
    zapier: "url_path_looks_secret",
    uuid: "url_path_looks_secret",
    apikey: "url_path_looks_secret",
  });
  for (const [, secret] of Object.values(secrets)) assertNoSecret(secret!, r, f.read());
  const human = await inProcess(f, ["--from", "claude", "--dry-run"]);
  assert.match(human.stderr, /"zapier": its url path holds what looks like a key \(a long random segment\), which is never copied: .* declare it with `subs mcp add <id> <url>`/);
  assert.match(human.stderr, /"fragment": its url carries a credential \(in its query, its fragment or user:password@\)/);
  for (const [, secret] of Object.values(secrets)) assertNoSecret(secret!, human);
});

// One hostile entry used to abort the whole import (exit 2, nothing imported) with an error citing a
// line of the edited file, which was never written: a url the file cannot hold, a reserved name.
test("one bad entry is skipped with its reason or renamed, the rest import; no error cites a line of a file never written", async () => {
  const bad = {
    del: "https://del.example/a\u007fb",
    c1: "https://c1.example/a\u009bb",
    bidi: "https://bidi.example/a\u202eb",
    surrogate: "https://surrogate.example/a\ud800b",
    unparsable: "https://exa mple.com/mcp",
  };
  const f = fixture({
    "substructure.toml": EXISTING,
    ".mcp.json": JSON.stringify({
      mcpServers: {
        ...Object.fromEntries(Object.entries(bad).map(([name, url]) => [name, { type: "http", url }])),
        constructor: { type: "http", url: "https://a.example/mcp" },
        prototype: { type: "http", url: "https://b.example/mcp" },
        good: { type: "http", url: "https://good.example/mcp" },
      },
    }).replace('"good"', '"__proto__": {"type": "http", "url": "https://p.example/mcp"}, "good"'),
  });
  const r = await inProcess(f, ["--from", "claude", "--json"]);
  assert.equal(r.code, 0, r.stderr);
  const out = JSON.parse(r.stdout);
  assert.deepEqual(
    out.added.map((a: { id: string; from: { name: string } }) => [a.from.name, a.id]),
    [
      ["constructor", "constructor-2"],
      ["prototype", "prototype-2"],
      ["__proto__", "proto"],
      ["good", "good"],
    ],
  );
  assert.deepEqual(
    out.skipped.map((s: { from: { name: string }; reason: string }) => [s.from.name, s.reason]),
    Object.keys(bad).map((name) => [name, "invalid_url"]),
  );
  const after = f.read();
  assert.ok(after.startsWith(EXISTING.split("# Agents below")[0]!.trimEnd()), after);
  assert.match(after, /\[mcp\.constructor-2\]\nurl = "https:\/\/a\.example\/mcp"\n\n\[mcp\.prototype-2\]\n.*\n\n\[mcp\.proto\]\n.*\n\n\[mcp\.good\]\n/);
  assert.equal((await runInProcess(["mcp", "list", "--json"], { cwd: f.dir })).code, 0);
  // The same urls and names given to `subs mcp add` are its usage mistakes, also without a line.
  for (const [argv, message] of [
    [["mcp", "add", "x", bad.del], /the url of x holds a control or invisible character/],
    [["mcp", "add", "x", bad.surrogate], /the url of x holds a control or invisible character/],
    [["mcp", "add", "constructor", "https://a.example/mcp"], /`constructor` is a reserved name/],
  ] as const) {
    const before = f.read();
    const added = await runInProcess([...argv], { cwd: f.dir });
    assert.equal(added.code, 2, added.stderr);
    assert.match(added.stderr, message);
    assert.doesNotMatch(added.stderr, /substructure\.toml:\d+/);
    assert.equal(f.read(), before);
  }
});

/** A Codex config declaring `n` servers: every other one with a token written in the file. */
function codexServers(n: number): string {
  let text = "";
  for (let i = 0; i < n; i++) {
    text += `[mcp_servers.s${i}]\nurl = "https://mcp${i}.example.com/mcp"\n`;
    text += i % 2 === 0 ? `bearer_token_env_var = "TOKEN_${i}"\n\n` : `bearer_token = "sk-live-${i}-literal-${(i * 7919).toString(36)}"\nhttp_headers = { "X-Api-Key" = "key-${i}-literal" }\n\n`;
  }
  return text;
}

// Each server used to be appended by re-scanning the whole file, and every printed line scrubbed
// for every token learnt: 1,000 servers took 0.6 s, 8,000 took 28 s.
test("the time of an import grows with the count of servers, not its square (1,000 against 8,000)", { timeout: 300_000 }, async () => {
  const importOf = (n: number) => async () => {
    const f = fixture({ "substructure.toml": EXISTING, "~/.codex/config.toml": codexServers(n) });
    let r: RunResult | undefined;
    const ms = await timed(async () => (r = await inProcess(f, ["--from", "codex"])));
    assert.equal(r!.code, 0, r!.stderr.slice(-2000));
    assert.equal(f.read().match(/^\[mcp\./gm)?.length, n + 1);
    return ms;
  };
  // In turns, the least of each (the first small one also compiles the code both use). A ratio in
  // one run, not a figure a loaded machine can break: linear is 8 times the time; quadratic was 64.
  const { a: small, b: large } = await inTurns(importOf(1000), importOf(8000));
  assert.ok(large < small * 24, `1,000 servers took ${Math.round(small)} ms, 8,000 took ${Math.round(large)} ms (the least of 3 each)`);
});

test("a client file past the caps is refused with a clear message, the others import: 4 MiB of TOML, 1,000,000 JSON values, 10,000 servers", async () => {
  const f = fixture({
    "substructure.toml": "",
    "~/.codex/config.toml": `[mcp_servers.toml]\nurl = "https://toml.example/mcp"\n# ${"x".repeat(4 * 1024 * 1024)}\n`,
    ".cursor/mcp.json": JSON.stringify({ mcpServers: { values: { url: "https://values.example/mcp" } }, filler: new Array(1_000_001).fill(0) }),
    ".mcp.json": JSON.stringify({ mcpServers: Object.fromEntries(Array.from({ length: 10_001 }, (_, i) => [`s${i}`, { type: "http", url: `https://s${i}.example/mcp` }])) }),
    ".gemini/settings.json": JSON.stringify({ mcpServers: { fine: { httpUrl: "https://fine.example/mcp" } } }),
  });
  const r = await inProcess(f, []);
  assert.equal(r.code, 0, r.stderr);
  assert.match(r.stderr, /warning: ~\/\.codex\/config\.toml is larger than 4 MiB, the most subs reads of such a file; its servers were not read/);
  assert.match(r.stderr, /warning: \.cursor\/mcp\.json holds more than 1,000,000 JSON values, the most subs reads; its servers were not read/);
  assert.match(r.stderr, /warning: \.mcp\.json declares more than 10,000 MCP servers, the most subs reads from one file; its servers were not read/);
  assert.equal(f.read(), `[mcp.fine]\nurl = "https://fine.example/mcp"\n`);
  // Named with --from, such a file is the command's failure (exit 2), nothing written.
  for (const [from, message] of [
    [path.join(f.home, ".codex", "config.toml"), /is larger than 4 MiB/],
    [".cursor/mcp.json", /holds more than 1,000,000 JSON values/],
    [".mcp.json", /declares more than 10,000 MCP servers/],
  ] as const) {
    const named = await inProcess(f, ["--from", from]);
    assert.equal(named.code, 2, named.stderr);
    assert.match(named.stderr, message);
    assert.equal(f.read(), `[mcp.fine]\nurl = "https://fine.example/mcp"\n`);
  }
});

// A synchronous import never looked at Ctrl-C or SIGTERM: a 24 MB codex config ran for minutes and
// ignored both. Between files and steps it now looks, and stops with nothing written.
test("SIGTERM during a real import of large client files ends it at once: exit 143, substructure.toml untouched", { timeout: 120_000 }, async () => {
  // As Claude Code grows ~/.claude.json (per-project history beside the servers), twice over.
  const large = (key: string, entry: (i: number) => object) =>
    JSON.stringify({
      [key]: Object.fromEntries(Array.from({ length: 10_000 }, (_, i) => [`s${i}`, entry(i)])),
      projects: Object.fromEntries(Array.from({ length: 200 }, (_, p) => [`/p${p}`, { history: Array.from({ length: 200 }, (_, h) => ({ display: `${p}.${h} ${"lorem ipsum dolor sit amet ".repeat(16)}` })) }])),
    });
  const f = fixture({
    "substructure.toml": EXISTING,
    "~/.claude.json": large("mcpServers", (i) => ({ type: "http", url: `https://c${i}.example/mcp`, headers: { Authorization: `Bearer sk-${i}-literal-token` } })),
    // Read after Claude's, in this order: an import that read on after the signal reads both.
    "~/.cursor/mcp.json": large("mcpServers", (i) => ({ url: `https://u${i}.example/mcp` })),
    "~/.gemini/settings.json": large("mcpServers", (i) => ({ httpUrl: `https://g${i}.example/mcp` })),
  });
  const old = new Date("2020-01-01T00:00:00Z");
  utimesSync(f.toml, old, old);
  const term = signalOnce(/Reading ~\/\.claude\.json \(\d+ MiB\)…/, "SIGTERM");
  const r = await runCli(["mcp", "import"], { cwd: f.dir, env: { HOME: f.home }, timeoutMs: 60_000, onSpawn: term.onSpawn });
  assert.ok(term.state.sent, `no reading was said:\n${r.stderr.slice(0, 2000)}`);
  assert.equal(r.code, 143, r.stderr.slice(-2000));
  // At once is an order, not a duration: the file being read when the signal came is read to its
  // end (a parse is not cut), and at most the next one begun (a signal sent late, on a loaded
  // machine); not both files after it.
  assert.ok(r.stderr.startsWith(term.state.stderrBefore!), r.stderr);
  const afterSignal = r.stderr.slice(term.state.stderrBefore!.length);
  assert.ok((afterSignal.match(/^Reading /gm) ?? []).length <= 1, `read on after the signal:\n${r.stderr}`);
  assert.match(r.stderr, /Interrupted\.\n$/);
  assert.equal(f.read(), EXISTING);
  assert.equal(statSync(f.toml).mtimeMs, old.getTime());
  assert.deepEqual(readdirSync(f.dir).sort(), ["substructure.toml"]);
});
