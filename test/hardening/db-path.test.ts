// The db is the environment's and nobody else's. `db` names a file inside
// the file's own directory tree; the db is a regular file (never followed through a symlink), this
// user's, with one name, SQLite or absent; its -wal and -shm likewise; access by others is removed
// with a warning. Everything here runs on real files in temp dirs, and as root the tests can make
// files "another user's" with chown.
// The e2e refusal of a `db` outside (every command, for the relative path), the attack on
// authorized_keys, and the 0644 db made 0600 (a file mode) run the built CLI (bin/subs.cjs) as a
// person does; the other runs use the same `run()` in this process, where what is checked is
// the refusal printed and the files left, not the process.
import assert from "node:assert/strict";
import { createServer } from "node:http";
import { chmodSync, chownSync, existsSync, linkSync, lstatSync, mkdirSync, mkdtempSync, readFileSync, statSync, symlinkSync, writeFileSync } from "node:fs";
import type { AddressInfo } from "node:net";
import { spawnSync } from "node:child_process";
import { tmpdir } from "node:os";
import path from "node:path";
import { after, describe, test } from "node:test";
import Database from "better-sqlite3";
import { parseConfig } from "../../src/config/load.ts";
import { ConfigError, exitCodeFor, formatDiagnostic, SubsError } from "../../src/errors.ts";
import { silentReporter } from "../../src/report.ts";
import { openEnvironmentStore } from "../../src/store/environment.ts";
import { openStore } from "../../src/store/store.ts";
import { environment } from "../auth/harness.ts";
import { runAs, runCli, runInProcess } from "../support/cli.ts";
import { seedCredentials } from "../support/credentials.ts";

const NO_STACK = /\n\s+at .*:\d+:\d+\)?\n/;
const tempDir = (prefix = "subs-dbpath-") => mkdtempSync(path.join(tmpdir(), prefix));
const mode = (file: string) => statSync(file).mode & 0o777;
const refusedWith = (pattern: RegExp) => (error: unknown) => error instanceof SubsError && exitCodeFor(error) === 2 && pattern.test(error.message);

