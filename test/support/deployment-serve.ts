// `subs deployment serve` as a real process for the tests: its own data directory and key, its
// store (a SQLite file there, or a database of this test file's Postgres), an API token made in
// that store, and the RunningDeployment view the tests of the reference deployment
// (test/support/deployment/server.ts) read, here read from the process's store and its JSON
// request log. Fault injection is the reference's alone: a real server has none.
import { spawn, type ChildProcess } from "node:child_process";
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { createInterface } from "node:readline";
import Database from "better-sqlite3";
import { createToken } from "../../src/deployment/access.ts";
import { newKeyText, parseKey } from "../../src/deployment/keys.ts";
import { redactPostgresUrl } from "../../src/deployment/config.ts";
import { openPostgresStore } from "../../src/deployment/store/postgres.ts";
import { openSqliteStore } from "../../src/deployment/store/sqlite.ts";
import type { DeploymentStore, RekeyableStore, Role } from "../../src/deployment/store/types.ts";
import { BIN, ensureBuilt } from "./cli.ts";
import type { Credential, RunningDeployment } from "./deployment/server.ts";
import { postgresForThisFile, syncReader, type TestPostgres } from "./postgres.ts";
import { stopChild, waitFor, within, WAIT_MS } from "./wait.ts";

const postgres = postgresForThisFile();

/** The stores a served deployment can run on: the tests where the store matters run on each. */
export const STORES = ["sqlite", "postgres"] as const;
export type StoreKind = (typeof STORES)[number];
/**
 * Where a feature's end-to-end test runs when the store does not change what it checks. Every
 * method of the store is tested on both stores in test/deployment/store.test.ts; a feature runs on
 * Postgres as well where the store is what the test is about: several processes sharing it (replicas,
 * races across processes, the session cap), its contents read back (secrets at rest, a restart), the
 * host's commands opening it, or it failing (outage).
 */
export const FEATURE_STORES: readonly StoreKind[] = ["sqlite"];

export type ServeOptions = {
  catalog?: string[];
  /** Seconds between polls the deployment asks for. */
  pollInterval?: number;
  /** Seconds an authorization stays pending. */
  authorizationTtl?: number;
  /** Reuse this data directory and key, and its store (a restart). */
  dir?: string;
  /** The SQLite file in the data directory (the default), or a new database of this test file's Postgres. */
  store?: StoreKind;
  env?: Record<string, string>;
};

export type ServedDeployment = RunningDeployment & {
  /** An admin token of this deployment. */
  token: string;
  /** The address this process listens on (its public URL may be a balancer's). */
  direct: string;
  dir: string;
  dbPath: string;
  /** What `--store` names: the data directory, or the Postgres URL. */
  storeArg: string;
  /** Everything the store holds, as text: the data directory's files, or every row of the database. */
  storeContents(): Promise<string>;
  /** This test file's Postgres, when the store is there. */
  postgres: TestPostgres | undefined;
  keyFile: string;
  /** Makes another token with this role. */
  tokenFor(role: Role): Promise<string>;
  /** Resolves once the last `credentials.set` is written (SQLite's already is). */
  settled(): Promise<void>;
  /** Every JSON log line so far. */
  logs: Array<Record<string, unknown>>;
  stderr: () => string;
  /** Stops the process (SIGTERM) and waits for it; the data directory stays. */
  stop(): Promise<number | null>;
  /** kill -9: the process dies where it stands, nothing drained or closed. */
  kill(): Promise<void>;
};

