// The record in both stores (docs/deployment-protocol.md section 3.14): appended in batches, a
// batch written twice kept once, the filters, the cursor's pages, pruning in bounded deletes, rows
// checked on the way back; and the writer (src/deployment/audit.ts): batched off the call's path,
// a change waited for, a store that does not answer neither failing nor growing it, every entry
// logged. Real SQLite files in temp dirs and a real Postgres (a database per test); no CLI run.
import assert from "node:assert/strict";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { after, describe, test } from "node:test";
import Database from "better-sqlite3";
import { AuditRecorder, callEntry, changeEntry, personOf } from "../../src/deployment/audit.ts";
import { Metrics } from "../../src/deployment/ops.ts";
import { auditPage } from "../../src/deployment/routes/audit.ts";
import { redactPostgresUrl } from "../../src/deployment/config.ts";
import { openPostgresStore } from "../../src/deployment/store/postgres.ts";
import { openSqliteStore } from "../../src/deployment/store/sqlite.ts";
import type { DeploymentStore, NewAuditEntry } from "../../src/deployment/store/types.ts";
import { newKeyText, parseKey } from "../../src/deployment/keys.ts";
import { runInProcess } from "../support/cli.ts";
import { postgresForThisFile } from "../support/postgres.ts";
import { waitFor } from "../support/wait.ts";

const testPostgres = postgresForThisFile();
const dirs: string[] = [];
after(() => dirs.forEach((d) => rmSync(d, { recursive: true, force: true })));

type Opened = { store: DeploymentStore; sql(statement: string): Promise<void>; second(): Promise<DeploymentStore> };
const KINDS: Array<{ name: string; open(): Promise<Opened> }> = [
  {
    name: "sqlite",
    async open() {
      const dir = mkdtempSync(path.join(tmpdir(), "subs-audit-"));
      dirs.push(dir);
      const options = { storeDir: dir, dbPath: path.join(dir, "deployment.db"), key: undefined };
      return {
        store: await openSqliteStore(options),
        sql: async (statement) => {
          const raw = new Database(options.dbPath);
          raw.exec(statement);
          raw.close();
        },
        second: () => openSqliteStore(options),
      };
    },
  },
  {
    name: "postgres",
    async open() {
      const pg = await testPostgres();
      const url = await pg.database();
      const open = () => openPostgresStore({ url, redacted: redactPostgresUrl(url), key: undefined });
      return { store: await open(), sql: async (statement) => void (await pg.query(url, statement)), second: open };
    },
  },
];

const T0 = Date.parse("2026-12-06T09:00:00Z");
const alice = { id: "aaaa00000001", person: "alice" };
const bob = { id: "bbbb00000002", person: "bob" };
const call = (n: number, who = alice, agent = "triage") =>
  callEntry(agent, who, { tool: `sentry__t${n}`, connection: "sentry", outcome: n % 2 ? "ok" : "tool_error", durationMs: n + 0.123, requestId: `req-${n}` }, T0 + n * 1000);

