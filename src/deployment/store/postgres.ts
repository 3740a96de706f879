// The deployment's store in a Postgres database that several replicas share. The same rows as the
// SQLite file (sqlite.ts), sealed the same way (rows.ts), with the writes that must not interleave
// made safe across processes: a compare-and-swap on a credential's version is one UPDATE … WHERE
// version = $n, and a check-then-write runs in a transaction holding row locks (SELECT … FOR
// UPDATE / FOR SHARE) so READ COMMITTED gives the answer SQLite's single writer gives.
// Migrations run under a transaction-level advisory lock, so replicas starting at once run each
// one exactly once (https://www.postgresql.org/docs/current/explicit-locking.html#ADVISORY-LOCKS).
import type { ClientConfig, Pool, PoolClient, QueryResultRow } from "pg";
import { failed, refused, SubsError } from "../../errors.ts";
import { passwordInUrl } from "../config.ts";
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
  agentOf,
  AuthorizationRow,
  authorizationAad,
  authorizationOf,
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
  checkedAll,
  ConnectionRow,
  CONNECTION_COLUMNS,
  connectionOf,
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
  CredentialRow,
  credentialLossesMigration,
  LossRow,
  lossOf,
  SUMMARY_COLUMNS,
  credentialAad,
  credentialOf,
  declares,
  KEY_CHECK,
  KEY_CHECK_TEXT,
  LAST_USED_RESOLUTION_MS,
  needKey,
  openRegistration,
  registrationAad,
  reseal,
  SealedAuthorizationRow,
  SealedRow,
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
  StoreUnavailable,
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
  type DeleteConnection,
  type HeaderValueRecord,
  type HeaderValueSummary,
  type PutAgent,
  type PutConnection,
  type PutState,
  type RefreshExchange,
  type RekeyableStore,
  type RevokeToken,
  type StateChange,
  type ReplicaRecord,
} from "./types.ts";

/** Entry N takes the schema from version N to N+1: sqlite.ts's MIGRATIONS in Postgres's types. */
export const PG_MIGRATIONS: readonly string[] = [
  `CREATE TABLE meta (name TEXT PRIMARY KEY, key_id TEXT, value TEXT NOT NULL);
   CREATE TABLE connections (
     id TEXT PRIMARY KEY, url TEXT NOT NULL, prefix_tools BOOLEAN NOT NULL, oauth_json TEXT,
     created_at BIGINT NOT NULL, updated_at BIGINT NOT NULL);
   CREATE TABLE agents (name TEXT PRIMARY KEY, body_json TEXT NOT NULL, created_at BIGINT NOT NULL, updated_at BIGINT NOT NULL);
   CREATE TABLE agent_connections (agent TEXT NOT NULL REFERENCES agents(name) ON DELETE CASCADE, connection TEXT NOT NULL, PRIMARY KEY (agent, connection));
   CREATE INDEX agent_connections_by_connection ON agent_connections(connection);
   CREATE TABLE credentials (
     id TEXT PRIMARY KEY REFERENCES connections(id) ON DELETE CASCADE, url TEXT NOT NULL, issuer TEXT NOT NULL,
     authorized_at BIGINT NOT NULL, expires_at BIGINT, version INTEGER NOT NULL,
     key_id TEXT NOT NULL, sealed TEXT NOT NULL);
   CREATE TABLE registrations (
     authorization_server TEXT NOT NULL, redirect_uri TEXT NOT NULL, key_id TEXT NOT NULL, sealed TEXT NOT NULL,
     created_at BIGINT NOT NULL, PRIMARY KEY (authorization_server, redirect_uri));
   CREATE TABLE api_tokens (
     id TEXT PRIMARY KEY, name TEXT NOT NULL, role TEXT NOT NULL, hash BYTEA NOT NULL UNIQUE,
     created_at BIGINT NOT NULL, last_used_at BIGINT);`,
  // Pending consents (sqlite.ts's second migration). Its third, the refresh leases, has no
  // counterpart: a refresh here holds a transaction-level advisory lock instead (refreshCredential).
  `CREATE TABLE authorizations (
     id TEXT PRIMARY KEY, connection_id TEXT NOT NULL, url TEXT NOT NULL, state_hash TEXT NOT NULL UNIQUE,
     issuer TEXT NOT NULL, iss_advertised BOOLEAN NOT NULL, expires_at BIGINT NOT NULL,
     status TEXT NOT NULL, error TEXT, message TEXT, final_at BIGINT, claimed BOOLEAN NOT NULL,
     key_id TEXT NOT NULL, sealed TEXT NOT NULL);
   CREATE INDEX authorizations_by_connection ON authorizations(connection_id, status);`,
  // Agents' MCP sessions (sqlite.ts's fourth migration), so that any replica continues one.
  `CREATE TABLE mcp_sessions (
     agent TEXT NOT NULL, id TEXT NOT NULL, owner TEXT, initialize_json TEXT NOT NULL, snapshot_json TEXT NOT NULL,
     created_at BIGINT NOT NULL, last_used_at BIGINT NOT NULL, PRIMARY KEY (agent, id));
   CREATE INDEX mcp_sessions_by_use ON mcp_sessions(last_used_at);`,
  // Token expiry and unique names (sqlite.ts's fifth migration, which says what becomes of a shared name).
  `ALTER TABLE api_tokens ADD COLUMN expires_at BIGINT;
   ${UNIQUE_TOKEN_NAMES}`,
  // Who consented (sqlite.ts's sixth migration).
  AUTHORIZED_BY,
  // The processes serving the store (sqlite.ts's seventh migration).
  `CREATE TABLE replicas (id TEXT PRIMARY KEY, listen TEXT NOT NULL, started_at BIGINT NOT NULL, seen_at BIGINT NOT NULL);`,
  // Header templates and the values of their variables (sqlite.ts's eighth migration).
  headerValuesMigration("BIGINT", ""),
  // People (sqlite.ts's ninth migration).
  peopleMigration("BIGINT", ""),
  // Personal credentials (sqlite.ts's tenth migration; here the key changes in place).
  personalCredentialsMigration("BIGINT", ""),
  // When a refresh token expires, and the record a credential lost for good leaves (sqlite.ts's eleventh migration).
  credentialLossesMigration("BIGINT", ""),
  // The record of calls and changes (sqlite.ts's twelfth migration).
  auditMigration("BIGSERIAL PRIMARY KEY", "BIGINT", "DOUBLE PRECISION", ""),
  // The lock the agents are served under (sqlite.ts's thirteenth migration).
  lockMigration("BIGINT", ""),
];

/** The advisory lock the migrations run under: any constant no other tool of the database uses ("subs" in ASCII). */
const MIGRATION_LOCK = 0x73756273;
/**
 * The advisory lock every write of declarations takes first (connections and agents, one at a time
 * or a whole state): applies from several replicas then run one after another, each reading what
 * the one before committed (READ COMMITTED reads at each statement), so two applies end in one of
 * the two declared states, never a mix (docs/deployment-protocol.md section 3.10).
 */
const DECLARATIONS_LOCK = 0x73756274;
/**
 * The first key of the two-key advisory locks (the second is hashtext of the id): a credential's
 * refresh, and the starts of consents of one connection. Two-key locks never collide with the
 * one-key locks above (https://www.postgresql.org/docs/current/functions-admin.html#FUNCTIONS-ADVISORY-LOCKS);
 * two ids of the same hash only wait for each other.
 */
export const REFRESH_LOCKS = 0x73756275;
const CONSENT_LOCKS = 0x73756276;
/**
 * The advisory lock every write of API tokens takes first: two creations do not both pass the
 * count, and two revocations of the last two admin tokens do not both find the other still there.
 */
const TOKENS_LOCK = 0x73756277;
/**
 * The advisory lock every write of the record takes first. A sequence hands out numbers when rows
 * are inserted, not when they commit: two replicas' batches could become visible out of order, and
 * a reader following the cursor (`subs deployment audit --follow`) would step past the one that
 * committed later. Writers in turn, seq order is commit order.
 */
const AUDIT_LOCK = 0x73756278;
/**
 * A refresh waits this long for another replica's: one exchange with an authorization server.
 * Set per transaction, overriding the 5 s statement timeout that would otherwise cancel a waiting
 * replica while the holder's exchange is still running.
 */