export async function startServedDeployment(options: ServeOptions = {}): Promise<ServedDeployment> {
  ensureBuilt();
  const dir = options.dir ?? mkdtempSync(path.join(tmpdir(), "subs-served-"));
  const storeDir = path.join(dir, "data");
  const dbPath = path.join(storeDir, "deployment.db");
  const keyFile = path.join(dir, "deployment.key");
  if (!existsSync(keyFile)) writeFileSync(keyFile, newKeyText(), { mode: 0o600 });
  const key = parseKey(readFileSync(keyFile, "utf8"), keyFile);
  // A restart finds its database's URL beside its key.
  const urlFile = path.join(dir, "postgres-url");
  const pg = options.store === "postgres" || existsSync(urlFile) ? await postgres() : undefined;
  let pgUrl: string | undefined;
  if (pg) {
    pgUrl = existsSync(urlFile) ? readFileSync(urlFile, "utf8") : await pg.database();
    writeFileSync(urlFile, pgUrl, { mode: 0o600 });
  }
  const store: RekeyableStore = pgUrl ? await openPostgresStore({ url: pgUrl, redacted: redactPostgresUrl(pgUrl), key }) : await openSqliteStore({ storeDir, dbPath, key });
  const token = await tokenIn(store, `test-admin-${Date.now()}`, "admin");
  const storeArg = pgUrl ?? storeDir;
  const args = [BIN, "deployment", "serve", "--listen", "127.0.0.1:0", "--store", storeArg, "--key-file", keyFile];
  if (options.catalog) {
    writeFileSync(path.join(dir, "catalog"), `${options.catalog.join("\n")}\n`);
    args.push("--catalog", path.join(dir, "catalog"));
  }
  const child: ChildProcess = spawn(process.execPath, args, {
    cwd: dir,
    env: {
      PATH: process.env.PATH,
      HOME: dir,
      SUBS_DEPLOYMENT_POLL_INTERVAL: String(options.pollInterval ?? 0.1),
      SUBS_DEPLOYMENT_AUTHORIZATION_TTL: String(options.authorizationTtl ?? 600),
      ...options.env,
    },
    stdio: ["ignore", "pipe", "pipe"],
  });
  let stderr = "";
  child.stderr!.on("data", (d) => (stderr += d));
  const logs: Array<Record<string, unknown>> = [];
  const requests: string[] = [];
  const exited = new Promise<number | null>((resolve) => child.once("exit", (code) => resolve(code)));
  let direct = "";
  const listening = new Promise<string>((resolve, reject) => {
    const lines = createInterface({ input: child.stdout! });
    lines.on("line", (line) => {
      let entry: Record<string, unknown>;
      try {
        entry = JSON.parse(line);
      } catch {
        return;
      }
      logs.push(entry);
      if (entry.msg === "listening") {
        direct = `http://${String(entry.listen)}`;
        resolve(String(entry.url));
      }
      if (entry.msg === "request" && typeof entry.path === "string" && entry.path.startsWith("/v1")) requests.push(`${entry.method} ${String(entry.path).replace(/\/$/, "") || "/v1"}`);
    });
    exited.then((code) => reject(new Error(`subs deployment serve exited ${code}: ${stderr}`)));
  });
  const url = await within(listening, () => `subs deployment serve to log "listening"; its stderr:\n${stderr}`).catch(async (error) => {
    child.kill("SIGKILL");
    await store.close();
    throw error;
  });

  // The process's state, read from its store (SQLite's WAL, like Postgres, shows a reader every committed write).
  const reader = pgUrl ? syncReader(pgUrl) : undefined;
  const db = reader ? undefined : new Database(dbPath, { readonly: true });
  const rows = <T>(sql: string) => (reader ? reader.rows<T>(sql) : (db!.prepare(sql).all() as T[]));
  type Row = { id: string; url: string; prefix_tools: number | boolean; oauth_json: string | null };
  const declared = () => new Map(rows<Row>("SELECT * FROM connections ORDER BY id").map((r) => [r.id, { id: r.id, url: r.url, prefix_tools: r.prefix_tools === 1 || r.prefix_tools === true, ...(r.oauth_json ? { oauth: JSON.parse(r.oauth_json) } : {}) }]));
  const agents = () => new Map(rows<{ body_json: string }>("SELECT body_json FROM agents ORDER BY name").map((r) => JSON.parse(r.body_json)).map((a) => [a.name, a]));
  const held = () => new Map(rows<{ id: string; url: string }>("SELECT id, url FROM credentials").map((r) => [r.id, r]));
  const view = <V>(read: () => Map<string, V>) =>
    ({
      get: (k: string) => read().get(k),
      has: (k: string) => read().has(k),
      keys: () => read().keys(),
      values: () => read().values(),
      entries: () => read().entries(),
      get size() {
        return read().size;
      },
      [Symbol.iterator]: () => read().entries(),
    }) as unknown as Map<string, V>;
  let pending: Promise<unknown> = Promise.resolve();
  // The view itself, given `set`: a spread would read its `size` (a query, and on Postgres the
  // reader's first, which waits for its worker to connect) while the deployment starts.
  const credentials = Object.assign(view(held), {
    // A credential as if consent had finished, written through the store: SQLite's write is done
    // before the promise settles; a test on Postgres awaits `settled()` before relying on it.
    set(id: string, c: Credential) {
      pending = store.putCredential({
        id,
        person: "",
        url: c.url,
        issuer: "https://test-issuer.invalid",
        authorizedAt: c.authorizedAt,
        authorizedBy: null,
        expiresAt: c.expiresAt,
        secret: { tokens: c.tokens, client: { client_id: "test" }, authorizationServerUrl: "https://test-issuer.invalid" },
      });
      return credentials;
    },
  }) as unknown as Map<string, Credential>;

  const storeContents = async () => (pgUrl ? pg!.dump(pgUrl) : readdirSync(storeDir).map((f) => readFileSync(path.join(storeDir, f)).toString("latin1")).join("\n"));
  // Its drain (10 s for requests in flight) is well within the wait.
  const stop = () => stopChild(child, () => `subs deployment serve; its stderr:\n${stderr}`);
  return {
    url,
    redirectUri: `${url}/oauth/callback`,
    requests,
    connections: view(declared) as RunningDeployment["connections"],
    agents: view(agents) as RunningDeployment["agents"],
    credentials,
    token,
    direct,
    dir,
    dbPath,
    storeArg,
    storeContents,
    postgres: pg,
    settled: async () => void (await pending),
    keyFile,
    logs,
    stderr: () => stderr,
    tokenFor: (role) => tokenIn(store, `test-${role}-${Math.random()}`, role),
    fault: () => {
      throw new Error("a real deployment injects no faults");
    },
    clearFaults: () => {},
    stop,
    async kill() {
      if (child.exitCode === null && child.signalCode === null) child.kill("SIGKILL");
      await exited;
    },
    async close() {
      try {
        await stop();
      } finally {
        db?.close();
        reader?.close();
        await pending;
        await store.close();
        if (!options.dir) rmSync(dir, { recursive: true, force: true });
      }
    },
  };
}

