// `subs agent connect` / `subs mcp connect`, HOME and each client's variables pointed at temporary
// directories: per client, the file holds exactly the documented entry
// (absolute paths, the variables passed, nothing secret); a second run changes no byte; a changed
// substructure.toml updates the entry in place; --remove gives back the original bytes; an entry
// subs did not write is refused without --force; --dry-run writes nothing and prints the diff.
// Claude Code's first test (`subs agent connect`) and its linked-worktree test (`subs mcp connect`)
// run every step through the built CLI (bin/subs.cjs), as a person does: the command and path they
// write are the process's own node and real entry script. The rest run the same `run()` in this
// process, where what is checked is the file written and the output, not the process (a tenth of
// the CPU: a child costs a Node start-up and the bundle's load per step).
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { chmodSync, existsSync, lstatSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, realpathSync, statSync, symlinkSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { test } from "node:test";
import { BIN, runAs, type How, type RunResult } from "./support/cli.ts";

const NODE = process.execPath;
const SUBS = realpathSync(BIN);
/** A token value in the environment of every run: it must never reach a file or the output. */
const TOKEN = "s3cr3t-sentry-token-4f1c";

const SUBS_TOML = `[mcp.sentry]
url = "https://mcp.sentry.dev/mcp"
auth = { token_env = "SENTRY_TOKEN" }

[mcp.linear]
url = "https://mcp.linear.app/mcp"

[agent.support]
mcp = ["sentry", "linear"]

[agent.on_call]
mcp = ["linear"]
`;

/** `how`: whether every step of this world runs the built CLI as a child or `run()` in-process. */
type World = { root: string; home: string; proj: string; config: string; how: How };

function world(toml = SUBS_TOML, how: How = "in-process"): World {
  const root = realpathSync(mkdtempSync(path.join(tmpdir(), "subs-connect-")));
  const home = path.join(root, "home");
  const proj = path.join(root, "proj");
  mkdirSync(home);
  mkdirSync(proj);
  const config = path.join(proj, "substructure.toml");
  writeFileSync(config, toml);
  return { root, home, proj, config, how };
}

async function subs(w: World, args: string[], options: { cwd?: string; env?: Record<string, string> } = {}): Promise<RunResult> {
  const r = await runAs(w.how, args, { cwd: options.cwd ?? w.proj, env: { HOME: w.home, SENTRY_TOKEN: TOKEN, ...options.env } });
  assert.ok(!r.stdout.includes(TOKEN) && !r.stderr.includes(TOKEN), "the token's value is never printed");
  return r;
}

function put(file: string, text: string, mode?: number): void {
  mkdirSync(path.dirname(file), { recursive: true });
  writeFileSync(file, text);
  if (mode !== undefined) chmodSync(file, mode);
}

const read = (file: string) => readFileSync(file, "utf8");
const modeOf = (file: string) => statSync(file).mode & 0o777;

/** `value` as the clients write JSON (two spaces), its lines after the first indented by `indent`. */
const json = (value: unknown, indent: string, eol = "\n") => JSON.stringify(value, null, 2).split("\n").join(eol + indent);

const serveArgs = (w: World, agent = "support") => [SUBS, "agent", "serve", agent, "--config", w.config];

/** A real ~/.claude.json, as Claude Code 2.1.332 left it (2 spaces, no final newline), with a literal token in one server's env. */
function claudeJson(projectKey: string): string {
  return `{
  "firstStartTime": "2026-12-03T17:59:52.959Z",
  "machineID": "eeeaa8714b1d8add83a8fb80407fb1395db71dfcab91be6236e6a1354b7e6ac2",
  "projects": {
    ${JSON.stringify(projectKey)}: {
      "allowedTools": [],
      "mcpContextUris": [],
      "mcpServers": {
        "other": {
          "type": "stdio",
          "command": "/usr/bin/node",
          "args": [
            "/srv/server.mjs"
          ],
          "env": {
            "MY_API_TOKEN": "sk-literal-neighbour-token"
          }
        }
      },
      "hasTrustDialogAccepted": true,
      "disabledMcpServers": [],
      "enabledMcpjsonServers": [],
      "disabledMcpjsonServers": []
    }
  },
  "mcpServers": {},
  "pluginUsage": {
    "cc-plugin-privacy@builtin": {
      "usageCount": 0
    }
  }
}`;
}

test("claude, local scope: run from a subdirectory of a git repository, the entry goes under the git root's project in ~/.claude.json, exactly; again: no byte changes; --remove: the original bytes, mode 0600 kept", async () => {
  const w = world(SUBS_TOML, "cli");
  execFileSync("git", ["init", "-q", w.proj]);
  const deeper = path.join(w.proj, "sub", "deeper");
  mkdirSync(deeper, { recursive: true });
  const file = path.join(w.home, ".claude.json");
  const original = claudeJson(w.proj);
  put(file, original, 0o600);

  const r = await subs(w, ["agent", "connect", "support", "--to", "claude", "--config", w.config], { cwd: deeper });
  assert.equal(r.code, 0, r.stderr);
  assert.equal(r.stdout, "", "no data on stdout without --dry-run or --json");
  const entry = `,
        "support": {
          "type": "stdio",
          "command": ${JSON.stringify(NODE)},
          "args": [
            ${JSON.stringify(SUBS)},
            "agent",
            "serve",
            "support",
            "--config",
            ${JSON.stringify(w.config)}
          ],
          "env": {}
        }`;
  const at = original.indexOf("\n      },\n      \"hasTrustDialogAccepted\"");
  assert.equal(read(file), original.slice(0, at) + entry + original.slice(at), "only the entry is added, after the project's last server");
  assert.equal(modeOf(file), 0o600);
  assert.match(r.stderr, /Added "support" to Claude Code's ~\/\.claude\.json \(local scope\): Claude Code runs `subs agent serve support`\./);
  assert.match(r.stderr, /Variables for subs: SENTRY_TOKEN \(Claude Code gives its servers its whole environment\)/);
  const connected = read(file);

  const again = await subs(w, ["agent", "connect", "support", "--to", "claude", "--config", w.config], { cwd: deeper });
  assert.equal(again.code, 0, again.stderr);
  assert.equal(read(file), connected, "a second connect changes no byte");
  assert.match(again.stderr, /is up to date: nothing was written/);

  const removed = await subs(w, ["agent", "connect", "support", "--to", "claude", "--remove"], { cwd: deeper });
  assert.equal(removed.code, 0, removed.stderr);
  assert.equal(read(file), original, "--remove leaves the file byte for byte as before");
  assert.equal(modeOf(file), 0o600);
  assert.match(removed.stderr, /Removed "support" from Claude Code's ~\/\.claude\.json \(local scope\)\./);

  const nothing = await subs(w, ["agent", "connect", "support", "--to", "claude", "--remove"], { cwd: deeper });
  assert.equal(nothing.code, 0, nothing.stderr);
  assert.match(nothing.stderr, /No entry "support" in .*: nothing to remove\./);
  assert.equal(read(file), original);
});

test("claude, local scope in a linked git worktree: keyed by the main repository's root, as Claude Code keys it", async () => {
  const w = world(SUBS_TOML, "cli");
  execFileSync("git", ["init", "-q", w.proj]);
  execFileSync("git", ["-C", w.proj, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "--allow-empty", "-m", "x"]);
  const linked = path.join(w.root, "linked");
  execFileSync("git", ["-C", w.proj, "worktree", "add", "-q", linked]);
  const r = await subs(w, ["mcp", "connect", "sentry", "--to", "claude", "--config", w.config], { cwd: linked });
  assert.equal(r.code, 0, r.stderr);
  const written = JSON.parse(read(path.join(w.home, ".claude.json")));
  assert.deepEqual(Object.keys(written.projects), [w.proj]);
  assert.deepEqual(written.projects[w.proj].mcpServers.sentry.args, [SUBS, "mcp", "proxy", "sentry", "--config", w.config]);
});

test("claude, user and project scopes; CLAUDE_CONFIG_DIR; a file connect created is deleted again by --remove", async () => {
  const w = world();
  const dir = path.join(w.root, "claude-config");
  const file = path.join(dir, ".claude.json");
  const original = claudeJson("/elsewhere");
  put(file, original, 0o600);
  const env = { CLAUDE_CONFIG_DIR: dir };
  const user = await subs(w, ["agent", "connect", "support", "--to", "claude", "--scope", "user"], { env });
  assert.equal(user.code, 0, user.stderr);
  const entry = { type: "stdio", command: NODE, args: serveArgs(w), env: {} };
  assert.equal(read(file), original.replace(`"mcpServers": {},`, `"mcpServers": {\n    "support": ${json(entry, "    ")}\n  },`));
  assert.ok(!existsSync(path.join(w.home, ".claude.json")), "CLAUDE_CONFIG_DIR is where Claude Code's file is");
  assert.equal((await subs(w, ["agent", "connect", "support", "--to", "claude", "--scope", "user", "--remove"], { env })).code, 0);
  assert.equal(read(file), original, "an empty `mcpServers: {}` is given back as it was");

  const project = await subs(w, ["agent", "connect", "support", "--to", "claude", "--scope", "project"]);
  assert.equal(project.code, 0, project.stderr);
  const mcpJson = path.join(w.proj, ".mcp.json");
  assert.equal(read(mcpJson), `{\n  "mcpServers": {\n    "support": ${json(entry, "    ")}\n  }\n}\n`);
  assert.match(project.stderr, /shared with the project: it holds this machine's absolute paths/);
  assert.equal((await subs(w, ["agent", "connect", "support", "--to", "claude", "--scope", "project", "--remove"])).code, 0);
  assert.ok(!existsSync(mcpJson), "the file connect created is gone, as before");
});

/** A Codex config.toml as a person keeps it: comments, an inline server table, a profile after the MCP tables. */
const CODEX_TOML = `# mine
model = "o3"   # trailing comment

[mcp_servers]
other = { command = "x", env = { K = "sk-inline-literal" } }

[mcp_servers.z]
command = "/bin/true"
args = [ "1",   "2" ]   # odd spacing

[profiles.p]
model = "o4"
`;

test("codex: [mcp_servers.<name>] with env_vars after the last MCP table, every other byte kept; again: same bytes; --remove: the original bytes; 0600 for a new file", async () => {
  const w = world();
  const file = path.join(w.home, ".codex", "config.toml");
  put(file, CODEX_TOML, 0o644);
  const r = await subs(w, ["agent", "connect", "support", "--to", "codex"]);
  assert.equal(r.code, 0, r.stderr);
  const table = `[mcp_servers.support]
command = ${JSON.stringify(NODE)}
args = [${serveArgs(w).map((a) => JSON.stringify(a)).join(", ")}]
env_vars = ["SENTRY_TOKEN"]
`;
  const at = CODEX_TOML.indexOf("\n[profiles.p]");
  assert.equal(read(file), `${CODEX_TOML.slice(0, at)}\n${table}${CODEX_TOML.slice(at)}`);
  assert.equal(modeOf(file), 0o644, "an existing file keeps its mode");
  assert.match(r.stderr, /Variables for subs: SENTRY_TOKEN \(named in env_vars\)/);
  const connected = read(file);
  assert.equal((await subs(w, ["agent", "connect", "support", "--to", "codex"])).code, 0);
  assert.equal(read(file), connected);
  assert.equal((await subs(w, ["agent", "connect", "support", "--to", "codex", "--remove"])).code, 0);
  assert.equal(read(file), CODEX_TOML);

  // CODEX_HOME, no file yet: created 0600 as Codex creates its own; --remove deletes it again.
  const codexHome = path.join(w.root, "codex-home");
  const created = await subs(w, ["mcp", "connect", "linear", "--to", "codex"], { env: { CODEX_HOME: codexHome } });
  assert.equal(created.code, 0, created.stderr);
  const fresh = path.join(codexHome, "config.toml");
  assert.equal(read(fresh), `[mcp_servers.linear]\ncommand = ${JSON.stringify(NODE)}\nargs = [${[SUBS, "mcp", "proxy", "linear", "--config", w.config].map((a) => JSON.stringify(a)).join(", ")}]\n`);
  assert.equal(modeOf(fresh), 0o600);
  assert.equal((await subs(w, ["mcp", "connect", "linear", "--to", "codex", "--remove"], { env: { CODEX_HOME: codexHome } })).code, 0);
  assert.ok(!existsSync(fresh));
});

test("codex: a CRLF file, and one without a final newline, are given back byte for byte by --remove", async () => {
  for (const original of [CODEX_TOML.replace(/\n/g, "\r\n"), "model = \"o3\"\n\n[mcp_servers.z]\ncommand = \"/bin/true\"", "[profiles.p]\nmodel = \"o4\""]) {
    const w = world();
    const file = path.join(w.home, ".codex", "config.toml");
    put(file, original);
    const r = await subs(w, ["agent", "connect", "support", "--to", "codex"]);
    assert.equal(r.code, 0, r.stderr);
    const after = read(file);
    if (original.includes("\r\n")) assert.ok(!/[^\r]\n/.test(after), "CRLF stays CRLF");
    else assert.ok(!after.endsWith("\n"), "a file without a final newline stays without one");
    assert.ok(after.includes(`env_vars = ["SENTRY_TOKEN"]`));
    assert.equal((await subs(w, ["agent", "connect", "support", "--to", "codex", "--remove"])).code, 0);
    assert.equal(read(file), original, JSON.stringify(original));
  }
});

test("codex: a token_env added to substructure.toml updates the entry in place; keys and sub-tables a person added to it stay", async () => {
  const w = world();
  const file = path.join(w.home, ".codex", "config.toml");
  put(file, CODEX_TOML);
  assert.equal((await subs(w, ["agent", "connect", "on_call", "--to", "codex"])).code, 0);
  const first = read(file);
  assert.ok(!first.includes("env_vars"), "linear alone reads no variable");
  // The person tunes the entry Codex runs.
  const tuned = first.replace(`"on_call", "--config", ${JSON.stringify(w.config)}]\n`, `"on_call", "--config", ${JSON.stringify(w.config)}]\nstartup_timeout_sec = 20\n\n[mcp_servers.on_call.tools.linear__search]\napproval_mode = "approve"\n`);
  writeFileSync(file, tuned);
  writeFileSync(w.config, SUBS_TOML.replace(`[mcp.linear]\nurl = "https://mcp.linear.app/mcp"\n`, `[mcp.linear]\nurl = "https://mcp.linear.app/mcp"\noauth = { client_id = "abc", client_secret_env = "LINEAR_SECRET" }\n`));
  const r = await subs(w, ["agent", "connect", "on_call", "--to", "codex", "--json"]);
  assert.equal(r.code, 0, r.stderr);
  assert.equal(JSON.parse(r.stdout).action, "updated");
  assert.equal(read(file), tuned.replace(`startup_timeout_sec = 20\n`, `startup_timeout_sec = 20\nenv_vars = ["LINEAR_SECRET"]\n`));
  assert.equal((await subs(w, ["agent", "connect", "on_call", "--to", "codex"])).code, 0);
  assert.equal(read(file), tuned.replace(`startup_timeout_sec = 20\n`, `startup_timeout_sec = 20\nenv_vars = ["LINEAR_SECRET"]\n`), "and then it is up to date");
});

test("gemini: env maps each variable to $VAR, `_` in the name becomes `-`; comments and 4-space indentation kept; the mcpServers it created goes again with --remove", async () => {
  const w = world();
  const original = `{\n    // my settings\n    "ui": { "theme": "Dracula" },\n    "security": {\n        "auth": { "selectedType": "gemini-api-key" }\n    }\n}\n`;
  const file = path.join(w.proj, ".gemini", "settings.json");
  put(file, original);
  const r = await subs(w, ["agent", "connect", "on_call", "--to", "gemini"]);
  assert.equal(r.code, 0, r.stderr);
  const entry = { command: NODE, args: serveArgs(w, "on_call") };
  const mcpServers = `,\n    "mcpServers": {\n        "on-call": ${JSON.stringify(entry, null, 4).split("\n").join("\n        ")}\n    }`;
  const at = original.lastIndexOf("\n}");
  assert.equal(read(file), original.slice(0, at) + mcpServers + original.slice(at), "the default scope is the project's, as `gemini mcp add`'s");
  assert.match(r.stderr, /Added "on-call" to Gemini CLI's \.gemini\/settings\.json \(project scope\)/);
  assert.equal((await subs(w, ["agent", "connect", "on_call", "--to", "gemini", "--remove"])).code, 0);
  assert.equal(read(file), original);

  const home = path.join(w.root, "gemini-home");
  const user = await subs(w, ["agent", "connect", "support", "--to", "gemini", "--scope", "user"], { env: { GEMINI_CLI_HOME: home } });
  assert.equal(user.code, 0, user.stderr);
  const written = JSON.parse(read(path.join(home, ".gemini", "settings.json")));
  assert.deepEqual(written, { mcpServers: { support: { command: NODE, args: serveArgs(w), env: { SENTRY_TOKEN: "$SENTRY_TOKEN" } } } });
  assert.match(user.stderr, /Variables for subs: SENTRY_TOKEN \(named in env, as \$VAR\)/);
  assert.match(user.stderr, /Gemini CLI starts local servers only in a trusted folder/);
});

test("cursor: ${env:VAR}; a one-line neighbour holding a token is masked in the --dry-run diff, and --dry-run writes nothing", async () => {
  const w = world();
  const file = path.join(w.home, ".cursor", "mcp.json");
  const original = `{\n  "mcpServers": {\n    "github": { "url": "https://api.githubcopilot.com/mcp/", "headers": { "Authorization": "Bearer ghp_neighbourtoken" } }\n  }\n}\n`;
  put(file, original);
  const dry = await subs(w, ["agent", "connect", "support", "--to", "cursor", "--dry-run"]);
  assert.equal(dry.code, 0, dry.stderr);
  assert.equal(read(file), original, "--dry-run writes nothing");
  assert.ok(!dry.stdout.includes("ghp_neighbourtoken") && !dry.stdout.includes("githubcopilot"), dry.stdout);
  const entry = { command: NODE, args: serveArgs(w), env: { SENTRY_TOKEN: "${env:SENTRY_TOKEN}" } };
  const added = json({ support: entry }, "    ").split("\n").slice(1, -1).map((l) => `+${l.slice(2)}`);
  assert.equal(
    dry.stdout,
    [
      `--- ${file}`,
      `+++ ${file}`,
      "@@ -1,5 +1,19 @@",
      " {",
      '   "mcpServers": {',
      '-    "github": { "url": "…", "headers": { "Authorization": "…" } }',
      '+    "github": { "url": "…", "headers": { "Authorization": "…" } },',
      ...added,
      "   }",
      " }",
      "",
    ].join("\n"),
  );
  assert.match(dry.stderr, /Dry run: would add "support" to Cursor's ~\/\.cursor\/mcp\.json \(user scope\); nothing was written\./);
  const r = await subs(w, ["agent", "connect", "support", "--to", "cursor"]);
  assert.equal(r.code, 0, r.stderr);
  assert.deepEqual(JSON.parse(read(file)).mcpServers.support, entry);
  assert.match(r.stderr, /Cursor reads SENTRY_TOKEN from its own environment/);
  assert.equal((await subs(w, ["agent", "connect", "support", "--to", "cursor", "--remove"])).code, 0);
  assert.equal(read(file), original);
});

test("vscode: `servers`, type stdio, ${env:VAR}, in a tab-indented CRLF file with comments and inputs; a missing user directory is said", async () => {
  const w = world();
  const missing = await subs(w, ["agent", "connect", "support", "--to", "vscode"]);
  assert.equal(missing.code, 2);
  assert.match(missing.stderr, /VS Code's configuration directory was not found \(looked in .*Code\/User/);
  const file = path.join(w.home, ".config", "Code", "User", "mcp.json");
  const original = `{\r\n\t// servers for Copilot\r\n\t"servers": {\r\n\t\t"gh": {\r\n\t\t\t"type": "http",\r\n\t\t\t"url": "https://api.githubcopilot.com/mcp/"\r\n\t\t}\r\n\t},\r\n\t"inputs": []\r\n}\r\n`;
  put(file, original);
  const r = await subs(w, ["agent", "connect", "support", "--to", "vscode", "--json"]);
  assert.equal(r.code, 0, r.stderr);
  const entry = { type: "stdio", command: NODE, args: serveArgs(w), env: { SENTRY_TOKEN: "${env:SENTRY_TOKEN}" } };
  const text = `,\r\n\t\t"support": ${JSON.stringify(entry, null, "\t").split("\n").join("\r\n\t\t")}`;
  const at = original.indexOf("\r\n\t},");
  assert.equal(read(file), original.slice(0, at) + text + original.slice(at));
  const doc = JSON.parse(r.stdout);
  assert.deepEqual(Object.keys(doc), ["client", "scope", "file", "name", "serves", "action", "dry_run", "entry", "variables", "diff", "notes"]);
  assert.deepEqual(
    { ...doc, diff: undefined },
    {
      client: "vscode",
      scope: "user",
      file,
      name: "support",
      serves: { kind: "agent", name: "support" },
      action: "added",
      dry_run: false,
      entry,
      variables: ["SENTRY_TOKEN"],
      diff: undefined,
      notes: [doc.notes[0]],
    },
  );
  assert.match(doc.diff, /^--- .*mcp\.json\n\+\+\+ .*mcp\.json\n@@ /);
  assert.equal((await subs(w, ["agent", "connect", "support", "--to", "vscode", "--remove"])).code, 0);
  assert.equal(read(file), original);
});

test("claude-desktop: mcpServers with command and args; a variable it cannot pass is said, never written", async () => {
  const w = world();
  const file = path.join(w.home, ".config", "Claude", "claude_desktop_config.json");
  const original = `{\n  "globalShortcut": "",\n  "mcpServers": {\n    "fs": {\n      "command": "npx",\n      "args": ["-y", "@modelcontextprotocol/server-filesystem", "/tmp"]\n    }\n  }\n}\n`;
  put(file, original);
  const r = await subs(w, ["agent", "connect", "support", "--to", "claude-desktop"]);
  assert.equal(r.code, 0, r.stderr);
  assert.deepEqual(JSON.parse(read(file)).mcpServers.support, { command: NODE, args: serveArgs(w) });
  assert.match(r.stderr, /Claude Desktop passes its servers only a few variables \(HOME, PATH, USER…\): SENTRY_TOKEN will not reach subs/);
  const scoped = await subs(w, ["agent", "connect", "support", "--to", "claude-desktop", "--scope", "project"]);
  assert.equal(scoped.code, 2);
  assert.match(scoped.stderr, /Claude Desktop has no project scope\nhint: use --scope user/);
  assert.equal((await subs(w, ["agent", "connect", "support", "--to", "claude-desktop", "--remove"])).code, 0);
  assert.equal(read(file), original);
});

test("an entry of the same name subs did not write: refused (exit 2) naming it and --force; --force replaces it; --remove needs --force too", async () => {
  const w = world();
  const file = path.join(w.home, ".cursor", "mcp.json");
  const theirs = `{\n  "mcpServers": {\n    "support": {\n      "command": "npx",\n      "args": ["their-server"],\n      "env": { "API_KEY": "sk-theirs" }\n    }\n  }\n}\n`;
  put(file, theirs);
  const r = await subs(w, ["agent", "connect", "support", "--to", "cursor", "--json"]);
  assert.equal(r.code, 2);
  assert.match(r.stderr, /error: ~\/\.cursor\/mcp\.json already has an entry "support" that subs did not write\nhint: pass --force to replace it, or remove it in Cursor first/);
  assert.equal(JSON.parse(r.stdout).error.code, "entry_exists");
  assert.equal(read(file), theirs);
  const remove = await subs(w, ["agent", "connect", "support", "--to", "cursor", "--remove"]);
  assert.equal(remove.code, 2);
  assert.match(remove.stderr, /hint: pass --force to remove it/);
  assert.equal(read(file), theirs);
  const ok = await subs(w, ["agent", "connect", "support", "--to", "cursor", "--force"]);
  assert.equal(ok.code, 0, ok.stderr);
  assert.deepEqual(JSON.parse(read(file)).mcpServers.support, { command: NODE, args: serveArgs(w), env: { SENTRY_TOKEN: "${env:SENTRY_TOKEN}" } });
  assert.ok(!read(file).includes("sk-theirs"));
  // An entry subs wrote for something else (`mcp proxy sentry`) is not the agent's either.
  const proxy = JSON.parse(read(file));
  proxy.mcpServers.sentry = { command: NODE, args: [SUBS, "mcp", "proxy", "sentry", "--config", w.config] };
  writeFileSync(file, JSON.stringify(proxy, null, 2));
  const other = await subs(w, ["agent", "connect", "sentry", "--to", "cursor", "--remove"]);
  assert.equal(other.code, 2);
  assert.match(other.stderr, /already has an entry "sentry", which runs `subs mcp proxy sentry`/);
});

test("--dry-run of Codex prints the unified diff on stdout (--json carries it too) and writes nothing; a new file is diffed from /dev/null", async () => {
  const w = world();
  const file = path.join(w.home, ".codex", "config.toml");
  const dry = await subs(w, ["agent", "connect", "support", "--to", "codex", "--dry-run"]);
  assert.equal(dry.code, 0, dry.stderr);
  assert.ok(!existsSync(file) && !existsSync(path.dirname(file)), "nothing created");
  const table = [`[mcp_servers.support]`, `command = ${JSON.stringify(NODE)}`, `args = [${serveArgs(w).map((a) => JSON.stringify(a)).join(", ")}]`, `env_vars = ["SENTRY_TOKEN"]`];
  assert.equal(dry.stdout, [`--- /dev/null`, `+++ ${file}`, "@@ -0,0 +1,4 @@", ...table.map((l) => `+${l}`), ""].join("\n"));
  put(file, CODEX_TOML);
  const json = await subs(w, ["agent", "connect", "support", "--to", "codex", "--dry-run", "--json"]);
  assert.equal(json.code, 0, json.stderr);
  const doc = JSON.parse(json.stdout);
  assert.equal(doc.dry_run, true);
  assert.equal(doc.action, "added");
  assert.ok(!doc.diff.includes("sk-inline-literal"), "the inline table's literal is masked");
  assert.equal(
    doc.diff,
    [
      `--- ${file}`,
      `+++ ${file}`,
      "@@ -8,5 +8,10 @@",
      ' command = "…"',
      ' args = [ "…",   "…" ]   #…',
      " ",
      ...table.map((l) => `+${l}`),
      "+",
      " [profiles.p]",
      ' model = "…"',
      "",
    ].join("\n"),
  );
  assert.equal(read(file), CODEX_TOML);
});

const REMOTE_TOML = `[remote]\nurl = "https://deploy.example/team"\ntoken_env = "DEPLOY_TOKEN"\n\n[mcp.linear]\nurl = "https://mcp.linear.app/mcp"\n\n[agent.support]\nmcp = ["linear"]\n`;
const ENDPOINT = "https://deploy.example/team/v1/agents/support/mcp";
/** The deployment's API token: only the variable's name may reach a client's file. */
const DEPLOY_TOKEN = "subsd_d3pl0y-t0ken-9a7b";

test("[remote], each client: the agent's endpoint on the deployment with the API token read from $DEPLOY_TOKEN in the client's own syntax, never the token; again: no change; --remove takes it out", async () => {
  const w = world(REMOTE_TOML);
  const cases: Array<{ to: string; file: string; container: string; entry: Record<string, unknown> }> = [
    { to: "claude", file: path.join(w.proj, ".mcp.json"), container: "mcpServers", entry: { type: "http", url: ENDPOINT, headers: { Authorization: "Bearer ${DEPLOY_TOKEN}" } } },
    { to: "gemini", file: path.join(w.proj, ".gemini", "settings.json"), container: "mcpServers", entry: { httpUrl: ENDPOINT, headers: { Authorization: "Bearer $DEPLOY_TOKEN" } } },
    { to: "cursor", file: path.join(w.proj, ".cursor", "mcp.json"), container: "mcpServers", entry: { url: ENDPOINT, headers: { Authorization: "Bearer ${env:DEPLOY_TOKEN}" } } },
    { to: "vscode", file: path.join(w.proj, ".vscode", "mcp.json"), container: "servers", entry: { type: "http", url: ENDPOINT, headers: { Authorization: "Bearer ${env:DEPLOY_TOKEN}" } } },
  ];
  const env = { DEPLOY_TOKEN };
  for (const c of cases) {
    const r = await subs(w, ["agent", "connect", "support", "--to", c.to, "--scope", "project", "--json"], { env });
    assert.equal(r.code, 0, `${c.to}: ${r.stderr}`);
    const json = JSON.parse(r.stdout);
    assert.deepEqual(json.entry, c.entry, c.to);
    assert.deepEqual(json.variables, ["DEPLOY_TOKEN"]);
    assert.deepEqual(json.serves, { kind: "agent", name: "support", url: ENDPOINT });
    assert.match(json.notes.join("\n"), /\$DEPLOY_TOKEN .*`use` \(or `admin`\) token/);
    assert.deepEqual(JSON.parse(read(c.file))[c.container].support, c.entry, c.to);
    assert.ok(!read(c.file).includes(DEPLOY_TOKEN), `${c.to}: the token itself is never written`);
    assert.equal(JSON.parse((await subs(w, ["agent", "connect", "support", "--to", c.to, "--scope", "project", "--json"], { env })).stdout).action, "unchanged");
    assert.equal((await subs(w, ["agent", "connect", "support", "--to", c.to, "--scope", "project", "--remove"], { env })).code, 0);
    assert.ok(!existsSync(c.file), `${c.to}: the file connect created goes again`);
  }
  // Codex: bearer_token_env_var names the variable; a local entry there before is replaced whole (no command or args left).
  const codex = path.join(w.home, ".codex", "config.toml");
  const local = world();
  assert.equal((await subs(local, ["agent", "connect", "support", "--to", "codex"], { env: { HOME: w.home } })).code, 0);
  assert.match(read(codex), /command = /);
  const r = await subs(w, ["agent", "connect", "support", "--to", "codex"], { env });
  assert.equal(r.code, 0, r.stderr);
  assert.equal(read(codex), `[mcp_servers.support]\nurl = "${ENDPOINT}"\nbearer_token_env_var = "DEPLOY_TOKEN"\n`);
  assert.match(r.stderr, /Updated "support" in Codex's .* Codex reaches https:\/\/deploy\.example\/team\/v1\/agents\/support\/mcp\.\n {2}API token: \$DEPLOY_TOKEN/);
  assert.equal((await subs(w, ["agent", "connect", "support", "--to", "codex", "--remove"], { env })).code, 0);
  assert.ok(!existsSync(codex));
});

test("[remote]: `subs mcp connect` and Claude Desktop (no variable references) are refused, exit 2, remote_unsupported, nothing written; an unknown agent or client scope is a usage error", async () => {
  const w = world(REMOTE_TOML);
  const mcp = await subs(w, ["mcp", "connect", "linear", "--to", "claude", "--json"]);
  assert.equal(mcp.code, 2);
  assert.equal(JSON.parse(mcp.stdout).error.code, "remote_unsupported");
  assert.match(mcp.stderr, /the deployment serves agents, not single connections/);
  const desktopDir = path.join(w.home, ".config", "Claude");
  mkdirSync(desktopDir, { recursive: true });
  const desktop = await subs(w, ["agent", "connect", "support", "--to", "claude-desktop", "--json"]);
  assert.equal(desktop.code, 2);
  assert.equal(JSON.parse(desktop.stdout).error.code, "remote_unsupported");
  assert.match(desktop.stderr, /Claude Desktop cannot read an API token from a variable/);
  assert.ok(!existsSync(path.join(w.home, ".claude.json")));
  assert.deepEqual(readdirSync(desktopDir), []);
  const unknownRemote = await subs(w, ["agent", "connect", "suport", "--to", "claude"]);
  assert.equal(unknownRemote.code, 2);
  assert.match(unknownRemote.stderr, /did you mean `support`/);
  const w2 = world();
  const unknown = await subs(w2, ["agent", "connect", "suport", "--to", "claude"]);
  assert.equal(unknown.code, 2);
  assert.match(unknown.stderr, /did you mean `support`/);
  const scope = await subs(w2, ["agent", "connect", "support", "--to", "codex", "--scope", "local"]);
  assert.equal(scope.code, 2);
  assert.match(scope.stderr, /Codex has no local scope\nhint: use --scope user or project \(default: user\)/);
  const client = await subs(w2, ["agent", "connect", "support", "--to", "zed"]);
  assert.equal(client.code, 2);
  assert.match(client.stderr, /Allowed choices are claude, codex, gemini, cursor, vscode, claude-desktop/);
});

test("[remote].url with a variable in its path or host ($HOME, ${GITHUB_TOKEN}, ${input:…}): refused for every client, exit 2, url_expands at [remote].url, nothing written; %24 is written as it is", async () => {
  const clients = ["gemini", "claude", "codex", "cursor", "vscode"];
  const files = (w: World) => [path.join(w.proj, ".gemini"), path.join(w.proj, ".mcp.json"), path.join(w.home, ".codex"), path.join(w.proj, ".cursor"), path.join(w.proj, ".vscode")];
  for (const url of ["https://deploy.example/$HOME/team", "https://deploy.example/${GITHUB_TOKEN}", "https://deploy.example/x/${input:token}", "https://a$GITHUB_TOKEN.deploy.example", "https://deploy.example/team$"]) {
    const w = world(REMOTE_TOML.replace("https://deploy.example/team", url));
    for (const to of clients) {
      const r = await subs(w, ["agent", "connect", "support", "--to", to, "--scope", to === "codex" ? "user" : "project", "--json"], { env: { DEPLOY_TOKEN, GITHUB_TOKEN: "ghp_not-to-be-sent" } });
      assert.equal(r.code, 2, `${url} --to ${to}: ${r.stderr}`);
      const { error } = JSON.parse(r.stdout) as { error: { code: string; message: string; diagnostics: Array<{ line: number; hint: string }> } };
      assert.equal(error.code, "url_expands", `${url} --to ${to}`);
      assert.equal(error.diagnostics[0]!.line, 2, "at [remote].url");
      assert.match(error.message, /^substructure\.toml:2:\d+: \[remote\]\.url holds "\$", and the endpoint subs would write is https:\/\/.*\/v1\/agents\/support\/mcp: MCP clients read "\$" in their files as a variable/);
      assert.match(error.diagnostics[0]!.hint, /take "\$" out of \[remote\]\.url \(a "\$" the deployment's path really has is written %24\)/);
      assert.ok(!r.stdout.includes("ghp_not-to-be-sent") && !r.stderr.includes("ghp_not-to-be-sent"));
    }
    // --dry-run is refused the same way; nothing of any client was written.
    assert.equal((await subs(w, ["agent", "connect", "support", "--to", "gemini", "--dry-run"], { env: { DEPLOY_TOKEN } })).code, 2);
    for (const file of files(w)) assert.ok(!existsSync(file), `${url}: ${file} not written`);
  }
  // A "$" the deployment's path really has, percent-encoded: no client expands it.
  const w = world(REMOTE_TOML.replace("https://deploy.example/team", "https://deploy.example/%24team"));
  const r = await subs(w, ["agent", "connect", "support", "--to", "gemini", "--json"], { env: { DEPLOY_TOKEN } });
  assert.equal(r.code, 0, r.stderr);
  assert.equal(JSON.parse(read(path.join(w.proj, ".gemini", "settings.json"))).mcpServers.support.httpUrl, "https://deploy.example/%24team/v1/agents/support/mcp");
});

test("SUBS_ALLOWED_REMOTE is checked on the url the client is given, path included: a deployment under another path of the same origin is refused (remote_not_allowed), a plain origin still allows its paths", async () => {
  const w = world(REMOTE_TOML.replace("https://deploy.example/team", "https://deploy.example/attacker"));
  for (const to of ["gemini", "claude", "codex", "cursor", "vscode"]) {
    const r = await subs(w, ["agent", "connect", "support", "--to", to, "--json"], { env: { DEPLOY_TOKEN, SUBS_ALLOWED_REMOTE: "https://deploy.example/team" } });
    assert.equal(r.code, 2, `${to}: ${r.stderr}`);
    const { error } = JSON.parse(r.stdout) as { error: { code: string; message: string } };
    assert.equal(error.code, "remote_not_allowed");
    assert.match(error.message, /\[remote\]\.url is https:\/\/deploy\.example\/attacker, which \$SUBS_ALLOWED_REMOTE does not allow \(https:\/\/deploy\.example\/team\/\)/);
  }
  for (const file of [path.join(w.proj, ".gemini"), path.join(w.home, ".claude.json"), path.join(w.home, ".codex")]) assert.ok(!existsSync(file));
  // The deployment's own path, and a plain origin (as before: any path of it), are allowed.
  for (const allowed of ["https://deploy.example/attacker", "https://deploy.example/attacker/", "https://deploy.example"]) {
    const r = await subs(w, ["agent", "connect", "support", "--to", "gemini", "--dry-run"], { env: { DEPLOY_TOKEN, SUBS_ALLOWED_REMOTE: allowed } });
    assert.equal(r.code, 0, `${allowed}: ${r.stderr}`);
  }
});

test("a path holding `$` is refused for Gemini CLI, which would expand it", async () => {
  const w = world();
  const odd = path.join(w.root, "pro$ject");
  mkdirSync(odd);
  writeFileSync(path.join(odd, "substructure.toml"), SUBS_TOML);
  const r = await subs(w, ["agent", "connect", "support", "--to", "gemini", "--scope", "user"], { cwd: odd });
  assert.equal(r.code, 2);
  assert.match(r.stderr, /holds "\$", which Gemini CLI would read as a variable and replace/);
  assert.ok(!existsSync(path.join(w.home, ".gemini")));
});

test("gemini: a variable added to substructure.toml, then a moved file, update the entry in place; `trust` and a timeout a person added stay", async () => {
  const w = world();
  const file = path.join(w.proj, ".gemini", "settings.json");
  assert.equal((await subs(w, ["agent", "connect", "on_call", "--to", "gemini"])).code, 0);
  // Gemini CLI itself rewrites the file (two spaces, no final newline); the person trusts the server.
  const tuned = JSON.parse(read(file));
  Object.assign(tuned.mcpServers["on-call"], { trust: true, timeout: 30000 });
  writeFileSync(file, JSON.stringify({ ui: { theme: "Dracula" }, ...tuned }, null, 2));
  writeFileSync(w.config, SUBS_TOML.replace(`url = "https://mcp.linear.app/mcp"\n`, `url = "https://mcp.linear.app/mcp"\noauth = { client_id = "abc", client_secret_env = "LINEAR_SECRET" }\n`));
  const r = await subs(w, ["agent", "connect", "on_call", "--to", "gemini", "--json"]);
  assert.equal(r.code, 0, r.stderr);
  assert.equal(JSON.parse(r.stdout).action, "updated");
  assert.deepEqual(JSON.parse(r.stdout).variables, ["LINEAR_SECRET"]);
  const entry = { command: NODE, args: serveArgs(w, "on_call"), trust: true, timeout: 30000, env: { LINEAR_SECRET: "$LINEAR_SECRET" } };
  assert.equal(read(file), JSON.stringify({ ui: { theme: "Dracula" }, mcpServers: { "on-call": entry } }, null, 2));
  assert.equal((await subs(w, ["agent", "connect", "on_call", "--to", "gemini"])).code, 0);
  assert.equal(read(file), JSON.stringify({ ui: { theme: "Dracula" }, mcpServers: { "on-call": entry } }, null, 2), "then it is up to date");

  // The same agent from another copy of the file: only the path in args changes, where it is.
  const moved = path.join(w.root, "moved");
  mkdirSync(moved);
  writeFileSync(path.join(moved, "substructure.toml"), read(w.config));
  const again = await subs(w, ["agent", "connect", "on_call", "--to", "gemini", "--config", path.join(moved, "substructure.toml")]);
  assert.equal(again.code, 0, again.stderr);
  const args = [SUBS, "agent", "serve", "on_call", "--config", path.join(moved, "substructure.toml")];
  assert.equal(read(file), JSON.stringify({ ui: { theme: "Dracula" }, mcpServers: { "on-call": { ...entry, args } } }, null, 2));
  assert.match(again.stderr, /Updated "on-call" in Gemini CLI's/);
});

test("a client file that is a symbolic link (dotfiles) is written where it points, the link kept; an invalid one is refused without quoting it", async () => {
  const w = world();
  const target = path.join(w.root, "dotfiles", "cursor-mcp.json");
  put(target, `{\n  "mcpServers": {}\n}\n`, 0o640);
  mkdirSync(path.join(w.home, ".cursor"));
  const link = path.join(w.home, ".cursor", "mcp.json");
  symlinkSync(target, link);
  const r = await subs(w, ["agent", "connect", "support", "--to", "cursor"]);
  assert.equal(r.code, 0, r.stderr);
  assert.ok(lstatSync(link).isSymbolicLink(), "the link stays a link");
  assert.ok(JSON.parse(read(target)).mcpServers.support);
  assert.equal(modeOf(target), 0o640);
  writeFileSync(target, `{\n  "mcpServers": { "x": { "headers": { "Authorization": "Bearer ghp_broken" } }\n`);
  const bad = await subs(w, ["agent", "connect", "support", "--to", "cursor", "--json"]);
  assert.equal(bad.code, 2);
  assert.match(bad.stderr, /~\/\.cursor\/mcp\.json is not valid JSON \(line 3, column \d+\); nothing was written/);
  assert.equal(JSON.parse(bad.stdout).error.code, "client_file_invalid");
  assert.ok(!bad.stdout.includes("ghp_broken") && !bad.stderr.includes("ghp_broken"));
});

test("subs mcp import reads the files connect writes: $CLAUDE_CONFIG_DIR/.claude.json and $GEMINI_CLI_HOME/.gemini/settings.json", async () => {
  const w = world();
  const claudeDir = path.join(w.root, "claude-config");
  const geminiHome = path.join(w.root, "gemini-home");
  put(path.join(claudeDir, ".claude.json"), JSON.stringify({ mcpServers: { fromclaude: { type: "http", url: "https://claude.example/mcp" } } }));
  put(path.join(geminiHome, ".gemini", "settings.json"), JSON.stringify({ mcpServers: { fromgemini: { httpUrl: "https://gemini.example/mcp" } } }));
  const r = await subs(w, ["mcp", "import", "--dry-run", "--json"], { env: { CLAUDE_CONFIG_DIR: claudeDir, GEMINI_CLI_HOME: geminiHome } });
  assert.equal(r.code, 0, r.stderr);
  assert.deepEqual(
    JSON.parse(r.stdout).added.map((a: { url: string }) => a.url),
    ["https://claude.example/mcp", "https://gemini.example/mcp"],
  );
});
