// The deployment's store on one machine: one SQLite file (better-sqlite3, WAL, a busy timeout so
// `subs deployment token create` can write while the server runs) in a data directory only its
// owner can enter. Tokens and client secrets are sealed (keys.ts); API tokens are kept as SHA-256
// hashes. Migrations run in order and record the schema version in the file.
import { randomUUID } from "node:crypto";
import { closeSync, constants, lstatSync, mkdirSync, openSync, chmodSync } from "node:fs";
import path from "node:path";
import type BetterSqlite3 from "better-sqlite3";
import { failed, refused } from "../../errors.ts";
import { headerVariables } from "../../config/templates.ts";
import { seal, type Key, type Sealed } from "../keys.ts";
import {
  AUDIT_COLUMNS,
  auditMigration,
  auditOf,
  AuditRow,
  auditValues,
  auditWhere,
  AgentRow,
  AuthorizationRow,
  authorizationOf,
  authorizationAad,
  checkKey,
  checked,
  CountRow,
  UNIQUE_TOKEN_NAMES,
  AUTHORIZED_BY,
  ReplicaRow,
  replicaOf,
  HeldSessionRow,
  McpSessionRow,
  OwnerRow,
  ownersOf,
  SessionCountRow,
  SessionKeyRow,
  sortHeldSessions,
  needKey,
  checkedAll,
  ConnectionRow,
  CONNECTION_COLUMNS,
  CredentialRow,
  credentialLossesMigration,
  LossRow,
  lossOf,
  SUMMARY_COLUMNS,
  HeaderValueRow,
  HeaderValueSummaryRow,
  headersColumn,
  headerValueAad,
  headerValueOf,
  headerValueSummaryOf,
  headerValuesMigration,
  peopleMigration,
  personalCredentialsMigration,
  PERSON_REMOVED,
  credentialColumn,
  dropsCredentials,
  type RawConnectionRow,
  PersonRow,
  personOf,
  sealHeaderValue,
  connectionOf,
  agentOf,
  credentialAad,
  credentialOf,
  declares,
  KEY_CHECK,
  KEY_CHECK_TEXT,
  LAST_USED_RESOLUTION_MS,
  openRegistration,
  registrationAad,
  reseal,
  SealedRow,
  SealedAuthorizationRow,
  sealAuthorization,
  sealCredential,
  sealRegistration,
  SummaryRow,
  summaryOf,
  TokenRow,
  tokenOf,
  lockMigration,
  lockOf,
  LockRow,
} from "./rows.ts";
import { lockText } from "../lock.ts";
import {
  expired,
  type AddToken,
  type AgentRecord,
  type AuditEntry,
  type AuditFilter,
  type NewAuditEntry,
  type ApiTokenRecord,
  type AuthorizationOutcome,
  type AuthorizationRecord,
  type ConnectionRecord,
  type CredentialLoss,
  type CredentialRecord,
  type CredentialRefresh,
  type DeclaredState,
  LOCK_CHANGE_ID,
  type LockRecord,
  type DeleteConnection,
  type HeaderValueRecord,
  type HeaderValueSummary,
  type HeldMcpSession,
  type Loss,
  type McpSessionCheck,
  type McpSessionKey,
  type OwnerCap,
  type McpSessionRecord,
  type NewApiToken,
  type PersonRecord,
  type PutMcpSession,
  type RemovePerson,
  type TokenLimits,
  type PutAgent,
  type PutConnection,
  type PutState,
  type RefreshExchange,
  type RekeyableStore,
  type RevokeToken,
  type StateChange,
  type ReplicaRecord,
} from "./types.ts";

/** The key check row of an SQLite store or backup, checked; undefined when it has none. */
export function readKeyCheck(db: BetterSqlite3.Database): Sealed | undefined {
  const row = db.prepare("SELECT key_id, value AS sealed FROM meta WHERE name = ?").get(KEY_CHECK);
  if (row === undefined) return undefined;
  const { key_id, sealed } = checked(SealedRow, row, "meta");
  return { keyId: key_id, value: sealed };
}

/** Entry N takes the schema from version N to N+1. */
export const MIGRATIONS: readonly string[] = [
  `CREATE TABLE meta (name TEXT PRIMARY KEY, key_id TEXT, value TEXT NOT NULL) STRICT;
   CREATE TABLE connections (
     id TEXT PRIMARY KEY, url TEXT NOT NULL, prefix_tools INTEGER NOT NULL, oauth_json TEXT,
     created_at INTEGER NOT NULL, updated_at INTEGER NOT NULL) STRICT;
   CREATE TABLE agents (name TEXT PRIMARY KEY, body_json TEXT NOT NULL, created_at INTEGER NOT NULL, updated_at INTEGER NOT NULL) STRICT;
   CREATE TABLE agent_connections (agent TEXT NOT NULL REFERENCES agents(name) ON DELETE CASCADE, connection TEXT NOT NULL, PRIMARY KEY (agent, connection)) STRICT;
   CREATE INDEX agent_connections_by_connection ON agent_connections(connection);
   CREATE TABLE credentials (
     id TEXT PRIMARY KEY REFERENCES connections(id) ON DELETE CASCADE, url TEXT NOT NULL, issuer TEXT NOT NULL,
     authorized_at INTEGER NOT NULL, expires_at INTEGER, version INTEGER NOT NULL,
     key_id TEXT NOT NULL, sealed TEXT NOT NULL) STRICT;
   CREATE TABLE registrations (
     authorization_server TEXT NOT NULL, redirect_uri TEXT NOT NULL, key_id TEXT NOT NULL, sealed TEXT NOT NULL,
     created_at INTEGER NOT NULL, PRIMARY KEY (authorization_server, redirect_uri)) STRICT;
   CREATE TABLE api_tokens (
     id TEXT PRIMARY KEY, name TEXT NOT NULL, role TEXT NOT NULL, hash BLOB NOT NULL UNIQUE,
     created_at INTEGER NOT NULL, last_used_at INTEGER) STRICT;`,
  // Pending consents, so that any replica (and a restarted one) answers their redirect and polls.
  // No foreign key to connections: a consent outlives its connection's DELETE, to report it.
  `CREATE TABLE authorizations (
     id TEXT PRIMARY KEY, connection_id TEXT NOT NULL, url TEXT NOT NULL, state_hash TEXT NOT NULL UNIQUE,
     issuer TEXT NOT NULL, iss_advertised INTEGER NOT NULL, expires_at INTEGER NOT NULL,
     status TEXT NOT NULL, error TEXT, message TEXT, final_at INTEGER, claimed INTEGER NOT NULL,
     key_id TEXT NOT NULL, sealed TEXT NOT NULL) STRICT;
   CREATE INDEX authorizations_by_connection ON authorizations(connection_id, status);`,
  // The refresh lock of each credential across processes (refreshCredential); no foreign key, so
  // a lease outlives nothing it should not: it is deleted when released and ignored when expired.
  `CREATE TABLE credential_leases (id TEXT PRIMARY KEY, holder TEXT NOT NULL, until INTEGER NOT NULL) STRICT;`,
  // Agents' MCP sessions, so that any replica continues one; no secret is in them.
  `CREATE TABLE mcp_sessions (
     agent TEXT NOT NULL, id TEXT NOT NULL, owner TEXT, initialize_json TEXT NOT NULL, snapshot_json TEXT NOT NULL,
     created_at INTEGER NOT NULL, last_used_at INTEGER NOT NULL, PRIMARY KEY (agent, id)) STRICT;
   CREATE INDEX mcp_sessions_by_use ON mcp_sessions(last_used_at);`,
  // Tokens expire, and their names are unique (revoking by name hits one token). Names an older
  // subs let two tokens share: the oldest keeps it, each other gets its id appended (`ci-3f9a61c0b2d4`),
  // so every token still works and each can be told apart (docs/deployment-server.md, "API tokens").
  `ALTER TABLE api_tokens ADD COLUMN expires_at INTEGER;
   ${UNIQUE_TOKEN_NAMES}`,
  AUTHORIZED_BY,
  // The processes serving the store, each renewing its row while it does (rotate-key asks).
  `CREATE TABLE replicas (id TEXT PRIMARY KEY, listen TEXT NOT NULL, started_at INTEGER NOT NULL, seen_at INTEGER NOT NULL) STRICT;`,
  // Header templates and the values of their variables (docs/deployment-protocol.md section 3.12).
  headerValuesMigration("INTEGER", " STRICT"),
  peopleMigration("INTEGER", " STRICT"),
  // Personal credentials: one per (connection, person) (rows.ts says how).
  personalCredentialsMigration("INTEGER", " STRICT"),
  // When a refresh token expires, and the record a credential lost for good leaves (rows.ts).
  credentialLossesMigration("INTEGER", " STRICT"),
  // The record of calls and changes (docs/deployment-protocol.md section 3.14).
  auditMigration("INTEGER PRIMARY KEY AUTOINCREMENT", "INTEGER", "REAL", " STRICT"),
  // The lock the agents are served under (docs/deployment-protocol.md section 3.10, "The lock").
  lockMigration("INTEGER", " STRICT"),
];