/** A new token of `role` in `store`; its value. */
export async function tokenIn(store: DeploymentStore, name: string, role: Role): Promise<string> {
  const made = await createToken(store, { name, role });
  if (made.outcome !== "created") throw new Error(`token ${name} not made: ${made.outcome}`);
  return made.token;
}

/** One API request to a served deployment (an admin token unless `token` is given); the JSON answer parsed. */
/** One API request to a deployment (`url`: where to send it; a served one's, its balancer's, or the reference's). */
export async function callServed(d: { url: string; token: string }, method: string, pathname: string, body?: unknown, token: string = d.token): Promise<{ status: number; body: any }> {
  const answer = (async () => {
    const res = await fetch(`${d.url}${pathname}`, {
      method,
      headers: { authorization: `Bearer ${token}`, ...(body === undefined ? {} : { "content-type": "application/json" }) },
      ...(body === undefined ? {} : { body: JSON.stringify(body) }),
    });
    const text = await res.text();
    return { status: res.status, body: text ? JSON.parse(text) : undefined };
  })();
  return within(answer, `the answer to ${method} ${pathname}`);
}

/**
 * Declares `id` on the deployment, starts its consent, lets a browser that follows redirects
 * consent (the test authorization server allows at once), and polls to a final status: for at most
 * a minute, not the authorization's own lifetime (ten minutes by default).
 */
export async function authorizeServed(d: ServedDeployment, id: string, declaration: Record<string, unknown>): Promise<{ status: string; error?: string; message?: string }> {
  const put = await callServed(d, "PUT", `/v1/mcp/${id}`, { prefix_tools: false, ...declaration });
  if (put.status !== 200 && put.status !== 201) throw new Error(`PUT /v1/mcp/${id}: ${put.status} ${JSON.stringify(put.body)}`);
  const started = await callServed(d, "POST", `/v1/mcp/${id}/authorizations`, {});
  if (started.status !== 201) throw new Error(`POST authorizations: ${started.status} ${JSON.stringify(started.body)}`);
  await within(
    fetch(started.body.authorization_url).then((res) => res.text()),
    "the consent (the authorization server, then the deployment's callback) to answer",
  );
  const poll = new URL(started.body.poll_url, d.url).pathname;
  let last: unknown;
  return waitFor(
    async () => {
      const outcome = (await callServed(d, "GET", poll)).body;
      last = outcome;
      return outcome.status !== "pending" && outcome;
    },
    () => `the authorization of ${id} to end (still ${JSON.stringify(last)})`,
    WAIT_MS,
    50,
  );
}
