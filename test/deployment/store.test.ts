// The deployment's settings, its store, encryption at rest and API tokens: every store case runs
// on both stores, real SQLite files in temp dirs and a real Postgres (a database per test), with
// the real CLI in process for the operator's commands.
import assert from "node:assert/strict";
import { randomBytes } from "node:crypto";
import { mkdirSync, mkdtempSync, readFileSync, readdirSync, rmSync, statSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { after, describe, test } from "node:test";
import { authenticate, allows } from "../../src/deployment/access.ts";
import { deploymentConfig } from "../../src/deployment/config.ts";
import { newKeyText, parseKey } from "../../src/deployment/keys.ts";
import { openPostgresStore, PG_MIGRATIONS, REFRESH_LOCKS } from "../../src/deployment/store/postgres.ts";
import { MIGRATIONS, openSqliteStore } from "../../src/deployment/store/sqlite.ts";
import type { Key } from "../../src/deployment/keys.ts";
import type { CredentialRecord, RekeyableStore } from "../../src/deployment/store/types.ts";
import { redactPostgresUrl } from "../../src/deployment/config.ts";
import { digestOf } from "../../src/config/tool-lock.ts";
import Database from "better-sqlite3";
import pgClient from "pg";
import { runInProcess } from "../support/cli.ts";
import { postgresForThisFile } from "../support/postgres.ts";
import { within } from "../support/wait.ts";

const testPostgres = postgresForThisFile();
const dirs: string[] = [];
after(() => dirs.forEach((d) => rmSync(d, { recursive: true, force: true })));
const tempDir = () => {
  const dir = mkdtempSync(path.join(tmpdir(), "subs-deploy-"));
  dirs.push(dir);
  return dir;
};
const problem = (fn: () => unknown) => {
  try {
    fn();
  } catch (error) {
    return (error as Error).message;
  }
  assert.fail("expected a refusal");
};
/** Every file of the data directory, as bytes read as latin1 (the db, its -wal and -shm). */
const storeBytes = (dir: string) => readdirSync(dir).map((f) => readFileSync(path.join(dir, f)).toString("latin1")).join("\n");

describe("settings", () => {
  const ctx = { env: {}, cwd: "/srv" };
  test("flags and same-named variables; the flag wins; defaults", () => {
    const config = deploymentConfig({}, { env: { SUBS_DEPLOYMENT_LISTEN: "0.0.0.0:9000", SUBS_DEPLOYMENT_PUBLIC_URL: "https://subs.example.com/team/" }, cwd: "/srv" }, { serve: true });
    assert.deepEqual(config.listen, { host: "0.0.0.0", port: 9000 });
    assert.equal(config.publicUrl?.href, "https://subs.example.com/team");
    assert.equal(config.dbPath, "/srv/subs-deployment/deployment.db");
    const flagged = deploymentConfig({ listen: "8081", store: "data" }, { env: { SUBS_DEPLOYMENT_LISTEN: "0.0.0.0:9000" }, cwd: "/srv" }, { serve: true });
    assert.deepEqual(flagged.listen, { host: "127.0.0.1", port: 8081 });
    assert.equal(flagged.publicUrl, undefined);
    assert.equal(flagged.storeDir, "/srv/data");
  });

  test("a plain-http public URL off loopback is refused, naming where it came from; every problem at once", () => {
    assert.match(problem(() => deploymentConfig({ publicUrl: "http://subs.example.com" }, ctx, { serve: true })), /^--public-url "http:\/\/subs\.example\.com": must be https/);
    assert.match(
      problem(() => deploymentConfig({}, { env: { SUBS_DEPLOYMENT_PUBLIC_URL: "http://10.0.0.5:8080" }, cwd: "/" }, { serve: true })),
      /^\$SUBS_DEPLOYMENT_PUBLIC_URL "http:\/\/10\.0\.0\.5:8080": must be https/,
    );
    assert.equal(deploymentConfig({ publicUrl: "http://127.0.0.1:8080" }, ctx, { serve: true }).publicUrl?.origin, "http://127.0.0.1:8080");
    const both = problem(() => deploymentConfig({ listen: "host:99999", publicUrl: "ftp://x" }, ctx, { serve: true }));
    assert.match(both, /2 problems/);
    assert.match(both, /--listen "host:99999": must be PORT, HOST:PORT/);
    assert.match(both, /--public-url "ftp:\/\/x": must be https/);
    // On one line, numbered: an error's message is shown with its line breaks escaped (a literal \n).
    assert.match(both, /^the deployment's settings have 2 problems: \(1\) --listen "host:99999": .* \(2\) --public-url "ftp:\/\/x": /);
    assert.ok(!both.includes("\n"), "one line");
    assert.match(problem(() => deploymentConfig({ listen: "0.0.0.0:8080" }, ctx, { serve: true })), /--public-url is required when --listen 0\.0\.0\.0:8080 is not loopback/);
  });

  test("the catalog file: one URL per line, a bad line named by its number", () => {
    const dir = tempDir();
    writeFileSync(path.join(dir, "catalog"), "# allowed\nhttps://mcp.sentry.dev/mcp\n\nnot a url\n");
    assert.match(problem(() => deploymentConfig({ catalog: "catalog" }, { env: {}, cwd: dir }, { serve: true })), /catalog:4: "not a url" is not an http\(s\) URL/);
    writeFileSync(path.join(dir, "catalog"), "https://mcp.sentry.dev/mcp # sentry\nhttps://mcp.linear.app/mcp\n");
    assert.deepEqual(deploymentConfig({}, { env: { SUBS_DEPLOYMENT_CATALOG: "catalog" }, cwd: dir }, { serve: true }).catalog, ["https://mcp.sentry.dev/mcp", "https://mcp.linear.app/mcp"]);
  });

  test("a postgres:// store is a database, its password never shown; a bad one is refused where it came from; anything else stays a directory", () => {
    const config = deploymentConfig({}, { env: { SUBS_DEPLOYMENT_STORE: "postgres://subs:Hunter2-secret@db.internal:5433/subs" }, cwd: "/srv" }, { serve: true });
    assert.equal(config.postgres?.url, "postgres://subs:Hunter2-secret@db.internal:5433/subs");
    assert.equal(config.postgres?.redacted, "postgres://subs:***@db.internal:5433/subs");
    assert.equal(deploymentConfig({ store: "postgresql://u@h/d" }, ctx, { serve: false }).postgres?.redacted, "postgresql://u@h/d");
    assert.equal(deploymentConfig({ store: "pgdata" }, ctx, { serve: false }).postgres, undefined, "not a URL: the SQLite directory");
    assert.equal(deploymentConfig({ store: "pgdata" }, ctx, { serve: false }).storeDir, "/srv/pgdata");
    const noDb = problem(() => deploymentConfig({ store: "postgres://subs:Hunter2-secret@db.internal:5433" }, ctx, { serve: true }));
    assert.match(noDb, /^--store "postgres:\/\/subs:\*\*\*@db\.internal:5433": names no database/);
    const bad = problem(() => deploymentConfig({}, { env: { SUBS_DEPLOYMENT_STORE: "postgres://subs:Hunter2-secret@[nope/subs" }, cwd: "/" }, { serve: true }));
    assert.match(bad, /^\$SUBS_DEPLOYMENT_STORE "postgres:\/\/\*\*\*": not a URL/, "a URL that does not parse: nothing after the scheme");
    for (const message of [noDb, bad]) assert.doesNotMatch(message, /Hunter2/);
    assert.equal(redactPostgresUrl("postgres://a:b@h/d?password=zz"), "postgres://a:***@h/d?password=***");
  });
});

/** Each store, freshly made for one test: how to open it, what `--store` names it, and every byte it holds. */
type Kind = {
  name: "sqlite" | "postgres";
  fresh(): Promise<{
    cwd: string;
    storeArg: string;
    open(key: Key | undefined): Promise<RekeyableStore & { hasKeyCheck(): Promise<boolean> }>;
    /** Everything the store holds, as text: the files of the data directory, or every row of the database. */
    contents(): Promise<string>;
    /** How a refusal names the store. */
    named: RegExp;
    /** Runs one statement on the store's database, beside the store: what another process or a hand edit would do. */
    sql(statement: string, params?: unknown[]): Promise<void>;
    /** Takes the lock a refresh of credential `id` takes, from another process's session; `kill` ends that session as kill -9 would. */
    holdRefreshLock(id: string): Promise<{ kill(): void }>;
  }>;
};
const KINDS: Kind[] = [
  {
    name: "sqlite",
    fresh: async () => {
      const cwd = tempDir();
      const storeDir = path.join(cwd, "data");
      return {
        cwd,
        storeArg: "data",
        open: (key) => openSqliteStore({ storeDir, dbPath: path.join(storeDir, "deployment.db"), key }),
        contents: async () => storeBytes(storeDir),
        named: /deployment\.db/,
        sql: async (statement, params = []) => {
          const raw = new Database(path.join(storeDir, "deployment.db"));
          raw.prepare(statement).run(...params);
          raw.close();
        },
        // A lease that nobody renews: what a holder killed mid-refresh leaves. It runs out when the
        // test kills the holder (its end set to the past), not on a clock of its own, so the
        // exchange that follows can only start after the kill, however late a loaded machine runs
        // the test's timer.
        holdRefreshLock: async (id) => {
          const db = path.join(storeDir, "deployment.db");
          const raw = new Database(db);
          raw.prepare("INSERT INTO credential_leases (id, holder, until) VALUES (?, 'killed', ?)").run(id, Date.now() + 3_600_000);
          raw.close();
          return {
            kill: () => {
              const at = new Database(db);
              at.prepare("UPDATE credential_leases SET until = 0 WHERE id = ? AND holder = 'killed'").run(id);
              at.close();
            },
          };
        },
      };
    },
  },
  {
    name: "postgres",
    fresh: async () => {
      const pg = await testPostgres();
      const url = await pg.database();
      const redacted = redactPostgresUrl(url);
      return {
        cwd: tempDir(),
        storeArg: url,
        open: (key) => openPostgresStore({ url, redacted, key }),
        contents: () => pg.dump(url),
        named: new RegExp(redacted.replace(/[.*+?^${}()|[\]\\]/g, "\\$&")),
        sql: async (statement, params) => void (await pg.query(url, statement, params)),
        holdRefreshLock: async (id) => {
          const client = new pgClient.Client({ connectionString: url });
          client.on("error", () => {});
          await client.connect();
          await client.query("BEGIN");
          await client.query("SELECT pg_advisory_xact_lock($1, hashtext($2))", [REFRESH_LOCKS, id]);
          // The socket closed under it, as when its process is killed: no ROLLBACK is ever sent.
          return { kill: () => (client as unknown as { connection: { stream: { destroy(): void } } }).connection.stream.destroy() };
        },
      };
    },
  },
];

const credential = (id: string, url: string, person = "") => ({
  id,
  person,
  url,
  issuer: "https://auth.example",
  authorizedAt: 1,
  authorizedBy: "alice laptop",
  expiresAt: null,
  secret: { tokens: { access_token: `ACCESS-${id}-SECRET`, refresh_token: `REFRESH-${id}-SECRET`, token_type: "Bearer" }, client: { client_id: "c", client_secret: "CLIENT-SECRET" }, authorizationServerUrl: "https://auth.example" },
});

describe("the SQLite file", () => {
  test("made 0600 in a 0700 directory, WAL, schema version recorded", async () => {
    const storeDir = path.join(tempDir(), "data");
    const store = await openSqliteStore({ storeDir, dbPath: path.join(storeDir, "deployment.db"), key: parseKey(newKeyText(), "test") });
    await store.close();
    assert.equal(statSync(storeDir).mode & 0o777, 0o700);
    assert.equal(statSync(path.join(storeDir, "deployment.db")).mode & 0o777, 0o600);
    const { default: Database } = await import("better-sqlite3");
    const db = new Database(path.join(storeDir, "deployment.db"), { readonly: true });
    assert.equal(db.pragma("journal_mode", { simple: true }), "wal");
    assert.equal((db.prepare("SELECT version FROM schema_version").get() as { version: number }).version, MIGRATIONS.length);
    db.close();
  });
});

describe("the Postgres database", () => {
  test("three replicas opening an empty database at once: the migrations run once, under the advisory lock; each sees the final schema", async () => {
    const pg = await testPostgres();
    const url = await pg.database();
    const key = parseKey(newKeyText(), "test");
    const stores = await Promise.all([1, 2, 3].map(() => openPostgresStore({ url, redacted: redactPostgresUrl(url), key })));
    try {
      assert.deepEqual(stores.map((s) => s.migrationsRun).sort(), [0, 0, PG_MIGRATIONS.length]);
      assert.deepEqual(await pg.query(url, "SELECT version FROM schema_migrations ORDER BY version"), PG_MIGRATIONS.map((_, n) => ({ version: n + 1 })));
      for (const s of stores) assert.deepEqual(await s.listConnections(), []);
      assert.equal((await pg.query(url, "SELECT count(*)::int AS n FROM meta"))[0]!.n, 1, "one key check, though three replicas started with the key at once");
    } finally {
      await Promise.all(stores.map((s) => s.close()));
    }
    const later = await openPostgresStore({ url, redacted: redactPostgresUrl(url), key });
    assert.equal(later.migrationsRun, 0);
    await later.close();
  });

  test("a connection the server ends while a transaction holds it between statements (a refresh's exchange) fails that refresh as the store not answering, and the process lives on", async () => {
    const pg = await testPostgres();
    const url = await pg.database();
    const store = await openPostgresStore({ url, redacted: redactPostgresUrl(url), key: parseKey(newKeyText(), "test") });
    try {
      await store.putConnection({ id: "a", url: "https://a.example/mcp", prefixTools: true, oauth: undefined });
      await store.putCredential(credential("a", "https://a.example/mcp"));
      let exchanging!: () => void;
      const atServer = new Promise<void>((r) => (exchanging = r));
      let answer!: () => void;
      const answered = new Promise<void>((r) => (answer = r));
      const refresh = store.refreshCredential("a", "", 1, async (current) => {
        exchanging();
        await answered;
        return { ...current, expiresAt: 1 };
      });
      await atServer;
      // What a Postgres restart or failover does to the connection: it ends with no query running on it.
      // This database's only: the server is the whole run's, other files' deployments use it too.
      const ended = await pg.query(url, "SELECT pg_terminate_backend(pid) AS ok FROM pg_stat_activity WHERE application_name = 'subs-deployment' AND state = 'idle in transaction' AND datname = current_database()");
      assert.equal(ended.length, 1, "the refresh's connection, idle in its transaction");
      await new Promise((r) => setTimeout(r, 200));
      answer();
      await assert.rejects(refresh, (error: Error) => error.name === "StoreUnavailable" && !/pw|password/i.test(error.message));
      assert.equal((await store.getCredential("a", ""))?.version, 1, "nothing was stored; the next refresh retries");
    } finally {
      await store.close();
    }
  });
});

for (const kind of KINDS) {
  describe(`the ${kind.name} store`, () => {
    test("personal credentials: one per person and connection, only for a personal connection; bound to their person; a change of kind or url takes every one; removing a person takes theirs", async () => {
      const at = await kind.fresh();
      const key = parseKey(newKeyText(), "test");
      const store = await at.open(key);
      const url = "https://p.example/mcp";
      await store.putConnection({ id: "p", url, prefixTools: true, oauth: undefined, credential: "personal" });
      await store.putConnection({ id: "s", url, prefixTools: true, oauth: undefined });
      assert.equal((await store.getConnection("p"))?.credential, "personal");
      assert.equal((await store.getConnection("s"))?.credential, undefined);
      for (const person of ["alice", "bob"]) await store.addToken({ id: `t-${person}`, name: person, role: "use", person, hash: randomBytes(32) });
      await store.addToken({ id: "t-admin", name: "admin", role: "admin", person: "ops", hash: randomBytes(32) });
      assert.equal(await store.putCredential(credential("p", url, "alice")), true);
      assert.equal(await store.putCredential(credential("p", url, "bob")), true);
      assert.equal(await store.putCredential(credential("p", url)), false, "no shared credential for a personal connection");
      assert.equal(await store.putCredential(credential("s", url, "alice")), false, "no personal credential for a shared one");
      assert.equal(await store.putCredential(credential("s", url)), true);
      assert.equal((await store.getCredential("p", "alice"))?.person, "alice");
      assert.equal(await store.getCredential("p", ""), undefined);
      assert.deepEqual((await store.credentialSummaries("bob")).map((c) => [c.id, c.person]), [["p", "bob"]]);
      assert.deepEqual((await store.credentialSummaries("")).map((c) => [c.id, c.person]), [["s", ""]]);

      // One refresh per person: alice's refresh leaves bob's credential at its version.
      const aliceBefore = (await store.getCredential("p", "alice"))!;
      const bobBefore = (await store.getCredential("p", "bob"))!;
      const refreshed = await store.refreshCredential("p", "alice", aliceBefore.version, async (c) => ({ ...c, secret: { ...c.secret, tokens: { ...c.secret.tokens, access_token: "ACCESS-alice-2" } } }));
      assert.equal(refreshed.outcome, "refreshed");
      assert.equal((await store.getCredential("p", "alice"))?.secret.tokens.access_token, "ACCESS-alice-2");
      assert.equal((await store.getCredential("p", "bob"))?.version, bobBefore.version);

      // Sealed with its person: alice's sealed value put under bob's row opens for nobody.
      await at.sql("UPDATE credentials SET sealed = (SELECT sealed FROM credentials WHERE id = 'p' AND person = 'alice') WHERE id = 'p' AND person = 'bob'");
      await assert.rejects(store.getCredential("p", "bob"));
      assert.equal(await store.deleteCredential("p", "bob", bobBefore.version), true);

      // Removing alice takes her personal credentials, to be revoked; the shared one stays.
      const removed = await store.removePerson("alice", Date.now());
      assert.equal(removed.outcome, "removed");
      if (removed.outcome !== "removed") return;
      assert.deepEqual(removed.held.map((c) => [c.id, c.person]), [["p", "alice"]]);
      assert.deepEqual(removed.credentials.map((c) => c.secret.tokens.access_token), ["ACCESS-alice-2"]);
      assert.equal(await store.getCredential("p", "alice"), undefined);
      assert.ok(await store.getCredential("s", ""));

      // A change of kind takes every credential of the connection, handed back for revocation.
      assert.equal(await store.putCredential(credential("p", url, "carol")), true);
      const shared = await store.putConnection({ id: "p", url, prefixTools: true, oauth: undefined });
      assert.deepEqual(shared.dropped.map((c) => c.person), ["carol"]);
      assert.equal(await store.getCredential("p", "carol"), undefined);
      const state = await store.putState({ connections: [{ id: "s", url, prefixTools: true, oauth: undefined, credential: "personal" }], agents: [], prune: false });
      assert.equal(state.outcome, "applied");
      if (state.outcome === "applied") assert.deepEqual(state.dropped.map((c) => [c.id, c.person]), [["s", ""]]);
      await store.close();
    });

    test("credentials are sealed: none in clear in the store; a url change drops one; a wrong key refuses and decrypts nothing", async () => {
      const at = await kind.fresh();
      const key = parseKey(newKeyText(), "test");
      const store = await at.open(key);
      assert.deepEqual(await store.putConnection({ id: "a", url: "https://a.example/mcp", prefixTools: true, oauth: undefined }), { created: true, urlChanged: false, dropped: [] });
      await store.putConnection({ id: "b", url: "https://a.example/mcp", prefixTools: true, oauth: { scopes: [] } });
      assert.deepEqual(await store.getConnection("b"), { id: "b", url: "https://a.example/mcp", prefixTools: true, oauth: { scopes: [] } });
      assert.equal(await store.putCredential(credential("a", "https://a.example/mcp")), true);
      assert.equal(await store.putCredential(credential("b", "https://other.example/mcp")), false, "never stored for another url than the declared one");
      assert.equal(await store.putCredential(credential("b", "https://a.example/mcp")), true);
      assert.equal((await store.getCredential("a", ""))?.secret.tokens.access_token, "ACCESS-a-SECRET");
      assert.doesNotMatch(await at.contents(), /SECRET/);

      const moved = await store.putConnection({ id: "a", url: "https://moved.example/mcp", prefixTools: true, oauth: undefined });
      assert.equal(moved.created, false);
      assert.equal(moved.urlChanged, true);
      assert.deepEqual(moved.dropped.map((c) => c.secret.tokens.refresh_token), ["REFRESH-a-SECRET"], "handed back for revocation");
      assert.equal(await store.getCredential("a", ""), undefined);
      assert.equal((await store.getCredential("b", ""))?.url, "https://a.example/mcp", "the other account's credential is untouched");
      assert.equal((await store.putAgent({ name: "x", mcp: [{ id: "b" }, { id: "zz" }], tools: [], agents: [] })).outcome, "unknown_connection");
      assert.equal((await store.putAgent({ name: "x", mcp: [{ id: "b", tools: { read_only: false } }], tools: ["t"], agents: [] })).outcome, "created");
      assert.equal((await store.putAgent({ name: "x", mcp: [{ id: "b", tools: { read_only: false } }], tools: ["t"], agents: [] })).outcome, "updated");
      assert.deepEqual(await store.deleteConnection("b"), { outcome: "in_use", agents: ["x"] });
      assert.deepEqual(await store.deleteConnection("nope"), { outcome: "absent" });
      assert.equal((await store.deleteConnection("a")).outcome, "deleted");
      await store.close();

      const wrong = parseKey(newKeyText(), "test");
      await assert.rejects(at.open(wrong), (error: Error) => at.named.test(error.message) && /does not open .*: its values are sealed under key/.test(error.message));

      const reopened = await at.open(key);
      const next = parseKey(newKeyText(), "test");
      await reopened.putRegistration("https://auth.example", "https://d.example/oauth/callback", { client_id: "reg", client_secret: "REG-SECRET" });
      assert.equal(await reopened.rekey(next), 2);
      await reopened.close();
      await assert.rejects(at.open(key), /does not open/, "the old key no longer opens it");
      const rotated = await at.open(next);
      assert.equal((await rotated.getCredential("b", ""))?.secret.tokens.access_token, "ACCESS-b-SECRET");
      assert.equal((await rotated.getRegistration("https://auth.example", "https://d.example/oauth/callback"))?.client_id, "reg");
      assert.deepEqual(await rotated.getAgent("x"), { name: "x", mcp: [{ id: "b", tools: { read_only: false } }], tools: ["t"], agents: [] });
      assert.deepEqual((await rotated.listAgents()).map((a) => a.name), ["x"]);
      assert.doesNotMatch(await at.contents(), /SECRET/);
      await rotated.close();
    });

    test("header values are sealed, bound to the url and the variables the headers name, re-sealed by rekey; a change of headers moves the revision", async () => {
      const at = await kind.fresh();
      const key = parseKey(newKeyText(), "test");
      const store = await at.open(key);
      const url = "https://keyed.example/mcp";
      const headers = { "X-API-Key": "${API_KEY}", "X-Team": "${TEAM}-${API_KEY}" };
      const value = (name: string, v: string, on = url) => ({ connectionId: "k", name, url: on, setAt: 1000, setBy: "alice laptop", value: v });
      assert.equal(await store.putHeaderValue(value("API_KEY", "KEY-SECRET")), false, "not declared");
      const before = await store.revision();
      await store.putConnection({ id: "k", url, prefixTools: true, oauth: undefined, headers });
      assert.deepEqual(await store.getConnection("k"), { id: "k", url, prefixTools: true, oauth: undefined, headers });
      assert.notEqual(await store.revision(), before);
      const declared = await store.revision();
      await store.putConnection({ id: "k", url, prefixTools: true, oauth: undefined, headers: { ...headers } });
      assert.equal(await store.revision(), declared, "the same headers again change nothing");
      assert.equal(await store.putHeaderValue(value("OTHER", "x")), false, "a variable the headers do not name");
      assert.equal(await store.putHeaderValue(value("API_KEY", "KEY-SECRET", "https://elsewhere.example/mcp")), false, "another url");
      assert.equal(await store.putHeaderValue(value("API_KEY", "KEY-SECRET")), true);
      assert.equal(await store.putHeaderValue(value("TEAM", "TEAM-SECRET")), true);
      assert.deepEqual(
        (await store.headerValues("k", url)).map((v) => [v.name, v.value, v.setBy]),
        [
          ["API_KEY", "KEY-SECRET", "alice laptop"],
          ["TEAM", "TEAM-SECRET", "alice laptop"],
        ],
      );
      assert.deepEqual(
        (await store.headerValueSummaries()).map((v) => Object.keys(v).sort().join()),
        ["connectionId,name,setAt,setBy,url", "connectionId,name,setAt,setBy,url"],
        "a summary never carries the value",
      );
      assert.doesNotMatch(await at.contents(), /SECRET/);

      const next = parseKey(newKeyText(), "test");
      assert.equal(await store.rekey(next), 2);
      await store.close();
      const rotated = await at.open(next);
      assert.deepEqual((await rotated.headerValues("k", url)).map((v) => v.value), ["KEY-SECRET", "TEAM-SECRET"]);

      // TEAM no longer named: its value goes; API_KEY's stays.
      await rotated.putConnection({ id: "k", url, prefixTools: true, oauth: undefined, headers: { "X-API-Key": "${API_KEY}" } });
      assert.deepEqual((await rotated.headerValues("k", url)).map((v) => v.name), ["API_KEY"]);
      const state = await rotated.putState({ connections: [{ id: "k", url: "https://moved.example/mcp", prefixTools: true, oauth: undefined, headers }], agents: [], prune: true });
      assert.equal(state.outcome, "applied");
      assert.deepEqual(state.outcome === "applied" && state.changes.map((c) => [c.id, c.action, c.credentialDropped]), [["k", "change", true]], "a url change through PUT /v1/state drops them too");
      assert.deepEqual(await rotated.headerValueSummaries(), []);
      assert.equal(await rotated.putHeaderValue(value("API_KEY", "KEY-SECRET", "https://moved.example/mcp")), true);
      assert.equal(await rotated.deleteHeaderValue("k", "API_KEY"), true);
      assert.equal(await rotated.deleteHeaderValue("k", "API_KEY"), false);
      assert.equal(await rotated.putHeaderValue(value("API_KEY", "KEY-SECRET", "https://moved.example/mcp")), true);
      assert.equal((await rotated.deleteConnection("k")).outcome, "deleted");
      assert.deepEqual(await rotated.headerValueSummaries(), [], "they go with the connection");
      await rotated.close();
    });

    test("the revision moves with each change of a declaration, not with the same declaration again (a login re-declares before it authorizes)", async () => {
      const at = await kind.fresh();
      const store = await at.open(parseKey(newKeyText(), "test"));
      const a = { id: "a", url: "https://a.example/mcp", prefixTools: true, oauth: { scopes: ["read"] } };
      const agent = { name: "x", mcp: [{ id: "a" }], tools: [], agents: [] };
      const moves: boolean[] = [];
      const step = async (change: () => Promise<unknown>) => {
        const before = await store.revision();
        await change();
        moves.push((await store.revision()) !== before);
      };
      await step(() => store.putConnection(a));
      await step(() => store.putConnection({ ...a }));
      await step(() => store.putConnection({ ...a, prefixTools: false }));
      await step(() => store.putConnection({ ...a, prefixTools: false, oauth: undefined }));
      await step(() => store.putConnection({ ...a, prefixTools: false, oauth: undefined }));
      await step(() => store.putAgent(agent));
      await step(async () => assert.equal((await store.putAgent({ ...agent, mcp: [{ id: "a" }] })).outcome, "updated"));
      await step(() => store.putAgent({ ...agent, tools: ["t"] }));
      assert.deepEqual(moves, [true, false, true, true, false, true, false, true]);
      await store.close();
    });

    test("serving processes: a heartbeat makes or renews a row, one silent since the cut-off is not live, one that ended is gone", async () => {
      const at = await kind.fresh();
      const [a, b] = [await at.open(undefined), await at.open(undefined)];
      try {
        await a.heartbeat({ id: "r1", listen: "127.0.0.1:8081" }, 1000);
        await b.heartbeat({ id: "r2", listen: "127.0.0.1:8082" }, 2000);
        await a.heartbeat({ id: "r1", listen: "127.0.0.1:8081" }, 5000);
        assert.deepEqual(await b.liveReplicas(0), [
          { id: "r1", listen: "127.0.0.1:8081", startedAt: 1000, seenAt: 5000 },
          { id: "r2", listen: "127.0.0.1:8082", startedAt: 2000, seenAt: 2000 },
        ]);
        assert.deepEqual((await b.liveReplicas(3000)).map((r) => r.id), ["r1"], "r2 said nothing since 3000");
        await a.endReplica("r1");
        assert.deepEqual((await b.liveReplicas(0)).map((r) => r.id), ["r2"]);
      } finally {
        await a.close();
        await b.close();
      }
    });

    test("a refresh is a compare-and-swap on the version: of two at once only one replaces it; a delete at an old version does nothing", async () => {
      const at = await kind.fresh();
      const store = await at.open(parseKey(newKeyText(), "test"));
      try {
        await store.putConnection({ id: "a", url: "https://a.example/mcp", prefixTools: false, oauth: undefined });
        await store.putCredential(credential("a", "https://a.example/mcp"));
        const held = (await store.getCredential("a", ""))!;
        assert.deepEqual([held.version, held.authorizedBy], [1, "alice laptop"]);
        assert.deepEqual((await store.credentialSummaries()).map((c) => c.authorizedBy), ["alice laptop"], "who consented is in the clear columns GET /v1/mcp reads");
        const refreshed = (n: number) => ({ ...credential("a", "https://a.example/mcp"), secret: { ...credential("a", "").secret, tokens: { access_token: `NEW-${n}`, token_type: "Bearer" } } });
        const outcomes = await Promise.all([1, 2, 3, 4].map((n) => store.replaceCredential(held.version, refreshed(n))));
        assert.equal(outcomes.filter(Boolean).length, 1, "exactly one refresh of version 1 wins");
        const after = (await store.getCredential("a", ""))!;
        assert.deepEqual([after.version, after.authorizedBy], [2, "alice laptop"], "a refresh keeps who consented");
        assert.equal(after.secret.tokens.access_token, `NEW-${outcomes.indexOf(true) + 1}`);
        assert.equal(await store.replaceCredential(2, { ...refreshed(9), url: "https://moved.example/mcp" }), false, "never for another url");
        assert.equal(await store.deleteCredential("a", "", 1), false);
        assert.equal((await store.credentialSummaries()).map((c) => c.version).join(), "2");
        assert.equal(await store.putCredential(credential("a", "https://a.example/mcp")), true);
        assert.equal((await store.getCredential("a", ""))?.version, 3, "a new consent bumps the version too");
        assert.equal(await store.deleteCredential("a", "", 3), true);
        assert.deepEqual(await store.credentialSummaries(), []);
      } finally {
        await store.close();
      }
    });
    test("a credential lost for good leaves its reason (not its secret) until a new consent, a url change or the connection's deletion; its refresh token's expiry is a clear column", async () => {
      const at = await kind.fresh();
      const store = await at.open(parseKey(newKeyText(), "test"));
      try {
        for (const id of ["a", "b", "c"]) await store.putConnection({ id, url: `https://${id}.example/mcp`, prefixTools: false, oauth: undefined });
        await store.putCredential({ ...credential("a", "https://a.example/mcp"), refreshExpiresAt: 1_800_000_000_000 });
        assert.deepEqual((await store.credentialSummaries()).map((c) => c.refreshExpiresAt), [1_800_000_000_000], "read without decrypting");
        const held = (await store.getCredential("a", ""))!;
        const refreshed = await store.refreshCredential("a", "", held.version, async () => ({ delete: { reason: "refresh_rejected", message: "invalid_grant: gone" } }));
        assert.deepEqual(refreshed, { outcome: "refreshed", credential: undefined });
        assert.equal(await store.getCredential("a", ""), undefined, "the secret material is gone");
        const [lost] = await store.credentialLosses();
        assert.deepEqual({ ...lost, lostAt: typeof lost?.lostAt }, { id: "a", person: "", url: "https://a.example/mcp", reason: "refresh_rejected", message: "invalid_grant: gone", lostAt: "number" });
        await store.putCredential(credential("a", "https://a.example/mcp"));
        assert.deepEqual(await store.credentialLosses(), [], "a new consent clears it");
        await store.putCredential(credential("b", "https://b.example/mcp"));
        await store.putCredential(credential("c", "https://c.example/mcp"));
        const b = (await store.getCredential("b", ""))!;
        assert.equal(await store.deleteCredential("b", "", b.version, { reason: "refused_after_refresh", message: "refused" }, 7), true);
        const c = (await store.getCredential("c", ""))!;
        await store.refreshCredential("c", "", c.version, async () => ({ delete: { reason: "no_refresh_token", message: "none" } }));
        assert.deepEqual((await store.credentialLosses()).map((l) => [l.id, l.reason]), [["b", "refused_after_refresh"], ["c", "no_refresh_token"]]);
        await store.putConnection({ id: "b", url: "https://b.example/mcp", prefixTools: true, oauth: undefined });
        assert.equal((await store.credentialLosses()).length, 2, "a change that keeps the url keeps it");
        await store.putConnection({ id: "b", url: "https://moved.example/mcp", prefixTools: true, oauth: undefined });
        assert.equal(await store.deleteConnection("c").then((d) => d.outcome), "deleted");
        assert.deepEqual(await store.credentialLosses(), [], "a url change and a deletion clear it");
      } finally {
        await store.close();
      }
    });

    test("the lock: held with the declarations, in one transaction; the same lock again is no change; null removes it; a store written before it migrates; a row edited by hand is damage", async () => {
      const at = await kind.fresh();
      // The schema the previous subs wrote, with a declaration in it.
      if (kind.name === "sqlite") {
        const storeDir = path.join(at.cwd, "data");
        const raw = olderSqliteStore(storeDir, MIGRATIONS.length - 1);
        raw.prepare("INSERT INTO connections (id, url, prefix_tools, created_at, updated_at) VALUES ('c', 'https://c.example/mcp', 1, 0, 0)").run();
        raw.close();
      } else {
        await at.sql("CREATE TABLE schema_migrations (version INTEGER PRIMARY KEY, applied_at BIGINT NOT NULL)");
        for (const [n, sql] of PG_MIGRATIONS.slice(0, -1).entries()) {
          await at.sql(sql);
          await at.sql("INSERT INTO schema_migrations (version, applied_at) VALUES ($1, 0)", [n + 1]);
        }
        await at.sql("INSERT INTO connections (id, url, prefix_tools, created_at, updated_at) VALUES ('c', 'https://c.example/mcp', true, 0, 0)");
      }
      const store = await at.open(undefined);
      try {
        assert.deepEqual((await store.listConnections()).map((c) => c.id), ["c"], "the migration keeps the declarations");
        assert.equal(await store.getLock(), undefined, "a store from before locks holds none");
        const connections = [{ id: "c", url: "https://c.example/mcp", prefixTools: true, oauth: undefined }];
        const agents = [{ name: "a", mcp: [{ id: "c" }], tools: [], agents: [] }];
        const entry = (name: string, description: string) => {
          const face = { name, description, inputSchema: { type: "object" } };
          return { connection: "c", name, digest: digestOf(face), description, input_schema: { type: "object" } };
        };
        const lock = { tools: [entry("search", "Search."), entry("fetch", "Fetch.")] };
        const first = await store.putState({ connections, agents, prune: true, lock });
        assert.equal(first.outcome, "applied");
        if (first.outcome !== "applied") return;
        assert.deepEqual(first.changes.map((c) => [c.kind, c.id, c.action]), [["agent", "a", "add"], ["lock", "substructure.lock", "add"]]);
        assert.deepEqual((await store.getLock())?.tools.map((t) => t.name), ["fetch", "search"], "kept in one order");
        const again = await store.putState({ connections, agents, prune: true, lock: { tools: [...lock.tools].reverse() }, ifRevision: first.revision });
        assert.deepEqual(again.outcome === "applied" && again.changes, [], "the same lock in another order is no change");
        const kept = await store.putState({ connections, agents, prune: true });
        assert.deepEqual(kept.outcome === "applied" && kept.changes, [], "no lock sent: the one held is kept");
        assert.ok(await store.getLock());
        // A stale revision with a lock change changes nothing.
        const changed = { tools: [entry("search", "Search everything."), entry("fetch", "Fetch.")] };
        assert.equal((await store.putState({ connections, agents, prune: true, lock: changed, ifRevision: "0" })).outcome, "revision_changed");
        assert.equal((await store.getLock())?.tools.find((t) => t.name === "search")?.description, "Search.");
        const change = await store.putState({ connections, agents, prune: true, lock: changed, ifRevision: first.revision });
        assert.ok(change.outcome === "applied" && change.revision !== first.revision, "a lock change is a change of revision");
        assert.deepEqual(change.outcome === "applied" && change.changes.map((c) => [c.kind, c.action]), [["lock", "change"]]);
        // Edited by hand in the store: an error, never a lock that allows what it says.
        await at.sql("UPDATE tool_lock SET body_json = replace(body_json, 'Search everything.', 'Search and send.')");
        await assert.rejects(store.getLock(), /tool_lock table holds a row this subs cannot read/);
        await at.sql("UPDATE tool_lock SET body_json = 'not json'");
        await assert.rejects(store.getLock(), /tool_lock table/);
        const removed = await store.putState({ connections, agents, prune: true, lock: null });
        assert.deepEqual(removed.outcome === "applied" && removed.changes.map((c) => [c.kind, c.action]), [["lock", "remove"]]);
        assert.equal(await store.getLock(), undefined);
      } finally {
        await store.close();
      }
    });
  });

  describe(`API tokens (${kind.name})`, () => {
    test("create prints it once; only a hash is stored; list never shows it; revoke ends it", async () => {
      const at = await kind.fresh();
      const { cwd: dir, storeArg } = at;
      // A store the server made: the token commands never make one.
      await (await at.open(undefined)).close();
      const created = await runInProcess(["deployment", "token", "create", "--name", "ci", "--role", "apply", "--store", storeArg], { cwd: dir });
      assert.equal(created.code, 0, created.stderr);
      const token = created.stdout.trim();
      assert.match(token, /^subsd_[A-Za-z0-9_-]{43}$/);
      assert.match(created.stderr, /made apply token [0-9a-f]{12} \(ci\) on .*; it never expires\. It is shown this once/);
      assert.doesNotMatch(created.stderr, new RegExp(token));
      assert.ok(!(await at.contents()).includes(token), "the token itself is nowhere in the store");

      const listed = await runInProcess(["deployment", "token", "list", "--store", storeArg, "--json"], { cwd: dir });
      assert.equal(listed.code, 0, listed.stderr);
      const [row] = JSON.parse(listed.stdout);
      assert.deepEqual(Object.keys(row), ["id", "name", "role", "person", "created_at", "expires_at", "last_used_at"]);
      assert.equal(row.role, "apply");
      assert.equal(row.person, "ci", "without --person, the token is its own person, named as it is");
      assert.ok(!listed.stdout.includes(token));

      const store = await at.open(undefined);
      assert.equal((await authenticate(store, token, Date.now()))?.name, "ci");
      assert.equal(await authenticate(store, `${token.slice(0, -1)}x`, Date.now()), undefined);
      assert.equal(await authenticate(store, undefined, Date.now()), undefined);
      assert.notEqual((await store.listTokens())[0]?.lastUsedAt, null, "its use is recorded");
      assert.ok(allows("apply", "read") && allows("apply", "apply") && allows("apply", "consent") && !allows("apply", "use"));
      assert.ok(allows("use", "use") && allows("use", "read") && allows("use", "consent") && !allows("use", "apply") && !allows("use", "admin"));
      assert.ok(!allows("read", "apply") && !allows("read", "consent") && !allows("read", "use") && allows("admin", "use"));

      const revoked = await runInProcess(["deployment", "token", "revoke", "ci", "--store", storeArg], { cwd: dir });
      assert.equal(revoked.code, 0, revoked.stderr);
      assert.equal(await authenticate(store, token, Date.now()), undefined);
      await store.close();
      const again = await runInProcess(["deployment", "token", "revoke", "ci", "--store", storeArg], { cwd: dir });
      assert.equal(again.code, 1);
      const badRole = await runInProcess(["deployment", "token", "create", "--name", "x", "--role", "owner", "--store", storeArg], { cwd: dir });
      assert.equal(badRole.code, 2);
      assert.match(badRole.stderr, /--role "owner": must be one of admin, apply, use, read/);
    });

    test("the migration to unique names keeps every token: the oldest of a shared name keeps it, the others get their id appended; none expires", async () => {
      const at = await kind.fresh();
      const rows: Array<[string, string, number]> = [
        ["aaaaaaaaaaaa", "admin", 1000],
        ["bbbbbbbbbbbb", "admin", 2000],
        ["cccccccccccc", "admin", 2000],
        ["dddddddddddd", "solo", 500],
      ];
      if (kind.name === "sqlite") {
        // The schema the previous subs wrote, with the rows it allowed.
        const storeDir = path.join(at.cwd, "data");
        const raw = olderSqliteStore(storeDir, 4);
        for (const [id, name, created] of rows) raw.prepare("INSERT INTO api_tokens (id, name, role, hash, created_at) VALUES (?, ?, 'admin', ?, ?)").run(id, name, randomBytes(32), created);
        raw.close();
      } else {
        await at.sql("CREATE TABLE schema_migrations (version INTEGER PRIMARY KEY, applied_at BIGINT NOT NULL)");
        for (const [n, sql] of PG_MIGRATIONS.slice(0, 3).entries()) {
          await at.sql(sql);
          await at.sql("INSERT INTO schema_migrations (version, applied_at) VALUES ($1, 0)", [n + 1]);
        }
        for (const [id, name, created] of rows) await at.sql("INSERT INTO api_tokens (id, name, role, hash, created_at) VALUES ($1, $2, 'admin', $3, $4)", [id, name, randomBytes(32), created]);
      }
      const store = await at.open(undefined);
      try {
        const tokens = await store.listTokens();
        assert.deepEqual(
          tokens.map((t) => [t.id, t.name, t.expiresAt]),
          [
            ["dddddddddddd", "solo", null],
            ["aaaaaaaaaaaa", "admin", null],
            ["bbbbbbbbbbbb", "admin-bbbbbbbbbbbb", null],
            ["cccccccccccc", "admin-cccccccccccc", null],
          ],
        );
        // The later migration to people: each token its own person, named as it is now.
        assert.deepEqual(tokens.map((t) => t.person), ["solo", "admin", "admin-bbbbbbbbbbbb", "admin-cccccccccccc"]);
        assert.deepEqual((await store.listPeople()).map((p) => [p.name, p.tokens]), [["solo", 1], ["admin", 1], ["admin-bbbbbbbbbbbb", 1], ["admin-cccccccccccc", 1]]);
        const again = await store.addToken({ id: "eeeeeeeeeeee", name: "admin", role: "use", person: "p", hash: randomBytes(32) });
        assert.deepEqual(again, { outcome: "name_taken" });
      } finally {
        await store.close();
      }
    });

    test("people: a person's tokens are one identity; removing them revokes every token and session of theirs at once; the last admin is kept; both caps hold", async () => {
      const at = await kind.fresh();
      const { cwd: dir, storeArg } = at;
      await (await at.open(undefined)).close();
      const make = async (name: string, role: string, person?: string) => {
        const r = await runInProcess(["deployment", "token", "create", "--name", name, "--role", role, ...(person ? ["--person", person] : []), "--store", storeArg], { cwd: dir });
        assert.equal(r.code, 0, r.stderr);
        return r.stdout.trim();
      };
      const admin = await make("root", "admin", "ops@example.com");
      const aliceLaptop = await make("alice laptop", "use", "alice@example.com");
      const aliceClaude = await make("alice claude", "use", "alice@example.com");
      const bob = await make("bob laptop", "use", "bob+work@example.com");
      const ci = await make("ci", "apply");
      const listed = await runInProcess(["deployment", "token", "list", "--store", storeArg], { cwd: dir });
      assert.match(listed.stdout, /\tuse\talice laptop\tcreated [^\t]+\tnever expires\tnever used\tof alice@example\.com\n/);
      const people = await runInProcess(["deployment", "person", "list", "--store", storeArg, "--json"], { cwd: dir });
      assert.equal(people.code, 0, people.stderr);
      assert.deepEqual(
        JSON.parse(people.stdout).map((p: { name: string; tokens: number }) => [p.name, p.tokens]),
        [["ops@example.com", 1], ["alice@example.com", 2], ["bob+work@example.com", 1], ["ci", 1]],
      );

      const store = await at.open(undefined);
      try {
        const bobToken = (await authenticate(store, bob, Date.now()))!;
        assert.equal(bobToken.person, "bob+work@example.com");
        const saved = await store.putMcpSession({ agent: "a", id: "s-bob", owner: bobToken.id, initialize: {}, snapshot: null }, Date.now(), 0);
        assert.equal(saved.outcome, "saved");

        // --remove-person on one of two tokens: refused, nothing revoked.
        const both = await runInProcess(["deployment", "token", "revoke", "alice laptop", "--remove-person", "--store", storeArg], { cwd: dir });
        assert.equal(both.code, 2, both.stderr);
        assert.match(both.stderr, /"alice@example\.com" holds 1 other token \([0-9a-f]{12}\); nothing was revoked/);
        assert.ok(await authenticate(store, aliceLaptop, Date.now()), "nothing was revoked");

        const removed = await runInProcess(["deployment", "person", "remove", "bob+work@example.com", "--store", storeArg, "--json"], { cwd: dir });
        assert.equal(removed.code, 0, removed.stderr);
        const body = JSON.parse(removed.stdout);
        assert.equal(body.person.name, "bob+work@example.com");
        assert.deepEqual(body.tokens.map((t: { name: string }) => t.name), ["bob laptop"]);
        assert.match(removed.stderr, /removed bob\+work@example\.com from .*; revoked with them: [0-9a-f]{12} \(bob laptop\)/);
        assert.equal(await authenticate(store, bob, Date.now()), undefined, "his token is refused");
        assert.equal(await store.useMcpSession("a", "s-bob", Date.now(), 0), undefined, "his session is gone");
        assert.ok(await authenticate(store, aliceClaude, Date.now()), "the others' tokens stand");
        const gone = await runInProcess(["deployment", "person", "remove", "bob+work@example.com", "--store", storeArg], { cwd: dir });
        assert.equal(gone.code, 1);
        assert.match(gone.stderr, /no person is named "bob\+work@example\.com"/);

        // One by one: a person whose tokens were all revoked is kept, with none, until removed.
        assert.equal((await runInProcess(["deployment", "token", "revoke", "alice claude", "--store", storeArg], { cwd: dir })).code, 0);
        assert.deepEqual((await store.listPeople()).find((p) => p.name === "alice@example.com")?.tokens, 1);
        const last = await runInProcess(["deployment", "token", "revoke", "alice laptop", "--remove-person", "--store", storeArg], { cwd: dir });
        assert.equal(last.code, 0, last.stderr);
        assert.match(last.stderr, /revoked use token [0-9a-f]{12} \(alice laptop\)[^\n]*\nsubs: removed alice@example\.com from /);
        assert.deepEqual((await store.listPeople()).map((p) => p.name), ["ops@example.com", "ci"]);

        // The person holding the last admin token is kept, nothing changed.
        const lastAdmin = await runInProcess(["deployment", "person", "remove", "ops@example.com", "--store", storeArg], { cwd: dir });
        assert.equal(lastAdmin.code, 2);
        assert.match(lastAdmin.stderr, /"ops@example\.com" holds the last admin token that has not expired/);
        assert.ok(await authenticate(store, admin, Date.now()));
        assert.ok(await authenticate(store, ci, Date.now()));

        const badPerson = await runInProcess(["deployment", "token", "create", "--name", "x", "--role", "use", "--person", "-bob", "--store", storeArg], { cwd: dir });
        assert.equal(badPerson.code, 2);
        assert.match(badPerson.stderr, /--person "-bob": 1-128 letters, digits, spaces and \. _ @ \+ -/);

        // Caps: a new person past `people` is refused with nothing stored; a known one is not new.
        const caps = { tokens: 100, people: 2 };
        const add = (id: string, person: string) => store.addToken({ id, name: id, role: "use", person, hash: randomBytes(32) }, caps);
        assert.deepEqual(await add("t-new", "carol"), { outcome: "too_many_people", max: 2 });
        assert.equal((await add("t-ci-2", "ci")).outcome, "added");
        assert.equal((await store.listTokens()).some((t) => t.id === "t-new"), false);
        assert.deepEqual((await store.listPeople()).map((p) => p.name), ["ops@example.com", "ci"]);
      } finally {
        await store.close();
      }
    });

    test("rotate-key re-encrypts under the new key; a missing key file for a sealed store refuses", async () => {
      const at = await kind.fresh();
      const { cwd: dir, storeArg } = at;
      writeFileSync(path.join(dir, "old.key"), newKeyText(), { mode: 0o600 });
      const store = await at.open(parseKey(readFileSync(path.join(dir, "old.key"), "utf8"), "t"));
      await store.close();
      const rotated = await runInProcess(["deployment", "rotate-key", "--store", storeArg, "--key-file", "old.key", "--new-key-file", "new.key"], { cwd: dir });
      assert.equal(rotated.code, 0, rotated.stderr);
      assert.match(rotated.stderr, /re-encrypted 0 values from key [0-9a-f]{16} to key [0-9a-f]{16}/);
      assert.equal(statSync(path.join(dir, "new.key")).mode & 0o777, 0o600);
      const stale = await runInProcess(["deployment", "rotate-key", "--store", storeArg, "--key-file", "old.key", "--new-key-file", "third.key"], { cwd: dir });
      assert.equal(stale.code, 2);
      assert.match(stale.stderr, /does not open/);
      assert.match(stale.stderr, at.named);
      const missing = await runInProcess(["deployment", "rotate-key", "--store", storeArg, "--key-file", "gone.key", "--new-key-file", "x.key"], { cwd: dir });
      assert.equal(missing.code, 2);
      assert.match(missing.stderr, /gone\.key: no such file, and the store holds values encrypted under a key/);
      for (const run of [rotated, stale, missing]) assert.ok(kind.name === "sqlite" || !run.stderr.includes((await testPostgres()).password), "the password is never shown");
    });
  });
}

for (const kind of KINDS) {
  describe(`one refresh per credential across processes sharing the ${kind.name} store`, () => {
    const open2 = async () => {
      const at = await kind.fresh();
      const key = parseKey(newKeyText(), "test");
      const a = await at.open(key);
      const b = await at.open(key);
      await a.putConnection({ id: "gh", url: "https://a.example/mcp", prefixTools: false, oauth: undefined });
      const secret = { tokens: { access_token: "at-0", token_type: "bearer", refresh_token: "rt-0" }, client: { client_id: "c" }, authorizationServerUrl: "https://as.example" };
      assert.equal(await a.putCredential({ id: "gh", person: "", url: "https://a.example/mcp", issuer: "https://as.example", authorizedAt: 1, authorizedBy: null, expiresAt: 2, secret }), true);
      return { at, a, b, version: (await a.getCredential("gh", ""))!.version, close: () => Promise.all([a.close(), b.close()]) };
    };
    const rotated = (n: number, ms = 200) => async (current: CredentialRecord) => {
      await new Promise((r) => setTimeout(r, ms));
      return { ...current, secret: { ...current.secret, tokens: { ...current.secret.tokens, access_token: `at-${n}`, refresh_token: `rt-${n}` } } };
    };

    test("six refreshes of one version on two store handles at once: one exchange; every caller gets its result", async () => {
      const { a, b, version, close } = await open2();
      let exchanges = 0;
      const exchange = async (current: CredentialRecord) => (exchanges++, rotated(exchanges)(current));
      const results = await Promise.all([a, b, a, b, a, b].map((s) => s.refreshCredential("gh", "", version, exchange)));
      assert.equal(exchanges, 1);
      assert.deepEqual(results.map((r) => r.outcome).sort(), ["moved", "moved", "moved", "moved", "moved", "refreshed"]);
      assert.ok(results.every((r) => r.credential?.version === version + 1 && r.credential.secret.tokens.refresh_token === "rt-1"));
      await close();
    });

    test("a lock left by a holder that was killed is freed (Postgres: when its session ends; SQLite: when its lease lapses), then one exchange runs; one that throws stores nothing and frees the lock", async () => {
      const { at, a, b, version, close } = await open2();
      const held = await at.holdRefreshLock("gh");
      let killed = false;
      setTimeout(() => {
        killed = true;
        held.kill();
      }, 400);
      let exchanges = 0;
      // An order, not a duration: the exchange ran only once the holder was dead.
      const result = await b.refreshCredential("gh", "", version, async (c) => (assert.ok(killed, "the exchange waited for the holder to die"), exchanges++, rotated(1)(c)));
      assert.equal(result.outcome, "refreshed");
      assert.equal(exchanges, 1);
      await assert.rejects(
        a.refreshCredential("gh", "", version + 1, async () => {
          throw new Error("token endpoint down");
        }),
        /token endpoint down/,
      );
      assert.equal((await a.getCredential("gh", ""))!.secret.tokens.refresh_token, "rt-1", "nothing stored");
      const next = await b.refreshCredential("gh", "", version + 1, rotated(2));
      assert.equal(next.outcome, "refreshed", "the lock was released");
      assert.equal(next.credential!.version, version + 2);
      await close();
    });

    test("a refresh waiting longer than a statement may run (5 s) for another's slow exchange gets its result, not an error; a url change during an exchange is not held up and wins", async () => {
      const { a, b, version, close } = await open2();
      // Each exchange says when it has begun (it holds the lock then): no sleep guesses when.
      const begun = () => {
        let begin!: () => void;
        const started = new Promise<void>((r) => (begin = r));
        return { started, begin };
      };
      const first = begun();
      const slow = a.refreshCredential("gh", "", version, async (c) => (first.begin(), rotated(1, 6000)(c)));
      await within(first.started, "the slow exchange to begin");
      const waiting = await b.refreshCredential("gh", "", version, rotated(99));
      assert.equal(waiting.outcome, "moved");
      assert.equal(waiting.credential?.secret.tokens.refresh_token, "rt-1");
      assert.equal((await slow).outcome, "refreshed");

      // An order, not a duration: the url change ends while the exchange is held (it would wait for ever
      // for an exchange that waits for it). The bound is far above what the change takes.
      const second = begun();
      let finish!: () => void;
      const finished = new Promise<void>((r) => (finish = r));
      const during = a.refreshCredential("gh", "", version + 1, async (c) => (second.begin(), await finished, rotated(2, 0)(c)));
      await within(second.started, "the exchange to begin");
      const moved = await within(b.putConnection({ id: "gh", url: "https://moved.example/mcp", prefixTools: false, oauth: undefined }), "the url change while the exchange is held", 30_000);
      finish();
      assert.deepEqual(moved.dropped.map((c) => c.secret.tokens.refresh_token), ["rt-1"]);
      assert.deepEqual(await during, { outcome: "moved", credential: undefined }, "the exchange's result is not stored for a credential that is gone");
      assert.equal(await a.getCredential("gh", ""), undefined);
      await close();
    });
  });

  describe(`consents in the ${kind.name} store`, () => {
    const secret = (n: number) => ({
      codeVerifier: `VERIFIER-${n}-SECRET`,
      client: { client_id: "c", client_secret: "CONSENT-CLIENT-SECRET" },
      metadata: { issuer: "https://as.example", authorization_endpoint: "https://as.example/authorize", token_endpoint: "https://as.example/token", response_types_supported: ["code"] },
      resource: "https://a.example/mcp",
    });
    const consent = (n: number, expiresAt: number) => ({
      id: `auth-${n}`,
      connectionId: "gh",
      url: "https://a.example/mcp",
      stateHash: `state-hash-${n}`,
      issuer: "https://as.example",
      issAdvertised: n % 2 === 0,
      by: n % 2 === 0 ? `token-${n}` : null,
      person: "",
      expiresAt,
      secret: secret(n),
    });
    const superseded = { status: "failed" as const, error: "superseded", message: "a newer consent started" };

    test("a start supersedes the pending one; of eight claims at once on two handles one wins; it ends once; sweeps expire and forget; sealed, re-sealed by rekey, and a wrong key refused by them alone", async () => {
      const at = await kind.fresh();
      const key = parseKey(newKeyText(), "test");
      const a = await at.open(key);
      const b = await at.open(key);
      const now = Date.now();
      await a.startAuthorization(consent(1, now + 60_000), superseded, now);
      await b.startAuthorization(consent(2, now + 60_000), superseded, now + 1);
      const first = (await a.getAuthorization("auth-1"))!;
      assert.deepEqual([first.outcome, first.finalAt, first.claimed], [{ status: "failed", error: "superseded", message: "a newer consent started" }, now + 1, false]);
      const second = (await a.authorizationByState("state-hash-2"))!;
      assert.deepEqual({ ...second, secret: undefined }, { ...consent(2, now + 60_000), secret: undefined, outcome: { status: "pending" }, finalAt: null, claimed: false });
      assert.deepEqual(second.secret, secret(2));
      assert.equal(await a.authorizationByState("forged"), undefined);
      assert.equal(await b.claimAuthorization("auth-1", now), false, "a superseded consent cannot be claimed");

      const claims = await Promise.all([a, b, a, b, a, b, a, b].map((s) => s.claimAuthorization("auth-2", now)));
      assert.equal(claims.filter(Boolean).length, 1, "exactly one claim of eight");
      assert.equal((await b.getAuthorization("auth-2"))!.claimed, true);
      const ends = await Promise.all([a, b].map((s) => s.finishAuthorization("auth-2", { status: "authorized" }, now + 2)));
      assert.deepEqual(ends.sort(), [false, true]);
      assert.deepEqual((await a.getAuthorization("auth-2"))!.outcome, { status: "authorized" });

      await a.startAuthorization(consent(3, now + 10), superseded, now + 3);
      await a.startAuthorization({ ...consent(4, now + 60_000), connectionId: "other" }, superseded, now + 3);
      assert.equal(await a.claimAuthorization("auth-3", now + 10), false, "an expired consent cannot be claimed");
      await b.sweepAuthorizations(now + 10, { status: "expired", message: "too late" }, now);
      assert.deepEqual((await a.getAuthorization("auth-3"))!.outcome, { status: "expired", message: "too late" });
      assert.equal((await a.getAuthorization("auth-3"))!.finalAt, now + 10);
      assert.equal((await a.getAuthorization("auth-4"))!.outcome.status, "pending", "another connection's consent is not ended");
      await b.sweepAuthorizations(now + 10, { status: "expired" }, now + 5);
      assert.deepEqual([await a.getAuthorization("auth-1"), await a.getAuthorization("auth-2")], [undefined, undefined], "final ones are forgotten after a while");
      assert.ok(await a.getAuthorization("auth-3"));
      await b.endAuthorizations("other", { status: "failed", error: "connection_changed" }, now + 11);
      assert.deepEqual((await a.getAuthorization("auth-4"))!.outcome, { status: "failed", error: "connection_changed" });
      assert.doesNotMatch(await at.contents(), /SECRET/);
      await b.close();

      const next = parseKey(newKeyText(), "test");
      assert.equal(await a.rekey(next), 2, "every consent's secret is re-sealed");
      await a.close();
      const rotated = await at.open(next);
      assert.deepEqual((await rotated.getAuthorization("auth-4"))!.secret, secret(4));
      await rotated.close();
      // With the key check gone, a sealed consent alone still tells a wrong key.
      await at.sql("DELETE FROM meta WHERE name = 'key_check'");
      await assert.rejects(at.open(parseKey(newKeyText(), "test")), /does not open/);
    });
  });
}

for (const kind of KINDS) {
  describe(`agents' MCP sessions in the ${kind.name} store`, () => {
  test("a session last used before the idle cut-off is gone for every reader; a use moves its last use; an idle-only end spares one used since", async () => {
    const at = await kind.fresh();
    const store = await at.open(parseKey(newKeyText(), "test"));
    await store.addToken({ id: "tok1", name: "one", role: "use", person: "p", hash: randomBytes(32) });
    const session = { agent: "helper", id: "s1", owner: "tok1", initialize: { jsonrpc: "2.0", id: 0, method: "initialize" }, snapshot: { tools: [], served: [] } };
    assert.deepEqual(await store.putMcpSession(session, 1000, 0), { outcome: "saved" });
    assert.deepEqual(await store.useMcpSession("helper", "s1", 5000, 500), session, "used within the timeout: there, as stored");
    assert.equal(await store.useMcpSession("other", "s1", 5000, 500), undefined, "an id is valid at its own agent only");
    assert.equal(await store.endMcpSession("helper", "s1", 4000), false, "used at 5000: not idle since 4000");
    assert.equal(await store.useMcpSession("helper", "s1", 9000, 6000), undefined, "idle past the timeout: ended");
    assert.equal(await store.useMcpSession("helper", "s1", 9000, 0), undefined, "and deleted, for every replica");
    await store.putMcpSession({ ...session, id: "s2" }, 10_000, 0);
    assert.equal(await store.endMcpSession("helper", "s2"), true);
    assert.equal(await store.useMcpSession("helper", "s2", 10_000, 0), undefined);
    await store.close();
  });

  test("a token's sessions are capped on all agents together, also when two processes start them at once; a revoked token loses them all and starts none", async () => {
    const at = await kind.fresh();
    const key = parseKey(newKeyText(), "test");
    const [a, b] = [await at.open(key), await at.open(key)];
    for (const id of ["alice", "bob"]) await a.addToken({ id, name: id, role: "use", person: "p", hash: randomBytes(32) });
    const session = (agent: string, id: string, owner: string) => ({ agent, id, owner, initialize: { method: "initialize" }, snapshot: null });
    // 12 starts of alice's at once, on two processes and two agents, with a cap of 5.
    const starts = await Promise.all(Array.from({ length: 12 }, (_, n) => [a, b][n % 2]!.putMcpSession(session(n % 3 ? "helper" : "triage", `a${n}`, "alice"), 1000 + n, 0, { max: 5, displaceBefore: 0 })));
    assert.equal(starts.filter((s) => s.outcome === "saved").length, 5, "exactly the cap");
    assert.ok(starts.every((s) => s.outcome === "saved" || (s.outcome === "owner_full" && s.oldestUse >= 1000)), JSON.stringify(starts));
    assert.deepEqual(await b.countMcpSessions("alice", 0), { count: 5, oldestUse: Math.min(...starts.flatMap((s, n) => (s.outcome === "saved" ? [1000 + n] : []))) });
    assert.deepEqual(await a.putMcpSession(session("helper", "b1", "bob"), 2000, 0, { max: 5, displaceBefore: 0 }), { outcome: "saved" }, "another token is not held back");
    assert.deepEqual(await a.countMcpSessions("alice", 100_000), { count: 0, oldestUse: undefined }, "sessions idle before the cut-off are not counted");

    const revoked = await b.revokeToken("alice", Date.now());
    assert.deepEqual(revoked.outcome === "revoked" && [revoked.token.id, revoked.token.name], ["alice", "alice"]);
    assert.deepEqual(await a.countMcpSessions("alice", 0), { count: 0, oldestUse: undefined }, "revoking deletes its sessions");
    assert.deepEqual(await a.putMcpSession(session("helper", "a99", "alice"), 3000, 0, { max: 5, displaceBefore: 0 }), { outcome: "owner_gone" });
    assert.deepEqual(await a.countMcpSessions("bob", 0), { count: 1, oldestUse: 2000 });
    await Promise.all([a.close(), b.close()]);
  });

  test("at a token's cap, its least recently used session gives its place only when unused since the cut-off; a busy one never does", async () => {
    const at = await kind.fresh();
    const store = await at.open(parseKey(newKeyText(), "test"));
    await store.addToken({ id: "alice", name: "alice", role: "use", person: "p", hash: randomBytes(32) });
    const put = (id: string, now: number, displaceBefore: number) => store.putMcpSession({ agent: "helper", id, owner: "alice", initialize: {}, snapshot: null }, now, 0, { max: 2, displaceBefore });
    assert.deepEqual(await put("s1", 1000, 0), { outcome: "saved" });
    assert.deepEqual(await put("s2", 2000, 0), { outcome: "saved" });
    // Both used at or after 1000: none left behind by 1000.
    assert.deepEqual(await put("s3", 50_000, 1000), { outcome: "owner_full", oldestUse: 1000 });
    // s1 marked used (a call or a stream open on it) after s2: s2 is the one left behind by 3000.
    assert.ok(await store.useMcpSession("helper", "s1", 2500, 0));
    assert.deepEqual(await put("s3", 70_000, 3000), { outcome: "saved", displaced: { agent: "helper", id: "s2" } });
    assert.equal(await store.useMcpSession("helper", "s2", 70_000, 0), undefined, "the displaced session is gone");
    assert.deepEqual(await store.countMcpSessions("alice", 0), { count: 2, oldestUse: 2500 });
    await store.close();
  });

  test("checking the sessions a process holds: one whose token was removed by hand goes with all of its owner's; busy ones are marked used; ended ones are not kept", async () => {
    const at = await kind.fresh();
    const store = await at.open(parseKey(newKeyText(), "test"));
    for (const id of ["alice", "bob"]) await store.addToken({ id, name: id, role: "use", person: "p", hash: randomBytes(32) });
    const put = (agent: string, id: string, owner: string, at: number) => store.putMcpSession({ agent, id, owner, initialize: {}, snapshot: null }, at, 0);
    await put("helper", "a1", "alice", 1000);
    await put("triage", "a2", "alice", 1000);
    await put("helper", "b1", "bob", 1000);
    await put("helper", "b2", "bob", 1000);
    const held = [
      { agent: "helper", id: "a1", owner: "alice" },
      { agent: "helper", id: "b1", owner: "bob" },
      { agent: "helper", id: "b2", owner: "bob" },
      { agent: "helper", id: "gone", owner: "bob" },
    ];
    const keys = (n: number, m: number) => held.slice(n, m).map(({ agent, id }) => ({ agent, id }));
    const check = async (busy: Array<{ agent: string; id: string }>, now: number) => {
      const found = await store.checkMcpSessions(held, busy, now, 2000);
      return { ...found, kept: found.kept.sort((x, y) => x.id.localeCompare(y.id)) };
    };
    assert.deepEqual(await check([{ agent: "helper", id: "b1" }], 5000), { kept: keys(0, 3), revoked: [] });
    assert.equal((await store.countMcpSessions("bob", 4000)).count, 1, "the busy one was marked used at 5000, the other not");

    await at.sql("DELETE FROM api_tokens WHERE id = 'alice'");
    assert.deepEqual(await check([], 6000), { kept: keys(1, 3), revoked: ["alice"] });
    assert.deepEqual(await store.countMcpSessions("alice", 0), { count: 0, oldestUse: undefined }, "its session on another agent, held by no one here, went too");
    assert.deepEqual(await store.checkMcpSessions([], [], 7000, 2000), { kept: [], revoked: [] });
    await store.close();
  });
  });
}

/** The SQLite store in `storeDir` as a subs that knew the first `version` migrations left it, open for a test to add its rows. */
function olderSqliteStore(storeDir: string, version: number): Database.Database {
  mkdirSync(storeDir, { mode: 0o700 });
  const raw = new Database(path.join(storeDir, "deployment.db"));
  raw.exec("CREATE TABLE schema_version (version INTEGER NOT NULL) STRICT");
  for (const sql of MIGRATIONS.slice(0, version)) raw.exec(sql);
  raw.prepare("INSERT INTO schema_version (version) VALUES (?)").run(version);
  return raw;
}
