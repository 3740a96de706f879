// `subs mcp import`, faithful for local servers and headers (docs/commands.md, "subs mcp import"):
// a local server comes over with its command, args, env and cwd; a header with its template; a
// literal env or header value is never copied (that is where tokens are pasted): the entry reads a
// `${NAME}` template and the report says what to export.
// Through the built CLI, from the files as Claude Code and Codex write them.
import assert from "node:assert/strict";
import { mkdirSync, mkdtempSync, readFileSync, realpathSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { describe, it } from "node:test";
import { REPO, runCli } from "./support/cli.ts";

const GITHUB_PAT = "ghp_abcdefghijklmnopqrstuvwxyz0123456789";
const OTHER_KEY = "sk-live-abcdefghijklmnopqrstuvwx";

/** The file's text without the comments `subs init` writes. */
const declared = (file: string) =>
  readFileSync(file, "utf8")
    .split("\n")
    .filter((line) => line.trim() !== "" && !line.startsWith("#"))
    .join("\n");

describe("subs mcp import: local servers and headers", () => {
  it("from Claude Code's .mcp.json: command, args, env (secrets as templates), headers; the report says what to export", async () => {
    const dir = mkdtempSync(path.join(tmpdir(), "subs-import-local-"));
    writeFileSync(
      path.join(dir, ".mcp.json"),
      JSON.stringify({
        mcpServers: {
          filesystem: { type: "stdio", command: "npx", args: ["-y", "@modelcontextprotocol/server-filesystem", "./docs"], env: { LOG_LEVEL: "info", GITHUB_TOKEN: GITHUB_PAT, ROOT_DIR: "${ROOT:-/tmp}" } },
          exa: { type: "http", url: "https://mcp.exa.ai/mcp", headers: { "X-API-Key": "${EXA_API_KEY}", "X-Trace": "on", "X-Other-Key": OTHER_KEY } },
        },
      }),
    );
    const ran = await runCli(["mcp", "import", "--from", "claude"], { cwd: dir });
    assert.equal(ran.code, 0, ran.stderr);
    const out = ran.stdout + ran.stderr;
    assert.doesNotMatch(out, new RegExp(`${GITHUB_PAT}|${OTHER_KEY}`));
    assert.match(out, /\+ filesystem\s+local: npx -y @modelcontextprotocol\/server-filesystem \.\/docs/);
    assert.match(out, /\$GITHUB_TOKEN of its env: Claude Code holds its value written in its file; not copied: the entry reads \$\{GITHUB_TOKEN\}: export GITHUB_TOKEN/);
    assert.match(out, /\$ROOT_DIR of its env: its \$\{NAME:-default\} is \$\{NAME\} here/);
    assert.match(out, /header X-Other-Key: .*export X_OTHER_KEY/);
    assert.match(out, /Next: export LOG_LEVEL, GITHUB_TOKEN, ROOT, EXA_API_KEY, X_TRACE, X_OTHER_KEY, then `subs mcp login exa`/);
    const file = declared(path.join(dir, "substructure.toml"));
    assert.doesNotMatch(file, new RegExp(`${GITHUB_PAT}|${OTHER_KEY}`));
    assert.match(file, /\[mcp\.filesystem\]\ncommand = "npx"\nargs = \["-y", "@modelcontextprotocol\/server-filesystem", "\.\/docs"\]\nenv = \{ LOG_LEVEL = "\$\{LOG_LEVEL\}", GITHUB_TOKEN = "\$\{GITHUB_TOKEN\}", ROOT_DIR = "\$\{ROOT\}" \}/);
    assert.match(file, /\[mcp\.exa\]\nurl = "https:\/\/mcp\.exa\.ai\/mcp"\nheaders = \{ X-API-Key = "\$\{EXA_API_KEY\}", X-Trace = "\$\{X_TRACE\}", X-Other-Key = "\$\{X_OTHER_KEY\}" \}/);

    // What was written is a valid file that says what is missing, and a second import adds nothing.
    const listed = await runCli(["mcp", "list", "--json"], { cwd: dir, env: { ROOT: "/tmp" } });
    assert.equal(listed.code, 0, listed.stderr);
    const byId = Object.fromEntries((JSON.parse(listed.stdout) as Array<{ id: string; unset_env: string[]; status: string }>).map((c) => [c.id, c]));
    assert.deepEqual([byId.filesystem!.status, byId.filesystem!.unset_env], ["env_unset", ["LOG_LEVEL", "GITHUB_TOKEN"]]);
    assert.deepEqual(byId.exa!.unset_env, ["EXA_API_KEY", "X_TRACE", "X_OTHER_KEY"]);
    const again = await runCli(["mcp", "import", "--from", "claude"], { cwd: dir });
    assert.equal(again.code, 0, again.stderr);
    assert.match(again.stdout + again.stderr, /Already declared:[\s\S]*"filesystem"[\s\S]*Nothing to add/);
  });

  it("from Codex's config.toml: command, args, env, cwd; its env_vars named as left out", async () => {
    const dir = mkdtempSync(path.join(tmpdir(), "subs-import-codex-local-"));
    const codexHome = path.join(dir, "codex-home");
    mkdirSync(codexHome);
    writeFileSync(
      path.join(codexHome, "config.toml"),
      `[mcp_servers.fs]\ncommand = "npx"\nargs = ["-y", "@modelcontextprotocol/server-filesystem", "."]\ncwd = "/srv/docs"\nenv_vars = ["HOME_DIR"]\n\n[mcp_servers.fs.env]\nAPI_KEY = "${OTHER_KEY}"\nMODE = "ro"\n`,
    );
    const ran = await runCli(["mcp", "import", "--from", "codex"], { cwd: dir, env: { CODEX_HOME: codexHome } });
    assert.equal(ran.code, 0, ran.stderr);
    assert.doesNotMatch(ran.stdout + ran.stderr, new RegExp(OTHER_KEY));
    assert.match(ran.stdout + ran.stderr, /env_vars \(Codex\) not imported/);
    const file = declared(path.join(dir, "substructure.toml"));
    assert.match(file, /\[mcp\.fs\]\ncommand = "npx"\nargs = \["-y", "@modelcontextprotocol\/server-filesystem", "\."\]\nenv = \{ API_KEY = "\$\{API_KEY\}", MODE = "\$\{MODE\}" \}\ncwd = "\/srv\/docs"/);
  });

  it("with [remote], a local server is skipped, saying why", async () => {
    const dir = mkdtempSync(path.join(tmpdir(), "subs-import-remote-local-"));
    writeFileSync(path.join(dir, "substructure.toml"), `[remote]\nurl = "https://deploy.example.com"\n`);
    writeFileSync(path.join(dir, ".mcp.json"), JSON.stringify({ mcpServers: { fs: { command: "npx", args: ["x"] } } }));
    const ran = await runCli(["mcp", "import", "--from", "claude", "--json"], { cwd: dir });
    assert.equal(ran.code, 0, ran.stderr);
    const result = JSON.parse(ran.stdout) as { added: unknown[]; skipped: Array<{ reason: string; message: string }> };
    assert.deepEqual(result.added, []);
    assert.equal(result.skipped[0]!.reason, "stdio");
    assert.match(result.skipped[0]!.message, /the deployment in \[remote\] cannot run it/);
  });

  it("with [remote], headers come over as templates whose values the login hands to the deployment; nothing says to export them", async () => {
    const dir = mkdtempSync(path.join(tmpdir(), "subs-import-remote-headers-"));
    writeFileSync(path.join(dir, "substructure.toml"), `[remote]\nurl = "https://deploy.example.com"\n`);
    writeFileSync(path.join(dir, ".mcp.json"), JSON.stringify({ mcpServers: { exa: { type: "http", url: "https://mcp.exa.ai/mcp", headers: { "X-API-Key": "${EXA_API_KEY}", "X-Other-Key": OTHER_KEY } } } }));
    const ran = await runCli(["mcp", "import", "--from", "claude"], { cwd: dir });
    assert.equal(ran.code, 0, ran.stderr);
    const out = ran.stdout + ran.stderr;
    assert.doesNotMatch(out, new RegExp(OTHER_KEY));
    assert.match(out, /header X-Other-Key: Claude Code holds its value written in its file; not copied: the entry reads \$\{X_OTHER_KEY\}: hand its value to the deployment with `subs mcp login exa`/);
    assert.match(out, /Next: `subs mcp login exa`, then `subs mcp list`\./);
    const file = declared(path.join(dir, "substructure.toml"));
    assert.match(file, /\[mcp\.exa\]\nurl = "https:\/\/mcp\.exa\.ai\/mcp"\nheaders = \{ X-API-Key = "\$\{EXA_API_KEY\}", X-Other-Key = "\$\{X_OTHER_KEY\}" \}/);
  });

  it("from the files Claude Code's and Codex's own `mcp add` wrote (test/fixtures/import/README.md, \"local\")", async () => {
    const fixtures = path.join(REPO, "test", "fixtures", "import", "local");
    const dir = realpathSync(mkdtempSync(path.join(tmpdir(), "subs-import-real-")));
    const home = path.join(dir, "home");
    const project = path.join(dir, "proj");
    mkdirSync(path.join(home, ".codex"), { recursive: true });
    mkdirSync(project);
    writeFileSync(path.join(home, ".claude.json"), readFileSync(path.join(fixtures, "claude.json"), "utf8").replaceAll("/work/tmp/realadd/proj", project));
    writeFileSync(path.join(project, ".mcp.json"), readFileSync(path.join(fixtures, "mcp.json")));
    writeFileSync(path.join(home, ".codex", "config.toml"), readFileSync(path.join(fixtures, "codex-config.toml")));
    const pasted = /sk-literal-pasted-0123456789abcdef|pasted-key-abcdef0123456789/;
    const claude = await runCli(["mcp", "import", "--from", "claude"], { cwd: project, env: { HOME: home } });
    assert.equal(claude.code, 0, claude.stderr);
    assert.doesNotMatch(claude.stdout + claude.stderr, pasted);
    const file = declared(path.join(project, "substructure.toml"));
    assert.doesNotMatch(file, pasted);
    assert.match(file, /\[mcp\.keyed\]\nurl = "https:\/\/keyed\.example\/mcp"\nheaders = \{ X-API-Key = "\$\{X_API_KEY\}" \}/);
    assert.match(file, /\[mcp\.fs\]\ncommand = "npx"\nargs = \["-y", "@modelcontextprotocol\/server-filesystem", "\.\/docs"\]\nenv = \{ LOG_LEVEL = "\$\{LOG_LEVEL\}", API_TOKEN = "\$\{API_TOKEN\}" \}/);
    assert.match(file, /\[mcp\.exa\]\nurl = "https:\/\/mcp\.exa\.ai\/mcp"\nheaders = \{ X-API-Key = "\$\{EXA_API_KEY\}", X-Trace = "\$\{X_TRACE\}" \}/);
    // Codex's fs is the same program with the same arguments: already declared, not added twice.
    const codex = await runCli(["mcp", "import", "--from", "codex", "--json"], { cwd: project, env: { HOME: home, CODEX_HOME: path.join(home, ".codex") } });
    assert.equal(codex.code, 0, codex.stderr);
    assert.doesNotMatch(codex.stdout + codex.stderr, pasted);
    const result = JSON.parse(codex.stdout) as { added: unknown[]; already_declared: Array<{ id: string; command?: string }> };
    assert.deepEqual([result.added, result.already_declared.map((d) => [d.id, d.command])], [[], [["fs", "npx"]]]);
  });
});