const BUSY_TIMEOUT_MS = 5000;
/** A connection row as SQLite holds it: what putState compares a declaration with, byte for byte. */
type RawConnection = RawConnectionRow;
/** Thrown inside putState's transaction to roll it back: the plan was made from an older revision. */
const STALE = Symbol("stale revision");
/** The meta row of the declarations' revision (absent: "0"). */
const REVISION = "revision";
/** A refresh lease's length; renewed every third of it while the exchange runs. */
const LEASE_MS = 15_000;
/** How often a process waiting for another's lease looks again, and for how long at most. */
const LEASE_POLL_MS = 50;
const LEASE_WAIT_MS = 60_000;

type Options = {
  storeDir: string;
  dbPath: string;
  /** Absent for commands that handle no credential (tokens); sealed values then cannot be read. */
  key: Key | undefined;
  /**
   * Refuse, creating nothing, when there is no store there yet: a command on the host given a
   * mistyped path must not make a new empty store that the running server never reads.
   */
  mustExist?: boolean;
  now?: () => number;
};

/** Opens (creating when absent) the store; refuses a key that does not open what it holds. */
export async function openSqliteStore(options: Options): Promise<SqliteStore> {
  const { storeDir, dbPath } = options;
  if (options.mustExist && lstatSync(dbPath, { throwIfNoEntry: false }) === undefined) throw noStore(storeDir);
  mkdirSync(storeDir, { recursive: true, mode: 0o700 });
  const dirStat = lstatSync(storeDir);
  if (!dirStat.isDirectory()) throw refused(`${storeDir} is not a directory`, { code: "unsafe_store" });
  if (typeof process.getuid === "function" && dirStat.uid !== process.getuid()) {
    throw refused(`${storeDir} belongs to another user`, { hint: "run the deployment as the user that owns its data directory", code: "unsafe_store" });
  }
  // Only its owner may enter it: the db, its -wal and -shm, and backups made beside it.
  if ((dirStat.mode & 0o077) !== 0) chmodSync(storeDir, 0o700);
  const stat = lstatSync(dbPath, { throwIfNoEntry: false });
  if (stat?.isSymbolicLink()) throw refused(`${dbPath} is a symbolic link`, { hint: "the store must be a regular file", code: "unsafe_store" });
  if (!stat) {
    // 0600 from the first byte; SQLite gives its -wal and -shm the same mode.
    try {
      closeSync(openSync(dbPath, constants.O_WRONLY | constants.O_CREAT | constants.O_EXCL, 0o600));
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== "EEXIST") throw error;
    }
  } else if ((stat.mode & 0o077) !== 0) {
    chmodSync(dbPath, 0o600);
  }
  const { default: Database } = await import("better-sqlite3");
  const db = new Database(dbPath, { timeout: BUSY_TIMEOUT_MS });
  try {
    if (options.mustExist && db.prepare("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'schema_version'").get() === undefined) throw noStore(storeDir);
    db.pragma("journal_mode = WAL");
    db.pragma("foreign_keys = ON");
    migrate(db);
    const store = new SqliteStore(db, dbPath, options.key, options.now ?? Date.now);
    await store.checkKey();
    return store;
  } catch (error) {
    db.close();
    throw error;
  }
}

function noStore(storeDir: string) {
  return refused(`no deployment store in ${storeDir}; nothing was created`, {
    hint: "give --store the data directory `subs deployment serve` runs with (it makes the store on its first start)",
    code: "no_store",
  });
}

function migrate(db: BetterSqlite3.Database) {
  db.exec("CREATE TABLE IF NOT EXISTS schema_version (version INTEGER NOT NULL) STRICT");
  db.transaction(() => {
    const row = db.prepare("SELECT version FROM schema_version").get() as { version: number } | undefined;
    const at = row?.version ?? 0;
    if (at > MIGRATIONS.length) {
      throw refused(`the store was written by a newer subs (schema ${at}; this one knows ${MIGRATIONS.length})`, { hint: "run the newer subs, or restore a backup", code: "store_too_new" });
    }
    for (let n = at; n < MIGRATIONS.length; n++) db.exec(MIGRATIONS[n]!);
    if (!row) db.prepare("INSERT INTO schema_version (version) VALUES (?)").run(MIGRATIONS.length);
    else if (at !== MIGRATIONS.length) db.prepare("UPDATE schema_version SET version = ?").run(MIGRATIONS.length);
  }).immediate();
}

export class SqliteStore implements RekeyableStore {
  readonly #db: BetterSqlite3.Database;
  /** Each statement compiled once: every MCP call reads a token, an agent and a credential. */
  readonly #statements = new Map<string, BetterSqlite3.Statement>();
  #key: Key | undefined;
  readonly #now: () => number;
  readonly path: string;

  constructor(db: BetterSqlite3.Database, dbPath: string, key: Key | undefined, now: () => number) {
    this.#db = db;
    this.path = dbPath;
    this.#key = key;
    this.#now = now;
  }