/** A loopback server that counts every request: none may arrive when the file is refused. */
async function countingServer() {
  let count = 0;
  const server = createServer((_req, res) => {
    count++;
    res.writeHead(500).end();
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/mcp`,
    count: () => count,
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}

function rows(dbPath: string): string[] {
  const db = new Database(dbPath, { readonly: true, fileMustExist: true });
  try {
    return (db.prepare("SELECT id FROM subs_credentials ORDER BY id").all() as { id: string }[]).map((r) => r.id);
  } finally {
    db.close();
  }
}

describe("`db` stays inside the file's directory tree", () => {
  const configAt = (dir: string, db: string) => `# an environment\n\ndb = ${JSON.stringify(db)}\n[mcp.a]\nurl = "https://a.example/mcp"\n`;

  test("a relative path that climbs out, one through a subdirectory, and an absolute path outside are config errors at the `db` key", () => {
    const outside = tempDir();
    const dir = tempDir();
    for (const db of ["../outside.db", "state/../../outside.db", "..", ".", path.join(outside, "substructure.db"), "/etc/passwd"]) {
      assert.throws(
        () => parseConfig(configAt(dir, db), { path: path.join(dir, "substructure.toml"), cwd: dir }),
        (error: unknown) => {
          assert.ok(error instanceof ConfigError, String(error));
          assert.equal(exitCodeFor(error), 2);
          assert.deepEqual(error.diagnostics.map(formatDiagnostic), ["substructure.toml:3:1: `db` must name a file inside this file's directory: the db holds credentials"]);
          return true;
        },
        db,
      );
    }
  });

  test("paths inside the tree, `..` included, and an absolute path inside are accepted", () => {
    const dir = tempDir();
    for (const [db, expected] of [
      ["substructure.db", "substructure.db"],
      ["state/env.db", "state/env.db"],
      ["./state/../other.db", "other.db"],
      [path.join(dir, "abs.db"), "abs.db"],
      ["..hidden.db", "..hidden.db"],
    ] as const) {
      const config = parseConfig(configAt(dir, db), { path: path.join(dir, "substructure.toml"), cwd: dir });
      assert.equal(config.dbPath, path.join(dir, expected));
    }
  });

  test("e2e: `db` outside is refused (exit 2, file:line:col) by every command before any request; nothing is created outside", async () => {
    const outside = tempDir();
    const dir = tempDir();
    const server = await countingServer();
    try {
      for (const [db, how] of [["../" + path.basename(outside) + "/stolen.db", "cli"], [path.join(outside, "abs.db"), "in-process"]] as const) {
        writeFileSync(path.join(dir, "substructure.toml"), `db = ${JSON.stringify(db)}\n[mcp.a]\nurl = "${server.url}"\n`);
        for (const argv of [["mcp", "login", "a"], ["mcp", "tools", "a"], ["mcp", "list", "--check"], ["apply"]]) {
          const result = await runAs(how, argv, { cwd: dir });
          assert.equal(result.code, 2, `${argv.join(" ")}: ${result.stderr}`);
          assert.match(result.stderr, /substructure\.toml:1:1: `db` must name a file inside this file's directory/);
          assert.doesNotMatch(result.stderr, NO_STACK);
        }
      }
      assert.equal(server.count(), 0, "no request was sent");
      assert.deepEqual(spawnSync("ls", ["-A", outside], { encoding: "utf8" }).stdout, "", "nothing created outside");
    } finally {
      await server.close();
    }
  });

  test('the attack (item 2): `db = "../../.ssh/authorized_keys"` with a real authorization server: refused before any request, no key file written', async () => {
    const home = tempDir("subs-victim-");
    mkdirSync(path.join(home, ".ssh"), { mode: 0o700 });
    const keys = path.join(home, ".ssh", "authorized_keys");
    writeFileSync(keys, "ssh-ed25519 AAAA-the-users-own-key user@host\n", { mode: 0o600 });
    const env = await environment();
    try {
      const project = path.join(home, "src", "cloned");
      mkdirSync(project, { recursive: true });
      writeFileSync(path.join(project, "substructure.toml"), `db = "../../.ssh/authorized_keys"\n[mcp.demo]\nurl = "${env.mcp.url}"\n`);
      const result = await runCli(["mcp", "login", "demo"], { cwd: project });
      assert.equal(result.code, 2, result.stderr);
      assert.match(result.stderr, /substructure\.toml:1:1: `db` must name a file inside this file's directory/);
      assert.equal(env.as.counters.registrations + env.as.counters.authorizations + env.as.counters.codeExchanges, 0);
      assert.deepEqual(env.mcp.requests, []);
      assert.equal(readFileSync(keys, "utf8"), "ssh-ed25519 AAAA-the-users-own-key user@host\n");
      assert.deepEqual(spawnSync("ls", ["-A", path.join(home, ".ssh")], { encoding: "utf8" }).stdout, "authorized_keys\n", "no -wal or -shm beside it");

      // The same aim at a file that does not exist yet, through a completed login in-process
      // (today's code logged in and created it, 0600, its parents 0700).
      const target = path.join(tempDir("subs-victim-"), ".ssh", "authorized_keys");
      env.write(`db = ${JSON.stringify(path.relative(env.dir, target))}\n[mcp.demo]\nurl = "${env.mcp.url}"\n`);
      const login = await env.subs(["mcp", "login", "demo"]);
      assert.equal(login.code, 2, login.stderr);
      assert.equal(env.as.counters.authorizations, 0);
      assert.equal(existsSync(path.dirname(target)), false);
    } finally {
      await env.close();
    }
  });

  test("a directory on the way that is a symlink leading outside is refused; nothing is made outside", async () => {
    const outside = tempDir();
    const dir = tempDir();
    symlinkSync(outside, path.join(dir, "state"));
    for (const db of ["state/env.db", "state/new/deeper/env.db"]) {
      const config = parseConfig(`db = "${db}"\n[mcp.a]\nurl = "https://a.example/mcp"\n`, { path: path.join(dir, "substructure.toml"), cwd: dir });
      await assert.rejects(openEnvironmentStore(config, { create: true, reporter: silentReporter }), refusedWith(/leads outside .* through a symbolic link/), db);
    }
    assert.deepEqual(spawnSync("ls", ["-A", outside], { encoding: "utf8" }).stdout, "");
    // A symlink that stays inside the tree is fine.
    mkdirSync(path.join(dir, "real"));
    symlinkSync(path.join(dir, "real"), path.join(dir, "alias"));
    const config = parseConfig(`db = "alias/env.db"\n[mcp.a]\nurl = "https://a.example/mcp"\n`, { path: path.join(dir, "substructure.toml"), cwd: dir });
    (await openEnvironmentStore(config, { create: true, reporter: silentReporter }))!.store.close();
    assert.ok(lstatSync(path.join(dir, "real", "env.db")).isFile());
  });
});

describe("the db is a regular file of this user's, SQLite or absent", () => {
  test("a symlink to another project's db is refused, by every command: that db's credentials are neither purged nor revoked", async () => {
    const other = tempDir();
    const otherDb = path.join(other, "substructure.db");
    await seedCredentials(otherDb, [{ id: "theirs", url: "https://theirs.example/mcp" }]);
    const before = readFileSync(otherDb);
    const dir = tempDir();
    writeFileSync(path.join(dir, "substructure.toml"), '[mcp.mine]\nurl = "https://mine.example/mcp"\n');
    symlinkSync(otherDb, path.join(dir, "substructure.db"));
    for (const argv of [["apply"], ["mcp", "list", "--json"], ["mcp", "login", "mine"]]) {
      const result = await runInProcess(argv, { cwd: dir });
      assert.equal(result.code, 2, `${argv.join(" ")}: ${result.stderr}`);
      assert.match(result.stderr, /substructure\.db is a symbolic link; subs never follows one/);
      assert.doesNotMatch(result.stderr, NO_STACK);
      if (argv.includes("--json")) assert.equal(JSON.parse(result.stdout).error.code, "unsafe_db");
    }
    assert.deepEqual(readFileSync(otherDb), before);
    assert.deepEqual(rows(otherDb), ["theirs"]);
  });

  test("a dangling symlink is refused, never followed: its target is not created", async () => {
    const dir = tempDir();
    const target = path.join(tempDir(), "created-by-sqlite.db");
    const dbPath = path.join(dir, "substructure.db");
    symlinkSync(target, dbPath);
    await assert.rejects(openStore({ dbPath, create: true }), refusedWith(/is a symbolic link/));
    await assert.rejects(openStore({ dbPath, create: false }), refusedWith(/is a symbolic link/), "a reading command does not take it for 'no db'");
    writeFileSync(path.join(dir, "substructure.toml"), '[mcp.a]\nurl = "https://a.example/mcp"\n');
    const result = await runInProcess(["apply"], { cwd: dir });
    assert.equal(result.code, 2, result.stderr);
    assert.equal(existsSync(target), false);
    assert.ok(lstatSync(dbPath).isSymbolicLink(), "left as it was");
  });

  test("an existing 0644 db is made 0600, with a warning on stderr; the command goes on", async () => {
    const dir = tempDir();
    writeFileSync(path.join(dir, "substructure.toml"), '[mcp.a]\nurl = "https://a.example/mcp"\n');
    const dbPath = path.join(dir, "substructure.db");
    await seedCredentials(dbPath, [{ id: "a", url: "https://a.example/mcp" }]);
    chmodSync(dbPath, 0o644);
    const result = await runCli(["mcp", "list", "--json"], { cwd: dir });
    assert.equal(result.code, 0, result.stderr);
    assert.match(result.stderr, /substructure\.db could be read or written by other users \(mode 0644\); made it 0600/);
    assert.equal(JSON.parse(result.stdout)[0].status, "authorized");
    assert.equal(mode(dbPath), 0o600);
    const again = await runCli(["mcp", "list", "--json"], { cwd: dir });
    assert.equal(again.stderr, "", "warned once: it is private now");
  });

  test("a -wal or -shm others can read is made 0600 with a warning too", async () => {
    const dbPath = path.join(tempDir(), "substructure.db");
    await seedCredentials(dbPath, []);
    for (const suffix of ["-wal", "-shm"]) {
      writeFileSync(dbPath + suffix, "", { mode: 0o666 });
      chmodSync(dbPath + suffix, 0o666);
      const opened = (await openStore({ dbPath, create: false }))!;
      assert.equal(mode(dbPath + suffix), 0o600, suffix);
      assert.deepEqual(opened.warnings, [`substructure.db${suffix} could be read or written by other users (mode 0666); made it 0600. What it held may have been read: log in again to replace those credentials`]);
      opened.store.close();
    }
  });

  test("a db others can read that cannot be made private (read-only filesystem) is refused", async (t) => {
    const dir = tempDir();
    if (spawnSync("mount", ["-t", "tmpfs", "-o", "size=2048k", "tmpfs", dir]).status !== 0) {
      t.diagnostic("mount not permitted here: the fix-with-warning case above still runs");
      return;
    }
    after(() => spawnSync("umount", ["-l", dir]));
    const dbPath = path.join(dir, "substructure.db");
    await seedCredentials(dbPath, [{ id: "a", url: "https://a.example/mcp" }]);
    chmodSync(dbPath, 0o644);
    assert.equal(spawnSync("mount", ["-o", "remount,ro", dir]).status, 0);
    await assert.rejects(openStore({ dbPath, create: false }), refusedWith(/can be read or written by other users \(mode 0644\) and cannot be made private \(EROFS\)/));
  });

  test("a -wal hard link another user pre-created (nlink 2) is refused: no token is written to it", async () => {
    const dir = tempDir();
    const dbPath = path.join(dir, "substructure.db");
    await seedCredentials(dbPath, []);
    const attacker = path.join(tempDir(), "collect");
    writeFileSync(attacker, "", { mode: 0o666 });
    linkSync(attacker, dbPath + "-wal");
    assert.equal(statSync(dbPath + "-wal").nlink, 2);
    await assert.rejects(seedCredentials(dbPath, [{ id: "a", url: "https://a.example/mcp" }]), refusedWith(/substructure\.db-wal has 2 names \(hard links\)/));
    writeFileSync(path.join(dir, "substructure.toml"), '[mcp.a]\nurl = "https://a.example/mcp"\n');
    const result = await runInProcess(["mcp", "list"], { cwd: dir });
    assert.equal(result.code, 2, result.stderr);
    assert.match(result.stderr, /substructure\.db-wal has 2 names/);
    assert.equal(statSync(attacker).size, 0, "nothing written to the attacker's file");

    // Owned by the other user, without the second link: refused all the same.
    const dir2 = tempDir();
    const db2 = path.join(dir2, "substructure.db");
    await seedCredentials(db2, []);
    writeFileSync(db2 + "-wal", "", { mode: 0o600 });
    chownSync(db2 + "-wal", 65534, 65534);
    await assert.rejects(seedCredentials(db2, [{ id: "a", url: "https://a.example/mcp" }]), refusedWith(/substructure\.db-wal belongs to another user \(uid 65534\)/));
    assert.equal(statSync(db2 + "-wal").size, 0);

    // A symlinked -shm is refused too.
    const dir3 = tempDir();
    const db3 = path.join(dir3, "substructure.db");
    await seedCredentials(db3, []);
    const shmTarget = path.join(tempDir(), "shm");
    symlinkSync(shmTarget, db3 + "-shm");
    await assert.rejects(openStore({ dbPath: db3, create: false }), refusedWith(/substructure\.db-shm is a symbolic link/));
    assert.equal(existsSync(shmTarget), false);
  });

  test("a db owned by another user is refused, and left as it is", async () => {
    const dir = tempDir();
    writeFileSync(path.join(dir, "substructure.toml"), '[mcp.a]\nurl = "https://a.example/mcp"\n');
    const dbPath = path.join(dir, "substructure.db");
    await seedCredentials(dbPath, [{ id: "a", url: "https://a.example/mcp" }, { id: "gone", url: "https://gone.example/mcp" }]);
    chownSync(dbPath, 65534, 65534);
    assert.equal(statSync(dbPath).uid, 65534, "chown works here");
    const result = await runInProcess(["apply"], { cwd: dir });
    assert.equal(result.code, 2, result.stderr);
    assert.match(result.stderr, /substructure\.db belongs to another user \(uid 65534\); the db and its files must be yours/);
    assert.doesNotMatch(result.stderr, NO_STACK);
    assert.deepEqual(rows(dbPath), ["a", "gone"], "nothing purged");
  });

  test("a db with a second name (hard link) is refused", async () => {
    const dir = tempDir();
    const dbPath = path.join(dir, "substructure.db");
    await seedCredentials(dbPath, []);
    linkSync(dbPath, path.join(tempDir(), "copy.db"));
    await assert.rejects(openStore({ dbPath, create: true }), refusedWith(/substructure\.db has 2 names/));
  });

  test("a file that is not SQLite at the db path is refused with a clear message and not overwritten", async () => {
    const dir = tempDir();
    writeFileSync(path.join(dir, "substructure.toml"), '[mcp.a]\nurl = "https://a.example/mcp"\n');
    const dbPath = path.join(dir, "substructure.db");
    const text = "ssh-ed25519 AAAA user@host\n";
    writeFileSync(dbPath, text, { mode: 0o600 });
    for (const argv of [["mcp", "list"], ["mcp", "login", "a"]]) {
      const result = await runInProcess(argv, { cwd: dir });
      assert.equal(result.code, 1, result.stderr);
      assert.match(result.stderr, /substructure\.db is not a valid database \(not a SQLite file\); subs left it as it is/);
      assert.match(result.stderr, /move .*substructure\.db aside/);
    }
    assert.equal(readFileSync(dbPath, "utf8"), text);
    assert.equal(existsSync(dbPath + "-wal"), false);
  });

  test("a FIFO or a directory at the db path is refused at once, never waited on", async () => {
    const dir = tempDir();
    const fifo = path.join(dir, "fifo.db");
    assert.equal(spawnSync("mkfifo", [fifo]).status, 0);
    await assert.rejects(openStore({ dbPath: fifo, create: true }), refusedWith(/fifo\.db is not a regular file/));
    mkdirSync(path.join(dir, "dir.db"));
    await assert.rejects(openStore({ dbPath: path.join(dir, "dir.db"), create: true }), refusedWith(/dir\.db is not a regular file/));
  });

  test("an empty file at the db path (another subs just created it) is taken as a new db", async () => {
    const dbPath = path.join(tempDir(), "substructure.db");
    writeFileSync(dbPath, "", { mode: 0o600 });
    const opened = (await openStore({ dbPath, create: false }))!;
    assert.deepEqual(opened.store.listCredentials(), []);
    assert.deepEqual(opened.warnings, []);
    opened.store.close();
  });

  test("directories subs creates for the db are 0700", async () => {
    const dir = tempDir();
    const dbPath = path.join(dir, "a", "b", "substructure.db");
    (await openStore({ dbPath, create: true, root: dir }))!.store.close();
    assert.equal(mode(path.join(dir, "a")), 0o700);
    assert.equal(mode(path.join(dir, "a", "b")), 0o700);
    assert.equal(mode(dbPath), 0o600);
  });
});
