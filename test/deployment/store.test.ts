// The deployment's settings, its SQLite store, encryption at rest and API tokens: real files in
// temp dirs, the real CLI in process for the operator's commands.
import assert from "node:assert/strict";
import { mkdtempSync, readFileSync, readdirSync, rmSync, statSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { after, describe, test } from "node:test";
import { authenticate, allows } from "../../src/deployment/access.ts";
import { deploymentConfig } from "../../src/deployment/config.ts";
import { newKeyText, parseKey } from "../../src/deployment/keys.ts";
import { MIGRATIONS, openSqliteStore } from "../../src/deployment/store/sqlite.ts";
import type { CredentialRecord } from "../../src/deployment/store/types.ts";
import Database from "better-sqlite3";
import { runInProcess } from "../support/cli.ts";

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
    assert.match(problem(() => deploymentConfig({ listen: "0.0.0.0:8080" }, ctx, { serve: true })), /--public-url is required when --listen 0\.0\.0\.0:8080 is not loopback/);
  });

  test("the catalog file: one URL per line, a bad line named by its number", () => {
    const dir = tempDir();
    writeFileSync(path.join(dir, "catalog"), "# allowed\nhttps://mcp.sentry.dev/mcp\n\nnot a url\n");
    assert.match(problem(() => deploymentConfig({ catalog: "catalog" }, { env: {}, cwd: dir }, { serve: true })), /catalog:4: "not a url" is not an http\(s\) URL/);
    writeFileSync(path.join(dir, "catalog"), "https://mcp.sentry.dev/mcp # sentry\nhttps://mcp.linear.app/mcp\n");
    assert.deepEqual(deploymentConfig({}, { env: { SUBS_DEPLOYMENT_CATALOG: "catalog" }, cwd: dir }, { serve: true }).catalog, ["https://mcp.sentry.dev/mcp", "https://mcp.linear.app/mcp"]);
  });
});

describe("the SQLite store", () => {
  const credential = (id: string, url: string) => ({
    id,
    url,
    issuer: "https://auth.example",
    authorizedAt: 1,
    expiresAt: null,
    secret: { tokens: { access_token: `ACCESS-${id}-SECRET`, refresh_token: `REFRESH-${id}-SECRET`, token_type: "Bearer" }, client: { client_id: "c", client_secret: "CLIENT-SECRET" }, authorizationServerUrl: "https://auth.example" },
  });

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

  test("credentials are sealed: none in clear in the files; a url change drops one; a wrong key refuses and decrypts nothing", async () => {
    const storeDir = path.join(tempDir(), "data");
    const dbPath = path.join(storeDir, "deployment.db");
    const key = parseKey(newKeyText(), "test");
    const store = await openSqliteStore({ storeDir, dbPath, key });
    assert.deepEqual(await store.putConnection({ id: "a", url: "https://a.example/mcp", prefixTools: true, oauth: undefined }), { created: true, urlChanged: false, dropped: undefined });
    await store.putConnection({ id: "b", url: "https://a.example/mcp", prefixTools: true, oauth: { scopes: [] } });
    assert.equal(await store.putCredential(credential("a", "https://a.example/mcp")), true);
    assert.equal(await store.putCredential(credential("b", "https://other.example/mcp")), false, "never stored for another url than the declared one");
    assert.equal(await store.putCredential(credential("b", "https://a.example/mcp")), true);
    assert.equal((await store.getCredential("a"))?.secret.tokens.access_token, "ACCESS-a-SECRET");
    assert.doesNotMatch(storeBytes(storeDir), /SECRET/);

    const moved = await store.putConnection({ id: "a", url: "https://moved.example/mcp", prefixTools: true, oauth: undefined });
    assert.equal(moved.created, false);
    assert.equal(moved.dropped?.secret.tokens.refresh_token, "REFRESH-a-SECRET", "handed back for revocation");
    assert.equal(await store.getCredential("a"), undefined);
    assert.equal((await store.getCredential("b"))?.url, "https://a.example/mcp", "the other account's credential is untouched");
    assert.equal((await store.putAgent({ name: "x", mcp: [{ id: "b" }, { id: "zz" }], tools: [], agents: [] })).outcome, "unknown_connection");
    assert.equal((await store.putAgent({ name: "x", mcp: [{ id: "b", tools: { read_only: false } }], tools: ["t"], agents: [] })).outcome, "created");
    assert.deepEqual(await store.deleteConnection("b"), { outcome: "in_use", agents: ["x"] });
    await store.close();

    const wrong = parseKey(newKeyText(), "test");
    await assert.rejects(openSqliteStore({ storeDir, dbPath, key: wrong }), /does not open deployment\.db: its values are sealed under key/);

    const reopened = await openSqliteStore({ storeDir, dbPath, key });
    const next = parseKey(newKeyText(), "test");
    assert.equal(await reopened.rekey(next), 1);
    await reopened.close();
    await assert.rejects(openSqliteStore({ storeDir, dbPath, key }), /does not open/, "the old key no longer opens it");
    const rotated = await openSqliteStore({ storeDir, dbPath, key: next });
    assert.equal((await rotated.getCredential("b"))?.secret.tokens.access_token, "ACCESS-b-SECRET");
    assert.deepEqual(await rotated.getAgent("x"), { name: "x", mcp: [{ id: "b", tools: { read_only: false } }], tools: ["t"], agents: [] });
    await rotated.close();
  });
});

