// The Postgres store's password, against this file's real Postgres (password authentication) and
// the real CLI: where it may come from (the URL, --store-password-file, $PGPASSWORD, a pgpass
// file), that a password on the command line is warned about at start (every local user reads
// /proc/<pid>/cmdline) while the variable form is not, that the pg client is handed the password
// subs resolved and looks for none of its own, and that no error shows any of a password, even
// of a URL that does not parse.
// `subs deployment serve` runs as the built CLI (bin/subs.cjs) in a child where the password is
// given on the command line (its warning) and in --store-password-file, as do the `deployment token
// list` of the command-line warning and the one refusing a password file others may read; the
// other serves and token commands run the same `run()` in this process, where what is checked is
// what they print, the listening line and their exit code, not the process (a child costs a Node
// start-up and the bundle's load, about half a second of CPU each). Every place a password may come
// from resolves in one function (postgresPassword, src/deployment/config.ts), for the server as for
// the token commands, reading the run's environment (ctx.env), which in this process is the test's.
import assert from "node:assert/strict";
import { chmodSync, chownSync, existsSync, mkdtempSync, rmSync, statSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { after, describe, test } from "node:test";
import { redactPostgresUrl } from "../../src/deployment/config.ts";
import { pgpassPassword } from "../../src/deployment/pgpass.ts";
import { runCli, runInProcess, type How } from "../support/cli.ts";
import { postgresForThisFile } from "../support/postgres.ts";
import { serveOnce } from "../support/serve-once.ts";
import { waitFor } from "../support/wait.ts";

const postgres = postgresForThisFile();
const dirs: string[] = [];
after(() => dirs.forEach((d) => rmSync(d, { recursive: true, force: true })));
const tempDir = () => {
  const dir = mkdtempSync(path.join(tmpdir(), "subs-store-password-"));
  dirs.push(dir);
  return dir;
};

/** A new database: its URL with the password, the same without it, and the password. */
async function database() {
  const pg = await postgres();
  const withPassword = await pg.database();
  const url = new URL(withPassword);
  url.password = "";
  return { withPassword, without: url.href, password: pg.password, port: url.port, name: url.pathname.slice(1) };
}

/** `subs deployment serve` with this test's key file, until it listens or exits: in this process unless `how` is "cli". */
const serve = (args: string[], options: { cwd: string; env?: Record<string, string>; how?: How }) => serveOnce(["--key-file", "deployment.key", ...args], { how: "in-process", ...options });

const WARNING = /subs: warning: --store holds the database password, which every user of this machine can read in the process list \(\/proc\/<pid>\/cmdline\) while subs runs: give it in --store-password-file FILE \(mode 0600\), \$PGPASSWORD or a pgpass file instead, or the whole URL in \$SUBS_DEPLOYMENT_STORE/;

describe("the Postgres store's password", () => {
  test("given in --store on the command line: a warning at start, naming what to use instead, and never the password; in $SUBS_DEPLOYMENT_STORE: no warning", async () => {
    const db = await database();
    const cwd = tempDir();
    const flagged = await serve(["--store", db.withPassword], { cwd, how: "cli" });
    assert.equal(flagged.code, 0, flagged.stderr);
    assert.ok(flagged.listening, "it still starts");
    assert.match(flagged.stderr, WARNING);
    assert.equal(flagged.listening!.store, `postgres://subs:***@127.0.0.1:${db.port}/${db.name}`);
    assert.ok(!(flagged.stdout + flagged.stderr).includes(db.password), "the password is printed nowhere");
    // The operator's other commands take the same --store: each warns the same way.
    const token = await runCli(["deployment", "token", "list", "--store", db.withPassword], { cwd });
    assert.equal(token.code, 0, token.stderr);
    assert.match(token.stderr, WARNING);

    const fromEnv = await serve([], { cwd, env: { SUBS_DEPLOYMENT_STORE: db.withPassword } });
    assert.equal(fromEnv.code, 0, fromEnv.stderr);
    assert.ok(fromEnv.listening);
    assert.doesNotMatch(fromEnv.stderr, /warning/);
  });

  test("from --store-password-file (0600), $PGPASSWORD or a pgpass file ($PGPASSFILE, ~/.pgpass): the deployment connects, with no warning and the password nowhere in its output", async () => {
    const db = await database();
    const cwd = tempDir();
    writeFileSync(path.join(cwd, "store-password"), `${db.password}\n`, { mode: 0o600 });
    const pgpass = `# host:port:database:user:password\n127.0.0.1:${db.port}:other_db:subs:wrong\n127.0.0.1:${db.port}:*:subs:${db.password}\n`;
    writeFileSync(path.join(cwd, "pgpass"), pgpass, { mode: 0o600 });
    const runs: Array<[string, string[], Record<string, string>, How]> = [
      ["--store-password-file", ["--store", db.without, "--store-password-file", "store-password"], {}, "cli"],
      ["$SUBS_DEPLOYMENT_STORE_PASSWORD_FILE", [], { SUBS_DEPLOYMENT_STORE: db.without, SUBS_DEPLOYMENT_STORE_PASSWORD_FILE: path.join(cwd, "store-password") }, "in-process"],
      ["$PGPASSWORD", ["--store", db.without], { PGPASSWORD: db.password }, "in-process"],
      ["$PGPASSFILE", ["--store", db.without], { PGPASSFILE: "pgpass" }, "in-process"],
    ];
    for (const [how, args, env, runAs] of runs) {
      const run = await serve(args, { cwd, env, how: runAs });
      assert.equal(run.code, 0, `${how}: ${run.stderr}`);
      assert.ok(run.listening, `${how}: it connected to the store and listened`);
      assert.equal(run.listening!.store, `postgres://subs@127.0.0.1:${db.port}/${db.name}`, how);
      assert.doesNotMatch(run.stderr, /warning/, how);
      assert.ok(!(run.stdout + run.stderr).includes(db.password), `${how}: the password is printed nowhere`);
    }
    // ~/.pgpass, as libpq reads it when nothing else gives a password.
    writeFileSync(path.join(cwd, ".pgpass"), pgpass, { mode: 0o600 });
    const home = await serve(["--store", db.without], { cwd, env: { HOME: cwd } });
    assert.equal(home.code, 0, home.stderr);
    assert.ok(home.listening);
  });

  test("the pg client is handed the password subs read from its own environment, and looks in none of its own (process.env, ~/.pgpass)", async () => {
    const db = await database();
    const cwd = tempDir();
    // In process: the run's environment (ctx.env) holds PGPASSWORD; this process's does not.
    assert.equal(process.env.PGPASSWORD, undefined);
    // A store the server made: the token commands make none.
    assert.equal((await serve(["--store", db.withPassword], { cwd })).code, 0);
    const given = await runInProcess(["deployment", "token", "create", "--name", "ci", "--role", "read", "--store", db.without], { cwd, env: { PGPASSWORD: db.password } });
    assert.equal(given.code, 0, given.stderr);
    assert.match(given.stdout, /^subsd_/);
    // None anywhere: refused at once, saying where one may be given.
    const none = await runInProcess(["deployment", "token", "list", "--store", db.without], { cwd, env: { HOME: cwd } });
    assert.equal(none.code, 2, none.stderr);
    assert.match(none.stderr, new RegExp(`the Postgres store postgres://subs@127\\.0\\.0\\.1:${db.port}/${db.name} asks for a password, and none is given`));
    assert.match(none.stderr, /--store-password-file FILE \(mode 0600\), \$PGPASSWORD or a pgpass file/);
    // And the half-made connection is closed: pg leaves it open after such a refusal, and the server
    // would hold it for its authentication_timeout (60 s), in a long-running caller as here.
    const refusedAt = Date.now();
    const halfMade = async () => {
      const [row] = await (await postgres()).query<{ n: number }>(db.withPassword, "SELECT count(*)::int AS n FROM pg_stat_activity WHERE state = 'starting' AND backend_start <= to_timestamp($1 / 1000.0)", [refusedAt]);
      return row!.n === 0;
    };
    await waitFor(halfMade, "the server to have no connection still starting from before the refusal", 10_000);
  });

  test("a wrong password is refused (exit 2), the hint naming where it came from; the password given twice is a usage error", async () => {
    const db = await database();
    const cwd = tempDir();
    writeFileSync(path.join(cwd, "store-password"), "not-the-password-4711\n", { mode: 0o600 });
    const wrong = await runInProcess(["deployment", "token", "list", "--store", db.without, "--store-password-file", "store-password"], { cwd, env: { HOME: cwd } });
    assert.equal(wrong.code, 2, wrong.stderr);
    assert.match(wrong.stderr, /refused the connection/);
    assert.match(wrong.stderr, /check the user, password \(from --store-password-file store-password\) and database of the store/);
    assert.ok(!wrong.stderr.includes("not-the-password-4711"));
    const twice = await runInProcess(["deployment", "token", "list", "--store-password-file", "store-password"], { cwd, env: { HOME: cwd, SUBS_DEPLOYMENT_STORE: db.withPassword } });
    assert.equal(twice.code, 2);
    assert.match(twice.stderr, /the store's password is given twice, in \$SUBS_DEPLOYMENT_STORE and in --store-password-file/);
    assert.ok(!twice.stderr.includes(db.password));
    const noPostgres = await runInProcess(["deployment", "token", "list", "--store", "data", "--store-password-file", "store-password"], { cwd, env: { HOME: cwd } });
    assert.equal(noPostgres.code, 2);
    assert.match(noPostgres.stderr, /--store-password-file is the password of a Postgres store/);
  });

  test("a password file others may read, or of another user, is refused before anything is sent; an open ~/.pgpass is not used, with a warning", async () => {
    const db = await database();
    const cwd = tempDir();
    const file = path.join(cwd, "store-password");
    writeFileSync(file, `${db.password}\n`);
    chmodSync(file, 0o644);
    const open = await runCli(["deployment", "token", "list", "--store", db.without, "--store-password-file", "store-password"], { cwd });
    assert.equal(open.code, 2, open.stderr);
    assert.match(open.stderr, /--store-password-file store-password: others may read it \(mode 0644\)/);
    assert.match(open.stderr, /`chmod 600 store-password`; what it holds may have been copied: change the database user's password/);
    assert.ok(!open.stderr.includes(db.password));

    chmodSync(file, 0o600);
    chownSync(file, 65534, 65534);
    assert.equal(statSync(file).uid, 65534, "chown works here");
    const foreign = await runInProcess(["deployment", "token", "list", "--store", db.without, "--store-password-file", "store-password"], { cwd, env: { HOME: cwd } });
    assert.equal(foreign.code, 2, foreign.stderr);
    assert.match(foreign.stderr, /--store-password-file store-password: belongs to another user \(uid 65534\), not to the user subs runs as \(uid 0\)/);
    assert.match(foreign.stderr, /`chown 0 store-password`/);

    writeFileSync(path.join(cwd, "pgpass"), `*:*:*:*:${db.password}\n`);
    chmodSync(path.join(cwd, "pgpass"), 0o640);
    const named = await runInProcess(["deployment", "token", "list", "--store", db.without], { cwd, env: { HOME: cwd, PGPASSFILE: "pgpass" } });
    assert.equal(named.code, 2);
    assert.match(named.stderr, /\$PGPASSFILE pgpass: others may read it \(mode 0640\)/);
    // libpq's rule for the file nobody named: ignored, with a warning (then no password at all).
    writeFileSync(path.join(cwd, ".pgpass"), `*:*:*:*:${db.password}\n`);
    chmodSync(path.join(cwd, ".pgpass"), 0o644);
    const home = await runInProcess(["deployment", "token", "list", "--store", db.without], { cwd, env: { HOME: cwd } });
    assert.equal(home.code, 2);
    assert.match(home.stderr, new RegExp(`subs: warning: the pgpass file ${cwd.replace(/[.*+?^${}()|[\]\\]/g, "\\$&")}/\\.pgpass: others may read it \\(mode 0644\\).*; not used`));
    assert.match(home.stderr, /asks for a password, and none is given/);
    assert.ok(!home.stderr.includes(db.password));
  });

  test("a URL that does not parse, or whose password spilt past the host, is shown as postgres://*** in the error the CLI prints", async () => {
    const cwd = tempDir();
    const cases = [
      // An unencoded `@`, `:` and `/` in the password: no URL at all.
      ["postgres://subs:p@ss:w/rd@db.internal:5432/subs", ["ss:w", "w/rd", "p@ss"]],
      // `12/ss`: the authority ends at the `/`, so `subs:12` reads as host and port, the rest as the path.
      ["postgres://subs:12/ss@db.internal:5432/subs", ["12/ss", "ss@db"]],
      // A `#` in it.
      ["postgresql://subs:pa#ss@db.internal/subs", ["pa#ss", "#ss"]],
    ] as const;
    for (const [url, fragments] of cases) {
      for (const [args, env, where] of [
        [["--store", url], {}, "--store"],
        [[], { SUBS_DEPLOYMENT_STORE: url }, "$SUBS_DEPLOYMENT_STORE"],
      ] as const) {
        const result = await runInProcess(["deployment", "token", "list", ...args], { cwd, env: { HOME: cwd, ...env } });
        assert.equal(result.code, 2, result.stderr);
        assert.ok(result.stderr.includes(`${where} "${url.startsWith("postgresql") ? "postgresql" : "postgres"}://***": `), `${url}: ${result.stderr}`);
        for (const fragment of fragments) assert.ok(!result.stderr.includes(fragment), `${url}: ${fragment} shown in ${result.stderr}`);
      }
    }
    // A password that ran past the host is named as such, with the encoding to use.
    const spilt = await runInProcess(["deployment", "token", "list", "--store", "postgres://subs:12/db?x@db.internal/subs"], { cwd, env: { HOME: cwd } });
    assert.equal(spilt.code, 2);
    assert.match(spilt.stderr, /--store "postgres:\/\/\*\*\*": has an `@` after the host: percent-encode `@`, `\/`, `\?` and `#` in the password/);
    assert.equal(existsSync(path.join(cwd, "subs-deployment")), false, "no store was made");
  });

  test("redaction: the password in the user info or any password parameter; anything ambiguous whole after the scheme", () => {
    assert.equal(redactPostgresUrl("postgres://subs:Hunter2@db:5432/subs"), "postgres://subs:***@db:5432/subs");
    assert.equal(redactPostgresUrl("postgres://subs@db/subs?password=Hunter2&sslpassword=Key-pass&sslmode=require"), "postgres://subs@db/subs?password=***&sslpassword=***&sslmode=require");
    assert.equal(redactPostgresUrl("postgres://subs:p@ss:w/rd@db:5432/subs"), "postgres://***");
    assert.equal(redactPostgresUrl("postgres://subs:12/ss@db/subs"), "postgres://***");
    assert.equal(redactPostgresUrl("postgres://subs:12/db?x@y"), "postgres://***");
    assert.equal(redactPostgresUrl("POSTGRESQL://subs:x@[db/subs"), "POSTGRESQL://***");
    assert.equal(redactPostgresUrl("postgres://subs@db/subs"), "postgres://subs@db/subs");
  });

  test("pgpass lines: wildcards, escaped `:` and `\\`, comments, the first match wins", () => {
    const target = { host: "db", port: "5432", database: "subs", user: "subs" };
    assert.equal(pgpassPassword("# comment\ndb:5432:other:subs:no\ndb:*:subs:subs:a\\:b\\\\c\n*:*:*:*:later\n", target), "a:b\\c");
    assert.equal(pgpassPassword("db\\:x:5432:subs:subs:no\n", target), undefined);
    assert.equal(pgpassPassword("db:5433:subs:subs:no\n", target), undefined);
    assert.equal(pgpassPassword("*:*:*:*:any\n", target), "any");
    assert.equal(pgpassPassword("db:5432:subs\n", target), undefined, "a short line is not a match");
  });
});
