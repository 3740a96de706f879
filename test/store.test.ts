import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { existsSync, mkdtempSync, statSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { test } from "node:test";
import Database from "better-sqlite3";
import { parseConfig } from "../src/config/load.ts";
import { exitCodeFor, SubsError } from "../src/errors.ts";
import { silentReporter } from "../src/report.ts";
import { openEnvironmentStore, storedRows, undeclaredCredentials } from "../src/store/environment.ts";
import { checkedCredentialRow, checkedLostCredentialRow, checkedOpenConnectionRow } from "../src/store/row-check.ts";
import { credentialRowSchema, lostCredentialRowSchema, MIGRATIONS, openConnectionRowSchema } from "../src/store/schema.ts";
import { openStore } from "../src/store/store.ts";
import { seedCredentials } from "./support/credentials.ts";
import { picker, prng } from "./support/prng.ts";

const tempDir = () => mkdtempSync(path.join(tmpdir(), "subs-store-"));
const mode = (file: string) => statSync(file).mode & 0o777;

test("a new db is 0600, in WAL mode, with its schema version; its WAL files are 0600 too", async () => {
  const dbPath = path.join(tempDir(), "nested", "substructure.db");
  await seedCredentials(dbPath, [{ id: "sentry", url: "https://mcp.sentry.dev/mcp" }]);
  assert.equal(mode(dbPath), 0o600);
  const db = new Database(dbPath);
  assert.equal(db.pragma("journal_mode", { simple: true }), "wal");
  assert.equal((db.prepare("SELECT version FROM subs_schema").get() as { version: number }).version, MIGRATIONS.length);
  for (const suffix of ["-wal", "-shm"]) if (existsSync(dbPath + suffix)) assert.equal(mode(dbPath + suffix), 0o600, suffix);
  db.close();
});

test("reading commands never create a db", async () => {
  const dbPath = path.join(tempDir(), "substructure.db");
  assert.equal(await openStore({ dbPath, create: false }), undefined);
  assert.equal(existsSync(dbPath), false);
});

test("subs keeps to its own tables: the engine's tables survive and migrations run once", async () => {
  const dbPath = path.join(tempDir(), "substructure.db");
  const engine = new Database(dbPath);
  engine.exec("CREATE TABLE sessions (id TEXT); INSERT INTO sessions VALUES ('s1')");
  engine.close();
  await seedCredentials(dbPath, [{ id: "a", url: "https://a.example/mcp" }]);
  const again = await openStore({ dbPath, create: false });
  assert.ok(again);
  assert.equal(again.store.listCredentials().length, 1);
  again.store.close();
  const db = new Database(dbPath);
  assert.deepEqual(db.prepare("SELECT id FROM sessions").all(), [{ id: "s1" }]);
  const tables = (db.prepare("SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name").all() as { name: string }[]).map((t) => t.name);
  assert.deepEqual(tables, ["sessions", "subs_clients", "subs_credentials", "subs_lost_credentials", "subs_open_connections", "subs_refresh_leases", "subs_schema"]);
  db.close();
});

test("a db an earlier subs wrote (schema 1) is migrated in place: its credentials stay", async () => {
  const dbPath = path.join(tempDir(), "substructure.db");
  const old = new Database(dbPath);
  old.exec(MIGRATIONS[0]!);
  old.exec("CREATE TABLE subs_schema (version INTEGER NOT NULL); INSERT INTO subs_schema VALUES (1)");
  old
    .prepare("INSERT INTO subs_credentials VALUES ('a', 'https://a.example/mcp', 'https://as.example', NULL, '{\"client_id\":\"c\"}', 'at', 'Bearer', NULL, NULL, '', 1, 1)")
    .run();
  old.close();
  const opened = await openStore({ dbPath, create: false });
  assert.ok(opened);
  assert.deepEqual(opened.store.listCredentials().map((r) => [r.id, r.refresh_expires_at]), [["a", null]]);
  assert.deepEqual(opened.store.listOpenConnections(), []);
  assert.deepEqual(opened.store.listLostCredentials(), []);
  opened.store.close();
  const db = new Database(dbPath);
  assert.equal((db.prepare("SELECT version FROM subs_schema").get() as { version: number }).version, MIGRATIONS.length);
  db.close();
});

test("a credential and a finding that the server needs none exclude each other; a corrupt finding is an error", async () => {
  const dbPath = path.join(tempDir(), "substructure.db");
  await seedCredentials(dbPath, [{ id: "a", url: "https://a.example/mcp" }]);
  const opened = (await openStore({ dbPath, create: false }))!;
  const credential = opened.store.getCredential("a")!;
  opened.store.putOpenConnection({ id: "a", url: "https://a.example/mcp", checked_at: 1 });
  assert.equal(opened.store.getCredential("a"), undefined);
  assert.deepEqual(opened.store.listOpenConnections(), [{ id: "a", url: "https://a.example/mcp", checked_at: 1 }]);
  opened.store.putCredential(credential);
  assert.deepEqual(opened.store.listOpenConnections(), []);
  opened.store.putOpenConnection({ id: "b", url: "https://b.example/mcp", checked_at: 1 });
  opened.store.deleteCredentials(["b"]);
  assert.equal(opened.store.getOpenConnection("b"), undefined);
  opened.store.close();
  const db = new Database(dbPath);
  db.prepare("INSERT INTO subs_open_connections VALUES ('c', '', 1)").run();
  db.close();
  const again = (await openStore({ dbPath, create: false }))!;
  assert.throws(() => again.store.listOpenConnections(), /what is stored for 'c' is corrupt/);
  again.store.close();
});

test("a lost credential leaves its reason until a login replaces it or the id is deleted; a corrupt record is an error", async () => {
  const dbPath = path.join(tempDir(), "substructure.db");
  await seedCredentials(dbPath, [
    { id: "a", url: "https://a.example/mcp", refresh_expires_at: 1_800_000_000_000 },
    { id: "b", url: "https://b.example/mcp" },
  ]);
  const opened = (await openStore({ dbPath, create: false }))!;
  const credential = opened.store.getCredential("a")!;
  assert.equal(credential.refresh_expires_at, 1_800_000_000_000);
  const record = { id: "a", url: "https://a.example/mcp", reason: "refresh_rejected", message: "invalid_grant: expired", lost_at: 5 };
  opened.store.loseCredential(record);
  assert.equal(opened.store.getCredential("a"), undefined);
  assert.deepEqual(opened.store.listLostCredentials(), [record]);
  opened.store.putCredential(credential);
  assert.deepEqual(opened.store.listLostCredentials(), [], "a login clears it");
  opened.store.loseCredential({ ...record, id: "b", url: "https://b.example/mcp" });
  opened.store.deleteCredentials(["b"]);
  assert.deepEqual(opened.store.listLostCredentials(), [], "apply's deletion clears it");
  opened.store.loseCredential(record);
  opened.store.close();
  const db = new Database(dbPath);
  db.prepare("UPDATE subs_lost_credentials SET url = ''").run();
  db.close();
  const again = (await openStore({ dbPath, create: false, readsOnly: true }))!;
  assert.throws(() => again.store.listLostCredentials(), /lost credential of 'a' is corrupt/);
  again.store.close();
});

test("a corrupt row is an error naming the connection, not 'logged out'", async () => {
  const dbPath = path.join(tempDir(), "substructure.db");
  await seedCredentials(dbPath, [{ id: "sentry", url: "https://mcp.sentry.dev/mcp" }]);
  const db = new Database(dbPath);
  db.prepare("UPDATE subs_credentials SET access_token = '' WHERE id = 'sentry'").run();
  db.close();
  const opened = await openStore({ dbPath, create: false });
  assert.throws(
    () => opened!.store.listCredentials(),
    (error: unknown) => error instanceof SubsError && exitCodeFor(error) === 1 && /'sentry' is corrupt/.test(error.message) && /subs mcp login sentry/.test(error.hint ?? ""),
  );
  opened!.store.close();
});

// A listing checks its rows by hand (store/row-check.ts): it must accept and refuse exactly what
// the schema does.
test("a long list reads every row as the schema parses it, and a corrupt row in it is still an error naming it", async () => {
  const dbPath = path.join(tempDir(), "substructure.db");
  const ids = Array.from({ length: 250 }, (_, i) => `c${String(i).padStart(3, "0")}`);
  await seedCredentials(dbPath, ids.map((id, i) => ({ id, url: `https://s${id}.example/mcp`, ...(i % 2 ? { refresh_token: null, expires_at: null } : {}) })));
  const opened = await openStore({ dbPath, create: false });
  const rows = opened!.store.listCredentials();
  assert.deepEqual(rows.map((r) => r.id), ids);
  const db = new Database(dbPath);
  assert.deepEqual(rows, (db.prepare("SELECT * FROM subs_credentials ORDER BY id").all() as unknown[]).map((r) => credentialRowSchema().parse(r)));
  for (const [column, value] of [["access_token", "''"], ["client_json", "'x'"], ["url", "''"], ["refresh_token", "''"]] as const) {
    db.prepare(`UPDATE subs_credentials SET ${column} = ${value} WHERE id = 'c077'`).run();
    assert.throws(
      () => opened!.store.listCredentials(),
      (error: unknown) => error instanceof SubsError && /'c077' is corrupt/.test(error.message) && /subs mcp login c077/.test(error.hint ?? ""),
      column,
    );
    db.prepare(`UPDATE subs_credentials SET ${column} = ? WHERE id = 'c077'`).run(rows[77]![column]);
  }
  assert.deepEqual(opened!.store.listCredentials(), rows);
  db.close();
  opened!.store.close();
});

// The hand-written row checks a listing runs (store/row-check.ts) against the schemas they stand in
// for: every column given values of every type and edge (a fixed seed), each row must be accepted
// exactly when the schema accepts it, as the same object (its keys, in its order, and no others).
test("the row checks answer as the schemas do (seed 0x5707e, 20000 rows of each kind)", () => {
  const p = picker(prng(0x5707e));
  const values = [
    "", "x", "{}", "ab", "Bearer", "read write", "\u0000", 0, 1, -1, 1.5, 2 ** 53, 2 ** 53 - 1, -(2 ** 53), Number.NaN, Number.POSITIVE_INFINITY,
    null, undefined, true, 0n, [], {}, new Date(0), Buffer.from("x"),
  ];
  const credential = {
    id: "c1", url: "https://s.example/mcp", issuer: "https://auth.example", resource: null, client_json: '{"client_id":"a"}', access_token: "at",
    token_type: "Bearer", refresh_token: "rt", expires_at: 1_700_000_000_000, refresh_expires_at: null, scopes: "", created_at: 1, updated_at: 2,
  };
  const open = { id: "c1", url: "https://s.example/mcp", checked_at: 1 };
  const lost = { id: "c1", url: "https://s.example/mcp", reason: "refresh_rejected", message: "invalid_grant: expired", lost_at: 1 };
  for (const [base, check, schema] of [
    [credential, checkedCredentialRow, credentialRowSchema()],
    [open, checkedOpenConnectionRow, openConnectionRowSchema()],
    [lost, checkedLostCredentialRow, lostCredentialRowSchema()],
  ] as const) {
    const counts = { accepted: 0, refused: 0 };
    for (let n = 0; n < 20_000; n++) {
      const row: Record<string, unknown> = { ...base };
      for (let k = p.int(3); k > 0; k--) {
        const key = p.pick([...Object.keys(base), "extra"]);
        if (p.chance(0.15)) delete row[key];
        else row[key] = p.pick(values);
      }
      const given = p.chance(0.01) ? p.pick([null, [], "row", 1]) : row;
      const expected = schema.safeParse(given);
      const got = check(given);
      const context = `row ${n}: ${JSON.stringify(given, (_, v) => (typeof v === "bigint" ? `${v}n` : v))}`;
      if (expected.success) {
        assert.deepStrictEqual(got, expected.data, context);
        assert.deepEqual(Object.keys(got!), Object.keys(expected.data), context);
        counts.accepted++;
      } else {
        assert.equal(got, undefined, context);
        counts.refused++;
      }
    }
    assert.ok(counts.accepted > 3000 && counts.refused > 3000, JSON.stringify(counts));
  }
});

test("a file that is not a database fails clearly", async () => {
  const dbPath = path.join(tempDir(), "substructure.db");
  writeFileSync(dbPath, "this is not sqlite at all, just text ".repeat(200));
  await assert.rejects(openStore({ dbPath, create: false }), (error: unknown) => error instanceof SubsError && /not a valid database/.test(error.message));
});

test("a db from a newer subs is refused, not downgraded", async () => {
  const dbPath = path.join(tempDir(), "substructure.db");
  await seedCredentials(dbPath, []);
  const db = new Database(dbPath);
  db.prepare("UPDATE subs_schema SET version = 99").run();
  db.close();
  await assert.rejects(openStore({ dbPath, create: false }), /newer subs/);
});

test("opening for a command deletes nothing: credentials and findings of ids the file no longer declares stay, silently", async () => {
  const dir = tempDir();
  const config = parseConfig('[mcp.kept]\nurl = "https://kept.example/mcp"\n', { path: path.join(dir, "substructure.toml"), cwd: dir });
  await seedCredentials(config.dbPath, [
    { id: "kept", url: "https://kept.example/mcp" },
    { id: "gone", url: "https://gone.example/mcp" },
  ]);
  const seeded = await openStore({ dbPath: config.dbPath, create: false });
  seeded!.store.putOpenConnection({ id: "gone-open", url: "https://open.example/mcp", checked_at: 1 });
  seeded!.store.close();
  const notices: string[] = [];
  const opened = await openEnvironmentStore(config, { create: false, reporter: { ...silentReporter, info: (m) => notices.push(m), warn: (m) => notices.push(m) } });
  assert.deepEqual(opened!.store.listCredentials().map((r) => r.id), ["gone", "kept"]);
  assert.deepEqual(opened!.store.listOpenConnections().map((r) => r.id), ["gone-open"]);
  assert.deepEqual(undeclaredCredentials(storedRows(opened!).credentials, config).map((r) => r.id), ["gone"]);
  opened!.store.close();
  assert.deepEqual(notices, []);
});

test("creating a db in a git work tree that does not ignore it warns; an ignored one does not", async () => {
  const repo = tempDir();
  spawnSync("git", ["init", "-q"], { cwd: repo });
  const config = parseConfig('[mcp.a]\nurl = "https://a.example/mcp"\n', { path: path.join(repo, "substructure.toml"), cwd: repo });
  const warnings: string[] = [];
  const reporter = { ...silentReporter, warn: (m: string) => warnings.push(m) };
  (await openEnvironmentStore(config, { create: true, reporter }))!.store.close();
  assert.deepEqual(warnings, ["substructure.db holds credentials and is not ignored by git: add `*.db*` to .gitignore"]);

  const ignoredRepo = tempDir();
  spawnSync("git", ["init", "-q"], { cwd: ignoredRepo });
  writeFileSync(path.join(ignoredRepo, ".gitignore"), "*.db*\n");
  const ignoredConfig = parseConfig('[mcp.a]\nurl = "https://a.example/mcp"\n', { path: path.join(ignoredRepo, "substructure.toml"), cwd: ignoredRepo });
  warnings.length = 0;
  (await openEnvironmentStore(ignoredConfig, { create: true, reporter }))!.store.close();
  assert.deepEqual(warnings, []);
});

test("deleteClient drops an issuer's registration only while it is still that client's", async () => {
  const dbPath = path.join(tempDir(), "substructure.db");
  const opened = await openStore({ dbPath, create: true });
  assert.ok(opened);
  const { store } = opened;
  try {
    store.putClient("https://as.example/", { client_id: "old", redirect_uris: ["http://127.0.0.1:5000/callback"] }, 1);
    store.putClient("https://other.example/", { client_id: "old" }, 1);
    // Another login replaced it meanwhile: the newer registration stays.
    store.putClient("https://as.example/", { client_id: "new", redirect_uris: ["http://127.0.0.1:6000/callback"] }, 2);
    assert.equal(store.deleteClient("https://as.example/", "old"), false);
    assert.equal(store.getClient("https://as.example/")?.client_id, "new");
    assert.equal(store.deleteClient("https://as.example/", "new"), true);
    assert.equal(store.getClient("https://as.example/"), undefined);
    assert.equal(store.getClient("https://other.example/")?.client_id, "old", "registrations are per issuer");
  } finally {
    store.close();
  }
});
