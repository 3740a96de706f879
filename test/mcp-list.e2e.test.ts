// `subs mcp list` and local `subs apply` on the example file and on temp environments. The built CLI
// (bin/subs.cjs) runs, as a person does, the statuses from the db (with its file mode), the piped
// output, the usage errors with --help and --version (which bin/subs.cjs answers itself) and the
// apply test; the rest run the same `run()` in this process, where what is checked is the output,
// the exit code and the db, not the process.
import assert from "node:assert/strict";
import { copyFileSync, existsSync, mkdtempSync, statSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { describe, test } from "node:test";
import { openStore } from "../src/store/store.ts";
import { REPO, runCli, runInProcess } from "./support/cli.ts";
import { seedCredentials } from "./support/credentials.ts";

const tempDir = () => mkdtempSync(path.join(tmpdir(), "subs-list-"));
const SECRET = /SECRET|ghp_/;

function environment(toml: string) {
  const dir = tempDir();
  writeFileSync(path.join(dir, "substructure.toml"), toml);
  return { dir, dbPath: path.join(dir, "substructure.db") };
}

describe("subs mcp list", () => {
  test("--json on the example file lists every connection with its status and agents", async () => {
    const dir = tempDir();
    copyFileSync(path.join(REPO, "substructure.toml.example"), path.join(dir, "substructure.toml"));
    const result = await runInProcess(["mcp", "list", "--json"], { cwd: dir, env: { GITHUB_TOKEN: "ghp_SECRETVALUE" } });
    assert.equal(result.code, 0, result.stderr);
    const list = JSON.parse(result.stdout);
    assert.deepEqual(
      list.map((c: { id: string; auth: string; status: string; usable: boolean; agents: string[] }) => [c.id, c.auth, c.status, c.usable, c.agents]),
      [
        ["sentry", "oauth", "needs_login", false, ["support", "triage"]],
        ["github", "static", "env_set", true, []],
        ["linear", "oauth", "needs_login", false, ["triage"]],
      ],
    );
    assert.doesNotMatch(result.stdout + result.stderr, SECRET);
    assert.equal(existsSync(path.join(dir, "substructure.db")), false, "listing must not create a db");
  });

  test("statuses from the db: authorized, refreshable after expiry, expired without refresh, url changed; removed ids undeclared, kept", async () => {
    const { dir, dbPath } = environment(
      [
        '[mcp.fresh]\nurl = "https://fresh.example/mcp"',
        '[mcp.stale]\nurl = "https://stale.example/mcp"',
        '[mcp.dead]\nurl = "https://dead.example/mcp"',
        '[mcp.moved]\nurl = "https://new.example/mcp"',
        '[mcp.never]\nurl = "https://never.example/mcp"',
        '[mcp.static]\nurl = "https://static.example/mcp"\nauth = { token_env = "STATIC_TOKEN" }',
      ].join("\n"),
    );
    const now = Date.now();
    await seedCredentials(dbPath, [
      { id: "fresh", url: "https://fresh.example/mcp", expires_at: now + 3600_000 },
      { id: "stale", url: "https://stale.example/mcp", expires_at: now - 60_000 },
      { id: "dead", url: "https://dead.example/mcp", expires_at: now - 60_000, refresh_token: null },
      { id: "moved", url: "https://old.example/mcp" },
      { id: "removed", url: "https://removed.example/mcp" },
    ]);
    const result = await runCli(["mcp", "list", "--json"], { cwd: dir });
    assert.equal(result.code, 0, result.stderr);
    const byId = Object.fromEntries(JSON.parse(result.stdout).map((c: { id: string }) => [c.id, c]));
    assert.equal(byId.fresh.status, "authorized");
    assert.equal(byId.fresh.refreshable, true);
    assert.equal(byId.fresh.issuer, "http://127.0.0.1:9");
    assert.deepEqual(byId.fresh.scopes, ["read"]);
    assert.ok(Date.parse(byId.fresh.expires_at) > now);
    assert.equal(byId.stale.status, "authorized");
    assert.equal(byId.dead.status, "needs_login");
    assert.equal(byId.moved.status, "url_changed");
    assert.equal(byId.moved.logged_in_url, "https://old.example/mcp");
    assert.equal(byId.moved.usable, false);
    assert.equal(byId.never.status, "needs_login");
    assert.equal(byId.static.status, "env_unset");
    assert.deepEqual(byId.removed, {
      id: "removed",
      url: "https://removed.example/mcp",
      command: null,
      unset_env: [],
      auth: "oauth",
      status: "undeclared",
      usable: false,
      issuer: "http://127.0.0.1:9",
      scopes: ["read"],
      expires_at: byId.removed.expires_at,
      refreshable: true,
      token_env: null,
      logged_in_url: null,
      agents: [],
      refresh_expires_at: null,
      lost: null,
      credential: null,
    });
    assert.equal(byId.fresh.credential, "shared", "a url connection says its kind; shared unless the file says personal");
    assert.deepEqual(JSON.parse(result.stdout).map((c: { id: string }) => c.id), ["fresh", "stale", "dead", "moved", "never", "static", "removed"], "file order, then undeclared ids");
    assert.doesNotMatch(result.stdout + result.stderr, SECRET);

    assert.doesNotMatch(result.stderr, /Deleted/);
    const opened = await openStore({ dbPath, create: false });
    assert.deepEqual(opened!.store.listCredentials().map((r) => r.id), ["dead", "fresh", "moved", "removed", "stale"]);
    opened!.store.close();
    assert.equal(statSync(dbPath).mode & 0o777, 0o600);
  });

  test("no command but apply deletes an undeclared id's credential or finding; mcp list shows the credential with the apply hint", async () => {
    // Loopback, closed: the commands that talk to kept's server fail fast, and nothing leaves the machine.
    const toml = '[mcp.kept]\nurl = "http://127.0.0.1:9/mcp"\n[agent.a]\nmcp = ["kept"]\n';
    for (const argv of [["mcp", "list"], ["mcp", "list", "--json"], ["mcp", "tools", "kept"], ["mcp", "call", "kept", "whoami"], ["agent", "tools", "a"]]) {
      const { dir, dbPath } = environment(toml);
      await seedCredentials(dbPath, [{ id: "gone", url: "https://gone.example/mcp" }]);
      const seeded = await openStore({ dbPath, create: false });
      seeded!.store.putOpenConnection({ id: "was-open", url: "https://open.example/mcp", checked_at: 1 });
      seeded!.store.close();
      const result = await runInProcess(argv, { cwd: dir });
      assert.doesNotMatch(result.stderr, /Deleted|Revoked/, argv.join(" "));
      const opened = await openStore({ dbPath, create: false });
      assert.deepEqual(opened!.store.listCredentials().map((r) => r.id), ["gone"], argv.join(" "));
      assert.deepEqual(opened!.store.listOpenConnections().map((r) => r.id), ["was-open"], argv.join(" "));
      opened!.store.close();
      if (argv.join(" ") === "mcp list") {
        assert.equal(result.stdout, "kept\thttp://127.0.0.1:9/mcp\toauth\tneeds login · subs mcp login kept\ta\ngone\thttps://gone.example/mcp\toauth\tstored credential for an undeclared id · subs apply deletes it\t-\n");
      }
      if (argv.join(" ") === "mcp list --json") {
        assert.deepEqual(JSON.parse(result.stdout).map((c: { id: string; status: string }) => [c.id, c.status]), [["kept", "needs_login"], ["gone", "undeclared"]]);
      }
      const applied = await runInProcess(["apply"], { cwd: dir });
      assert.equal(applied.stdout, "- gone: deleted its credential (no longer declared)\n", argv.join(" "));
      const after = await openStore({ dbPath, create: false });
      assert.deepEqual([after!.store.listCredentials(), after!.store.listOpenConnections()], [[], []], "apply deleted both");
      after!.store.close();
    }
  });

  test("with no connection declared, the undeclared credentials are still listed", async () => {
    const { dir, dbPath } = environment("");
    await seedCredentials(dbPath, [{ id: "gone", url: "https://gone.example/mcp" }]);
    const result = await runInProcess(["mcp", "list"], { cwd: dir, stdoutIsTTY: true, color: false });
    assert.equal(result.code, 0);
    assert.match(result.stderr, /No connections declared in substructure\.toml/);
    assert.match(result.stdout, /^gone +https:\/\/gone\.example\/mcp +oauth +stored credential for an undeclared id · subs apply deletes it +-$/m);
  });

  test("piped human output is one tab-separated line per connection, without colour", async () => {
    const { dir } = environment('[mcp.a]\nurl = "https://a.example/mcp"\n[agent.x]\nmcp = ["a"]\n');
    const result = await runCli(["mcp", "list"], { cwd: dir, env: { FORCE_COLOR: undefined } });
    assert.equal(result.code, 0);
    assert.equal(result.stdout, "a\thttps://a.example/mcp\toauth\tneeds login · subs mcp login a\tx\n");
  });

  test("on a terminal: a table with a header; NO_COLOR turns colour off", async () => {
    const { dir } = environment('[mcp.a]\nurl = "https://a.example/mcp"\n[mcp.b]\nurl = "https://b.example/mcp"\nauth = { token_env = "B_TOKEN" }\n');
    const colored = await runInProcess(["mcp", "list"], { cwd: dir, stdoutIsTTY: true, color: true, env: { B_TOKEN: "x" } });
    assert.match(colored.stdout, /\x1b\[/);
    const plain = await runInProcess(["mcp", "list"], { cwd: dir, stdoutIsTTY: true, color: false, env: {} });
    assert.equal(
      plain.stdout,
      [
        "ID  URL                    AUTH    STATUS                          AGENTS",
        "a   https://a.example/mcp  oauth   needs login · subs mcp login a  -",
        "b   https://b.example/mcp  static  $B_TOKEN unset                  -",
        "",
      ].join("\n"),
    );
  });

  test("a broken file exits 2 with file:line:col, no stack trace, and no db written", async () => {
    const cases: Array<[string, RegExp]> = [
      ['[mcp.a]\nurl = "https://a.example/mcp\n', /^substructure\.toml:2:29: invalid TOML/m],
      ['[mcp.a]\nurl = "https://a.example/mcp"\nauth = { token = "ghp_SECRET123" }\n', /^substructure\.toml:3:10: `token` would put a secret in the file/m],
      ['[mcp.a]\nurl = "https://a.example/mcp"\nextra = 1\n', /^substructure\.toml:3:1: unknown key `extra` in \[mcp\.a\]/m],
      ['[mcp.A]\nurl = "https://a.example/mcp"\n', /^substructure\.toml:1:1: \[mcp\.A\]: a connection id may contain only/m],
    ];
    for (const [toml, expected] of cases) {
      const { dir, dbPath } = environment(toml);
      for (const argv of [["mcp", "list"], ["mcp", "list", "--json"], ["apply"]]) {
        const result = await runInProcess(argv, { cwd: dir });
        assert.equal(result.code, 2, `${argv.join(" ")}: ${result.stderr}`);
        assert.match(result.stderr, expected);
        assert.doesNotMatch(result.stderr, /\n\s+at .+\(.*:\d+:\d+\)/, "no stack trace");
        assert.doesNotMatch(result.stdout + result.stderr, SECRET);
        assert.equal(existsSync(dbPath), false);
      }
    }
  });

  test("--json errors are JSON on stdout too, for scripts", async () => {
    const { dir } = environment('[mcp.a]\nurl = "ftp://a.example/mcp"\n');
    const result = await runInProcess(["mcp", "list", "--json"], { cwd: dir });
    assert.equal(result.code, 2);
    const body = JSON.parse(result.stdout);
    assert.equal(body.error.code, "invalid_config");
    assert.deepEqual(body.error.diagnostics, [{ file: "substructure.toml", line: 2, col: 1, message: "`url` must be an http(s) URL" }]);
  });

  test("usage errors exit 2; --help and --version exit 0", async () => {
    const { dir } = environment('[mcp.a]\nurl = "https://a.example/mcp"\n');
    assert.equal((await runCli(["mcp", "lst"], { cwd: dir })).code, 2);
    assert.equal((await runCli(["mcp", "list", "--bogus"], { cwd: dir })).code, 2);
    const help = await runCli(["mcp", "list", "--help"], { cwd: dir });
    assert.equal(help.code, 0);
    assert.match(help.stdout, /Examples:\n\s+\$ subs mcp list/);
    const version = await runCli(["--version"], { cwd: dir });
    assert.equal(version.code, 0);
    assert.match(version.stdout, /^\d+\.\d+\.\d+\n$/);
    const none = await runCli(["mcp", "list"], { cwd: tempDir() });
    assert.equal(none.code, 2);
    assert.match(none.stderr, /no substructure\.toml in .* or any parent directory/);
  });
});

describe("subs apply (local)", () => {
  test("deletes credentials of removed ids and of changed urls; --dry-run changes nothing; a second run has nothing to do", async () => {
    const { dir, dbPath } = environment('[mcp.kept]\nurl = "https://kept.example/mcp"\n[mcp.moved]\nurl = "https://new.example/mcp"\n');
    await seedCredentials(dbPath, [
      { id: "kept", url: "https://kept.example/mcp" },
      { id: "moved", url: "https://old.example/mcp" },
      { id: "gone", url: "https://gone.example/mcp" },
    ]);
    const dry = await runCli(["apply", "--dry-run", "--json"], { cwd: dir });
    assert.equal(dry.code, 0, dry.stderr);
    assert.deepEqual(JSON.parse(dry.stdout), {
      target: "local",
      db: dbPath,
      dry_run: true,
      changes: [
        { id: "gone", action: "remove", reason: "not_declared" },
        { id: "moved", action: "remove", reason: "url_changed" },
      ],
      unchanged: ["kept"],
    });
    const afterDry = await openStore({ dbPath, create: false });
    assert.equal(afterDry!.store.listCredentials().length, 3, "--dry-run deleted something");
    afterDry!.store.close();

    const applied = await runCli(["apply"], { cwd: dir });
    assert.equal(applied.code, 0, applied.stderr);
    assert.equal(applied.stdout, "- gone: deleted its credential (no longer declared)\n- moved: deleted its credential (url changed since login)\n");
    assert.match(applied.stderr, /Deleted 2 credentials in substructure\.db\./);

    const again = await runCli(["apply", "--json"], { cwd: dir });
    assert.deepEqual(JSON.parse(again.stdout).changes, []);
    const opened = await openStore({ dbPath, create: false });
    assert.deepEqual(opened!.store.listCredentials().map((r) => r.id), ["kept"]);
    opened!.store.close();
  });
});
