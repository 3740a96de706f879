// Issue 15: `subs mcp import` brings the remote MCP servers of Claude Code, Codex, Cursor, VS Code
// and Gemini CLI into substructure.toml. Real files in temp dirs; HOME points at a temp dir through
// the environment (of the child process for the real CLI, of the Context in process). A token
// written in a client's file never reaches the file, stdout, stderr or --json.
import assert from "node:assert/strict";
import { mkdirSync, mkdtempSync, readFileSync, readdirSync, statSync, utimesSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { test } from "node:test";
import { runCli, runInProcess, type RunResult } from "./support/cli.ts";
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

test("Claude Code: .mcp.json and ~/.claude.json (user and this project's local servers); bearer from a variable is token_env; stdio skipped", async () => {
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
  assert.match(r.stderr, /- claude \.mcp\.json: "files": a local \(stdio\) server: subs connects to remote servers only/);
  assert.match(r.stderr, /✔ Added 4 connections to substructure\.toml\.\nNext: export LINEAR_TOKEN, ASANA_TOKEN, then `subs mcp login notion stripe`, then `subs mcp list`\./);
  assert.doesNotMatch(r.stderr, /other\.example/, "another project's local servers are not this project's");
  assertNoSecret("asana_DEFAULT_SECRET_1", r, f.read());
  // What it wrote loads.
  const list = await runCli(["mcp", "list", "--json"], { cwd: f.dir, env: { HOME: f.home } });
  assert.equal(list.code, 0, list.stderr);
  assert.deepEqual(
    JSON.parse(list.stdout).map((c: { id: string }) => c.id),
    ["sentry", "linear", "asana", "notion", "stripe"],
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
  const r = await cli(f, ["--from", "codex", "--json"]);
  assert.equal(r.code, 0, r.stderr);
  const out = JSON.parse(r.stdout);
  assert.deepEqual(
    out.added.map((a: { id: string; token_env: string | null; notes: Array<{ kind: string; header: string }> }) => [a.id, a.token_env, a.notes.map((n) => `${n.kind}:${n.header}`)]),
    [
      ["docs", null, []],
      ["github", "GITHUB_PAT", []],
      ["legacy", null, ["secret_left_out:Authorization"]],
      ["catalog", null, ["header_left_out:X-Client", "header_left_out:X-Api-Key", "header_from_env:Authorization"]],
    ],
  );
  assert.deepEqual(
    out.skipped.map((s: { from: { name: string }; reason: string }) => [s.from.name, s.reason]),
    [
      ["off", "disabled"],
      ["local", "stdio"],
    ],
  );
  assert.equal(
    f.read(),
    `[mcp.docs]\nurl = "https://docs.example/mcp"\n\n[mcp.github]\nurl = "https://api.githubcopilot.com/mcp/"\nauth = { token_env = "GITHUB_PAT" }\n\n[mcp.legacy]\nurl = "https://legacy.example/mcp"\n\n[mcp.catalog]\nurl = "https://catalog.example/mcp"\n`,
  );
  assert.match(r.stderr, /Authorization held a token written in the file: not copied\. Export it as LEGACY_TOKEN and add `auth = \{ token_env = "LEGACY_TOKEN" \}` to \[mcp\.legacy\]/);
  assert.match(r.stderr, /Authorization is the whole of \$CATALOG_AUTH; subs sends "Bearer <token>"/);
  assert.match(r.stderr, /X-Api-Key carries a credential subs cannot send/);
  assert.match(r.stderr, /header X-Client not imported: substructure\.toml declares no custom headers/);
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
  const r = await cli(f, ["--from", "cursor"]);
  assert.equal(r.code, 0, r.stderr);
  assert.equal(
    f.read(),
    `[mcp.userjot]\nurl = "https://api.userjot.com/v1/mcp"\nauth = { token_env = "USERJOT_API_TOKEN" }\n\n[mcp.geonode]\nurl = "https://scraper.geonode.io/mcp"\n`,
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
  const r = await cli(f, ["--from", "vscode", "--json"]);
  assert.equal(r.code, 0, r.stderr);
  const out = JSON.parse(r.stdout);
  assert.deepEqual(
    out.added.map((a: { id: string; transport: string | null; token_env: string | null }) => [a.id, a.transport, a.token_env]),
    [
      ["github", "http", null],
      ["perplexity-search", "sse", "PPLX_KEY"],
      ["context7", "http", null],
      ["deepwiki", "http", null],
    ],
  );
  assert.deepEqual(out.added[0].notes, [{ kind: "prompted_input", header: "Authorization", input: "github_token", suggested_env: "GITHUB_TOKEN" }]);
  assert.deepEqual(out.skipped.map((s: { from: { name: string }; reason: string }) => [s.from.name, s.reason]), [["py", "stdio"]]);
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
  const r = await cli(f, ["--from", "gemini", "--json"]);
  assert.equal(r.code, 0, r.stderr);
  const out = JSON.parse(r.stdout);
  assert.deepEqual(
    out.added.map((a: { id: string; transport: string | null; token_env: string | null; notes: Array<{ kind: string }> }) => [a.id, a.transport, a.token_env, a.notes.map((n) => n.kind)]),
    [
      ["talaria", "http", "TALARIA_MCP_TOKEN", []],
      ["github", "http", null, ["secret_left_out"]],
      ["events", "sse", null, []],
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
    const r = await cli(f, argv, { SUBS_DEBUG: "1" });
    assert.equal(r.code, 0, `${argv.join(" ")}: ${r.stderr}`);
    assertNoSecret(secret, r, f.read());
  }
  const r = await cli(f, ["--dry-run"]);
  assert.match(r.stderr, /warning: \.cursor\/mcp\.json is not valid JSON \(line 1, column \d+\); its servers were not read/);
  assert.match(r.stderr, /warning: \.codex\/config\.toml is not valid TOML \(line 3, column \d+\); its servers were not read/);
  assert.match(r.stderr, /- gemini \.gemini\/settings\.json: "q": its url carries a credential/);
  assert.match(f.read(), /\[mcp\.pay\]\nurl = "https:\/\/pay\.example\/mcp"\n/);
  // Named on the command line, a file that does not parse is the command's failure (exit 2), still without the secret.
  const named = await cli(f, ["--from", ".cursor/mcp.json"]);
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
  const r = await cli(f, ["--json"]);
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
  const list = await runCli(["mcp", "list", "--json"], { cwd: f.dir, env: { HOME: f.home } });
  assert.equal(list.code, 0, list.stderr);
  assert.equal(JSON.parse(list.stdout).length, 7);
  // A second run finds every url declared: nothing to add, the file untouched.
  const before = f.read();
  const again = await cli(f, []);
  assert.equal(again.code, 0, again.stderr);
  assert.match(again.stderr, /Nothing to add\./);
  assert.equal(f.read(), before);
});

test("--dry-run writes nothing (same bytes, same mtime) and creates no file; the --json shape", async () => {
  const f = fixture({ "substructure.toml": EXISTING, ".mcp.json": JSON.stringify({ mcpServers: { linear: { type: "http", url: "https://mcp.linear.app/mcp" } } }) });
  const old = new Date("2020-01-01T00:00:00Z");
  utimesSync(f.toml, old, old);
  const r = await cli(f, ["--dry-run", "--json"]);
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
        transport: "http",
        token_env: null,
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
  const dry = await cli(none, ["--dry-run"]);
  assert.equal(dry.code, 0, dry.stderr);
  assert.deepEqual(readdirSync(none.dir), [".mcp.json"]);
});

test("no substructure.toml: written as `subs init` writes it, with the servers declared; it loads", async () => {
  const f = fixture({ ".mcp.json": JSON.stringify({ mcpServers: { linear: { type: "http", url: "https://mcp.linear.app/mcp", headers: { Authorization: "Bearer ${LINEAR_TOKEN}" } } } }) });
  const r = await cli(f, []);
  assert.equal(r.code, 0, r.stderr);
  assert.match(r.stderr, /Adding to substructure\.toml \(a new file, as `subs init` writes it\):/);
  assert.match(r.stderr, /✔ Wrote substructure\.toml with 1 connection\./);
  const text = f.read();
  assert.match(text, /^# substructure\.toml: the MCP servers your agents connect to/);
  assert.match(text, /\n\[mcp\.linear\]\nurl = "https:\/\/mcp\.linear\.app\/mcp"\nauth = \{ token_env = "LINEAR_TOKEN" \}\n/);
  const list = await runCli(["mcp", "list", "--json"], { cwd: f.dir, env: { HOME: f.home } });
  assert.equal(list.code, 0, list.stderr);
  assert.deepEqual(JSON.parse(list.stdout).map((c: { id: string }) => c.id), ["linear"]);
});

test("nothing found: a clear message, exit 0, no file created; an unknown --from path is exit 2", async () => {
  const f = fixture({});
  const r = await inProcess(f, []);
  assert.equal(r.code, 0, r.stderr);
  assert.equal(r.stdout, "");
  assert.match(r.stderr, /^No MCP config of Claude Code, Codex, Cursor, VS Code, Gemini CLI found \(looked for \.mcp\.json, ~\/\.claude\.json, /);
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
          { name: "s", kind: "remote", url: "https://s.example/mcp", transport: "http", headers: [{ name: "Authorization", value: "Bearer abcdef123456" }], disabled: false },
          { name: "plain", kind: "remote", url: "http://internal.example/mcp", transport: undefined, headers: [], disabled: false },
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