const REFRESH_WAIT_MS = 60_000;
/**
 * How long a refresh may hold its lock between statements (while its exchange runs): a replica
 * that hangs without dying then loses its session, and with it the lock, after this long.
 */
const REFRESH_HOLD_MS = 60_000;
/** The meta row of the declarations' revision (absent: "0"). */
const REVISION = "revision";
/** Thrown inside putState's transaction to roll it back: the plan was made from an older revision. */
const STALE = Symbol("stale revision");
/** A connection row as Postgres returns it: what putState compares a declaration with. */
type RawConnection = RawConnectionRow;
/** A request waits this long for a connection before it is answered "store unavailable". */
const CONNECT_TIMEOUT_MS = 2000;
/** The longest one statement may run (a lock wait included) before Postgres cancels it. */
const STATEMENT_TIMEOUT_MS = 5000;
const POOL_SIZE = 10;

type Options = {
  /** The connection URL; a password in it is used when `password` is not given. */
  url: string;
  /** The password subs resolved (config.ts, postgresPassword), or none. */
  password?: string | undefined;
  /** Where it came from, for the operator: `$PGPASSWORD`, `--store-password-file FILE`… */
  passwordFrom?: string | undefined;
  /** The URL without its password: what errors and logs name. */
  redacted: string;
  key: Key | undefined;
  now?: () => number;
  /** Refuse, creating nothing, a database subs has never made a store in (sqlite.ts, the same option). */
  mustExist?: boolean;
};

type Queryable = Pick<PoolClient, "query">;

/**
 * Errors that say the database cannot be reached or did not answer in time, as opposed to one a
 * statement caused: SQLSTATE class 08 (connection exception), 57P0x (shutdown, cannot connect now),
 * 53 (insufficient resources), 57014 (canceled by statement_timeout)
 * (https://www.postgresql.org/docs/current/errcodes-appendix.html); a socket error (ECONNREFUSED,
 * ECONNRESET, ETIMEDOUT…); or the pg client's own connection and timeout errors, which carry no code.
 */
function unreachable(error: unknown): boolean {
  if (!(error instanceof Error)) return false;
  const code = (error as { code?: unknown }).code;
  if (typeof code === "string" && /^[0-9A-Z]{5}$/.test(code)) return /^(08|53|57P0)/.test(code) || code === "57014";
  if (typeof code === "string" && /^E[A-Z_]+$/.test(code)) return true;
  return /connect|terminated|timeout|not queryable|ended/i.test(error.message);
}

/** Opens the store (running any migration it lacks); refuses a key that does not open what it holds. */
export async function openPostgresStore(options: Options): Promise<PostgresStore> {
  const { default: pg } = await import("pg");
  const url = new URL(options.url);
  const inUrl = passwordInUrl(url);
  const password = options.password ?? inUrl;
  const passwordFrom = options.password !== undefined ? options.passwordFrom : inUrl !== undefined ? "the store URL" : undefined;
  url.password = "";
  if (url.searchParams.has("password")) url.searchParams.delete("password");
  const redacted = options.redacted;
  /**
   * pg takes a password the URL lacks from process.env.PGPASSWORD or ~/.pgpass on its own (its
   * ConnectionParameters and the pgpass module): here the one subs resolved is its only source,
   * given as the function pg calls when the server asks for one (pg's "password" option).
   */
  class StoreClient extends pg.Client {
    constructor(config?: ClientConfig) {
      super(config);
      (this as unknown as { password: () => string }).password = () => {
        if (password !== undefined) return password;
        // pg fails the connect with this refusal but leaves its socket open, and the server holds
        // the half-made connection until its authentication_timeout (60 s by default); pg-pool
        // drops the client without ending it. So it is ended here, once the refusal is reported.
        setImmediate(() => void this.end().catch(() => {}));
        throw refused(`the Postgres store ${redacted} asks for a password, and none is given`, {
          hint: "give it with --store-password-file FILE (mode 0600), $PGPASSWORD or a pgpass file ($PGPASSFILE, ~/.pgpass)",
          code: "store_refused",
        });
      };
    }
  }
  const pool = new pg.Pool({
    Client: StoreClient as unknown as new () => PoolClient,
    connectionString: url.href,
    max: POOL_SIZE,
    connectionTimeoutMillis: CONNECT_TIMEOUT_MS,
    statement_timeout: STATEMENT_TIMEOUT_MS,
    query_timeout: STATEMENT_TIMEOUT_MS + 1000,
    idleTimeoutMillis: 30_000,
    keepAlive: true,
    application_name: "subs-deployment",
  });
  // An idle connection the server closed (a restart, a failover) must not end the process: the
  // pool drops it and the next query opens another.
  pool.on("error", () => {});
  const store = new PostgresStore(pool, redacted, passwordFrom, options.key, options.now ?? Date.now);
  try {
    await store.migrate(options.mustExist ?? false);
    await store.checkKey();
    return store;
  } catch (error) {
    await pool.end().catch(() => {});
    throw error;
  }
}

export class PostgresStore implements RekeyableStore {
  readonly #pool: Pool;
  #key: Key | undefined;
  readonly #now: () => number;
  readonly path: string;
  readonly #passwordFrom: string | undefined;
  /** How many migrations this process ran when it opened the store (0 when another replica had). */
  migrationsRun = 0;

  constructor(pool: Pool, redacted: string, passwordFrom: string | undefined, key: Key | undefined, now: () => number) {
    this.#pool = pool;
    this.path = redacted;
    this.#passwordFrom = passwordFrom;
    this.#key = key;
    this.#now = now;
  }

  #unavailable(error: unknown): never {
    const code = (error as { code?: unknown }).code;
    // Class 28 (invalid authorization) and 3D000 (no such database): retrying will not help.
    if (typeof code === "string" && (code.startsWith("28") || code === "3D000")) {
      throw refused(`the Postgres store ${this.path} refused the connection: ${(error as Error).message}`, {
        hint: `check the user, password${this.#passwordFrom ? ` (from ${this.#passwordFrom})` : " (none was given)"} and database of the store`,
        code: "store_refused",
      });
    }
    // A SubsError is already words for the operator (the password function's refusal above).
    if (error instanceof SubsError || !unreachable(error)) throw error;
    // The driver's message, never the URL (it names the host, not the password, but says no more than the redacted one).
    throw new StoreUnavailable(`the Postgres store ${this.path} does not answer (${(error as Error).message || "no answer"})`, { cause: error });
  }

  async #rows<T extends QueryResultRow = QueryResultRow>(sql: string, params: unknown[] = [], on: Queryable = this.#pool): Promise<T[]> {
    try {
      return (await on.query<T>(sql, params)).rows;
    } catch (error) {
      this.#unavailable(error);
    }
  }

