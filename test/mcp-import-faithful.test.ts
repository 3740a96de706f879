// `subs mcp import` reads what the person set in each client, not only the server entries: servers
// they turned off (every way each client records it) are skipped and say where; run anywhere in a
// git repository, Claude Code's servers are found as Claude Code finds them; a pre-registered OAuth
// client and its scopes come along (a client secret never does); what subs cannot carry (a header
// helper, a WebSocket server, a setting without a key) is named with what to do. The client files
// are the ones the clients' own `mcp add` wrote (test/fixtures/import/README.md), put back where
// each client keeps them in a temp HOME.
// Claude Code's pre-registered client test (its import written and loaded by `mcp list`), `subs init`
// and the hostile-files test (a FIFO or /dev/zero that hung would block this very process, which no
// timeout could stop) run the built CLI (bin/subs.cjs); the rest run the same `run()` in this
// process, where what is checked is the file written and what is printed, not the process.
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { cpSync, existsSync, mkdirSync, mkdtempSync, readFileSync, readdirSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { test } from "node:test";
import { REPO, runCli, runInProcess, type RunResult } from "./support/cli.ts";

const FIXTURES = path.join(REPO, "test", "fixtures", "import");
/** The project path Claude Code 2.1.332 keyed the fixture's local servers by. */
const RECORDED_PROJECT = "/tmp/imp2/claude/work/proj";

type Json = {
  read: Array<{ client: string; file: string; servers: number }>;
  unreadable: Array<{ file: string; problem: string; role: string }>;
  added: Array<{ id: string; url: string; token_env: string | null; oauth: Record<string, unknown> | null; from: { name: string; file: string }; notes: Array<Record<string, unknown>> }>;
  skipped: Array<{ from: { name: string; file: string }; reason: string; message: string; disabled_in?: { file: string; setting: string } }>;
};

const json = (r: RunResult): Json => {
  assert.equal(r.code, 0, r.stderr);
  return JSON.parse(r.stdout) as Json;
};
const byName = <T extends { from: { name: string } }>(list: T[]) => Object.fromEntries(list.map((x) => [x.from.name, x]));
const write = (file: string, text: string) => {
  mkdirSync(path.dirname(file), { recursive: true });
  writeFileSync(file, text);
};

/** The text seen nowhere in the run's output, nor redacted (the scrubber would hide a leak). */
function assertNowhere(secret: string, r: RunResult, ...files: string[]) {
  for (const [what, text] of [["stdout", r.stdout], ["stderr", r.stderr], ...files.map((f) => [f, readFileSync(f, "utf8")])] as const) {
    assert.ok(!text.includes(secret), `the secret is in ${what}`);
    assert.ok(!text.includes("[redacted]"), `something was redacted from ${what}`);
  }
}

/**
 * Claude Code's files as its `mcp add` wrote them, in a fresh tree: `home/.claude.json` keyed by
 * this tree's repository, `proj/` a git repository (a `.git` directory is all Claude Code looks
 * at) with `.mcp.json` in proj, proj/sub and proj/sub/deeper, and the settings files that turn
 * `.mcp.json` servers off. `proj-wt/` is a linked worktree of proj, its metadata as `git worktree add` lays it out.
 */
function claudeTree(options: { settings?: boolean } = {}) {
  const root = mkdtempSync(path.join(tmpdir(), "subs-import-claude-"));
  const home = path.join(root, "home");
  const proj = path.join(root, "proj");
  const fixture = path.join(FIXTURES, "claude-2.1.332");
  write(path.join(home, ".claude.json"), readFileSync(path.join(fixture, "home", "claude.json"), "utf8").replaceAll(JSON.stringify(RECORDED_PROJECT), JSON.stringify(proj)));
  for (const dir of ["", "sub", "sub/deeper"]) write(path.join(proj, dir, ".mcp.json"), readFileSync(path.join(fixture, "proj", dir, "mcp.json"), "utf8"));
  mkdirSync(path.join(proj, ".git", "worktrees", "proj-wt"), { recursive: true });
  const wt = path.join(root, "proj-wt");
  write(path.join(wt, ".git"), `gitdir: ${path.join(proj, ".git", "worktrees", "proj-wt")}\n`);
  write(path.join(proj, ".git", "worktrees", "proj-wt", "commondir"), "../..\n");
  write(path.join(proj, ".git", "worktrees", "proj-wt", "gitdir"), `${path.join(wt, ".git")}\n`);
  if (options.settings !== false) {
    write(path.join(home, ".claude", "settings.json"), '{"disabledMcpjsonServers": ["top"]}\n');
    // As Claude Code wrote it: it moves a project's `disabledMcpjsonServers` out of ~/.claude.json into this file.
    write(path.join(proj, ".claude", "settings.local.json"), readFileSync(path.join(fixture, "proj", "claude", "settings.local.json"), "utf8"));
    write(path.join(proj, "sub", "deeper", ".claude", "settings.json"), '{"disabledMcpjsonServers": ["cwdset"]}\n');
    write(path.join(proj, "sub", "deeper", ".claude", "settings.local.json"), '{"disabledMcpjsonServers": ["cwdlocal"]}\n');
  }
  const run = (cwd: string, argv: string[] = [], env: Record<string, string> = {}) =>
    runInProcess(["mcp", "import", "--from", "claude", "--dry-run", "--json", ...argv], { cwd, env: { HOME: home, ...env } });
  return { root, home, proj, wt, deeper: path.join(proj, "sub", "deeper"), run };
}

test("Claude Code, run in a subdirectory of a git repository: the git root's local servers in ~/.claude.json and every .mcp.json up to the root are read", async () => {
  const t = claudeTree({ settings: false });
  const out = json(await t.run(t.deeper));
  assert.deepEqual(
    out.read.map((f) => [path.relative(t.root, f.file), f.servers]),
    [
      [path.join("proj", "sub", "deeper", ".mcp.json"), 3],
      [path.join("proj", "sub", ".mcp.json"), 1],
      [path.join("proj", ".mcp.json"), 2],
      [path.join("home", ".claude.json"), 7],
    ],
  );
  const names = [...out.added, ...out.skipped].map((x) => x.from.name).sort();
  assert.deepEqual(names, ["acme", "cwdlocal", "cwdset", "deep", "helper", "linear", "mid", "notion", "rootlocal", "scoped", "sock", "top", "wtlocal"]);
  // Another directory's entry is not this project's: a key for the subdirectory itself is not read (Claude Code ignores it too).
  const claudeJson = JSON.parse(readFileSync(path.join(t.home, ".claude.json"), "utf8"));
  claudeJson.projects[t.deeper] = { mcpServers: { stray: { type: "http", url: "https://stray.example/mcp" } } };
  writeFileSync(path.join(t.home, ".claude.json"), JSON.stringify(claudeJson, null, 2));
  assert.ok(!json(await t.run(t.deeper)).added.some((a) => a.from.name === "stray"));
});

test("Claude Code, run in a linked worktree: the main repository's local servers are read (Claude Code keys them by its root)", async () => {
  const t = claudeTree();
  const out = json(await t.run(t.wt));
  const local = [...out.added, ...out.skipped].filter((x) => x.from.file === path.join(t.home, ".claude.json")).map((x) => x.from.name);
  assert.deepEqual(local.sort(), ["acme", "helper", "linear", "notion", "scoped", "sock", "wtlocal"]);
  // The worktree's own directory is where its .mcp.json would be; the main tree's are not the worktree's.
  assert.ok(!out.read.some((f) => f.file === path.join(t.proj, ".mcp.json")));
  // A `.git` file whose gitdir does not point back at it is no worktree of proj: its own directory keys it.
  writeFileSync(path.join(t.proj, ".git", "worktrees", "proj-wt", "gitdir"), `${path.join(t.root, "elsewhere", ".git")}\n`);
  assert.ok(!json(await t.run(t.wt)).added.some((a) => a.from.name === "wtlocal"));
});

test("Claude Code: servers turned off are skipped as disabled, naming the setting and the file, for every place Claude Code records it", async () => {
  const t = claudeTree();
  // From the git root: the per-project lists of ~/.claude.json, ~/.claude/settings.json, the root's settings.local.json.
  const atRoot = json(await t.run(t.proj));
  const skipped = byName(atRoot.skipped);
  const claudeJson = path.join(t.home, ".claude.json");
  const where = `projects[${JSON.stringify(t.proj)}]`;
  assert.deepEqual(skipped.notion?.disabled_in, { file: claudeJson, setting: `${where}.disabledMcpServers` });
  assert.deepEqual(skipped.scoped?.disabled_in, { file: claudeJson, setting: `${where}.disabledMcpServers` });
  assert.deepEqual(skipped.top?.disabled_in, { file: path.join(t.home, ".claude", "settings.json"), setting: "disabledMcpjsonServers" });
  assert.deepEqual(skipped.rootlocal?.disabled_in, { file: path.join(t.proj, ".claude", "settings.local.json"), setting: "disabledMcpjsonServers" });
  for (const name of ["notion", "scoped", "top", "rootlocal"]) assert.equal(skipped[name]?.reason, "disabled", name);
  assert.equal(skipped.notion?.message, `disabled in Claude Code: ${where}.disabledMcpServers in ${claudeJson}`);
  assert.deepEqual(atRoot.added.map((a) => a.id).sort(), ["acme", "helper", "linear", "wtlocal"]);

  // From proj/sub/deeper: also the git root's settings.local.json for a .mcp.json above, and the working directory's two settings files.
  const deeper = byName(json(await t.run(t.deeper)).skipped);
  assert.deepEqual(deeper.mid?.disabled_in, { file: path.join(t.proj, ".claude", "settings.local.json"), setting: "disabledMcpjsonServers" });
  assert.deepEqual(deeper.cwdset?.disabled_in, { file: path.join(t.deeper, ".claude", "settings.json"), setting: "disabledMcpjsonServers" });
  assert.deepEqual(deeper.cwdlocal?.disabled_in, { file: path.join(t.deeper, ".claude", "settings.local.json"), setting: "disabledMcpjsonServers" });
  assert.equal(deeper.deep, undefined, "a .mcp.json server still waiting for approval is imported (Claude Code connects it in -p)");
  // Where earlier releases kept the rejected list, and Claude Code 2.1.332 still honours it until it moves it: the project's entry in ~/.claude.json.
  writeFileSync(path.join(t.proj, ".claude", "settings.local.json"), '{"disabledMcpjsonServers": ["rootlocal"]}');
  const legacy = JSON.parse(readFileSync(claudeJson, "utf8"));
  legacy.projects[t.proj].disabledMcpjsonServers = ["mid"];
  writeFileSync(claudeJson, JSON.stringify(legacy, null, 2));
  assert.deepEqual(byName(json(await t.run(t.deeper)).skipped).mid?.disabled_in, { file: claudeJson, setting: `${where}.disabledMcpjsonServers` });

  // The report shows where, the path as messages show paths.
  const human = await runInProcess(["mcp", "import", "--from", "claude", "--dry-run"], { cwd: t.proj, env: { HOME: t.home } });
  assert.match(human.stderr, new RegExp(`- claude ~/\\.claude\\.json: "notion": disabled in Claude Code: projects\\[".*"\\]\\.disabledMcpServers in ~/\\.claude\\.json\\n`));
  assert.match(human.stderr, /- claude \.mcp\.json: "rootlocal": disabled in Claude Code: disabledMcpjsonServers in \.claude\/settings\.local\.json\n/);
  // A settings file that cannot be read is a warning saying what was lost; the import goes on.
  writeFileSync(path.join(t.home, ".claude", "settings.json"), "{ not json");
  const broken = await runInProcess(["mcp", "import", "--from", "claude", "--dry-run"], { cwd: t.proj, env: { HOME: t.home } });
  assert.equal(broken.code, 0, broken.stderr);
  assert.match(broken.stderr, /warning: ~\/\.claude\/settings\.json is not valid JSON \(line 1, column 3\); which servers it turns off in Claude Code was not read\n/);
});

test("Claude Code: a pre-registered OAuth client (`claude mcp add --client-id`) and its scopes become `oauth`; its secret stays in Claude Code's store, the report says what to export", async () => {
  const t = claudeTree();
  const out = json(await t.run(t.proj));
  const added = Object.fromEntries(out.added.map((a) => [a.id, a]));
  assert.deepEqual(added.linear?.oauth, { client_id: "linear-client-id" });
  assert.deepEqual(added.linear?.notes, [
    { kind: "client_secret_in_client_store", suggested_env: "LINEAR_CLIENT_SECRET" },
    { kind: "redirect_uri", port: 8765 },
  ]);
  assert.deepEqual(added.acme?.oauth, { client_id: "acme-client" });
  // `scoped` is turned off in the fixture: on again, its scopes (one space-separated string in Claude Code) are a list.
  const claudeJson = JSON.parse(readFileSync(path.join(t.home, ".claude.json"), "utf8"));
  claudeJson.projects[t.proj].disabledMcpServers = [];
  writeFileSync(path.join(t.home, ".claude.json"), JSON.stringify(claudeJson, null, 2));
  const scoped = json(await t.run(t.proj)).added.find((a) => a.id === "scoped");
  assert.deepEqual(scoped?.oauth, { client_id: "scoped-client", scopes: ["read", "write"] });

  // Written for real: the file says it as `subs mcp add --client-id` would, and it loads.
  writeFileSync(path.join(t.proj, "substructure.toml"), "");
  const r = await runCli(["mcp", "import", "--from", "claude"], { cwd: t.proj, env: { HOME: t.home } });
  assert.equal(r.code, 0, r.stderr);
  const toml = readFileSync(path.join(t.proj, "substructure.toml"), "utf8");
  assert.match(toml, /\[mcp\.linear\]\nurl = "https:\/\/mcp\.linear\.app\/mcp"\noauth = \{ client_id = "linear-client-id" \}\n/);
  assert.match(toml, /\[mcp\.scoped\]\nurl = "https:\/\/scoped\.example\/mcp"\noauth = \{ client_id = "scoped-client", scopes = \["read", "write"\] \}\n/);
  assert.match(
    r.stderr,
    /! if you gave Claude Code a client secret for it, Claude Code keeps it in its own credential store, which subs does not read: export it as LINEAR_CLIENT_SECRET and add `client_secret_env = "LINEAR_CLIENT_SECRET"` to the `oauth` of \[mcp\.linear\]\n/,
  );
  assert.match(r.stderr, /! the OAuth client is registered for Claude Code, which logs in on port 8765: run `subs mcp login linear --port 8765`/);
  const list = await runCli(["mcp", "list", "--json"], { cwd: t.proj, env: { HOME: t.home } });
  assert.equal(list.code, 0, list.stderr);
  assert.ok(!existsSync(path.join(t.home, ".claude", ".credentials.json")));
});

test("Claude Code: a headersHelper and a WebSocket server are named with what to do, not imported as something else", async () => {
  const t = claudeTree();
  const out = json(await t.run(t.proj));
  const helper = out.added.find((a) => a.id === "helper");
  assert.deepEqual(helper?.notes, [{ kind: "headers_helper", setting: "headersHelper", suggested_env: "HELPER_TOKEN" }]);
  assert.deepEqual(helper?.oauth, null);
  const sock = byName(out.skipped).sock;
  assert.equal(sock?.reason, "unsupported_transport");
  assert.match(sock?.message ?? "", /^its transport is WebSocket \(ws\); subs connects to remote servers over Streamable HTTP or SSE/);
  const human = await runInProcess(["mcp", "import", "--from", "claude", "--dry-run"], { cwd: t.proj, env: { HOME: t.home } });
  assert.match(
    human.stderr,
    /! Claude Code runs a command for its headers \(headersHelper\), which subs does not: imported without them\. If the server takes a token, export it as HELPER_TOKEN and add `auth = \{ token_env = "HELPER_TOKEN" \}` to \[mcp\.helper\]; else log in with OAuth: `subs mcp login helper`/,
  );
  // The command line (which may carry a token) is never shown.
  assert.ok(!human.stderr.includes("get-mcp-headers") && !human.stdout.includes("get-mcp-headers"));
});

test("Claude Code: $CLAUDE_CONFIG_DIR moves ~/.claude.json and the user's settings, as Claude Code reads them", async () => {
  const t = claudeTree();
  const config = path.join(t.root, "claude-config");
  cpSync(path.join(t.home, ".claude.json"), path.join(config, ".claude.json"));
  cpSync(path.join(t.home, ".claude", "settings.json"), path.join(config, "settings.json"));
  writeFileSync(path.join(t.home, ".claude.json"), "{}");
  const out = json(await t.run(t.proj, [], { CLAUDE_CONFIG_DIR: config }));
  assert.ok(out.read.some((f) => f.file === path.join(config, ".claude.json")));
  assert.equal(byName(out.skipped).top?.disabled_in?.file, path.join(config, "settings.json"));
  assert.equal(byName(out.skipped).notion?.reason, "disabled");
});

test("Codex (config.toml by `codex mcp add`): enabled = false says where; oauth client_id and scopes carried, the literal client secret never; helpers and settings without a key named", async () => {
  const root = mkdtempSync(path.join(tmpdir(), "subs-import-codex-"));
  const home = path.join(root, "home");
  const dir = path.join(root, "project");
  write(path.join(home, ".codex", "config.toml"), readFileSync(path.join(FIXTURES, "codex-0.171.0", "config.toml"), "utf8"));
  write(path.join(dir, "substructure.toml"), "");
  const env = { HOME: home };
  const out = json(await runInProcess(["mcp", "import", "--from", "codex", "--dry-run", "--json"], { cwd: dir, env }));
  const added = Object.fromEntries(out.added.map((a) => [a.id, a]));
  const config = path.join(home, ".codex", "config.toml");
  assert.deepEqual(byName(out.skipped).off, {
    from: { client: "codex", scope: "user", file: config, name: "off" },
    reason: "disabled",
    message: `disabled in Codex: enabled = false in ${config}`,
    disabled_in: { file: config, setting: "enabled = false" },
  });
  assert.deepEqual(added.linear?.oauth, { client_id: "linear-client-id", scopes: ["read", "write"] });
  // `codex mcp add --oauth-client-id` registers a callback URL of its own (no port).
  assert.deepEqual(added.linear?.notes, [{ kind: "redirect_uri", port: null }]);
  assert.deepEqual(added.acme?.oauth, { client_id: "acme-client" });
  assert.deepEqual(added.acme?.notes, [
    { kind: "client_secret_left_out", suggested_env: "ACME_CLIENT_SECRET" },
    { kind: "redirect_uri", port: null },
    { kind: "setting_left_out", setting: "oauth_resource" },
  ]);
  assert.equal(added.github?.token_env, "GITHUB_PAT");
  assert.deepEqual(added.tools?.notes, [
    { kind: "headers_helper", setting: "http_headers_helper", suggested_env: "TOOLS_TOKEN" },
    { kind: "setting_left_out", setting: "enabled_tools" },
    { kind: "setting_left_out", setting: "tool_timeout_sec" },
  ]);

  const r = await runInProcess(["mcp", "import", "--from", "codex"], { cwd: dir, env });
  assert.equal(r.code, 0, r.stderr);
  assertNowhere("codex_CLIENT_SECRET_literal_37", r, path.join(dir, "substructure.toml"));
  const toml = readFileSync(path.join(dir, "substructure.toml"), "utf8");
  assert.match(toml, /\[mcp\.acme\]\nurl = "https:\/\/mcp\.acme\.example\/mcp"\noauth = \{ client_id = "acme-client" \}\n/);
  assert.match(
    r.stderr,
    /! Codex holds the OAuth client's secret written in its file: not copied\. Export it as ACME_CLIENT_SECRET and add `client_secret_env = "ACME_CLIENT_SECRET"` to the `oauth` of \[mcp\.acme\]\n/,
  );
  assert.match(r.stderr, /! enabled_tools \(Codex\) not imported: filter the tools per agent instead, `mcp = \[\{ id = "tools", tools = \{ include = \[\.\.\.\] \} \}\]` in its \[agent\.\*\]\n/);
  assert.match(r.stderr, /! tool_timeout_sec \(Codex\) not imported: substructure\.toml has no such setting\n/);
  assert.match(r.stderr, /- codex ~\/\.codex\/config\.toml: "off": disabled in Codex: enabled = false in ~\/\.codex\/config\.toml\n/);
  const list = await runInProcess(["mcp", "list", "--json"], { cwd: dir, env });
  assert.equal(list.code, 0, list.stderr);
  assertNowhere("codex_CLIENT_SECRET_literal_37", list);
});

/** Gemini CLI's files as its `mcp add` wrote them (plus what no command writes), in a fresh tree; system settings point inside it. */
function geminiTree() {
  const root = mkdtempSync(path.join(tmpdir(), "subs-import-gemini-"));
  const home = path.join(root, "home");
  const dir = path.join(root, "project");
  write(path.join(home, ".gemini", "settings.json"), readFileSync(path.join(FIXTURES, "gemini-0.61.0", "user-settings.json"), "utf8"));
  write(path.join(dir, ".gemini", "settings.json"), readFileSync(path.join(FIXTURES, "gemini-0.61.0", "project-settings.json"), "utf8"));
  // As `/mcp disable` writes it: keys lowercased, `JSON.stringify(…, null, 2)`.
  write(path.join(home, ".gemini", "mcp-server-enablement.json"), JSON.stringify({ offsse: { enabled: false }, mixed: { enabled: false } }, null, 2));
  write(path.join(dir, "substructure.toml"), "");
  const system = path.join(root, "etc", "gemini-cli", "settings.json");
  const env = { HOME: home, GEMINI_CLI_SYSTEM_SETTINGS_PATH: system };
  const run = (argv: string[] = ["--dry-run", "--json"], extra: Record<string, string> = {}) =>
    runInProcess(["mcp", "import", "--from", "gemini", ...argv], { cwd: dir, env: { ...env, ...extra } });
  return { root, home, dir, system, env, run };
}

test("Gemini CLI: mcp-server-enablement.json and mcp.excluded turn servers off (names compared lowercased), each said with its file", async () => {
  const t = geminiTree();
  const out = json(await t.run());
  const skipped = byName(out.skipped);
  const enablement = path.join(t.home, ".gemini", "mcp-server-enablement.json");
  assert.deepEqual(skipped.offsse?.disabled_in, { file: enablement, setting: 'its entry { "enabled": false }' });
  assert.deepEqual(skipped.Mixed?.disabled_in, { file: enablement, setting: 'its entry { "enabled": false }' }, "the project's server `Mixed` is the file's `mixed`");
  assert.deepEqual(skipped.excluded?.disabled_in, { file: path.join(t.home, ".gemini", "settings.json"), setting: "mcp.excluded" }, "`EXCLUDED` in the list");
  assert.deepEqual(out.added.map((a) => a.id).sort(), ["linear", "proj-on", "tools"]);
  assert.equal(out.added.find((a) => a.id === "proj-on")?.token_env, "PROJ_TOKEN");
  const human = await t.run(["--dry-run"]);
  assert.match(human.stderr, /- gemini ~\/\.gemini\/settings\.json: "offsse": disabled in Gemini CLI: its entry \{ "enabled": false \} in ~\/\.gemini\/mcp-server-enablement\.json\n/);
  // `{ "enabled": true }`, or another server's entry, leaves it on.
  writeFileSync(path.join(t.home, ".gemini", "mcp-server-enablement.json"), JSON.stringify({ offsse: { enabled: true }, other: { enabled: false } }));
  assert.ok(json(await t.run()).added.some((a) => a.id === "offsse"));
});

test("Gemini CLI: mcp.allowed (in system settings, $GEMINI_CLI_SYSTEM_SETTINGS_PATH) turns off every server it does not list; a workspace's lists leave another workspace's servers alone", async () => {
  const t = geminiTree();
  write(t.system, JSON.stringify({ mcp: { allowed: ["Linear", "tools", "proj-on", "offsse", "mixed"] } }));
  const skipped = byName(json(await t.run()).skipped);
  assert.deepEqual(skipped.excluded?.reason, "disabled");
  // Both lists say so; the first file read that does is named (the user's, whose excluded list names it).
  const allowedOnly = geminiTree();
  write(allowedOnly.system, JSON.stringify({ mcp: { allowed: ["linear"] } }));
  const settings = JSON.parse(readFileSync(path.join(allowedOnly.home, ".gemini", "settings.json"), "utf8"));
  delete settings.mcp;
  writeFileSync(path.join(allowedOnly.home, ".gemini", "settings.json"), JSON.stringify(settings));
  const out = json(await allowedOnly.run());
  assert.deepEqual(out.added.map((a) => a.id), ["linear"]);
  assert.deepEqual(byName(out.skipped).tools?.disabled_in, { file: allowedOnly.system, setting: "mcp.allowed (it is not listed)" });
  // A list in the config file's directory's workspace does not reach the working directory's workspace.
  const other = path.join(t.root, "other");
  write(path.join(other, ".gemini", "settings.json"), JSON.stringify({ mcp: { excluded: ["proj-on"] } }));
  const apart = json(await runInProcess(["mcp", "import", "--from", "gemini", "--dry-run", "--json", "--config", path.join(other, "substructure.toml")], { cwd: t.dir, env: t.env }));
  assert.ok(apart.added.some((a) => a.id === "proj-on"));
});

test("Gemini CLI: oauth clientId and scopes carried, a $VAR client secret as client_secret_env, a literal one never; tool filters and timeout named; $GEMINI_CLI_HOME honoured", async () => {
  const t = geminiTree();
  const out = json(await t.run());
  const added = Object.fromEntries(out.added.map((a) => [a.id, a]));
  assert.deepEqual(added.linear?.oauth, { client_id: "gemini-linear-client", client_secret_env: "GEMINI_LINEAR_SECRET", scopes: ["read", "write"] });
  assert.deepEqual(added.linear?.notes, []);
  assert.deepEqual(added.tools?.oauth, { client_id: "tools-client" });
  assert.deepEqual(added.tools?.notes, [
    { kind: "client_secret_left_out", suggested_env: "TOOLS_CLIENT_SECRET" },
    { kind: "setting_left_out", setting: "includeTools" },
    { kind: "setting_left_out", setting: "excludeTools" },
    { kind: "setting_left_out", setting: "timeout" },
  ]);
  const r = await runInProcess(["mcp", "import", "--from", "gemini"], { cwd: t.dir, env: t.env });
  assert.equal(r.code, 0, r.stderr);
  assertNowhere("gemini_CLIENT_SECRET_literal_55", r, path.join(t.dir, "substructure.toml"));
  assert.match(
    readFileSync(path.join(t.dir, "substructure.toml"), "utf8"),
    /\[mcp\.linear\]\nurl = "https:\/\/mcp\.linear\.app\/mcp"\noauth = \{ client_id = "gemini-linear-client", client_secret_env = "GEMINI_LINEAR_SECRET", scopes = \["read", "write"\] \}\n/,
  );
  const list = await runInProcess(["mcp", "list", "--json"], { cwd: t.dir, env: t.env });
  assert.equal(list.code, 0, list.stderr);

  // GEMINI_CLI_HOME replaces the home directory for Gemini CLI's own files.
  const moved = geminiTree();
  const gemHome = path.join(moved.root, "gem-home");
  cpSync(path.join(moved.home, ".gemini"), path.join(gemHome, ".gemini"), { recursive: true });
  writeFileSync(path.join(moved.home, ".gemini", "mcp-server-enablement.json"), "{}");
  const viaEnv = json(await moved.run(undefined, { GEMINI_CLI_HOME: gemHome }));
  assert.ok(viaEnv.read.some((f) => f.file === path.join(gemHome, ".gemini", "settings.json")));
  assert.equal(byName(viaEnv.skipped).offsse?.disabled_in?.file, path.join(gemHome, ".gemini", "mcp-server-enablement.json"));
});

test("Cursor: `auth` { CLIENT_ID, CLIENT_SECRET, scopes } becomes oauth (${env:VAR} as client_secret_env), with Cursor's own redirect noted", async () => {
  const root = mkdtempSync(path.join(tmpdir(), "subs-import-cursor-"));
  const dir = path.join(root, "project");
  write(path.join(dir, "substructure.toml"), "");
  write(
    path.join(dir, ".cursor", "mcp.json"),
    JSON.stringify({
      mcpServers: {
        hub: { url: "https://hub.example/mcp", auth: { CLIENT_ID: "hub-client", CLIENT_SECRET: "${env:HUB_SECRET}", scopes: ["openid", "kb:read"] } },
        lit: { url: "https://lit.example/mcp", auth: { CLIENT_ID: "lit-client", CLIENT_SECRET: "cursor_CLIENT_SECRET_literal_88" } },
      },
    }),
  );
  const r = await runInProcess(["mcp", "import", "--from", "cursor", "--dry-run", "--json"], { cwd: dir, env: { HOME: path.join(root, "home") } });
  const added = Object.fromEntries(json(r).added.map((a) => [a.id, a]));
  assert.deepEqual(added.hub?.oauth, { client_id: "hub-client", client_secret_env: "HUB_SECRET", scopes: ["openid", "kb:read"] });
  assert.deepEqual(added.hub?.notes, [{ kind: "redirect_uri", port: null }]);
  assert.deepEqual(added.lit?.oauth, { client_id: "lit-client" });
  assert.deepEqual(added.lit?.notes.map((n) => n.kind), ["client_secret_left_out", "redirect_uri"]);
  assert.ok(!r.stdout.includes("cursor_CLIENT_SECRET_literal_88") && !r.stderr.includes("cursor_CLIENT_SECRET_literal_88"));
});

test("a pre-registered client subs cannot write as it is: an id using a variable, an invalid scope, a static token beside it, [remote] (no client secret written)", async () => {
  const root = mkdtempSync(path.join(tmpdir(), "subs-import-oauth-"));
  const dir = path.join(root, "project");
  write(path.join(dir, "substructure.toml"), "");
  write(
    path.join(dir, ".gemini", "settings.json"),
    JSON.stringify({
      mcpServers: {
        varid: { httpUrl: "https://varid.example/mcp", oauth: { clientId: "$CLIENT_ID", scopes: ["read"] } },
        badscope: { httpUrl: "https://badscope.example/mcp", oauth: { clientId: "c1", scopes: ["read write", 'a"b'] } },
        both: { httpUrl: "https://both.example/mcp", headers: { Authorization: "Bearer $BOTH_TOKEN" }, oauth: { clientId: "c2" } },
        withsecret: { httpUrl: "https://secret.example/mcp", oauth: { clientId: "c3", clientSecret: "$SECRET_ENV" } },
      },
    }),
  );
  const run = (cwd: string) => runInProcess(["mcp", "import", "--from", "gemini", "--dry-run", "--json"], { cwd, env: { HOME: path.join(root, "home") } });
  const added = Object.fromEntries(json(await run(dir)).added.map((a) => [a.id, a]));
  assert.deepEqual(added.withsecret?.oauth, { client_id: "c3", client_secret_env: "SECRET_ENV" });
  assert.deepEqual(added.varid?.oauth, { scopes: ["read"] });
  assert.deepEqual(added.varid?.notes, [{ kind: "oauth_left_out", what: "client_id", why: "not_a_literal" }]);
  assert.deepEqual(added.badscope?.oauth, { client_id: "c1" });
  assert.deepEqual(added.badscope?.notes, [{ kind: "oauth_left_out", what: "scopes", why: "invalid_scope" }]);
  assert.equal(added.both?.token_env, "BOTH_TOKEN");
  assert.deepEqual(added.both?.oauth, null);
  assert.deepEqual(added.both?.notes, [{ kind: "oauth_left_out", what: "client", why: "static_token" }]);
  // Under [remote] the client id goes to the deployment; a secret is the operator's to set there.
  writeFileSync(path.join(dir, "substructure.toml"), '[remote]\nurl = "https://deploy.example"\n');
  const remote = Object.fromEntries(json(await run(dir)).added.map((a) => [a.id, a]));
  assert.deepEqual(remote.withsecret?.oauth, { client_id: "c3" });
  assert.deepEqual(remote.withsecret?.notes, [{ kind: "client_secret_on_deployment" }]);
  assert.deepEqual(remote.both?.oauth, { client_id: "c2" });
  // Written, each loads as the file's rules check it.
  writeFileSync(path.join(dir, "substructure.toml"), "");
  const r = await runInProcess(["mcp", "import", "--from", "gemini"], { cwd: dir, env: { HOME: path.join(root, "home") } });
  assert.equal(r.code, 0, r.stderr);
  const list = await runInProcess(["mcp", "list", "--json"], { cwd: dir, env: { HOME: path.join(root, "home") } });
  assert.equal(list.code, 0, list.stderr);
});

test("--config in a directory that does not exist: a usage error naming the directory, before anything is read; --dry-run too; nothing created", async () => {
  const root = mkdtempSync(path.join(tmpdir(), "subs-import-nodir-"));
  const dir = path.join(root, "project");
  write(path.join(dir, ".mcp.json"), JSON.stringify({ mcpServers: { linear: { type: "http", url: "https://mcp.linear.app/mcp" } } }));
  for (const extra of [[], ["--dry-run"]]) {
    const r = await runInProcess(["mcp", "import", "--config", "deploy/substructure.toml", ...extra], { cwd: dir, env: { HOME: path.join(root, "home") } });
    assert.equal(r.code, 2, r.stderr);
    assert.equal(r.stderr, "error: cannot create deploy/substructure.toml: the directory deploy does not exist; nothing was written\nhint: create it first (`mkdir -p deploy`), or give a path in an existing directory\n");
  }
  const asJson = await runInProcess(["mcp", "import", "--config", "deploy/substructure.toml", "--json"], { cwd: dir, env: { HOME: path.join(root, "home") } });
  assert.equal(JSON.parse(asJson.stdout).error.code, "usage");
  writeFileSync(path.join(dir, "file"), "");
  const notDir = await runInProcess(["mcp", "import", "--config", "file/substructure.toml"], { cwd: dir, env: { HOME: path.join(root, "home") } });
  assert.equal(notDir.code, 2);
  assert.match(notDir.stderr, /^error: cannot create file\/substructure\.toml: file is not a directory; nothing was written\n/);
  assert.deepEqual(readdirSync(dir).sort(), [".mcp.json", "file"]);
  // subs init, which `--config`'s "no such file" hint sends a person to, says the same.
  const init = await runCli(["init", "--config", "deploy/substructure.toml"], { cwd: dir, env: { HOME: path.join(root, "home") } });
  assert.equal(init.code, 2);
  assert.match(init.stderr, /^error: cannot create deploy\/substructure\.toml: the directory deploy does not exist/);
});

test("a server named as the file names a secret (`secret`, `token`) is imported under another id, not refused with the rest", async () => {
  const root = mkdtempSync(path.join(tmpdir(), "subs-import-names-"));
  const dir = path.join(root, "project");
  write(path.join(dir, "substructure.toml"), "");
  write(path.join(dir, ".mcp.json"), JSON.stringify({ mcpServers: { secret: { type: "http", url: "https://a.example/mcp" }, token: { type: "http", url: "https://b.example/mcp" } } }));
  const r = await runInProcess(["mcp", "import", "--from", "claude"], { cwd: dir, env: { HOME: path.join(root, "home") } });
  assert.equal(r.code, 0, r.stderr);
  assert.match(readFileSync(path.join(dir, "substructure.toml"), "utf8"), /^\[mcp\.secret-2\]\nurl = "https:\/\/a\.example\/mcp"\n\n\[mcp\.token-2\]\nurl = "https:\/\/b\.example\/mcp"\n/m);
});

test("what is read to find the project and the switches is read as hostile files are: a FIFO, a gitdir leading to /dev/zero or a FIFO; one warning, the import goes on", { timeout: 60_000 }, async () => {
  const root = mkdtempSync(path.join(tmpdir(), "subs-import-hostile-git-"));
  const home = path.join(root, "home");
  const dir = path.join(root, "proj", "sub");
  write(path.join(dir, ".mcp.json"), JSON.stringify({ mcpServers: { kept: { type: "http", url: "https://kept.example/mcp" } } }));
  write(path.join(root, "proj", ".git"), "gitdir: ../meta\n");
  mkdirSync(path.join(root, "meta"));
  execFileSync("mkfifo", [path.join(root, "meta", "commondir")]);
  mkdirSync(path.join(dir, ".claude"));
  execFileSync("mkfifo", [path.join(dir, ".claude", "settings.json")]);
  write(path.join(home, ".claude.json"), JSON.stringify({ projects: { [path.join(root, "proj")]: { disabledMcpServers: [] } } }));
  // The built CLI: a read that blocked on a FIFO would hang this process; a child is killed after 15 s.
  const run = () => runCli(["mcp", "import", "--from", "claude", "--dry-run", "--json"], { cwd: dir, env: { HOME: home }, timeoutMs: 15_000 });
  let r = await run();
  assert.equal(r.code, 0, r.stderr);
  assert.deepEqual(JSON.parse(r.stdout).added.map((a: { id: string }) => a.id), ["kept"]);
  assert.match(r.stderr, /^warning: \.claude\/settings\.json is not a regular file; which servers it turns off in Claude Code was not read\n/);
  assert.deepEqual(JSON.parse(r.stdout).unreadable, [{ client: "claude", scope: "user", file: path.join(dir, ".claude", "settings.json"), problem: "is not a regular file", role: "switches" }]);
  // A `.git` file pointing at /dev/zero, and a `.git` that is itself a FIFO.
  writeFileSync(path.join(root, "proj", ".git"), "gitdir: /dev/zero\n");
  r = await run();
  assert.equal(r.code, 0, r.stderr);
  rmSync(path.join(root, "proj", ".git"));
  execFileSync("mkfifo", [path.join(root, "proj", ".git")]);
  r = await run();
  assert.equal(r.code, 0, r.stderr);
  assert.deepEqual(JSON.parse(r.stdout).added.map((a: { id: string }) => a.id), ["kept"]);
});