  #prepared(sql: string): BetterSqlite3.Statement {
    let statement = this.#statements.get(sql);
    if (!statement) {
      statement = this.#db.prepare(sql);
      this.#statements.set(sql, statement);
    }
    return statement;
  }

  /** A key that does not open the store's check value is refused before anything is decrypted. */
  async checkKey() {
    await checkKey(this.#key, path.basename(this.path), {
      read: async () => readKeyCheck(this.#db),
      anySealedKeyId: async () => (this.#prepared("SELECT key_id FROM credentials UNION SELECT key_id FROM header_values UNION SELECT key_id FROM registrations UNION SELECT key_id FROM authorizations LIMIT 1").get() as { key_id: string } | undefined)?.key_id,
      write: async (sealed) => void this.#prepared("INSERT OR IGNORE INTO meta (name, key_id, value) VALUES (?, ?, ?)").run(KEY_CHECK, sealed.keyId, sealed.value),
    });
  }

  /** Whether a key has ever sealed anything here (a new store may get a new key). */
  async hasKeyCheck(): Promise<boolean> {
    return this.#prepared("SELECT 1 FROM meta WHERE name = ?").get(KEY_CHECK) !== undefined;
  }

  /** The key check value (its key id says which key the store's values are sealed under), if any. */
  async keyCheck(): Promise<Sealed | undefined> {
    return readKeyCheck(this.#db);
  }

  /**
   * A consistent copy of the whole store in `file`, made with SQLite's online backup while other
   * processes read and write it; 0600 from its first byte; never over an existing file.
   */
  async backup(file: string): Promise<void> {
    try {
      closeSync(openSync(file, constants.O_WRONLY | constants.O_CREAT | constants.O_EXCL, 0o600));
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code === "EEXIST") throw refused(`${file} exists: a backup never replaces a file`, { hint: "give a new file name (e.g. with the date in it)", code: "backup_exists" });
      throw refused(`cannot make ${file}: ${(error as NodeJS.ErrnoException).code ?? String(error)}`, { code: "backup_failed" });
    }
    await this.#db.backup(file);
  }

  async listConnections(): Promise<ConnectionRecord[]> {
    return checkedAll(ConnectionRow, this.#prepared(`SELECT ${CONNECTION_COLUMNS} FROM connections ORDER BY id`).all(), "connections").map(connectionOf);
  }

  async getConnection(id: string): Promise<ConnectionRecord | undefined> {
    const row = this.#prepared(`SELECT ${CONNECTION_COLUMNS} FROM connections WHERE id = ?`).get(id);
    return row === undefined ? undefined : connectionOf(checked(ConnectionRow, row, "connections"));
  }

  async putConnection(c: ConnectionRecord): Promise<PutConnection> {
    const at = this.#now();
    return this.#db
      .transaction((): PutConnection => {
        const existing = this.#prepared(`SELECT ${CONNECTION_COLUMNS} FROM connections WHERE id = ?`).get(c.id) as RawConnection | undefined;
        // The same declaration again (a login declares before it authorizes) leaves the revision
        // an apply planned from valid.
        if (declares(existing, c)) return { created: false, urlChanged: false, dropped: [] };
        this.#bumpRevision();
        return { created: !existing, urlChanged: existing !== undefined && existing.url !== c.url, dropped: this.#writeConnection(c, existing, at).credentials };
      })
      .immediate();
  }

  /**
   * Inside a transaction: declares or replaces. A different url, or a change between shared and
   * personal, takes every credential of it out (returned), and a different url every header
   * value; a variable the headers no longer name loses its value (docs/deployment-protocol.md
   * section 5). `values`: how many values went.
   */
  #writeConnection(c: ConnectionRecord, existing: RawConnection | undefined, at: number): { credentials: CredentialRecord[]; values: number } {
    const credentials = dropsCredentials(existing, c) ? this.#takeCredentials(c.id) : [];
    // A loss is bound to the url and the kind it happened at: another starts with nothing to say.
    if (dropsCredentials(existing, c)) this.#prepared("DELETE FROM credential_losses WHERE id = ?").run(c.id);
    this.#prepared(
      `INSERT INTO connections (id, url, prefix_tools, oauth_json, headers_json, credential, created_at, updated_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?)
       ON CONFLICT(id) DO UPDATE SET url = excluded.url, prefix_tools = excluded.prefix_tools, oauth_json = excluded.oauth_json,
         headers_json = excluded.headers_json, credential = excluded.credential, updated_at = excluded.updated_at`,
    ).run(c.id, c.url, c.prefixTools ? 1 : 0, c.oauth === undefined ? null : JSON.stringify(c.oauth), headersColumn(c), credentialColumn(c), at, at);
    const values = this.#prepared("DELETE FROM header_values WHERE connection_id = ? AND (url <> ? OR name NOT IN (SELECT value FROM json_each(?)))").run(
      c.id,
      c.url,
      JSON.stringify(headerVariables(c.headers ?? {})),
    ).changes;
    return { credentials, values };
  }

  /** Deletes and returns every credential of connection `id` (decrypted when the key is here, for revocation). */
  #takeCredentials(id: string): CredentialRecord[] {
    const rows = checkedAll(CredentialRow, this.#prepared("SELECT * FROM credentials WHERE id = ? ORDER BY person").all(id), "credentials");
    if (rows.length === 0) return [];
    this.#prepared("DELETE FROM credentials WHERE id = ?").run(id);
    const key = this.#key;
    return key ? rows.map((row) => credentialOf(key, row)) : [];
  }

  async deleteConnection(id: string): Promise<DeleteConnection> {
    return this.#db
      .transaction((): DeleteConnection => {
        const users = (this.#prepared("SELECT agent FROM agent_connections WHERE connection = ? ORDER BY agent").all(id) as Array<{ agent: string }>).map((r) => r.agent);
        if (users.length) return { outcome: "in_use", agents: users };
        if (!this.#prepared("SELECT 1 FROM connections WHERE id = ?").get(id)) return { outcome: "absent" };
        const dropped = this.#takeCredentials(id);
        this.#prepared("DELETE FROM connections WHERE id = ?").run(id);
        this.#bumpRevision();
        return { outcome: "deleted", dropped };
      })
      .immediate();
  }

  async listAgents(): Promise<AgentRecord[]> {
    return checkedAll(AgentRow, this.#prepared("SELECT body_json FROM agents ORDER BY name").all(), "agents").map(agentOf);
  }

  async getAgent(name: string): Promise<AgentRecord | undefined> {
    const row = this.#prepared("SELECT body_json FROM agents WHERE name = ?").get(name);
    return row === undefined ? undefined : agentOf(checked(AgentRow, row, "agents"));
  }

  async putAgent(agent: AgentRecord): Promise<PutAgent> {
    const at = this.#now();
    return this.#db
      .transaction((): PutAgent => {
        const has = this.#prepared("SELECT 1 FROM connections WHERE id = ?");
        const missing = [...new Set(agent.mcp.map((e) => e.id))].filter((id) => !has.get(id));
        if (missing.length) return { outcome: "unknown_connection", missing };
        const existing = this.#prepared("SELECT body_json FROM agents WHERE name = ?").get(agent.name) as { body_json: string } | undefined;
        if (existing?.body_json === JSON.stringify(agent)) return { outcome: "updated" };
        const existed = existing !== undefined;
        this.#writeAgent(agent, at);
        this.#bumpRevision();
        return { outcome: existed ? "updated" : "created" };
      })
      .immediate();
  }

  /** Inside a transaction: the agent and the index of the connections it names. */
  #writeAgent(agent: AgentRecord, at: number) {
    this.#prepared(
      `INSERT INTO agents (name, body_json, created_at, updated_at) VALUES (?, ?, ?, ?)
       ON CONFLICT(name) DO UPDATE SET body_json = excluded.body_json, updated_at = excluded.updated_at`,
    ).run(agent.name, JSON.stringify(agent), at, at);
    this.#prepared("DELETE FROM agent_connections WHERE agent = ?").run(agent.name);
    const link = this.#prepared("INSERT OR IGNORE INTO agent_connections (agent, connection) VALUES (?, ?)");
    for (const e of agent.mcp) link.run(agent.name, e.id);
  }

  async putState(state: DeclaredState): Promise<PutState> {
    const at = this.#now();
    // BEGIN IMMEDIATE: the read of the current state and every write are one unit, so two applies
    // (two processes, or a token command beside the server) serialize instead of interleaving.
    const current = { revision: "" };
    try {
      return this.#db.transaction((): PutState => this.#applyState(state, at, current)).immediate();
    } catch (error) {
      if (error === STALE) return { outcome: "revision_changed", revision: current.revision };
      throw error;
    }
  }

  /**
   * Inside the transaction. A stale `ifRevision` throws STALE (rolling back) only when the state
   * would change: a repeat of a request whose answer was lost finds it all done and succeeds.
   */
  #applyState(state: DeclaredState, at: number, current: { revision: string }): PutState {
    current.revision = this.#revision();
    const before = new Map((this.#prepared(`SELECT ${CONNECTION_COLUMNS} FROM connections`).all() as RawConnection[]).map((r) => [r.id, r]));
    const agentsBefore = new Map((this.#prepared("SELECT name, body_json FROM agents").all() as Array<{ name: string; body_json: string }>).map((r) => [r.name, r.body_json]));
    const named = new Set(state.connections.map((c) => c.id));
    const kept = (id: string) => named.has(id) || (!state.prune && before.has(id));
    const missing = [...new Set(state.agents.flatMap((a) => a.mcp.map((e) => e.id)))].filter((id) => !kept(id));
    if (missing.length) return { outcome: "unknown_connection", missing };

    const changes: StateChange[] = [];
    const ended: Array<{ id: string; why: "url_changed" | "deleted" }> = [];
    const dropped: CredentialRecord[] = [];
    const took = (credentials: CredentialRecord[]) => void dropped.push(...credentials);
    for (const c of state.connections) {
      const row = before.get(c.id);
      if (declares(row, c)) continue;
      // A credential is bound to its url (docs/deployment-protocol.md section 5).
      const hadCredential = dropsCredentials(row, c) && this.#prepared("SELECT 1 FROM credentials WHERE id = ?").get(c.id) !== undefined;
      const written = this.#writeConnection(c, row, at);
      took(written.credentials);
      if (row && row.url !== c.url) ended.push({ id: c.id, why: "url_changed" });
      changes.push({ kind: "connection", id: c.id, action: row ? "change" : "add", credentialDropped: hadCredential || written.values > 0 });
    }
    for (const agent of state.agents) {
      const body = agentsBefore.get(agent.name);
      if (body === JSON.stringify(agent)) continue;
      this.#writeAgent(agent, at);
      changes.push({ kind: "agent", id: agent.name, action: body === undefined ? "add" : "change", credentialDropped: false });
    }
    if (state.prune) {
      // Agents first: no agent ever names a missing connection, even inside the transaction.
      const keepAgents = new Set(state.agents.map((a) => a.name));
      for (const name of [...agentsBefore.keys()].sort()) {
        if (keepAgents.has(name)) continue;
        this.#prepared("DELETE FROM agents WHERE name = ?").run(name);
        changes.push({ kind: "agent", id: name, action: "remove", credentialDropped: false });
      }
      for (const id of [...before.keys()].sort()) {
        if (named.has(id)) continue;
        const hadCredential = this.#prepared("SELECT 1 FROM credentials WHERE id = ? UNION ALL SELECT 1 FROM header_values WHERE connection_id = ?").get(id, id) !== undefined;
        took(this.#takeCredentials(id));
        this.#prepared("DELETE FROM connections WHERE id = ?").run(id);
        ended.push({ id, why: "deleted" });
        changes.push({ kind: "connection", id, action: "remove", credentialDropped: hadCredential });
      }
    }
    if (state.lock !== undefined) {
      // A lock is a declaration too: the same text again is no change (src/deployment/lock.ts).
      const held = (this.#prepared("SELECT body_json FROM tool_lock WHERE id = 1").get() as { body_json: string } | undefined)?.body_json;
      const text = state.lock === null ? undefined : lockText(state.lock);
      if (held !== text) {
        if (text === undefined) this.#prepared("DELETE FROM tool_lock WHERE id = 1").run();
        else this.#prepared("INSERT INTO tool_lock (id, body_json, updated_at) VALUES (1, ?, ?) ON CONFLICT(id) DO UPDATE SET body_json = excluded.body_json, updated_at = excluded.updated_at").run(text, at);
        changes.push({ kind: "lock", id: LOCK_CHANGE_ID, action: held === undefined ? "add" : text === undefined ? "remove" : "change", credentialDropped: false });
      }
    }
    if (changes.length && state.ifRevision !== undefined && state.ifRevision !== current.revision) throw STALE;
    if (changes.length) this.#bumpRevision();
    return { outcome: "applied", changes, ended, dropped, revision: this.#revision() };
  }

  async deleteAgent(name: string): Promise<boolean> {
    return this.#db
      .transaction(() => {
        const deleted = this.#prepared("DELETE FROM agents WHERE name = ?").run(name).changes > 0;
        if (deleted) this.#bumpRevision();
        return deleted;
      })
      .immediate();
  }

  async revision(): Promise<string> {
    return this.#revision();
  }

  async getLock(): Promise<LockRecord | undefined> {
    const row = this.#prepared("SELECT body_json FROM tool_lock WHERE id = 1").get();
    return row === undefined ? undefined : lockOf(checked(LockRow, row, "tool_lock"));
  }

  #revision(): string {
    return (this.#prepared("SELECT value FROM meta WHERE name = ?").get(REVISION) as { value: string } | undefined)?.value ?? "0";
  }

  /** Inside a write transaction of declarations. */
  #bumpRevision() {
    this.#prepared("INSERT INTO meta (name, key_id, value) VALUES (?, NULL, '1') ON CONFLICT(name) DO UPDATE SET value = CAST(CAST(value AS INTEGER) + 1 AS TEXT)").run(REVISION);
  }

  async headerValueSummaries(): Promise<HeaderValueSummary[]> {
    return checkedAll(HeaderValueSummaryRow, this.#prepared("SELECT connection_id, name, url, set_at, set_by FROM header_values ORDER BY connection_id, name").all(), "header_values").map(headerValueSummaryOf);
  }

  async headerValues(connectionId: string, url: string): Promise<HeaderValueRecord[]> {
    const rows = checkedAll(HeaderValueRow, this.#prepared("SELECT * FROM header_values WHERE connection_id = ? AND url = ? ORDER BY name").all(connectionId, url), "header_values");
    return rows.map((row) => headerValueOf(this.#key, row));
  }

  async putHeaderValue(v: HeaderValueRecord): Promise<boolean> {
    const sealed = sealHeaderValue(this.#key, v);
    return this.#db
      .transaction(() => {
        const declared = this.#prepared(`SELECT ${CONNECTION_COLUMNS} FROM connections WHERE id = ?`).get(v.connectionId);
        if (declared === undefined) return false;
        const connection = connectionOf(checked(ConnectionRow, declared, "connections"));
        if (connection.url !== v.url || !headerVariables(connection.headers ?? {}).includes(v.name)) return false;
        this.#prepared(
          `INSERT INTO header_values (connection_id, name, url, set_at, set_by, key_id, sealed) VALUES (?, ?, ?, ?, ?, ?, ?)
           ON CONFLICT(connection_id, name) DO UPDATE SET url = excluded.url, set_at = excluded.set_at, set_by = excluded.set_by, key_id = excluded.key_id, sealed = excluded.sealed`,
        ).run(v.connectionId, v.name, v.url, v.setAt, v.setBy, sealed.keyId, sealed.value);
        return true;
      })
      .immediate();
  }

  async deleteHeaderValue(connectionId: string, name: string): Promise<boolean> {
    return this.#prepared("DELETE FROM header_values WHERE connection_id = ? AND name = ?").run(connectionId, name).changes > 0;
  }

  async credentialSummaries(person?: string): Promise<Array<Omit<CredentialRecord, "secret">>> {
    const rows = person === undefined ? this.#prepared(`SELECT ${SUMMARY_COLUMNS} FROM credentials`).all() : this.#prepared(`SELECT ${SUMMARY_COLUMNS} FROM credentials WHERE person = ?`).all(person);
    return checkedAll(SummaryRow, rows, "credentials").map(summaryOf);
  }

  async credentialLosses(person?: string): Promise<CredentialLoss[]> {
    const columns = "id, person, url, reason, message, lost_at";
    const rows =
      person === undefined
        ? this.#prepared(`SELECT ${columns} FROM credential_losses ORDER BY id, person`).all()
        : this.#prepared(`SELECT ${columns} FROM credential_losses WHERE person = ? ORDER BY id`).all(person);
    return checkedAll(LossRow, rows, "credential_losses").map(lossOf);
  }

  /** Inside a transaction: `person`'s credential of `id` at `url` is gone, and why. */
  #recordLoss(id: string, person: string, url: string, loss: Loss, at: number) {
    this.#prepared(
      `INSERT INTO credential_losses (id, person, url, reason, message, lost_at) VALUES (?, ?, ?, ?, ?, ?)
       ON CONFLICT(id, person) DO UPDATE SET url = excluded.url, reason = excluded.reason, message = excluded.message, lost_at = excluded.lost_at`,
    ).run(id, person, url, loss.reason, loss.message, at);
  }

  async getCredential(id: string, person: string): Promise<CredentialRecord | undefined> {
    const row = this.#prepared("SELECT * FROM credentials WHERE id = ? AND person = ?").get(id, person);
    return row === undefined ? undefined : credentialOf(this.#key, checked(CredentialRow, row, "credentials"));
  }

  #writeCredential(c: Omit<CredentialRecord, "version">, version: number) {
    const sealed = sealCredential(this.#key, c);
    this.#db
      .prepare(
        `INSERT INTO credentials (id, person, url, issuer, authorized_at, authorized_by, expires_at, refresh_expires_at, version, key_id, sealed) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
         ON CONFLICT(id, person) DO UPDATE SET url = excluded.url, issuer = excluded.issuer, authorized_at = excluded.authorized_at,
           authorized_by = excluded.authorized_by, expires_at = excluded.expires_at, refresh_expires_at = excluded.refresh_expires_at,
           version = excluded.version, key_id = excluded.key_id, sealed = excluded.sealed`,
      )
      .run(c.id, c.person, c.url, c.issuer, c.authorizedAt, c.authorizedBy, c.expiresAt, c.refreshExpiresAt ?? null, version, sealed.keyId, sealed.value);
  }

  async putCredential(c: Omit<CredentialRecord, "version">): Promise<boolean> {
    return this.#db
      .transaction(() => {
        const declared = this.#prepared("SELECT url, credential FROM connections WHERE id = ?").get(c.id) as { url: string; credential: string } | undefined;
        // A personal credential only for a personal connection, a shared one only for a shared one.
        if (!declared || declared.url !== c.url || (declared.credential === "personal") !== (c.person !== "")) return false;
        const held = this.#prepared("SELECT version FROM credentials WHERE id = ? AND person = ?").get(c.id, c.person) as { version: number } | undefined;
        this.#writeCredential(c, (held?.version ?? 0) + 1);
        // A new consent: whatever its holder lost before is replaced.
        this.#prepared("DELETE FROM credential_losses WHERE id = ? AND person = ?").run(c.id, c.person);
        return true;
      })
      .immediate();
  }

  async replaceCredential(version: number, c: Omit<CredentialRecord, "version">): Promise<boolean> {
    return this.#db
      .transaction(() => {
        const held = this.#prepared("SELECT version, url FROM credentials WHERE id = ? AND person = ?").get(c.id, c.person) as { version: number; url: string } | undefined;
        if (!held || held.version !== version || held.url !== c.url) return false;
        this.#writeCredential(c, version + 1);
        return true;
      })
      .immediate();
  }

  async deleteCredential(id: string, person: string, version: number, loss?: Loss, at = this.#now()): Promise<boolean> {
    if (!loss) return this.#prepared("DELETE FROM credentials WHERE id = ? AND person = ? AND version = ?").run(id, person, version).changes > 0;
    return this.#db
      .transaction(() => {
        const held = this.#prepared("DELETE FROM credentials WHERE id = ? AND person = ? AND version = ? RETURNING url").get(id, person, version) as { url: string } | undefined;
        if (held) this.#recordLoss(id, person, held.url, loss, at);
        return held !== undefined;
      })
      .immediate();
  }

  async refreshCredential(id: string, person: string, version: number, exchange: RefreshExchange): Promise<CredentialRefresh> {
    const holder = randomUUID();
    // One lease per credential: a shared one's keeps the connection's id, as before people; a connection id has no `/` (Postgres text takes no NUL).
    const lease = person === "" ? id : `${id}/${person}`;
    const take = () =>
      this.#prepared(
        `INSERT INTO credential_leases (id, holder, until) VALUES (?, ?, ?)
         ON CONFLICT(id) DO UPDATE SET holder = excluded.holder, until = excluded.until WHERE credential_leases.until <= ?`,
      ).run(lease, holder, this.#now() + LEASE_MS, this.#now()).changes === 1;
    const at = async (): Promise<CredentialRecord | undefined> => this.getCredential(id, person);
    const waitUntil = this.#now() + LEASE_WAIT_MS;
    while (!take()) {
      // Another process holds it: its result, once stored, is ours too.
      const current = await at();
      if (!current || current.version !== version) return { outcome: "moved", credential: current };
      if (this.#now() > waitUntil) throw failed(`another process has been refreshing the credential of ${id} for over ${LEASE_WAIT_MS / 1000}s`, { code: "refresh_busy" });
      await new Promise((r) => setTimeout(r, LEASE_POLL_MS + Math.random() * LEASE_POLL_MS));
    }
    const renew = setInterval(() => {
      try {
        this.#prepared("UPDATE credential_leases SET until = ? WHERE id = ? AND holder = ?").run(this.#now() + LEASE_MS, lease, holder);
      } catch {
        // A busy store: the next renewal tries again, well within the lease.
      }
    }, LEASE_MS / 3);
    renew.unref();
    try {
      const current = await at();
      if (!current || current.version !== version) return { outcome: "moved", credential: current };
      const next = await exchange(current);
      const stored = this.#db
        .transaction(() => {
          const held = this.#prepared("SELECT version, url FROM credentials WHERE id = ? AND person = ?").get(id, person) as { version: number; url: string } | undefined;
          if (!held || held.version !== version || held.url !== current.url) return false;
          if ("delete" in next) {
            this.#prepared("DELETE FROM credentials WHERE id = ? AND person = ?").run(id, person);
            this.#recordLoss(id, person, current.url, next.delete, this.#now());
          } else this.#writeCredential(next, version + 1);
          return true;
        })
        .immediate();
      if (!stored) return { outcome: "moved", credential: await at() };
      return { outcome: "refreshed", credential: "delete" in next ? undefined : { ...next, version: version + 1 } };
    } finally {
      clearInterval(renew);
      this.#prepared("DELETE FROM credential_leases WHERE id = ? AND holder = ?").run(lease, holder);
    }
  }

  async getRegistration(server: string, redirectUri: string) {
    const row = this.#prepared("SELECT key_id, sealed FROM registrations WHERE authorization_server = ? AND redirect_uri = ?").get(server, redirectUri);
    return row === undefined ? undefined : openRegistration(this.#key, server, redirectUri, checked(SealedRow, row, "registrations"));
  }

  async putRegistration(server: string, redirectUri: string, client: object) {
    const sealed = sealRegistration(this.#key, server, redirectUri, client);
    this.#db
      .prepare(
        `INSERT INTO registrations (authorization_server, redirect_uri, key_id, sealed, created_at) VALUES (?, ?, ?, ?, ?)
         ON CONFLICT(authorization_server, redirect_uri) DO UPDATE SET key_id = excluded.key_id, sealed = excluded.sealed, created_at = excluded.created_at`,
      )
      .run(server, redirectUri, sealed.keyId, sealed.value, this.#now());
  }

  async deleteRegistration(server: string, redirectUri: string) {
    this.#prepared("DELETE FROM registrations WHERE authorization_server = ? AND redirect_uri = ?").run(server, redirectUri);
  }

  /** Ends the pending consents of the connection (of one person's credential only, with `person`). */
  #endPending(connectionId: string, outcome: AuthorizationOutcome, at: number, person?: string) {
    const only = person === undefined ? "" : " AND person = ?";
    this.#prepared(`UPDATE authorizations SET status = ?, error = ?, message = ?, final_at = ? WHERE connection_id = ? AND status = 'pending'${only}`).run(
      outcome.status,
      outcome.error ?? null,
      outcome.message ?? null,
      at,
      connectionId,
      ...(person === undefined ? [] : [person]),
    );
  }

  async startAuthorization(a: Omit<AuthorizationRecord, "outcome" | "finalAt" | "claimed">, superseded: AuthorizationOutcome, at: number): Promise<void> {
    const sealed = sealAuthorization(this.#key, a);
    this.#db
      .transaction(() => {
        this.#endPending(a.connectionId, superseded, at, a.person);
        this.#prepared(
          `INSERT INTO authorizations (id, connection_id, url, state_hash, issuer, iss_advertised, authorized_by, person, expires_at, status, claimed, key_id, sealed)
           VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, 'pending', 0, ?, ?)`,
        ).run(a.id, a.connectionId, a.url, a.stateHash, a.issuer, a.issAdvertised ? 1 : 0, a.by, a.person, a.expiresAt, sealed.keyId, sealed.value);
      })
      .immediate();
  }

  async getAuthorization(id: string): Promise<AuthorizationRecord | undefined> {
    const row = this.#prepared("SELECT * FROM authorizations WHERE id = ?").get(id);
    return row === undefined ? undefined : authorizationOf(this.#key, checked(AuthorizationRow, row, "authorizations"));
  }

  async authorizationByState(stateHash: string): Promise<AuthorizationRecord | undefined> {
    const row = this.#prepared("SELECT * FROM authorizations WHERE state_hash = ?").get(stateHash);
    return row === undefined ? undefined : authorizationOf(this.#key, checked(AuthorizationRow, row, "authorizations"));
  }

  async claimAuthorization(id: string, now: number): Promise<boolean> {
    return this.#prepared("UPDATE authorizations SET claimed = 1 WHERE id = ? AND status = 'pending' AND claimed = 0 AND expires_at > ?").run(id, now).changes === 1;
  }

  async finishAuthorization(id: string, outcome: AuthorizationOutcome, at: number): Promise<boolean> {
    return (
      this.#prepared("UPDATE authorizations SET status = ?, error = ?, message = ?, final_at = ? WHERE id = ? AND status = 'pending'").run(
        outcome.status,
        outcome.error ?? null,
        outcome.message ?? null,
        at,
        id,
      ).changes === 1
    );
  }

  async endAuthorizations(connectionId: string, outcome: AuthorizationOutcome, at: number): Promise<void> {
    this.#endPending(connectionId, outcome, at);
  }

  async sweepAuthorizations(now: number, expired: AuthorizationOutcome, forgetBefore: number): Promise<void> {
    this.#db
      .transaction(() => {
        this.#prepared("UPDATE authorizations SET status = ?, error = ?, message = ?, final_at = expires_at WHERE status = 'pending' AND expires_at <= ?").run(
          expired.status,
          expired.error ?? null,
          expired.message ?? null,
          now,
        );
        this.#prepared("DELETE FROM authorizations WHERE final_at IS NOT NULL AND final_at < ?").run(forgetBefore);
      })
      .immediate();
  }

  async putMcpSession(m: McpSessionRecord, now: number, idleBefore: number, cap?: OwnerCap): Promise<PutMcpSession> {
    // IMMEDIATE: the write lock from the start, so two processes' starts for one owner count in turn.
    return this.#db
      .transaction((): PutMcpSession => {
        let displaced: McpSessionKey | undefined;
        this.#prepared("DELETE FROM mcp_sessions WHERE last_used_at < ?").run(idleBefore);
        if (m.owner !== undefined) {
          if (this.#prepared("SELECT 1 FROM api_tokens WHERE id = ?").get(m.owner) === undefined) return { outcome: "owner_gone" };
          if (cap !== undefined) {
            const held = this.#countSessions(m.owner, idleBefore);
            if (held.count >= cap.max) {
              const oldest = checked(
                SessionKeyRow,
                this.#prepared("SELECT agent, id FROM mcp_sessions WHERE owner = ? AND last_used_at < ? ORDER BY last_used_at, id LIMIT 1").get(m.owner, cap.displaceBefore) ?? null,
                "mcp_sessions",
              );
              if (!oldest) return { outcome: "owner_full", oldestUse: held.oldestUse ?? now };
              this.#prepared("DELETE FROM mcp_sessions WHERE agent = ? AND id = ?").run(oldest.agent, oldest.id);
              displaced = { agent: oldest.agent, id: oldest.id };
            }
          }
        }
        this.#prepared("INSERT INTO mcp_sessions (agent, id, owner, initialize_json, snapshot_json, created_at, last_used_at) VALUES (?, ?, ?, ?, ?, ?, ?)").run(
          m.agent,
          m.id,
          m.owner ?? null,
          JSON.stringify(m.initialize),
          JSON.stringify(m.snapshot ?? null),
          now,
          now,
        );
        return displaced ? { outcome: "saved", displaced } : { outcome: "saved" };
      })
      .immediate();
  }

  async countMcpSessions(owner: string, idleBefore: number): Promise<{ count: number; oldestUse: number | undefined }> {
    return this.#countSessions(owner, idleBefore);
  }

  #countSessions(owner: string, idleBefore: number): { count: number; oldestUse: number | undefined } {
    const row = checked(SessionCountRow, this.#prepared("SELECT count(*) AS count, min(last_used_at) AS oldest FROM mcp_sessions WHERE owner = ? AND last_used_at >= ?").get(owner, idleBefore), "mcp_sessions");
    return { count: row.count, oldestUse: row.oldest ?? undefined };
  }

  async checkMcpSessions(held: HeldMcpSession[], busy: McpSessionKey[], now: number, touchBefore: number): Promise<McpSessionCheck> {
    if (held.length === 0) return { kept: [], revoked: [] };
    // The sessions first, then their owners' tokens (postgres.ts says why).
    const rows = checkedAll(
      HeldSessionRow,
      this.#prepared(
        `SELECT s.agent, s.id, s.last_used_at FROM json_each(?) AS h
         JOIN mcp_sessions s ON s.agent = json_extract(h.value, '$[0]') AND s.id = json_extract(h.value, '$[1]')`,
      ).all(JSON.stringify(held.map((k) => [k.agent, k.id]))),
      "mcp_sessions",
    );
    const owners = checkedAll(OwnerRow, this.#prepared("SELECT id FROM api_tokens WHERE id IN (SELECT value FROM json_each(?))").all(JSON.stringify(ownersOf(held))), "api_tokens");
    const { kept, revoked, touch } = sortHeldSessions(held, new Set(owners.map((o) => o.id)), rows, busy, touchBefore);
    // Written only when there is something to write: this runs every second or so on every process.
    if (revoked.length > 0 || touch.length > 0) {
      this.#db
        .transaction(() => {
          for (const owner of revoked) this.#prepared("DELETE FROM mcp_sessions WHERE owner = ?").run(owner);
          for (const k of touch) this.#prepared("UPDATE mcp_sessions SET last_used_at = ? WHERE agent = ? AND id = ? AND last_used_at < ?").run(now, k.agent, k.id, now);
        })
        .immediate();
    }
    return { kept, revoked };
  }

  async useMcpSession(agent: string, id: string, now: number, idleBefore: number): Promise<McpSessionRecord | undefined> {
    return this.#db
      .transaction((): McpSessionRecord | undefined => {
        const found = this.#prepared("SELECT owner, initialize_json, snapshot_json, last_used_at FROM mcp_sessions WHERE agent = ? AND id = ?").get(agent, id);
        const row = found === undefined ? undefined : checked(McpSessionRow, found, "mcp_sessions");
        if (!row) return undefined;
        if (row.last_used_at < idleBefore) {
          this.#prepared("DELETE FROM mcp_sessions WHERE agent = ? AND id = ?").run(agent, id);
          return undefined;
        }
        // To the second: the idle timeout is minutes, and a write per request costs a WAL commit.
        if (now - row.last_used_at >= 1000) this.#prepared("UPDATE mcp_sessions SET last_used_at = ? WHERE agent = ? AND id = ?").run(now, agent, id);
        return { agent, id, owner: row.owner ?? undefined, initialize: row.initialize_json, snapshot: row.snapshot_json };
      })
      .immediate();
  }

  async endMcpSession(agent: string, id: string, idleBefore?: number): Promise<boolean> {
    if (idleBefore === undefined) return this.#prepared("DELETE FROM mcp_sessions WHERE agent = ? AND id = ?").run(agent, id).changes > 0;
    return this.#prepared("DELETE FROM mcp_sessions WHERE agent = ? AND id = ? AND last_used_at < ?").run(agent, id, idleBefore).changes > 0;
  }

  async addToken(t: NewApiToken, max?: TokenLimits): Promise<AddToken> {
    const at = this.#now();
    // IMMEDIATE: the write lock from the start, so the counts and the name are checked in turn across processes.
    return this.#db
      .transaction((): AddToken => {
        if (max !== undefined && checked(CountRow, this.#prepared("SELECT count(*) AS count FROM api_tokens").get(), "api_tokens").count >= max.tokens) return { outcome: "too_many", max: max.tokens };
        if (this.#prepared("SELECT 1 FROM api_tokens WHERE name = ?").get(t.name) !== undefined) return { outcome: "name_taken" };
        if (this.#prepared("SELECT 1 FROM people WHERE name = ?").get(t.person) === undefined) {
          if (max !== undefined && checked(CountRow, this.#prepared("SELECT count(*) AS count FROM people").get(), "people").count >= max.people) return { outcome: "too_many_people", max: max.people };
          this.#prepared("INSERT INTO people (name, created_at) VALUES (?, ?)").run(t.person, at);
        }
        const expiresAt = t.lifetimeMs == null ? null : at + t.lifetimeMs;
        this.#prepared("INSERT INTO api_tokens (id, name, role, person, hash, created_at, expires_at) VALUES (?, ?, ?, ?, ?, ?, ?)").run(t.id, t.name, t.role, t.person, t.hash, at, expiresAt);
        return { outcome: "added", token: { id: t.id, name: t.name, role: t.role, person: t.person, createdAt: at, lastUsedAt: null, expiresAt } };
      })
      .immediate();
  }

  async listPeople(): Promise<PersonRecord[]> {
    const rows = this.#prepared("SELECT p.name, p.created_at, (SELECT count(*) FROM api_tokens t WHERE t.person = p.name) AS tokens FROM people p ORDER BY p.created_at, p.name").all();
    return checkedAll(PersonRow, rows, "people").map(personOf);
  }

  async removePerson(name: string, now: number): Promise<RemovePerson> {
    return this.#db
      .transaction((): RemovePerson => {
        const found = this.#prepared("SELECT p.name, p.created_at, (SELECT count(*) FROM api_tokens t WHERE t.person = p.name) AS tokens FROM people p WHERE p.name = ?").get(name);
        if (found === undefined) return { outcome: "absent" };
        const person = personOf(checked(PersonRow, found, "people"));
        const tokens = checkedAll(TokenRow, this.#prepared("SELECT * FROM api_tokens WHERE person = ? ORDER BY created_at, id").all(name), "api_tokens").map(tokenOf);
        if (tokens.some((t) => t.role === "admin" && !expired(t, now))) {
          const others = this.#prepared("SELECT 1 FROM api_tokens WHERE role = 'admin' AND person <> ? AND (expires_at IS NULL OR expires_at > ?) LIMIT 1").get(name, now);
          if (others === undefined) return { outcome: "last_admin" };
        }
        for (const t of tokens) this.#prepared("DELETE FROM mcp_sessions WHERE owner = ?").run(t.id);
        this.#prepared("DELETE FROM api_tokens WHERE person = ?").run(name);
        this.#prepared("DELETE FROM people WHERE name = ?").run(name);
        // Their personal credentials go with them, to be revoked at their servers (a person's name is never "").
        const rows = checkedAll(CredentialRow, this.#prepared("SELECT * FROM credentials WHERE person = ? ORDER BY id").all(name), "credentials");
        this.#prepared("DELETE FROM credentials WHERE person = ?").run(name);
        this.#prepared("DELETE FROM credential_losses WHERE person = ?").run(name);
        this.#prepared("UPDATE authorizations SET status = 'failed', error = ?, message = ?, final_at = ? WHERE person = ? AND status = 'pending'").run(PERSON_REMOVED.error, PERSON_REMOVED.message, now, name);
        const key = this.#key;
        return { outcome: "removed", person, tokens, held: rows.map(summaryOf), credentials: key ? rows.map((row) => credentialOf(key, row)) : [] };
      })
      .immediate();
  }

  async listTokens(): Promise<ApiTokenRecord[]> {
    return checkedAll(TokenRow, this.#prepared("SELECT * FROM api_tokens ORDER BY created_at, id").all(), "api_tokens").map(tokenOf);
  }

  async heartbeat(replica: { id: string; listen: string }, now: number): Promise<void> {
    this.#prepared("INSERT INTO replicas (id, listen, started_at, seen_at) VALUES (?, ?, ?, ?) ON CONFLICT(id) DO UPDATE SET seen_at = excluded.seen_at").run(replica.id, replica.listen, now, now);
  }

  async endReplica(id: string): Promise<void> {
    this.#prepared("DELETE FROM replicas WHERE id = ?").run(id);
  }

  async liveReplicas(since: number): Promise<ReplicaRecord[]> {
    return checkedAll(ReplicaRow, this.#prepared("SELECT id, listen, started_at, seen_at FROM replicas WHERE seen_at >= ? ORDER BY started_at, id").all(since), "replicas").map(replicaOf);
  }

  async revokeToken(id: string, now: number): Promise<RevokeToken> {
    return this.#db
      .transaction((): RevokeToken => {
        const found = this.#prepared("SELECT * FROM api_tokens WHERE id = ?").get(id);
        if (found === undefined) return { outcome: "absent" };
        const token = tokenOf(checked(TokenRow, found, "api_tokens"));
        if (token.role === "admin" && !expired(token, now)) {
          const others = this.#prepared("SELECT 1 FROM api_tokens WHERE role = 'admin' AND id <> ? AND (expires_at IS NULL OR expires_at > ?) LIMIT 1").get(id, now);
          if (others === undefined) return { outcome: "last_admin" };
        }
        this.#prepared("DELETE FROM api_tokens WHERE id = ?").run(id);
        // Its sessions go with it; the processes holding them close them at their next check.
        this.#prepared("DELETE FROM mcp_sessions WHERE owner = ?").run(id);
        return { outcome: "revoked", token };
      })
      .immediate();
  }

  async findToken(hash: Buffer) {
    const found = this.#prepared("SELECT * FROM api_tokens WHERE hash = ?").get(hash);
    if (!found) return undefined;
    const row = checked(TokenRow, found, "api_tokens");
    const now = this.#now();
    const token = tokenOf(row);
    if (!expired(token, now) && (row.last_used_at === null || now - row.last_used_at >= LAST_USED_RESOLUTION_MS)) this.#prepared("UPDATE api_tokens SET last_used_at = ? WHERE id = ?").run(now, row.id);
    return { ...token, hash: row.hash };
  }

  async appendAudit(entries: readonly NewAuditEntry[]): Promise<void> {
    if (entries.length === 0) return;
    // One IMMEDIATE transaction: SQLite's one writer orders seq as the entries become visible.
    const insert = this.#prepared(`INSERT INTO audit (${AUDIT_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT(id) DO NOTHING`);
    this.#db
      .transaction(() => {
        for (const e of entries) insert.run(...auditValues(e));
      })
      .immediate();
  }

  async listAudit(filter: AuditFilter, after: number, limit: number): Promise<AuditEntry[]> {
    const { where, params } = auditWhere(filter, after, () => "?");
    const rows = this.#prepared(`SELECT seq, ${AUDIT_COLUMNS} FROM audit WHERE ${where} ORDER BY seq LIMIT ?`).all(...params, limit);
    return checkedAll(AuditRow, rows, "audit").map(auditOf);
  }

  async pruneAudit(before: number, max: number): Promise<number> {
    return this.#prepared("DELETE FROM audit WHERE seq IN (SELECT seq FROM audit WHERE at < ? ORDER BY seq LIMIT ?)").run(before, max).changes;
  }

  async rekey(next: Key): Promise<number> {
    const key = needKey(this.#key);
    const count = this.#db
      .transaction(() => {
        let n = 0;
        for (const row of this.#prepared("SELECT id, person, url, key_id, sealed FROM credentials").all() as Array<{ id: string; person: string; url: string; key_id: string; sealed: string }>) {
          const aad = credentialAad(row.id, row.url, row.person);
          const sealed = reseal(key, next, row, aad);
          this.#prepared("UPDATE credentials SET key_id = ?, sealed = ? WHERE id = ? AND person = ?").run(sealed.keyId, sealed.value, row.id, row.person);
          n++;
        }
        for (const row of checkedAll(HeaderValueRow, this.#prepared("SELECT * FROM header_values").all(), "header_values")) {
          const sealed = reseal(key, next, row, headerValueAad(row.connection_id, row.url, row.name));
          this.#prepared("UPDATE header_values SET key_id = ?, sealed = ? WHERE connection_id = ? AND name = ?").run(sealed.keyId, sealed.value, row.connection_id, row.name);
          n++;
        }
        const regs = this.#prepared("SELECT authorization_server, redirect_uri, key_id, sealed FROM registrations").all() as Array<{
          authorization_server: string;
          redirect_uri: string;
          key_id: string;
          sealed: string;
        }>;
        for (const row of regs) {
          const aad = registrationAad(row.authorization_server, row.redirect_uri);
          const sealed = reseal(key, next, row, aad);
          this.#prepared("UPDATE registrations SET key_id = ?, sealed = ? WHERE authorization_server = ? AND redirect_uri = ?").run(sealed.keyId, sealed.value, row.authorization_server, row.redirect_uri);
          n++;
        }
        for (const row of checkedAll(SealedAuthorizationRow, this.#prepared("SELECT id, key_id, sealed FROM authorizations").all(), "authorizations")) {
          const sealed = reseal(key, next, row, authorizationAad(row.id));
          this.#prepared("UPDATE authorizations SET key_id = ?, sealed = ? WHERE id = ?").run(sealed.keyId, sealed.value, row.id);
          n++;
        }
        const check = seal(next, KEY_CHECK_TEXT, KEY_CHECK);
        this.#prepared("INSERT INTO meta (name, key_id, value) VALUES (?, ?, ?) ON CONFLICT(name) DO UPDATE SET key_id = excluded.key_id, value = excluded.value").run(KEY_CHECK, check.keyId, check.value);
        return n;
      })
      .immediate();
    this.#key = next;
    return count;
  }

  async close() {
    this.#db.close();
  }
}