  async #count(sql: string, params: unknown[], on: Queryable = this.#pool): Promise<number> {
    try {
      return (await on.query(sql, params)).rowCount ?? 0;
    } catch (error) {
      this.#unavailable(error);
    }
  }

  /** Runs `body` in one transaction on one connection; rolled back when it throws. */
  async #transaction<T>(body: (db: Queryable) => Promise<T>): Promise<T> {
    let client: PoolClient;
    try {
      client = await this.#pool.connect();
    } catch (error) {
      this.#unavailable(error);
    }
    let broken = false;
    // pg-pool takes its own error listener off a connection it lends out, and a pg client emits
    // "error" when its connection ends with no query running: a Postgres restart or failover while
    // this transaction waits between statements (a refresh's exchange) would end the process. The
    // transaction's next statement then fails as the store not answering.
    const lost = () => void (broken = true);
    client.on("error", lost);
    try {
      await this.#rows("BEGIN", [], client);
      const result = await body(client);
      await this.#rows("COMMIT", [], client);
      return result;
    } catch (error) {
      broken ||= error instanceof StoreUnavailable;
      if (!broken) await client.query("ROLLBACK").catch(() => (broken = true));
      throw error;
    } finally {
      client.removeListener("error", lost);
      // A connection that failed mid-transaction is not given back to the pool.
      client.release(broken || undefined);
    }
  }

  async migrate(mustExist = false): Promise<void> {
    this.migrationsRun = await this.#transaction(async (db) => {
      await this.#rows("SELECT pg_advisory_xact_lock($1)", [MIGRATION_LOCK], db);
      if (mustExist) {
        const [made] = await this.#rows<{ made: boolean }>("SELECT to_regclass('schema_migrations') IS NOT NULL AS made", [], db);
        if (!made?.made) {
          throw refused(`no deployment store in ${this.path}; nothing was created`, {
            hint: "give --store the database `subs deployment serve` runs with (it makes the store on its first start)",
            code: "no_store",
          });
        }
      }
      await this.#rows("CREATE TABLE IF NOT EXISTS schema_migrations (version INTEGER PRIMARY KEY, applied_at BIGINT NOT NULL)", [], db);
      const [row] = await this.#rows<{ version: number | null }>("SELECT max(version) AS version FROM schema_migrations", [], db);
      const at = row?.version ?? 0;
      if (at > PG_MIGRATIONS.length) {
        throw refused(`the store was written by a newer subs (schema ${at}; this one knows ${PG_MIGRATIONS.length})`, { hint: "run the newer subs, or restore a backup", code: "store_too_new" });
      }
      for (let n = at; n < PG_MIGRATIONS.length; n++) {
        await this.#rows(PG_MIGRATIONS[n]!, [], db);
        await this.#rows("INSERT INTO schema_migrations (version, applied_at) VALUES ($1, $2)", [n + 1, this.#now()], db);
      }
      return PG_MIGRATIONS.length - at;
    });
  }

  /** A key that does not open the store's check value is refused before anything is decrypted. */
  async checkKey() {
    await checkKey(this.#key, this.path, {
      read: () => this.keyCheck(),
      anySealedKeyId: async () => (await this.#rows<{ key_id: string }>("SELECT key_id FROM credentials UNION SELECT key_id FROM header_values UNION SELECT key_id FROM registrations UNION SELECT key_id FROM authorizations LIMIT 1"))[0]?.key_id,
      write: async (sealed) => void (await this.#rows("INSERT INTO meta (name, key_id, value) VALUES ($1, $2, $3) ON CONFLICT (name) DO NOTHING", [KEY_CHECK, sealed.keyId, sealed.value])),
    });
  }

  /** Whether a key has ever sealed anything here (a new store may get a new key). */
  async hasKeyCheck(): Promise<boolean> {
    return (await this.#rows("SELECT 1 FROM meta WHERE name = $1", [KEY_CHECK])).length > 0;
  }

  /** The key check value (its key id says which key the store's values are sealed under), if any. */
  async keyCheck(): Promise<Sealed | undefined> {
    const [row] = await this.#rows("SELECT key_id, value AS sealed FROM meta WHERE name = $1", [KEY_CHECK]);
    if (!row) return undefined;
    const { key_id, sealed } = checked(SealedRow, row, "meta");
    return { keyId: key_id, value: sealed };
  }

  /** A round trip to the database: what /readyz asks. */
  async ping(): Promise<void> {
    await this.#rows("SELECT 1");
  }

  async listConnections(): Promise<ConnectionRecord[]> {
    return checkedAll(ConnectionRow, await this.#rows(`SELECT ${CONNECTION_COLUMNS} FROM connections ORDER BY id`), "connections").map(connectionOf);
  }

  async getConnection(id: string): Promise<ConnectionRecord | undefined> {
    const [row] = await this.#rows(`SELECT ${CONNECTION_COLUMNS} FROM connections WHERE id = $1`, [id]);
    return row === undefined ? undefined : connectionOf(checked(ConnectionRow, row, "connections"));
  }

  async putConnection(c: ConnectionRecord): Promise<PutConnection> {
    const at = this.#now();
    return this.#transaction(async (db) => {
      await this.#lockDeclarations(db);
      const [existing] = await this.#rows<RawConnection>(`SELECT ${CONNECTION_COLUMNS} FROM connections WHERE id = $1 FOR UPDATE`, [c.id], db);
      // The same declaration again (a login declares before it authorizes) leaves the revision
      // an apply planned from valid.
      if (declares(existing, c)) return { created: false, urlChanged: false, dropped: [] };
      const { created, credentials: dropped } = await this.#writeConnection(db, c, existing, at);
      await this.#bumpRevision(db);
      return { created, urlChanged: existing !== undefined && existing.url !== c.url, dropped };
    });
  }

  /**
   * Inside a transaction: declares or replaces. A different url, or a change between shared and
   * personal, takes every credential of it out (returned), and a different url every header
   * value; a variable the headers no longer name loses its value (docs/deployment-protocol.md
   * section 5). `values`: how many values went.
   */
  async #writeConnection(db: Queryable, c: ConnectionRecord, existing: RawConnection | undefined, at: number) {
    const credentials = dropsCredentials(existing, c) ? await this.#takeCredentials(db, c.id) : [];
    // A loss is bound to the url and the kind it happened at: another starts with nothing to say.
    if (dropsCredentials(existing, c)) await this.#rows("DELETE FROM credential_losses WHERE id = $1", [c.id], db);
    const [row] = await this.#rows<{ created: boolean }>(
      `INSERT INTO connections (id, url, prefix_tools, oauth_json, headers_json, credential, created_at, updated_at) VALUES ($1, $2, $3, $4, $6, $7, $5, $5)
       ON CONFLICT (id) DO UPDATE SET url = excluded.url, prefix_tools = excluded.prefix_tools, oauth_json = excluded.oauth_json,
         headers_json = excluded.headers_json, credential = excluded.credential, updated_at = excluded.updated_at
       RETURNING (xmax = 0) AS created`,
      [c.id, c.url, c.prefixTools, c.oauth === undefined ? null : JSON.stringify(c.oauth), at, headersColumn(c), credentialColumn(c)],
      db,
    );
    const values = await this.#count("DELETE FROM header_values WHERE connection_id = $1 AND (url <> $2 OR NOT (name = ANY($3::text[])))", [c.id, c.url, headerVariables(c.headers ?? {})], db);
    return { created: row?.created === true, credentials, values };
  }

  async #lockDeclarations(db: Queryable): Promise<void> {
    await this.#rows("SELECT pg_advisory_xact_lock($1)", [DECLARATIONS_LOCK], db);
  }

  /** Inside a write transaction of declarations. */
  async #bumpRevision(db: Queryable): Promise<void> {
    await this.#rows("INSERT INTO meta (name, key_id, value) VALUES ($1, NULL, '1') ON CONFLICT (name) DO UPDATE SET value = (meta.value::bigint + 1)::text", [REVISION], db);
  }

  async #revision(db: Queryable = this.#pool): Promise<string> {
    const [row] = await this.#rows<{ value: string }>("SELECT value FROM meta WHERE name = $1", [REVISION], db);
    return row?.value ?? "0";
  }

  async revision(): Promise<string> {
    return this.#revision();
  }

  async getLock(): Promise<LockRecord | undefined> {
    const [row] = await this.#rows("SELECT body_json FROM tool_lock WHERE id = 1");
    return row === undefined ? undefined : lockOf(checked(LockRow, row, "tool_lock"));
  }

  async putState(state: DeclaredState): Promise<PutState> {
    const at = this.#now();
    const current = { revision: "" };
    try {
      return await this.#transaction((db) => this.#applyState(db, state, at, current));
    } catch (error) {
      if (error === STALE) return { outcome: "revision_changed", revision: current.revision };
      throw error;
    }
  }

  /**
   * Inside the transaction, under the declarations' lock. A stale `ifRevision` throws STALE (rolling
   * back) only when the state would change: a repeat of a request whose answer was lost finds it
   * all done and succeeds. The same steps as sqlite.ts's, in the same order.
   */
  async #applyState(db: Queryable, state: DeclaredState, at: number, current: { revision: string }): Promise<PutState> {
    await this.#lockDeclarations(db);
    current.revision = await this.#revision(db);
    const before = new Map((await this.#rows<RawConnection>(`SELECT ${CONNECTION_COLUMNS} FROM connections`, [], db)).map((r) => [r.id, r]));
    const agentsBefore = new Map((await this.#rows<{ name: string; body_json: string }>("SELECT name, body_json FROM agents", [], db)).map((r) => [r.name, r.body_json]));
    const named = new Set(state.connections.map((c) => c.id));
    const kept = (id: string) => named.has(id) || (!state.prune && before.has(id));
    const missing = [...new Set(state.agents.flatMap((a) => a.mcp.map((e) => e.id)))].filter((id) => !kept(id));
    if (missing.length) return { outcome: "unknown_connection", missing };

    const changes: StateChange[] = [];
    const ended: Array<{ id: string; why: "url_changed" | "deleted" }> = [];
    const dropped: CredentialRecord[] = [];
    const hasCredential = async (id: string) => (await this.#rows("SELECT 1 FROM credentials WHERE id = $1", [id], db)).length > 0;
    for (const c of state.connections) {
      const row = before.get(c.id);
      if (declares(row, c)) continue;
      // A credential is bound to its url (docs/deployment-protocol.md section 5).
      const hadCredential = dropsCredentials(row, c) && (await hasCredential(c.id));
      const written = await this.#writeConnection(db, c, row, at);
      dropped.push(...written.credentials);
      if (row && row.url !== c.url) ended.push({ id: c.id, why: "url_changed" });
      changes.push({ kind: "connection", id: c.id, action: row ? "change" : "add", credentialDropped: hadCredential || written.values > 0 });
    }
    for (const agent of state.agents) {
      const body = agentsBefore.get(agent.name);
      if (body === JSON.stringify(agent)) continue;
      await this.#writeAgent(db, agent, at);
      changes.push({ kind: "agent", id: agent.name, action: body === undefined ? "add" : "change", credentialDropped: false });
    }
    if (state.prune) {
      // Agents first: no agent ever names a missing connection, even inside the transaction.
      const keepAgents = new Set(state.agents.map((a) => a.name));
      for (const name of [...agentsBefore.keys()].sort()) {
        if (keepAgents.has(name)) continue;
        await this.#rows("DELETE FROM agents WHERE name = $1", [name], db);
        changes.push({ kind: "agent", id: name, action: "remove", credentialDropped: false });
      }
      for (const id of [...before.keys()].sort()) {
        if (named.has(id)) continue;
        const hadCredential = (await hasCredential(id)) || (await this.#rows("SELECT 1 FROM header_values WHERE connection_id = $1", [id], db)).length > 0;
        dropped.push(...(await this.#takeCredentials(db, id)));
        await this.#rows("DELETE FROM connections WHERE id = $1", [id], db);
        ended.push({ id, why: "deleted" });
        changes.push({ kind: "connection", id, action: "remove", credentialDropped: hadCredential });
      }
    }
    if (state.lock !== undefined) {
      // A lock is a declaration too: the same text again is no change (src/deployment/lock.ts).
      const [row] = await this.#rows<{ body_json: string }>("SELECT body_json FROM tool_lock WHERE id = 1", [], db);
      const held = row?.body_json;
      const text = state.lock === null ? undefined : lockText(state.lock);
      if (held !== text) {
        if (text === undefined) await this.#rows("DELETE FROM tool_lock WHERE id = 1", [], db);
        else await this.#rows("INSERT INTO tool_lock (id, body_json, updated_at) VALUES (1, $1, $2) ON CONFLICT (id) DO UPDATE SET body_json = excluded.body_json, updated_at = excluded.updated_at", [text, at], db);
        changes.push({ kind: "lock", id: LOCK_CHANGE_ID, action: held === undefined ? "add" : text === undefined ? "remove" : "change", credentialDropped: false });
      }
    }
    if (changes.length && state.ifRevision !== undefined && state.ifRevision !== current.revision) throw STALE;
    if (changes.length) await this.#bumpRevision(db);
    return { outcome: "applied", changes, ended, dropped, revision: await this.#revision(db) };
  }

  /** Deletes and returns every credential of connection `id` (decrypted when the key is here, for revocation). */
  async #takeCredentials(db: Queryable, id: string): Promise<CredentialRecord[]> {
    const rows = checkedAll(CredentialRow, await this.#rows("DELETE FROM credentials WHERE id = $1 RETURNING *", [id], db), "credentials");
    const key = this.#key;
    return key ? rows.map((row) => credentialOf(key, row)).sort((a, b) => a.person.localeCompare(b.person)) : [];
  }

  async deleteConnection(id: string): Promise<DeleteConnection> {
    return this.#transaction(async (db): Promise<DeleteConnection> => {
      await this.#lockDeclarations(db);
      // Locked first: an agent being written that names it waits (putAgent takes FOR SHARE), so
      // the users read next are all there will be.
      const held = await this.#rows("SELECT 1 FROM connections WHERE id = $1 FOR UPDATE", [id], db);
      const users = (await this.#rows<{ agent: string }>("SELECT agent FROM agent_connections WHERE connection = $1 ORDER BY agent", [id], db)).map((r) => r.agent);
      if (users.length) return { outcome: "in_use", agents: users };
      if (!held.length) return { outcome: "absent" };
      const dropped = await this.#takeCredentials(db, id);
      await this.#rows("DELETE FROM connections WHERE id = $1", [id], db);
      await this.#bumpRevision(db);
      return { outcome: "deleted", dropped };
    });
  }

  async listAgents(): Promise<AgentRecord[]> {
    return checkedAll(AgentRow, await this.#rows("SELECT body_json FROM agents ORDER BY name"), "agents").map(agentOf);
  }

  async getAgent(name: string): Promise<AgentRecord | undefined> {
    const [row] = await this.#rows("SELECT body_json FROM agents WHERE name = $1", [name]);
    return row === undefined ? undefined : agentOf(checked(AgentRow, row, "agents"));
  }

  async putAgent(agent: AgentRecord): Promise<PutAgent> {
    const at = this.#now();
    return this.#transaction(async (db): Promise<PutAgent> => {
      await this.#lockDeclarations(db);
      const wanted = [...new Set(agent.mcp.map((e) => e.id))];
      // FOR SHARE: the connections named cannot be deleted until this agent is committed.
      const present = new Set((await this.#rows<{ id: string }>("SELECT id FROM connections WHERE id = ANY($1::text[]) FOR SHARE", [wanted], db)).map((r) => r.id));
      const missing = wanted.filter((id) => !present.has(id));
      if (missing.length) return { outcome: "unknown_connection", missing };
      const [existing] = await this.#rows<{ body_json: string }>("SELECT body_json FROM agents WHERE name = $1", [agent.name], db);
      if (existing?.body_json === JSON.stringify(agent)) return { outcome: "updated" };
      const created = await this.#writeAgent(db, agent, at);
      await this.#bumpRevision(db);
      return { outcome: created ? "created" : "updated" };
    });
  }

  /** Inside a transaction: the agent and the index of the connections it names; whether it is new. */
  async #writeAgent(db: Queryable, agent: AgentRecord, at: number): Promise<boolean> {
    const wanted = [...new Set(agent.mcp.map((e) => e.id))];
    const [row] = await this.#rows<{ created: boolean }>(
      `INSERT INTO agents (name, body_json, created_at, updated_at) VALUES ($1, $2, $3, $3)
       ON CONFLICT (name) DO UPDATE SET body_json = excluded.body_json, updated_at = excluded.updated_at
       RETURNING (xmax = 0) AS created`,
      [agent.name, JSON.stringify(agent), at],
      db,
    );
    await this.#rows("DELETE FROM agent_connections WHERE agent = $1", [agent.name], db);
    if (wanted.length) await this.#rows("INSERT INTO agent_connections (agent, connection) SELECT $1, unnest($2::text[]) ON CONFLICT DO NOTHING", [agent.name, wanted], db);
    return row?.created === true;
  }

  async deleteAgent(name: string): Promise<boolean> {
    return this.#transaction(async (db) => {
      await this.#lockDeclarations(db);
      const deleted = (await this.#count("DELETE FROM agents WHERE name = $1", [name], db)) > 0;
      if (deleted) await this.#bumpRevision(db);
      return deleted;
    });
  }

  async headerValueSummaries(): Promise<HeaderValueSummary[]> {
    return checkedAll(HeaderValueSummaryRow, await this.#rows("SELECT connection_id, name, url, set_at, set_by FROM header_values ORDER BY connection_id, name"), "header_values").map(headerValueSummaryOf);
  }

  async headerValues(connectionId: string, url: string): Promise<HeaderValueRecord[]> {
    const rows = checkedAll(HeaderValueRow, await this.#rows("SELECT * FROM header_values WHERE connection_id = $1 AND url = $2 ORDER BY name", [connectionId, url]), "header_values");
    return rows.map((row) => headerValueOf(this.#key, row));
  }

  async putHeaderValue(v: HeaderValueRecord): Promise<boolean> {
    const sealed = sealHeaderValue(this.#key, v);
    return this.#transaction(async (db) => {
      // FOR SHARE: a change of the url or the headers (FOR UPDATE) cannot slip between the check and the write.
      const [declared] = await this.#rows(`SELECT ${CONNECTION_COLUMNS} FROM connections WHERE id = $1 FOR SHARE`, [v.connectionId], db);
      if (declared === undefined) return false;
      const connection = connectionOf(checked(ConnectionRow, declared, "connections"));
      if (connection.url !== v.url || !headerVariables(connection.headers ?? {}).includes(v.name)) return false;
      await this.#rows(
        `INSERT INTO header_values (connection_id, name, url, set_at, set_by, key_id, sealed) VALUES ($1, $2, $3, $4, $5, $6, $7)
         ON CONFLICT (connection_id, name) DO UPDATE SET url = excluded.url, set_at = excluded.set_at, set_by = excluded.set_by, key_id = excluded.key_id, sealed = excluded.sealed`,
        [v.connectionId, v.name, v.url, v.setAt, v.setBy, sealed.keyId, sealed.value],
        db,
      );
      return true;
    });
  }

  async deleteHeaderValue(connectionId: string, name: string): Promise<boolean> {
    return (await this.#count("DELETE FROM header_values WHERE connection_id = $1 AND name = $2", [connectionId, name])) > 0;
  }

  async credentialSummaries(person?: string): Promise<Array<Omit<CredentialRecord, "secret">>> {
    const rows =
      person === undefined
        ? await this.#rows(`SELECT ${SUMMARY_COLUMNS} FROM credentials ORDER BY id, person`)
        : await this.#rows(`SELECT ${SUMMARY_COLUMNS} FROM credentials WHERE person = $1 ORDER BY id`, [person]);
    return checkedAll(SummaryRow, rows, "credentials").map(summaryOf);
  }

  async credentialLosses(person?: string): Promise<CredentialLoss[]> {
    const columns = "id, person, url, reason, message, lost_at";
    const rows =
      person === undefined
        ? await this.#rows(`SELECT ${columns} FROM credential_losses ORDER BY id, person`)
        : await this.#rows(`SELECT ${columns} FROM credential_losses WHERE person = $1 ORDER BY id`, [person]);
    return checkedAll(LossRow, rows, "credential_losses").map(lossOf);
  }

  /** Inside a transaction: `person`'s credential of `id` at `url` is gone, and why. */
  async #recordLoss(db: Queryable, id: string, person: string, url: string, loss: Loss, at: number): Promise<void> {
    await this.#rows(
      `INSERT INTO credential_losses (id, person, url, reason, message, lost_at) VALUES ($1, $6, $2, $3, $4, $5)
       ON CONFLICT (id, person) DO UPDATE SET url = excluded.url, reason = excluded.reason, message = excluded.message, lost_at = excluded.lost_at`,
      [id, url, loss.reason, loss.message, at, person],
      db,
    );
  }

  async getCredential(id: string, person: string): Promise<CredentialRecord | undefined> {
    const [row] = await this.#rows("SELECT * FROM credentials WHERE id = $1 AND person = $2", [id, person]);
    return row === undefined ? undefined : credentialOf(this.#key, checked(CredentialRow, row, "credentials"));
  }

  async putCredential(c: Omit<CredentialRecord, "version">): Promise<boolean> {
    const sealed = sealCredential(this.#key, c);
    return this.#transaction(async (db) => {
      // FOR SHARE: a url change (putConnection, FOR UPDATE) cannot slip between the check and the write.
      const [declared] = await this.#rows<{ url: string; credential: string }>("SELECT url, credential FROM connections WHERE id = $1 FOR SHARE", [c.id], db);
      // A personal credential only for a personal connection, a shared one only for a shared one.
      if (!declared || declared.url !== c.url || (declared.credential === "personal") !== (c.person !== "")) return false;
      await this.#rows(
        `INSERT INTO credentials (id, person, url, issuer, authorized_at, authorized_by, expires_at, refresh_expires_at, version, key_id, sealed) VALUES ($1, $9, $2, $3, $4, $8, $5, $10, 1, $6, $7)
         ON CONFLICT (id, person) DO UPDATE SET url = excluded.url, issuer = excluded.issuer, authorized_at = excluded.authorized_at,
           authorized_by = excluded.authorized_by, expires_at = excluded.expires_at, refresh_expires_at = excluded.refresh_expires_at,
           version = credentials.version + 1, key_id = excluded.key_id, sealed = excluded.sealed`,
        [c.id, c.url, c.issuer, c.authorizedAt, c.expiresAt, sealed.keyId, sealed.value, c.authorizedBy, c.person, c.refreshExpiresAt ?? null],
        db,
      );
      // A new consent: whatever was lost before is replaced.
      await this.#rows("DELETE FROM credential_losses WHERE id = $1 AND person = $2", [c.id, c.person], db);
      return true;
    });
  }

  async replaceCredential(version: number, c: Omit<CredentialRecord, "version">): Promise<boolean> {
    const sealed = sealCredential(this.#key, c);
    // One statement: the version compared and bumped under the row's lock, so of two replicas
    // refreshing the same version only one replaces it.
    const changed = await this.#count(
      `UPDATE credentials SET issuer = $4, authorized_at = $5, expires_at = $6, refresh_expires_at = $10, version = version + 1, key_id = $7, sealed = $8
       WHERE id = $1 AND version = $2 AND url = $3 AND person = $9`,
      [c.id, version, c.url, c.issuer, c.authorizedAt, c.expiresAt, sealed.keyId, sealed.value, c.person, c.refreshExpiresAt ?? null],
    );
    return changed > 0;
  }

  async deleteCredential(id: string, person: string, version: number, loss?: Loss, at = this.#now()): Promise<boolean> {
    if (!loss) return (await this.#count("DELETE FROM credentials WHERE id = $1 AND person = $2 AND version = $3", [id, person, version])) > 0;
    return this.#transaction(async (db) => {
      const [held] = await this.#rows<{ url: string }>("DELETE FROM credentials WHERE id = $1 AND person = $2 AND version = $3 RETURNING url", [id, person, version], db);
      if (held) await this.#recordLoss(db, id, person, held.url, loss, at);
      return held !== undefined;
    });
  }

  /**
   * The lock is pg_advisory_xact_lock on the credential's id, taken in a transaction held across
   * `exchange`: Postgres releases it at COMMIT or ROLLBACK, and at once when the holder's session
   * ends (a replica killed mid-refresh), so nobody waits out a lease. An advisory lock rather than
   * SELECT … FOR UPDATE on the row, because a url change, a DELETE or a new consent must not wait
   * for the authorization server (the contract says they take no lock); the final write is the same
   * compare-and-swap on the version as replaceCredential. One pool connection is held per credential
   * being refreshed in this process (oauth.ts runs one refresh per credential version at a time).
   */
  async refreshCredential(id: string, person: string, version: number, exchange: RefreshExchange): Promise<CredentialRefresh> {
    // One lock per credential: a shared one's is the connection id's, as before people; a connection id has no `/` (Postgres text takes no NUL).
    const lock = person === "" ? id : `${id}/${person}`;
    const lost = { moved: false };
    const result = await this.#transaction(async (db): Promise<CredentialRefresh> => {
      await this.#rows(`SET LOCAL lock_timeout = ${REFRESH_WAIT_MS}`, [], db);
      await this.#rows(`SET LOCAL statement_timeout = ${REFRESH_WAIT_MS + 5000}`, [], db);
      await this.#rows(`SET LOCAL idle_in_transaction_session_timeout = ${REFRESH_HOLD_MS}`, [], db);
      try {
        // The client-side read timeout too: the pool's (6 s) would give up on a wait Postgres allows.
        await db.query({ text: "SELECT pg_advisory_xact_lock($1, hashtext($2))", values: [REFRESH_LOCKS, lock], query_timeout: REFRESH_WAIT_MS + 10_000 } as never);
      } catch (error) {
        // SQLSTATE 55P03 lock_not_available: lock_timeout passed.
        if ((error as { code?: unknown }).code === "55P03") throw failed(`another process has been refreshing the credential of ${id} for over ${REFRESH_WAIT_MS / 1000}s`, { code: "refresh_busy" });
        this.#unavailable(error);
      }
      // READ COMMITTED: this reads what the previous holder committed before it released the lock.
      const [row] = await this.#rows("SELECT * FROM credentials WHERE id = $1 AND person = $2", [id, person], db);
      const current = row === undefined ? undefined : credentialOf(this.#key, checked(CredentialRow, row, "credentials"));
      if (!current || current.version !== version) return { outcome: "moved", credential: current };
      const next = await exchange(current);
      const stored =
        "delete" in next
          ? await this.#count("DELETE FROM credentials WHERE id = $1 AND version = $2 AND url = $3 AND person = $4", [id, version, current.url, person], db)
          : await this.#writeRefreshed(db, version, next);
      if (stored > 0 && "delete" in next) await this.#recordLoss(db, id, person, current.url, next.delete, this.#now());
      if (stored > 0) return { outcome: "refreshed", credential: "delete" in next ? undefined : { ...next, version: version + 1 } };
      lost.moved = true;
      return { outcome: "moved", credential: undefined };
    });
    // A DELETE, url change or new consent came during the exchange: what is held now, read after the commit.
    return lost.moved ? { outcome: "moved", credential: await this.getCredential(id, person) } : result;
  }

  /** The compare-and-swap of replaceCredential, on the transaction's connection. */
  async #writeRefreshed(db: Queryable, version: number, c: Omit<CredentialRecord, "version">): Promise<number> {
    const sealed = sealCredential(this.#key, c);
    return this.#count(
      `UPDATE credentials SET issuer = $4, authorized_at = $5, expires_at = $6, refresh_expires_at = $10, version = version + 1, key_id = $7, sealed = $8
       WHERE id = $1 AND version = $2 AND url = $3 AND person = $9`,
      [c.id, version, c.url, c.issuer, c.authorizedAt, c.expiresAt, sealed.keyId, sealed.value, c.person, c.refreshExpiresAt ?? null],
      db,
    );
  }

  async getRegistration(server: string, redirectUri: string) {
    const [row] = await this.#rows("SELECT key_id, sealed FROM registrations WHERE authorization_server = $1 AND redirect_uri = $2", [server, redirectUri]);
    return row === undefined ? undefined : openRegistration(this.#key, server, redirectUri, checked(SealedRow, row, "registrations"));
  }

  async putRegistration(server: string, redirectUri: string, client: object) {
    const sealed = sealRegistration(this.#key, server, redirectUri, client);
    await this.#rows(
      `INSERT INTO registrations (authorization_server, redirect_uri, key_id, sealed, created_at) VALUES ($1, $2, $3, $4, $5)
       ON CONFLICT (authorization_server, redirect_uri) DO UPDATE SET key_id = excluded.key_id, sealed = excluded.sealed, created_at = excluded.created_at`,
      [server, redirectUri, sealed.keyId, sealed.value, this.#now()],
    );
  }

  async deleteRegistration(server: string, redirectUri: string) {
    await this.#rows("DELETE FROM registrations WHERE authorization_server = $1 AND redirect_uri = $2", [server, redirectUri]);
  }

  /** Ends the pending consents of the connection (of one person's credential only, with `person`). */
  async #endPending(db: Queryable, connectionId: string, outcome: AuthorizationOutcome, at: number, person?: string): Promise<void> {
    const only = person === undefined ? "" : " AND person = $6";
    await this.#rows(
      `UPDATE authorizations SET status = $1, error = $2, message = $3, final_at = $4 WHERE connection_id = $5 AND status = 'pending'${only}`,
      [outcome.status, outcome.error ?? null, outcome.message ?? null, at, connectionId, ...(person === undefined ? [] : [person])],
      db,
    );
  }

  async startAuthorization(a: Omit<AuthorizationRecord, "outcome" | "finalAt" | "claimed">, superseded: AuthorizationOutcome, at: number): Promise<void> {
    const sealed = sealAuthorization(this.#key, a);
    await this.#transaction(async (db) => {
      // Two starts for one connection on two replicas at once: the second waits, then supersedes
      // the first (READ COMMITTED would otherwise let each miss the other's uncommitted row).
      await this.#rows("SELECT pg_advisory_xact_lock($1, hashtext($2))", [CONSENT_LOCKS, a.connectionId], db);
      await this.#endPending(db, a.connectionId, superseded, at, a.person);
      await this.#rows(
        `INSERT INTO authorizations (id, connection_id, url, state_hash, issuer, iss_advertised, authorized_by, person, expires_at, status, claimed, key_id, sealed)
         VALUES ($1, $2, $3, $4, $5, $6, $10, $11, $7, 'pending', false, $8, $9)`,
        [a.id, a.connectionId, a.url, a.stateHash, a.issuer, a.issAdvertised, a.expiresAt, sealed.keyId, sealed.value, a.by, a.person],
        db,
      );
    });
  }

  async getAuthorization(id: string): Promise<AuthorizationRecord | undefined> {
    const [row] = await this.#rows("SELECT * FROM authorizations WHERE id = $1", [id]);
    return row === undefined ? undefined : authorizationOf(this.#key, checked(AuthorizationRow, row, "authorizations"));
  }

  async authorizationByState(stateHash: string): Promise<AuthorizationRecord | undefined> {
    const [row] = await this.#rows("SELECT * FROM authorizations WHERE state_hash = $1", [stateHash]);
    return row === undefined ? undefined : authorizationOf(this.#key, checked(AuthorizationRow, row, "authorizations"));
  }

  async claimAuthorization(id: string, now: number): Promise<boolean> {
    // One statement: a second claimer waits for the first's row lock, then re-checks the WHERE
    // against the committed row (claimed) and updates nothing.
    const claimed = await this.#rows("UPDATE authorizations SET claimed = true WHERE id = $1 AND status = 'pending' AND claimed = false AND expires_at > $2 RETURNING id", [id, now]);
    return claimed.length === 1;
  }

  async finishAuthorization(id: string, outcome: AuthorizationOutcome, at: number): Promise<boolean> {
    const changed = await this.#count("UPDATE authorizations SET status = $1, error = $2, message = $3, final_at = $4 WHERE id = $5 AND status = 'pending'", [outcome.status, outcome.error ?? null, outcome.message ?? null, at, id]);
    return changed === 1;
  }

  async endAuthorizations(connectionId: string, outcome: AuthorizationOutcome, at: number): Promise<void> {
    await this.#endPending(this.#pool, connectionId, outcome, at);
  }

  async sweepAuthorizations(now: number, expired: AuthorizationOutcome, forgetBefore: number): Promise<void> {
    await this.#transaction(async (db) => {
      await this.#rows("UPDATE authorizations SET status = $1, error = $2, message = $3, final_at = expires_at WHERE status = 'pending' AND expires_at <= $4", [expired.status, expired.error ?? null, expired.message ?? null, now], db);
      await this.#rows("DELETE FROM authorizations WHERE final_at IS NOT NULL AND final_at < $1", [forgetBefore], db);
    });
  }

  async putMcpSession(m: McpSessionRecord, now: number, idleBefore: number, cap?: OwnerCap): Promise<PutMcpSession> {
    return this.#transaction(async (db): Promise<PutMcpSession> => {
      if (m.owner !== undefined) {
        // The owner's token row, locked first (revokeToken deletes it before its sessions, in the
        // same order): starts for one owner on any replica count in turn, and a revocation either
        // waits for this session and deletes it, or comes first and this one is not stored.
        const [token] = await this.#rows("SELECT id FROM api_tokens WHERE id = $1 FOR UPDATE", [m.owner], db);
        if (!token) return { outcome: "owner_gone" };
      }
      await this.#rows("DELETE FROM mcp_sessions WHERE last_used_at < $1", [idleBefore], db);
      let displaced: McpSessionKey | undefined;
      if (m.owner !== undefined && cap !== undefined) {
        const held = await this.#countSessions(m.owner, idleBefore, db);
        if (held.count >= cap.max) {
          const [row] = await this.#rows("SELECT agent, id FROM mcp_sessions WHERE owner = $1 AND last_used_at < $2 ORDER BY last_used_at, id LIMIT 1", [m.owner, cap.displaceBefore], db);
          const oldest = checked(SessionKeyRow, row ?? null, "mcp_sessions");
          if (!oldest) return { outcome: "owner_full", oldestUse: held.oldestUse ?? now };
          await this.#rows("DELETE FROM mcp_sessions WHERE agent = $1 AND id = $2", [oldest.agent, oldest.id], db);
          displaced = { agent: oldest.agent, id: oldest.id };
        }
      }
      await this.#rows(
        "INSERT INTO mcp_sessions (agent, id, owner, initialize_json, snapshot_json, created_at, last_used_at) VALUES ($1, $2, $3, $4, $5, $6, $6)",
        [m.agent, m.id, m.owner ?? null, JSON.stringify(m.initialize), JSON.stringify(m.snapshot ?? null), now],
        db,
      );
      return displaced ? { outcome: "saved", displaced } : { outcome: "saved" };
    });
  }

  async countMcpSessions(owner: string, idleBefore: number): Promise<{ count: number; oldestUse: number | undefined }> {
    return this.#countSessions(owner, idleBefore);
  }

  async #countSessions(owner: string, idleBefore: number, db: Queryable = this.#pool): Promise<{ count: number; oldestUse: number | undefined }> {
    const [row] = await this.#rows("SELECT count(*) AS count, min(last_used_at) AS oldest FROM mcp_sessions WHERE owner = $1 AND last_used_at >= $2", [owner, idleBefore], db);
    const counted = checked(SessionCountRow, row, "mcp_sessions");
    return { count: counted.count, oldestUse: counted.oldest ?? undefined };
  }

  async checkMcpSessions(held: HeldMcpSession[], busy: McpSessionKey[], now: number, touchBefore: number): Promise<McpSessionCheck> {
    if (held.length === 0) return { kept: [], revoked: [] };
    // The sessions first, then their owners' tokens: a revoked token's sessions go after (or with)
    // the token, so a session found gone here has an owner found gone next, and is said revoked.
    // Read the other way round, a revocation between the two reads ended it as "on another process".
    const rows = checkedAll(
      HeldSessionRow,
      await this.#rows(
        `SELECT s.agent, s.id, s.last_used_at FROM unnest($1::text[], $2::text[]) AS h(agent, id)
         JOIN mcp_sessions s ON s.agent = h.agent AND s.id = h.id`,
        [held.map((k) => k.agent), held.map((k) => k.id)],
      ),
      "mcp_sessions",
    );
    const owners = checkedAll(OwnerRow, await this.#rows("SELECT id FROM api_tokens WHERE id = ANY($1::text[])", [ownersOf(held)]), "api_tokens");
    const { kept, revoked, touch } = sortHeldSessions(held, new Set(owners.map((o) => o.id)), rows, busy, touchBefore);
    // Written only when there is something to write: this runs every second or so on every replica.
    if (revoked.length > 0) await this.#rows("DELETE FROM mcp_sessions WHERE owner = ANY($1::text[])", [revoked]);
    if (touch.length > 0) {
      await this.#rows(
        "UPDATE mcp_sessions s SET last_used_at = $1 FROM unnest($2::text[], $3::text[]) AS h(agent, id) WHERE s.agent = h.agent AND s.id = h.id AND s.last_used_at < $1",
        [now, touch.map((k) => k.agent), touch.map((k) => k.id)],
      );
    }
    return { kept, revoked };
  }

  async useMcpSession(agent: string, id: string, now: number, idleBefore: number): Promise<McpSessionRecord | undefined> {
    return this.#transaction(async (db) => {
      // FOR UPDATE: an idle end on another replica and this use do not both win.
      const [found] = await this.#rows("SELECT owner, initialize_json, snapshot_json, last_used_at FROM mcp_sessions WHERE agent = $1 AND id = $2 FOR UPDATE", [agent, id], db);
      if (!found) return undefined;
      const row = checked(McpSessionRow, found, "mcp_sessions");
      if (row.last_used_at < idleBefore) {
        await this.#rows("DELETE FROM mcp_sessions WHERE agent = $1 AND id = $2", [agent, id], db);
        return undefined;
      }
      // To the second: the idle timeout is minutes, and a write per request costs a commit.
      if (now - row.last_used_at >= 1000) await this.#rows("UPDATE mcp_sessions SET last_used_at = $1 WHERE agent = $2 AND id = $3", [now, agent, id], db);
      return { agent, id, owner: row.owner ?? undefined, initialize: row.initialize_json, snapshot: row.snapshot_json };
    });
  }

  async endMcpSession(agent: string, id: string, idleBefore?: number): Promise<boolean> {
    if (idleBefore === undefined) return (await this.#count("DELETE FROM mcp_sessions WHERE agent = $1 AND id = $2", [agent, id])) > 0;
    return (await this.#count("DELETE FROM mcp_sessions WHERE agent = $1 AND id = $2 AND last_used_at < $3", [agent, id, idleBefore])) > 0;
  }

  async addToken(t: NewApiToken, max?: TokenLimits): Promise<AddToken> {
    const at = this.#now();
    return this.#transaction(async (db): Promise<AddToken> => {
      await this.#rows("SELECT pg_advisory_xact_lock($1)", [TOKENS_LOCK], db);
      if (max !== undefined && checked(CountRow, (await this.#rows("SELECT count(*) AS count FROM api_tokens", [], db))[0], "api_tokens").count >= max.tokens) return { outcome: "too_many", max: max.tokens };
      if ((await this.#rows("SELECT 1 FROM api_tokens WHERE name = $1", [t.name], db)).length > 0) return { outcome: "name_taken" };
      if ((await this.#rows("SELECT 1 FROM people WHERE name = $1", [t.person], db)).length === 0) {
        if (max !== undefined && checked(CountRow, (await this.#rows("SELECT count(*) AS count FROM people", [], db))[0], "people").count >= max.people) return { outcome: "too_many_people", max: max.people };
        await this.#rows("INSERT INTO people (name, created_at) VALUES ($1, $2)", [t.person, at], db);
      }
      const expiresAt = t.lifetimeMs == null ? null : at + t.lifetimeMs;
      await this.#rows("INSERT INTO api_tokens (id, name, role, person, hash, created_at, expires_at) VALUES ($1, $2, $3, $4, $5, $6, $7)", [t.id, t.name, t.role, t.person, t.hash, at, expiresAt], db);
      return { outcome: "added", token: { id: t.id, name: t.name, role: t.role, person: t.person, createdAt: at, lastUsedAt: null, expiresAt } };
    });
  }

  async listPeople(): Promise<PersonRecord[]> {
    const rows = await this.#rows("SELECT p.name, p.created_at, (SELECT count(*) FROM api_tokens t WHERE t.person = p.name) AS tokens FROM people p ORDER BY p.created_at, p.name");
    return checkedAll(PersonRow, rows, "people").map(personOf);
  }

  async removePerson(name: string, now: number): Promise<RemovePerson> {
    return this.#transaction(async (db): Promise<RemovePerson> => {
      await this.#rows("SELECT pg_advisory_xact_lock($1)", [TOKENS_LOCK], db);
      const [found] = await this.#rows("SELECT p.name, p.created_at, (SELECT count(*) FROM api_tokens t WHERE t.person = p.name) AS tokens FROM people p WHERE p.name = $1", [name], db);
      if (!found) return { outcome: "absent" };
      const person = personOf(checked(PersonRow, found, "people"));
      // FOR UPDATE, as revokeToken locks its token: a session starting for one of them waits, then finds it gone.
      const tokens = checkedAll(TokenRow, await this.#rows("SELECT * FROM api_tokens WHERE person = $1 ORDER BY created_at, id FOR UPDATE", [name], db), "api_tokens").map(tokenOf);
      if (tokens.some((t) => t.role === "admin" && !expired(t, now))) {
        const others = await this.#rows("SELECT 1 FROM api_tokens WHERE role = 'admin' AND person <> $1 AND (expires_at IS NULL OR expires_at > $2) LIMIT 1", [name, now], db);
        if (others.length === 0) return { outcome: "last_admin" };
      }
      await this.#rows("DELETE FROM api_tokens WHERE person = $1", [name], db);
      await this.#rows("DELETE FROM mcp_sessions WHERE owner = ANY($1::text[])", [tokens.map((t) => t.id)], db);
      await this.#rows("DELETE FROM people WHERE name = $1", [name], db);
      // Their personal credentials go with them, to be revoked at their servers (a person's name is never "").
      const rows = checkedAll(CredentialRow, await this.#rows("DELETE FROM credentials WHERE person = $1 RETURNING *", [name], db), "credentials").sort((x, y) => x.id.localeCompare(y.id));
      await this.#rows("DELETE FROM credential_losses WHERE person = $1", [name], db);
      await this.#rows("UPDATE authorizations SET status = 'failed', error = $1, message = $2, final_at = $3 WHERE person = $4 AND status = 'pending'", [PERSON_REMOVED.error, PERSON_REMOVED.message, now, name], db);
      const key = this.#key;
      return { outcome: "removed", person, tokens, held: rows.map(summaryOf), credentials: key ? rows.map((row) => credentialOf(key, row)) : [] };
    });
  }

  async listTokens(): Promise<ApiTokenRecord[]> {
    return checkedAll(TokenRow, await this.#rows("SELECT * FROM api_tokens ORDER BY created_at, id"), "api_tokens").map(tokenOf);
  }

  async heartbeat(replica: { id: string; listen: string }, now: number): Promise<void> {
    await this.#rows("INSERT INTO replicas (id, listen, started_at, seen_at) VALUES ($1, $2, $3, $3) ON CONFLICT (id) DO UPDATE SET seen_at = excluded.seen_at", [replica.id, replica.listen, now]);
  }

  async endReplica(id: string): Promise<void> {
    await this.#rows("DELETE FROM replicas WHERE id = $1", [id]);
  }

  async liveReplicas(since: number): Promise<ReplicaRecord[]> {
    return checkedAll(ReplicaRow, await this.#rows("SELECT id, listen, started_at, seen_at FROM replicas WHERE seen_at >= $1 ORDER BY started_at, id", [since]), "replicas").map(replicaOf);
  }

  async revokeToken(id: string, now: number): Promise<RevokeToken> {
    return this.#transaction(async (db): Promise<RevokeToken> => {
      await this.#rows("SELECT pg_advisory_xact_lock($1)", [TOKENS_LOCK], db);
      // FOR UPDATE, as putMcpSession takes it: a session starting for this token waits, then finds it gone.
      const [found] = await this.#rows("SELECT * FROM api_tokens WHERE id = $1 FOR UPDATE", [id], db);
      if (!found) return { outcome: "absent" };
      const token = tokenOf(checked(TokenRow, found, "api_tokens"));
      if (token.role === "admin" && !expired(token, now)) {
        const others = await this.#rows("SELECT 1 FROM api_tokens WHERE role = 'admin' AND id <> $1 AND (expires_at IS NULL OR expires_at > $2) LIMIT 1", [id, now], db);
        if (others.length === 0) return { outcome: "last_admin" };
      }
      await this.#rows("DELETE FROM api_tokens WHERE id = $1", [id], db);
      // Its sessions go with it; the replicas holding them close them at their next check.
      await this.#rows("DELETE FROM mcp_sessions WHERE owner = $1", [id], db);
      return { outcome: "revoked", token };
    });
  }

  async findToken(hash: Buffer) {
    const [found] = await this.#rows("SELECT * FROM api_tokens WHERE hash = $1", [hash]);
    if (!found) return undefined;
    const row = checked(TokenRow, found, "api_tokens");
    const now = this.#now();
    const token = tokenOf(row);
    if (!expired(token, now) && (row.last_used_at === null || now - row.last_used_at >= LAST_USED_RESOLUTION_MS)) await this.#rows("UPDATE api_tokens SET last_used_at = $1 WHERE id = $2", [now, row.id]);
    return { ...token, hash: row.hash };
  }

  async appendAudit(entries: readonly NewAuditEntry[]): Promise<void> {
    if (entries.length === 0) return;
    await this.#transaction(async (db) => {
      await this.#rows("SELECT pg_advisory_xact_lock($1)", [AUDIT_LOCK], db);
      // One statement for the batch: 12 columns a row, well under Postgres's 65535 parameters for a bounded batch.
      const params: unknown[] = [];
      const tuples = entries.map((e) => {
        const values = auditValues(e);
        const first = params.length;
        params.push(...values);
        return `(${values.map((_, n) => `$${first + n + 1}`).join(", ")})`;
      });
      await this.#rows(`INSERT INTO audit (${AUDIT_COLUMNS}) VALUES ${tuples.join(", ")} ON CONFLICT (id) DO NOTHING`, params, db);
    });
  }

  async listAudit(filter: AuditFilter, after: number, limit: number): Promise<AuditEntry[]> {
    const { where, params } = auditWhere(filter, after, (n) => `$${n}`);
    const rows = await this.#rows(`SELECT seq, ${AUDIT_COLUMNS} FROM audit WHERE ${where} ORDER BY seq LIMIT $${params.length + 1}`, [...params, limit]);
    return checkedAll(AuditRow, rows, "audit").map(auditOf);
  }

  async pruneAudit(before: number, max: number): Promise<number> {
    return this.#count("DELETE FROM audit WHERE seq IN (SELECT seq FROM audit WHERE at < $1 ORDER BY seq LIMIT $2)", [before, max]);
  }

  async rekey(next: Key): Promise<number> {
    const key = needKey(this.#key);
    const count = await this.#transaction(async (db) => {
      let n = 0;
      for (const row of await this.#rows<{ id: string; person: string; url: string; key_id: string; sealed: string }>("SELECT id, person, url, key_id, sealed FROM credentials FOR UPDATE", [], db)) {
        const aad = credentialAad(row.id, row.url, row.person);
        const sealed = reseal(key, next, row, aad);
        await this.#rows("UPDATE credentials SET key_id = $1, sealed = $2 WHERE id = $3 AND person = $4", [sealed.keyId, sealed.value, row.id, row.person], db);
        n++;
      }
      for (const row of checkedAll(HeaderValueRow, await this.#rows("SELECT * FROM header_values FOR UPDATE", [], db), "header_values")) {
        const sealed = reseal(key, next, row, headerValueAad(row.connection_id, row.url, row.name));
        await this.#rows("UPDATE header_values SET key_id = $1, sealed = $2 WHERE connection_id = $3 AND name = $4", [sealed.keyId, sealed.value, row.connection_id, row.name], db);
        n++;
      }
      const regs = await this.#rows<{ authorization_server: string; redirect_uri: string; key_id: string; sealed: string }>(
        "SELECT authorization_server, redirect_uri, key_id, sealed FROM registrations FOR UPDATE",
        [],
        db,
      );
      for (const row of regs) {
        const aad = registrationAad(row.authorization_server, row.redirect_uri);
        const sealed = reseal(key, next, row, aad);
        await this.#rows("UPDATE registrations SET key_id = $1, sealed = $2 WHERE authorization_server = $3 AND redirect_uri = $4", [sealed.keyId, sealed.value, row.authorization_server, row.redirect_uri], db);
        n++;
      }
      for (const row of checkedAll(SealedAuthorizationRow, await this.#rows("SELECT id, key_id, sealed FROM authorizations FOR UPDATE", [], db), "authorizations")) {
        const sealed = reseal(key, next, row, authorizationAad(row.id));
        await this.#rows("UPDATE authorizations SET key_id = $1, sealed = $2 WHERE id = $3", [sealed.keyId, sealed.value, row.id], db);
        n++;
      }
      const check = seal(next, KEY_CHECK_TEXT, KEY_CHECK);
      await this.#rows("INSERT INTO meta (name, key_id, value) VALUES ($1, $2, $3) ON CONFLICT (name) DO UPDATE SET key_id = excluded.key_id, value = excluded.value", [KEY_CHECK, check.keyId, check.value], db);
      return n;
    });
    this.#key = next;
    return count;
  }

  async close() {
    await this.#pool.end();
  }
}