for (const kind of KINDS) {
  describe(`the record in the ${kind.name} store`, () => {
    test("appended in order with every field; filters; the cursor's pages; a batch written again kept once", async () => {
      const { store } = await kind.open();
      try {
        const entries: NewAuditEntry[] = [
          ...[1, 2, 3, 4].map((n) => call(n)),
          call(5, bob, "support"),
          changeEntry({ kind: "token.create", actor: alice, requestId: "req-t", detail: { token_id: "cccc", name: "ci", role: "apply", expires_at: null } }, T0 + 6000),
          changeEntry({ kind: "consent.finish", actor: undefined, person: "bob", connection: "linear", outcome: "failed", detail: { authorization: "x1", error: "access_denied" } }, T0 + 7000),
        ];
        await store.appendAudit(entries.slice(0, 3));
        await store.appendAudit(entries.slice(3));
        // A batch whose answer was lost, written again: nothing twice.
        await store.appendAudit(entries.slice(2, 5));
        const all = await store.listAudit({}, 0, 100);
        assert.deepEqual(
          all.map(({ seq: _, ...e }) => e),
          entries,
        );
        assert.ok(all.every((e, n) => n === 0 || e.seq > all[n - 1]!.seq), "seq grows");
        assert.equal(all[0]!.person, personOf(alice));
        assert.equal(all[0]!.durationMs, 1.12);
        const ids = (filter: Parameters<DeploymentStore["listAudit"]>[0]) => store.listAudit(filter, 0, 100).then((l) => l.map((e) => e.id));
        assert.deepEqual(await ids({ person: "bob" }), [entries[4]!.id, entries[6]!.id]);
        assert.deepEqual(await ids({ agent: "support" }), [entries[4]!.id]);
        assert.deepEqual(await ids({ connection: "linear" }), [entries[6]!.id]);
        assert.deepEqual(await ids({ kind: "token.create" }), [entries[5]!.id]);
        assert.deepEqual(await ids({ since: T0 + 2000, until: T0 + 4000 }), [entries[1]!.id, entries[2]!.id], "since inclusive, until exclusive");
        assert.deepEqual(await ids({ person: "alice", kind: "tool.call", since: T0 + 3000 }), [entries[2]!.id, entries[3]!.id]);
        // Pages of two, by the cursor, through the route's own paging.
        const seen: string[] = [];
        const query = new URLSearchParams({ limit: "2" });
        for (let pages = 0; ; pages++) {
          assert.ok(pages < 10);
          const read = await auditPage(store, query);
          assert.ok("page" in read);
          seen.push(...read.page.entries.map((e) => e.request_id ?? e.kind));
          if (!read.page.has_more) {
            assert.equal(read.page.entries.length, 1, "7 entries in pages of 2: the last has one");
            break;
          }
          query.set("after", read.page.next!);
        }
        assert.deepEqual(seen, ["req-1", "req-2", "req-3", "req-4", "req-5", "req-t", "consent.finish"]);
        const empty = await auditPage(store, new URLSearchParams({ after: String(all.at(-1)!.seq) }));
        assert.ok("page" in empty);
        assert.deepEqual(empty.page, { entries: [], next: String(all.at(-1)!.seq), has_more: false }, "an empty page keeps the cursor");
        for (const bad of ["limit=0", "limit=1001", "kind=tool.called", "since=yesterday", "after=-1", "bogus=1", "person=a&person=b"]) {
          assert.ok("problem" in (await auditPage(store, new URLSearchParams(bad))), bad);
        }
      } finally {
        await store.close();
      }
    });

    test("pruned in bounded deletes, oldest first; a cursor past pruned entries still reads what follows", async () => {
      const { store } = await kind.open();
      try {
        await store.appendAudit([1, 2, 3, 4, 5, 6].map((n) => call(n)));
        const before = await store.listAudit({}, 0, 100);
        assert.equal(await store.pruneAudit(T0 + 5000, 2), 2, "at most `max`");
        assert.equal(await store.pruneAudit(T0 + 5000, 100), 2);
        assert.equal(await store.pruneAudit(T0 + 5000, 100), 0);
        assert.deepEqual((await store.listAudit({}, 0, 100)).map((e) => e.requestId), ["req-5", "req-6"]);
        assert.deepEqual((await store.listAudit({}, before[1]!.seq, 100)).map((e) => e.requestId), ["req-5", "req-6"]);
        // Every entry gone: a new one still comes after every cursor given before (seq is never reused).
        await store.pruneAudit(T0 + 100_000, 100);
        await store.appendAudit([call(7)]);
        assert.deepEqual((await store.listAudit({}, before.at(-1)!.seq, 100)).map((e) => e.requestId), ["req-7"]);
      } finally {
        await store.close();
      }
    });

    test("a row this subs cannot read is refused naming the table, never its values", async () => {
      const opened = await kind.open();
      try {
        await opened.store.appendAudit([call(1)]);
        await opened.sql("UPDATE audit SET kind = 'tool.secret-sauce', detail_json = 'not json'");
        await assert.rejects(opened.store.listAudit({}, 0, 10), (error: Error) => /audit table holds a row/.test(error.message) && !/secret-sauce/.test(error.message));
      } finally {
        await opened.store.close();
      }
    });

    test("two writers at once, as two replicas: every entry once, and seq in the order they became visible", async () => {
      const opened = await kind.open();
      const other = await opened.second();
      try {
        // 20 batches of 25 from each, each writer's one after another, the two writers at once: the
        // count that showed Postgres's sequence handing out numbers in another order than commits
        // is not needed here; the lock is what is held. One connection per writer, both opened
        // first: 40 batches at once made each pool open ten connections together, which on a
        // loaded two-core machine took longer than the store's 2 s connect timeout.
        const batches = (who: typeof alice) => Array.from({ length: 20 }, (_, b) => Array.from({ length: 25 }, (_, n) => call(b * 25 + n, who)));
        const writes = async (store: typeof other, who: typeof alice) => {
          for (const batch of batches(who)) await store.appendAudit(batch);
        };
        await Promise.all([opened.store.listAudit({}, 0, 1), other.listAudit({}, 0, 1)]);
        await Promise.all([writes(opened.store, alice), writes(other, bob)]);
        const all = await opened.store.listAudit({}, 0, 1000);
        assert.equal(all.length, 1000);
        assert.equal(new Set(all.map((e) => e.id)).size, 1000);
        // The writes overlapped: in seq order the writer changes more than once (not all of one
        // writer's entries, then all of the other's).
        const switches = all.filter((e, n) => n > 0 && e.tokenId !== all[n - 1]!.tokenId).length;
        assert.ok(switches >= 2, `the two writers' batches interleave in seq order (${switches} changes of writer)`);
        // A reader that followed the cursor page by page sees the same entries as one read of all.
        const followed: number[] = [];
        for (let after = 0; ; ) {
          const page = await other.listAudit({}, after, 137);
          if (page.length === 0) break;
          followed.push(...page.map((e) => e.seq));
          after = page.at(-1)!.seq;
        }
        assert.deepEqual(followed, all.map((e) => e.seq));
      } finally {
        await other.close();
        await opened.store.close();
      }
    });
  });
}