describe("API tokens", () => {
  test("create prints it once; only a hash is stored; list never shows it; revoke ends it", async () => {
    const dir = tempDir();
    const created = await runInProcess(["deployment", "token", "create", "--name", "ci", "--role", "apply", "--store", "data"], { cwd: dir });
    assert.equal(created.code, 0, created.stderr);
    const token = created.stdout.trim();
    assert.match(token, /^subsd_[A-Za-z0-9_-]{43}$/);
    assert.match(created.stderr, /made apply token [0-9a-f]{12} \(ci\); it is shown this once/);
    assert.doesNotMatch(created.stderr, new RegExp(token));
    assert.ok(!storeBytes(path.join(dir, "data")).includes(token), "the token itself is nowhere in the store");

    const listed = await runInProcess(["deployment", "token", "list", "--store", "data", "--json"], { cwd: dir });
    assert.equal(listed.code, 0, listed.stderr);
    const [row] = JSON.parse(listed.stdout);
    assert.deepEqual(Object.keys(row), ["id", "name", "role", "created_at", "last_used_at"]);
    assert.equal(row.role, "apply");
    assert.ok(!listed.stdout.includes(token));

    const store = await openSqliteStore({ storeDir: path.join(dir, "data"), dbPath: path.join(dir, "data", "deployment.db"), key: undefined });
    assert.equal((await authenticate(store, token))?.name, "ci");
    assert.equal(await authenticate(store, `${token.slice(0, -1)}x`), undefined);
    assert.equal(await authenticate(store, undefined), undefined);
    assert.ok(allows("apply", "read") && allows("apply", "apply") && !allows("apply", "use"));
    assert.ok(allows("use", "use") && !allows("use", "read") && !allows("read", "apply") && allows("admin", "use"));

    const revoked = await runInProcess(["deployment", "token", "revoke", "ci", "--store", "data"], { cwd: dir });
    assert.equal(revoked.code, 0, revoked.stderr);
    assert.equal(await authenticate(store, token), undefined);
    await store.close();
    const again = await runInProcess(["deployment", "token", "revoke", "ci", "--store", "data"], { cwd: dir });
    assert.equal(again.code, 1);
    const badRole = await runInProcess(["deployment", "token", "create", "--name", "x", "--role", "owner", "--store", "data"], { cwd: dir });
    assert.equal(badRole.code, 2);
    assert.match(badRole.stderr, /--role "owner": must be one of admin, apply, use, read/);
  });

  test("rotate-key re-encrypts under the new key; a missing key file for a sealed store refuses", async () => {
    const dir = tempDir();
    const store = await openSqliteStore({ storeDir: path.join(dir, "data"), dbPath: path.join(dir, "data", "deployment.db"), key: parseKey((writeFileSync(path.join(dir, "old.key"), newKeyText()), readFileSync(path.join(dir, "old.key"), "utf8")), "t") });
    await store.close();
    const rotated = await runInProcess(["deployment", "rotate-key", "--store", "data", "--key-file", "old.key", "--new-key-file", "new.key"], { cwd: dir });
    assert.equal(rotated.code, 0, rotated.stderr);
    assert.match(rotated.stderr, /re-encrypted 0 values from key [0-9a-f]{16} to key [0-9a-f]{16}/);
    assert.equal(statSync(path.join(dir, "new.key")).mode & 0o777, 0o600);
    const stale = await runInProcess(["deployment", "rotate-key", "--store", "data", "--key-file", "old.key", "--new-key-file", "third.key"], { cwd: dir });
    assert.equal(stale.code, 2);
    assert.match(stale.stderr, /does not open deployment\.db/);
    const missing = await runInProcess(["deployment", "rotate-key", "--store", "data", "--key-file", "gone.key", "--new-key-file", "x.key"], { cwd: dir });
    assert.equal(missing.code, 2);
    assert.match(missing.stderr, /gone\.key: no such file, and the store holds values encrypted under a key/);
  });
});