describe("the writer", () => {
  const lines: Array<{ level: string; msg: string; fields: Record<string, unknown> }> = [];
  const log = (level: "info" | "warn" | "error", msg: string, fields: Record<string, unknown> = {}) => void lines.push({ level, msg, fields });

  test("calls go in batches off the call's path; a change is written before change() resolves; each entry has its log line", async () => {
    lines.length = 0;
    const { store } = await KINDS[0]!.open();
    const metrics = new Metrics();
    const audit = new AuditRecorder({ store, log, metrics, now: Date.now, retentionMs: 86_400_000, flushMs: 50 });
    try {
      for (let n = 0; n < 10; n++) audit.call("triage", alice, { tool: "t", connection: "c", outcome: "ok", durationMs: 1, requestId: undefined });
      assert.equal((await store.listAudit({}, 0, 100)).length, 0, "nothing written on the call's path");
      await audit.change({ kind: "agent.declare", actor: bob, agent: "triage", detail: { created: true } });
      const written = await store.listAudit({}, 0, 100);
      assert.equal(written.length, 11, "the change waited for its batch, and the calls queued before it went with it");
      assert.equal(written.at(-1)!.person, "bob");
      assert.equal(metrics.auditWritten, 11);
      assert.equal(lines.filter((l) => l.msg === "audit").length, 11);
      assert.deepEqual(
        new Set(lines.filter((l) => l.msg === "audit").map((l) => l.fields.audit_id)),
        new Set(written.map((e) => e.id)),
      );
    } finally {
      await audit.close();
      await store.close();
    }
  });

  test("a store that does not answer: the change goes on, the write is retried, a full queue drops and counts, and nothing is lost from the log", async () => {
    lines.length = 0;
    const { store } = await KINDS[0]!.open();
    let down = true;
    const flaky = {
      appendAudit: (entries: readonly NewAuditEntry[]) => (down ? Promise.reject(new Error("the store does not answer")) : store.appendAudit(entries)),
      pruneAudit: store.pruneAudit.bind(store),
    };
    const metrics = new Metrics();
    const audit = new AuditRecorder({ store: flaky, log, metrics, now: Date.now, retentionMs: 86_400_000, flushMs: 20, queueMax: 5 });
    try {
      await audit.change({ kind: "agent.delete", actor: alice, agent: "a" });
      for (let n = 0; n < 9; n++) audit.call("triage", alice, { tool: "t", connection: "c", outcome: "ok", durationMs: 1, requestId: undefined });
      assert.equal(metrics.auditDropped, 5, "5 held (the change and 4 calls), 5 dropped");
      assert.ok(lines.some((l) => l.level === "error" && /could not write the record/.test(l.msg)));
      assert.ok(lines.some((l) => l.level === "error" && /dropped unwritten/.test(l.msg) && l.fields.dropped === 1), "the first loss is said at once, the next ones together later");
      assert.equal(lines.filter((l) => l.msg === "audit").length, 6, "the change and the dropped calls are logged; the held ones at their next try");
      down = false;
      await audit.flush();
      assert.equal(lines.filter((l) => l.msg === "audit").length, 10, "every entry logged once, the dropped ones too");
      assert.equal((await store.listAudit({}, 0, 100)).length, 5);
      assert.ok(metrics.auditWriteFailures >= 1);
      assert.ok(lines.some((l) => /writing the record again/.test(l.msg)), JSON.stringify(lines.map((l) => l.msg)));
    } finally {
      await audit.close();
      await store.close();
    }
  });

  test("an entry queued while a write is in flight has its log line before the store holds it", async () => {
    lines.length = 0;
    const { store } = await KINDS[0]!.open();
    // The store's first write is held until the test lets it go: the second call is queued meanwhile,
    // and the same write goes on to write it (the loop takes what was queued during its last batch).
    let release!: () => void;
    const held = new Promise<void>((resolve) => (release = resolve));
    let writes = 0;
    const slow = {
      appendAudit: async (entries: readonly NewAuditEntry[]) => {
        if (writes++ === 0) await held;
        return store.appendAudit(entries);
      },
      pruneAudit: store.pruneAudit.bind(store),
    };
    const audit = new AuditRecorder({ store: slow, log, metrics: new Metrics(), now: Date.now, retentionMs: 86_400_000, flushMs: 20 });
    try {
      audit.call("triage", alice, { tool: "first", connection: "c", outcome: "ok", durationMs: 1, requestId: undefined });
      await waitFor(() => writes === 1, "the first write to start");
      audit.call("triage", alice, { tool: "second", connection: "c", outcome: "ok", durationMs: 1, requestId: undefined });
      release();
      await audit.flush();
      const written = await store.listAudit({}, 0, 100);
      assert.deepEqual(written.map((e) => e.tool), ["first", "second"]);
      assert.deepEqual(
        lines.filter((l) => l.msg === "audit").map((l) => l.fields.tool),
        ["first", "second"],
        "each entry the store holds has its log line",
      );
    } finally {
      await audit.close();
      await store.close();
    }
  });

  test("pruning deletes what is older than the retention", async () => {
    lines.length = 0;
    const { store } = await KINDS[0]!.open();
    const audit = new AuditRecorder({ store, log, metrics: new Metrics(), now: () => T0 + 10_000, retentionMs: 4500 });
    try {
      await store.appendAudit([1, 2, 3, 4, 5, 6, 7].map((n) => call(n)));
      assert.equal(await audit.prune(), 5);
      assert.deepEqual((await store.listAudit({}, 0, 100)).map((e) => e.requestId), ["req-6", "req-7"]);
      assert.ok(lines.some((l) => l.msg === "pruned the record" && l.fields.deleted === 5));
    } finally {
      await audit.close();
      await store.close();
    }
  });
});

describe("the operator's commands on the host (in this process)", () => {
  test("token create and revoke, person remove with --store, and rotate-key, go into the record by nobody's token; subs deployment audit --store reads it as a table and as JSON, filtered and paged", async () => {
    const dir = mkdtempSync(path.join(tmpdir(), "subs-audit-host-"));
    dirs.push(dir);
    writeFileSync(path.join(dir, "old.key"), newKeyText(), { mode: 0o600 });
    const store = await openSqliteStore({ storeDir: path.join(dir, "data"), dbPath: path.join(dir, "data", "deployment.db"), key: parseKey(readFileSync(path.join(dir, "old.key"), "utf8"), "t") });
    await store.appendAudit([call(1), call(2, bob)]);
    await store.close();
    const run = (...argv: string[]) => runInProcess(argv, { cwd: dir, env: {} });
    assert.equal((await run("deployment", "token", "create", "--name", "ops", "--role", "admin", "--store", "data")).code, 0);
    const revoked = await run("deployment", "token", "revoke", "ops", "--store", "data");
    assert.equal(revoked.code, 2, "the last admin token is kept");
    assert.equal((await run("deployment", "token", "create", "--name", "ci", "--role", "apply", "--store", "data")).code, 0);
    assert.equal((await run("deployment", "token", "revoke", "ci", "--store", "data")).code, 0, "revoked");
    const removed = await run("deployment", "person", "remove", "ci", "--store", "data");
    assert.equal(removed.code, 0, removed.stderr);
    const rotated = await run("deployment", "rotate-key", "--store", "data", "--key-file", "old.key", "--new-key-file", "new.key");
    assert.equal(rotated.code, 0, rotated.stderr);

    const json = await run("deployment", "audit", "--store", "data", "--json");
    assert.equal(json.code, 0, json.stderr);
    const page = JSON.parse(json.stdout);
    assert.deepEqual(
      page.entries.map((e: { kind: string; person: string | null; token_id: string | null; detail: { via?: string; name?: string } | null }) => [e.kind, e.person, e.token_id, e.detail?.via ?? null, e.detail?.name ?? null]),
      [
        ["tool.call", "alice", alice.id, null, null],
        ["tool.call", "bob", bob.id, null, null],
        ["token.create", null, null, "store", "ops"],
        ["token.create", null, null, "store", "ci"],
        ["token.revoke", null, null, "store", "ci"],
        ["person.remove", null, null, "store", null],
        ["key.rotate", null, null, "store", null],
      ],
    );
    assert.equal(page.has_more, false);
    assert.deepEqual(Object.keys(page.entries[0]), ["cursor", "at", "kind", "person", "token_id", "agent", "connection", "tool", "outcome", "duration_ms", "request_id", "detail"]);

    const first = await run("deployment", "audit", "--store", "data", "--kind", "tool.call", "--limit", "1");
    assert.equal(first.code, 0, first.stderr);
    // Piped: one tab-separated line an entry, no header; the next page's cursor on stderr.
    assert.deepEqual(first.stdout.trim().split("\t"), ["2026-12-06T09:00:01.000Z", "tool.call", "alice", "triage", "sentry", "sentry__t1", "ok", "1.12"]);
    const next = /more entries: --after (\d+)/.exec(first.stderr)?.[1];
    assert.ok(next, first.stderr);
    const second = await run("deployment", "audit", "--store", "data", "--kind", "tool.call", "--after", next!, "--person", "bob", "--since", "2026-12-06T09:00:00Z");
    assert.match(second.stdout, /^2026-12-06T09:00:02\.000Z\ttool\.call\tbob\t/);
    assert.equal(second.stderr, "");
    for (const [flag, value] of [["--limit", "0"], ["--since", "yesterday"], ["--kind", "tool.called"]] as const) {
      const bad = await run("deployment", "audit", "--store", "data", flag, value);
      assert.equal(bad.code, 2, `${flag} ${value}: ${bad.stderr}`);
    }
    // --follow: what is there, then what is written meanwhile, one JSON line an entry, until Ctrl-C.
    const stop = new AbortController();
    const following = runInProcess(["deployment", "audit", "--store", "data", "--kind", "tool.call", "--follow", "--json"], { cwd: dir, env: {}, signal: stop.signal });
    const writer = await openSqliteStore({ storeDir: path.join(dir, "data"), dbPath: path.join(dir, "data", "deployment.db"), key: undefined });
    await new Promise((resolve) => setTimeout(resolve, 300));
    await writer.appendAudit([call(3), call(4, bob)]);
    await writer.close();
    // Two polls apart (every 2 s): the new entries are read at the next.
    await new Promise((resolve) => setTimeout(resolve, 2500));
    stop.abort();
    const followed = await following;
    assert.equal(followed.code, 130, followed.stderr);
    assert.deepEqual(
      followed.stdout.trim().split("\n").map((line) => JSON.parse(line).request_id),
      ["req-1", "req-2", "req-3", "req-4"],
    );
    const nowhere = await run("deployment", "audit", "--store", "elsewhere");
    assert.equal(nowhere.code, 2);
    assert.match(nowhere.stderr, /no deployment store/);
  });
});