describe("one refresh per credential across processes sharing the store", () => {
  const open2 = async () => {
    const dir = tempDir();
    const key = parseKey(newKeyText(), "test");
    const storeDir = path.join(dir, "data");
    const dbPath = path.join(storeDir, "deployment.db");
    const a = await openSqliteStore({ storeDir, dbPath, key });
    const b = await openSqliteStore({ storeDir, dbPath, key });
    await a.putConnection({ id: "gh", url: "https://a.example/mcp", prefixTools: false, oauth: undefined });
    const secret = { tokens: { access_token: "at-0", token_type: "bearer", refresh_token: "rt-0" }, client: { client_id: "c" }, authorizationServerUrl: "https://as.example" };
    assert.equal(await a.putCredential({ id: "gh", url: "https://a.example/mcp", issuer: "https://as.example", authorizedAt: 1, expiresAt: 2, secret }), true);
    return { a, b, dbPath, version: (await a.getCredential("gh"))!.version, close: () => Promise.all([a.close(), b.close()]) };
  };
  const rotated = (n: number) => async (current: CredentialRecord) => {
    await new Promise((r) => setTimeout(r, 200));
    return { ...current, secret: { ...current.secret, tokens: { ...current.secret.tokens, access_token: `at-${n}`, refresh_token: `rt-${n}` } } };
  };

  test("six refreshes of one version on two store handles at once: one exchange; every caller gets its result", async () => {
    const { a, b, version, close } = await open2();
    let exchanges = 0;
    const exchange = async (current: CredentialRecord) => (exchanges++, rotated(exchanges)(current));
    const results = await Promise.all([a, b, a, b, a, b].map((s) => s.refreshCredential("gh", version, exchange)));
    assert.equal(exchanges, 1);
    assert.deepEqual(results.map((r) => r.outcome).sort(), ["moved", "moved", "moved", "moved", "moved", "refreshed"]);
    assert.ok(results.every((r) => r.credential?.version === version + 1 && r.credential.secret.tokens.refresh_token === "rt-1"));
    await close();
  });

  test("a lease left by a holder that died is waited out, then one exchange runs; one that throws stores nothing and frees the lock", async () => {
    const { a, b, dbPath, version, close } = await open2();
    const raw = new Database(dbPath);
    raw.prepare("INSERT INTO credential_leases (id, holder, until) VALUES ('gh', 'killed', ?)").run(Date.now() + 400);
    raw.close();
    const started = Date.now();
    let exchanges = 0;
    const result = await b.refreshCredential("gh", version, async (c) => (exchanges++, rotated(1)(c)));
    assert.equal(result.outcome, "refreshed");
    assert.ok(Date.now() - started >= 350, "it waited for the dead holder's lease to expire");
    assert.equal(exchanges, 1);
    await assert.rejects(
      a.refreshCredential("gh", version + 1, async () => {
        throw new Error("token endpoint down");
      }),
      /token endpoint down/,
    );
    assert.equal((await a.getCredential("gh"))!.secret.tokens.refresh_token, "rt-1", "nothing stored");
    const next = await b.refreshCredential("gh", version + 1, rotated(2));
    assert.equal(next.outcome, "refreshed", "the lock was released");
    assert.equal(next.credential!.version, version + 2);
    await close();
  });
});

describe("agents' MCP sessions in the store", () => {
  test("a session last used before the idle cut-off is gone for every reader; a use moves its last use; an idle-only end spares one used since", async () => {
    const dir = tempDir();
    const store = await openSqliteStore({ storeDir: path.join(dir, "data"), dbPath: path.join(dir, "data", "deployment.db"), key: parseKey(newKeyText(), "test") });
    const session = { agent: "helper", id: "s1", owner: "tok1", initialize: { jsonrpc: "2.0", id: 0, method: "initialize" }, snapshot: { tools: [], served: [] } };
    await store.putMcpSession(session, 1000, 0);
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
});
