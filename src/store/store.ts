import { closeSync, constants, fchmodSync, fstatSync, lstatSync, mkdirSync, openSync, readSync, realpathSync, type Stats } from "node:fs";
import { randomUUID } from "node:crypto";
import path from "node:path";
import type BetterSqlite3 from "better-sqlite3";
import { failed, interrupted, refused } from "../errors.ts";
import { MIGRATIONS } from "./migrations.ts";
import { checkedCredentialRow, checkedLostCredentialRow, checkedOpenConnectionRow } from "./row-check.ts";
import type { ClientRow, CredentialRow, LostCredentialRow, OpenConnectionRow, StoredClient } from "./schema.ts";

/** zod's row schemas (schema.ts): what a store checks its writes and a refused row with. */
type RowSchemas = typeof import("./schema.ts");

/** Long enough to outwait a running engine's write, short enough to fail clearly. */
export const BUSY_TIMEOUT_MS = 5000;
/** A refresh lease's length; renewed every third of it while the refresh runs. */
const LEASE_MS = 15_000;
/** How often a process waiting for another's refresh looks again, and for how long at most. */
const LEASE_POLL_MS = 50;
const LEASE_WAIT_MS = 60_000;

export type OpenOptions = {
  dbPath: string;
  /** Create the db when it does not exist (commands that only read pass false). */
  create: boolean;
  /**
   * The directory of substructure.toml: the db's directory must lead nowhere outside it, through a
   * symlink or otherwise (SECURITY.md, "Storage modes"). Defaults to the db's own directory.
   */
  root?: string;
  /**
   * The caller only lists what is stored (`subs mcp list`): the rows are checked by row-check.ts
   * alone, and zod's row schemas, which a store needs to write, are not loaded (about 1 ms).
   */
  readsOnly?: boolean;
};

/** `warnings`: what was fixed on the way (a db or WAL file others could read, now 0600); the caller reports them. */
export type Opened = { store: Store; created: boolean; warnings: string[] };

const SQLITE_HEADER = Buffer.from("SQLite format 3\0", "latin1");
/** Files SQLite keeps beside the db; each holds credentials as the db does. */
const SIDECARS = ["-wal", "-shm", "-journal"] as const;
// Windows has neither; there, the symlink checks by lstat remain and ownership is not checked.
const O_NOFOLLOW = constants.O_NOFOLLOW ?? 0;
const O_NONBLOCK = constants.O_NONBLOCK ?? 0;

/**
 * Opens the environment's db. Returns undefined when it does not exist and `create` is false:
 * reading commands never create a file as a side effect.
 *
 * The db is the environment's and nobody else's (SECURITY.md, "Storage modes"): a regular file,
 * never a symlink (a dangling one would have SQLite create its target), owned by this user, with
 * one name (a hard link elsewhere reads it too), SQLite or empty, in a directory inside the file's
 * own tree. Its -wal, -shm and -journal are held to the same rules, since another user's
 * pre-created -wal would receive every token written. Group or other access to any of them is
 * removed (0600) with a warning; everything else is refused before SQLite touches the file.
 */
export async function openStore(options: OpenOptions): Promise<Opened | undefined> {
  const { dbPath } = options;
  const root = options.root ?? path.dirname(dbPath);
  const exists = lstatSync(dbPath, { throwIfNoEntry: false }) !== undefined;
  if (!exists && !options.create) return undefined;
  const warnings: string[] = [];
  let created = false;
  assertDirectoryInside(dbPath, root);
  if (!exists) {
    mkdirSync(path.dirname(dbPath), { recursive: true, mode: 0o700 });
    assertDirectoryInside(dbPath, root);
    // Create the file ourselves so it is 0600 from its first byte (SQLite gives its -wal and -shm
    // files the database file's mode). O_EXCL never follows a symlink, dangling or not.
    try {
      closeSync(openSync(dbPath, constants.O_WRONLY | constants.O_CREAT | constants.O_EXCL | O_NOFOLLOW, 0o600));
      created = true;
    } catch (error) {
      // Another subs process created it since the lstat (8 logins at once): use theirs,
      // once it passes the checks below. A symlink put there meanwhile fails them.
      if ((error as NodeJS.ErrnoException).code !== "EEXIST") throw dbError(dbPath, error);
    }
  }
  const checked = checkDb(dbPath, warnings);
  const [{ default: Database }, schemas] = await Promise.all([import("better-sqlite3"), options.readsOnly ? undefined : import("./schema.ts")]);
  let db: BetterSqlite3.Database;
  try {
    db = new Database(dbPath, { timeout: BUSY_TIMEOUT_MS });
  } catch (error) {
    throw dbError(dbPath, error);
  }
  try {
    // Before the first write: a file swapped in since the checks never gets a byte.
    const now = lstatSync(dbPath, { throwIfNoEntry: false });
    if (!now || now.isSymbolicLink() || now.dev !== checked.dev || now.ino !== checked.ino) {
      throw refused(`${path.basename(dbPath)} was replaced while subs opened it`, { hint: `check who else writes to ${path.dirname(dbPath)}, then retry`, code: "unsafe_db" });
    }
    enableWal(db);
    migrate(db);
    // The -wal and -shm exist now: one put in place since the first check is caught here, before
    // any credential is written. By path only: SQLite holds them open (see liveFiles).
    checkSidecars(dbPath, warnings, false);
  } catch (error) {
    db.close();
    throw dbError(dbPath, error);
  }
  const key = fileKey(checked);
  liveFiles.set(key, (liveFiles.get(key) ?? 0) + 1);
  return { store: new Store(db, dbPath, () => liveFiles.set(key, liveFiles.get(key)! - 1), schemas), created, warnings: [...new Set(warnings)] };
}

/**
 * Db files this process has open through SQLite, by device and inode, with how many times.
 * Closing any descriptor of a file drops every POSIX lock the process holds on it (fcntl(2)),
 * SQLite's included, so subs opens a descriptor of its own on a db (or its -wal or -shm) only
 * while SQLite has none open here; then lstat alone checks it.
 */
const liveFiles = new Map<string, number>();
const fileKey = (stat: Stats) => `${stat.dev}:${stat.ino}`;
const isLive = (stat: Stats) => (liveFiles.get(fileKey(stat)) ?? 0) > 0;

/**
 * Switches a db to WAL, retrying while another process holds it: changing the journal mode takes
 * an exclusive lock, and SQLite can answer SQLITE_BUSY at once there rather than through the busy
 * handler, which eight processes creating one db at once can hit (test/hardening/concurrency).
 */
function enableWal(db: BetterSqlite3.Database) {
  const until = Date.now() + BUSY_TIMEOUT_MS;
  for (;;) {
    try {
      db.pragma("journal_mode = WAL");
      return;
    } catch (error) {
      if ((error as { code?: string }).code !== "SQLITE_BUSY" || Date.now() > until) throw error;
      Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, 20);
    }
  }
}

function migrate(db: BetterSqlite3.Database) {
  db.exec("CREATE TABLE IF NOT EXISTS subs_schema (version INTEGER NOT NULL)");
  const row = db.prepare("SELECT version FROM subs_schema").get() as { version: unknown } | undefined;
  const version = row === undefined ? 0 : row.version;
  if (typeof version !== "number" || !Number.isInteger(version) || version < 0) {
    throw new Error("subs_schema holds no valid version");
  }
  if (version > MIGRATIONS.length) {
    throw failed(`the db was written by a newer subs (schema ${version}; this one knows ${MIGRATIONS.length})`, {
      hint: "upgrade subs",
    });
  }
  if (version === MIGRATIONS.length) return;
  // BEGIN IMMEDIATE: two processes migrating at once serialize here, and the second sees the
  // version the first wrote.
  db.transaction(() => {
    const current = (db.prepare("SELECT version FROM subs_schema").get() as { version: number } | undefined)?.version ?? 0;
    for (let v = current; v < MIGRATIONS.length; v++) db.exec(MIGRATIONS[v]!);
    db.prepare("DELETE FROM subs_schema").run();
    db.prepare("INSERT INTO subs_schema (version) VALUES (?)").run(MIGRATIONS.length);
  }).immediate();
}

const inside = (dir: string, candidate: string) => {
  const relative = path.relative(dir, candidate);
  return relative === "" || (relative !== ".." && !relative.startsWith(`..${path.sep}`) && !path.isAbsolute(relative));
};

/**
 * The db's directory, symlinks resolved, is inside `root`'s, symlinks resolved. Before subs
 * creates missing directories the nearest existing one is checked, so none is made outside.
 */
function assertDirectoryInside(dbPath: string, root: string) {
  if (inside(realpathOfNearest(root, dbPath), realpathOfNearest(path.dirname(dbPath), dbPath))) return;
  throw refused(`${path.basename(dbPath)}: its directory leads outside ${root} through a symbolic link`, {
    hint: "a db holds credentials: point `db` at a file inside the directory of substructure.toml, with no symlink on the way",
    code: "unsafe_db",
  });
}

/** `dir` with symlinks resolved as far as it exists; the missing rest, which holds no symlink, appended. */
function realpathOfNearest(dir: string, dbPath: string): string {
  const missing: string[] = [];
  for (let at = path.resolve(dir); ; at = path.dirname(at)) {
    try {
      return path.join(realpathSync.native(at), ...missing.reverse());
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== "ENOENT" || path.dirname(at) === at) throw dbError(dbPath, error);
      missing.push(path.basename(at));
    }
  }
}

const octal = (mode: number) => (mode & 0o777).toString(8).padStart(4, "0");

const unsafe = (file: string, message: string, hint: string) => refused(`${path.basename(file)} ${message}`, { hint, code: "unsafe_db" });

/**
 * What lstat shows of `file` (the db or one of its sidecars) passes: a regular file, not a
 * symlink, this user's, one name. Returns whether group or others have access to it.
 */
function checkEntry(file: string, stat: Stats): boolean {
  if (stat.isSymbolicLink()) throw unsafe(file, "is a symbolic link; subs never follows one to the db or its files", `replace ${file} with a regular file, or move it aside`);
  if (!stat.isFile()) throw unsafe(file, "is not a regular file", `move ${file} aside, or point \`db\` at another file`);
  const uid = process.getuid?.();
  // Windows has no uid: there, the checks above remain.
  if (uid === undefined) return false;
  if (stat.uid !== uid) throw unsafe(file, `belongs to another user (uid ${stat.uid}); the db and its files must be yours`, `move ${file} aside and log in again`);
  if (stat.nlink > 1) throw unsafe(file, `has ${stat.nlink} names (hard links): another one could read its credentials`, `move ${file} aside and log in again`);
  return (stat.mode & 0o077) !== 0;
}

/**
 * Opens `file` without following a symlink (O_NONBLOCK: a FIFO swapped in must not block), checks
 * it is the file lstat saw, and runs `fn` on the descriptor.
 */
function withOwnDescriptor<T>(file: string, seen: Stats, fn: (fd: number) => T): T {
  let fd: number;
  try {
    fd = openSync(file, constants.O_RDONLY | O_NOFOLLOW | O_NONBLOCK);
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === "ELOOP") throw unsafe(file, "is a symbolic link; subs never follows one to the db or its files", `replace ${file} with a regular file, or move it aside`);
    throw error;
  }
  try {
    const stat = fstatSync(fd);
    if (stat.dev !== seen.dev || stat.ino !== seen.ino) throw unsafe(file, "was replaced while subs checked it", `check who else writes to ${path.dirname(file)}, then retry`);
    return fn(fd);
  } finally {
    closeSync(fd);
  }
}

/** Removes group and other access through `fd`, with a warning; refuses the file when it cannot. */
function makePrivate(fd: number, file: string, stat: Stats, warnings: string[]) {
  try {
    fchmodSync(fd, 0o600);
  } catch (error) {
    throw unsafe(file, `can be read or written by other users (mode ${octal(stat.mode)}) and cannot be made private (${(error as NodeJS.ErrnoException).code ?? "error"})`, `run \`chmod 600 ${file}\``);
  }
  warnings.push(`${path.basename(file)} could be read or written by other users (mode ${octal(stat.mode)}); made it 0600. What it held may have been read: log in again to replace those credentials`);
}

/** The checks before SQLite opens the db; returns what lstat saw of it. */
function checkDb(dbPath: string, warnings: string[]): Stats {
  let stat: Stats | undefined;
  try {
    stat = lstatSync(dbPath);
  } catch (error) {
    throw dbError(dbPath, error);
  }
  const exposed = checkEntry(dbPath, stat);
  // Open here already (a second open in one command): it passed these checks then.
  if (isLive(stat)) {
    checkSidecars(dbPath, warnings, false);
    return stat;
  }
  try {
    withOwnDescriptor(dbPath, stat, (fd) => {
      if (exposed) makePrivate(fd, dbPath, stat, warnings);
      assertSqliteOrEmpty(fd, stat, dbPath);
    });
  } catch (error) {
    throw dbError(dbPath, error);
  }
  checkSidecars(dbPath, warnings, true);
  return stat;
}

/** The db's first 16 bytes are SQLite's header, or the file is empty (new): anything else is left untouched. */
function assertSqliteOrEmpty(fd: number, stat: Stats, dbPath: string) {
  if (stat.size === 0) return;
  const header = Buffer.alloc(SQLITE_HEADER.length);
  const read = readSync(fd, header, 0, header.length, 0);
  if (read === header.length && header.equals(SQLITE_HEADER)) return;
  throw failed(`${path.basename(dbPath)} is not a valid database (not a SQLite file); subs left it as it is`, {
    hint: `move ${dbPath} aside and log in again, or point \`db\` at another file`,
  });
}

/**
 * The db's -wal, -shm and -journal, where present, pass checkEntry. Group or other access is
 * removed when `mayOpen` (SQLite has none of them open in this process); otherwise it is refused.
 */
function checkSidecars(dbPath: string, warnings: string[], mayOpen: boolean) {
  for (const suffix of SIDECARS) {
    const file = dbPath + suffix;
    const stat = lstatSync(file, { throwIfNoEntry: false });
    if (stat === undefined || !checkEntry(file, stat)) continue;
    if (!mayOpen) throw unsafe(file, `can be read or written by other users (mode ${octal(stat.mode)})`, `run \`chmod 600 ${file}\``);
    try {
      withOwnDescriptor(file, stat, (fd) => makePrivate(fd, file, stat, warnings));
    } catch (error) {
      // Gone since the lstat: SQLite removed it as another process closed the db.
      if ((error as NodeJS.ErrnoException).code === "ENOENT") continue;
      throw dbError(dbPath, error);
    }
  }
}

export function dbError(dbPath: string, error: unknown) {
  if (error instanceof Error && error.name === "SubsError") return error;
  const code = (error as { code?: string }).code ?? "";
  const name = path.basename(dbPath);
  if (code === "SQLITE_BUSY" || code === "SQLITE_LOCKED")
    return failed(`${name} is locked by another process`, { hint: "wait for the other subs or engine process, then retry", cause: error });
  if (code === "SQLITE_NOTADB" || code === "SQLITE_CORRUPT")
    return failed(`${name} is not a valid database (${code})`, { hint: `move ${dbPath} aside and log in again`, cause: error });
  if (code === "SQLITE_READONLY" || code === "SQLITE_CANTOPEN" || code === "SQLITE_PERM")
    return failed(`${name} cannot be written (${code})`, { hint: `check the permissions of ${dbPath}`, cause: error });
  if (code === "SQLITE_FULL" || code === "SQLITE_IOERR" || code.startsWith("SQLITE_IOERR"))
    return failed(`${name}: disk full or I/O error (${code}); nothing was saved`, { cause: error });
  const message = error instanceof Error ? error.message : String(error);
  return failed(`${name}: ${message}`, { cause: error });
}

const credentialNamed = (id: string) => `the stored credential for ${id}`;
const openConnectionNamed = (id: string) => `what is stored for ${id}`;
const lostNamed = (id: string) => `the record of the lost credential of ${id}`;

export class Store {
  constructor(
    private readonly db: BetterSqlite3.Database,
    readonly path: string,
    private readonly onClose: () => void = () => {},
    /** Absent for a store opened readsOnly. */
    private readonly schemas?: RowSchemas,
  ) {}

  /** The row schemas writes and stored clients are checked with; a store opened readsOnly has none, and only lists. */
  private get rowSchemas(): RowSchemas {
    if (!this.schemas) throw new Error("a store opened to list what is stored has no row schemas");
    return this.schemas;
  }

  private run<T>(fn: () => T): T {
    try {
      return fn();
    } catch (error) {
      throw dbError(this.path, error);
    }
  }

  /** A row read back: the hand-written check passes nearly every one; the schema, when loaded, says the rest. */
  private credential(row: unknown): CredentialRow {
    return checkedCredentialRow(row) ?? this.valid(row, this.schemas?.credentialRowSchema(), credentialNamed);
  }

  /**
   * A row its hand-written check refused, checked by `schema` (which refuses it too: test/store.test.ts
   * holds the two to each other); a corrupt row is an error naming its connection, never "logged out".
   */
  private valid<T>(row: unknown, schema: { safeParse(row: unknown): { success: true; data: T } | { success: false } } | undefined, what: (id: string) => string): T {
    const parsed = schema?.safeParse(row);
    if (parsed?.success) return parsed.data;
    const id = (row as { id?: unknown })?.id;
    throw failed(`${path.basename(this.path)}: ${what(typeof id === "string" ? `'${id}'` : "a connection")} is corrupt`, {
      hint: typeof id === "string" ? `run \`subs mcp login ${id}\` to replace it` : `move ${this.path} aside and log in again`,
    });
  }

  listCredentials(): CredentialRow[] {
    const rows = this.run(() => this.db.prepare("SELECT * FROM subs_credentials ORDER BY id").all());
    return rows.map((row) => this.credential(row));
  }

  getCredential(id: string): CredentialRow | undefined {
    const row = this.run(() => this.db.prepare("SELECT * FROM subs_credentials WHERE id = ?").get(id));
    return row === undefined ? undefined : this.credential(row);
  }

  /**
   * Stores the credential; it supersedes a finding that the server needed none, and the record of
   * a credential lost before (one transaction).
   */
  putCredential(row: CredentialRow): void {
    const valid = this.rowSchemas.credentialRowSchema().parse(row);
    this.run(() =>
      this.db
        .transaction(() => {
          this.db
            .prepare(
              `INSERT INTO subs_credentials (id, url, issuer, resource, client_json, access_token, token_type, refresh_token, expires_at, refresh_expires_at, scopes, created_at, updated_at)
               VALUES (@id, @url, @issuer, @resource, @client_json, @access_token, @token_type, @refresh_token, @expires_at, @refresh_expires_at, @scopes, @created_at, @updated_at)
               ON CONFLICT (id) DO UPDATE SET url = excluded.url, issuer = excluded.issuer, resource = excluded.resource,
                 client_json = excluded.client_json, access_token = excluded.access_token, token_type = excluded.token_type,
                 refresh_token = excluded.refresh_token, expires_at = excluded.expires_at, refresh_expires_at = excluded.refresh_expires_at,
                 scopes = excluded.scopes, updated_at = excluded.updated_at`,
            )
            .run(valid);
          this.db.prepare("DELETE FROM subs_open_connections WHERE id = ?").run(valid.id);
          this.db.prepare("DELETE FROM subs_lost_credentials WHERE id = ?").run(valid.id);
        })
        .immediate(),
    );
  }

  /** Deletes what is stored for these ids: credentials, findings that a server needs none, records of a loss. */
  deleteCredentials(ids: readonly string[]): void {
    if (ids.length === 0) return;
    this.run(() => {
      const credential = this.db.prepare("DELETE FROM subs_credentials WHERE id = ?");
      const open = this.db.prepare("DELETE FROM subs_open_connections WHERE id = ?");
      const lost = this.db.prepare("DELETE FROM subs_lost_credentials WHERE id = ?");
      this.db
        .transaction(() =>
          ids.forEach((id) => {
            credential.run(id);
            open.run(id);
            lost.run(id);
          }),
        )
        .immediate();
    });
  }

  /**
   * The credential of `row.id` is dead for good (its refresh rejected): it is deleted, and `row`
   * says why until a new login (one transaction). Runs inside withWriteLock's transaction too.
   */
  loseCredential(row: LostCredentialRow): void {
    const valid = this.rowSchemas.lostCredentialRowSchema().parse(row);
    this.run(() => {
      const write = () => {
        this.db.prepare("DELETE FROM subs_credentials WHERE id = ?").run(valid.id);
        this.db
          .prepare(
            `INSERT INTO subs_lost_credentials (id, url, reason, message, lost_at) VALUES (@id, @url, @reason, @message, @lost_at)
             ON CONFLICT (id) DO UPDATE SET url = excluded.url, reason = excluded.reason, message = excluded.message, lost_at = excluded.lost_at`,
          )
          .run(valid);
      };
      if (this.db.inTransaction) write();
      else this.db.transaction(write).immediate();
    });
  }

  /** Every record of a credential lost for good and not replaced by a login since. */
  listLostCredentials(): LostCredentialRow[] {
    const rows = this.run(() => this.db.prepare("SELECT * FROM subs_lost_credentials ORDER BY id").all());
    return rows.map((row) => checkedLostCredentialRow(row) ?? this.valid(row, this.schemas?.lostCredentialRowSchema(), lostNamed));
  }

  listOpenConnections(): OpenConnectionRow[] {
    const rows = this.run(() => this.db.prepare("SELECT * FROM subs_open_connections ORDER BY id").all());
    return rows.map((row) => this.openConnection(row));
  }

  getOpenConnection(id: string): OpenConnectionRow | undefined {
    const row = this.run(() => this.db.prepare("SELECT * FROM subs_open_connections WHERE id = ?").get(id));
    return row === undefined ? undefined : this.openConnection(row);
  }

  /** Records that `row.id`'s server answered without a credential; a stored credential for it goes (one transaction). */
  putOpenConnection(row: OpenConnectionRow): void {
    const valid = this.rowSchemas.openConnectionRowSchema().parse(row);
    this.run(() =>
      this.db
        .transaction(() => {
          this.db.prepare("DELETE FROM subs_credentials WHERE id = ?").run(valid.id);
          this.db
            .prepare("INSERT INTO subs_open_connections (id, url, checked_at) VALUES (@id, @url, @checked_at) ON CONFLICT (id) DO UPDATE SET url = excluded.url, checked_at = excluded.checked_at")
            .run(valid);
        })
        .immediate(),
    );
  }

  /**
   * Records the finding only while no credential is stored for `row.id` (one transaction): a
   * command that found the server open without trying a credential must not undo a login another
   * process finished meanwhile. Returns whether it was recorded.
   */
  putOpenConnectionUnlessLoggedIn(row: OpenConnectionRow): boolean {
    const valid = this.rowSchemas.openConnectionRowSchema().parse(row);
    return this.run(() =>
      this.db
        .transaction(() => {
          if (this.db.prepare("SELECT 1 FROM subs_credentials WHERE id = ?").get(valid.id) !== undefined) return false;
          this.db
            .prepare("INSERT INTO subs_open_connections (id, url, checked_at) VALUES (@id, @url, @checked_at) ON CONFLICT (id) DO UPDATE SET url = excluded.url, checked_at = excluded.checked_at")
            .run(valid);
          return true;
        })
        .immediate(),
    );
  }

  private openConnection(row: unknown): OpenConnectionRow {
    return checkedOpenConnectionRow(row) ?? this.valid(row, this.schemas?.openConnectionRowSchema(), openConnectionNamed);
  }

  getClient(issuer: string): StoredClient | undefined {
    const row = this.run(() => this.db.prepare("SELECT * FROM subs_clients WHERE issuer = ?").get(issuer));
    if (row === undefined) return undefined;
    return parseClient(this.rowSchemas.clientRowSchema().parse(row), this.path, this.rowSchemas);
  }

  putClient(issuer: string, client: StoredClient, now: number): void {
    this.run(() =>
      this.db
        .prepare("INSERT INTO subs_clients (issuer, client_json, created_at) VALUES (?, ?, ?) ON CONFLICT (issuer) DO UPDATE SET client_json = excluded.client_json, created_at = excluded.created_at")
        .run(issuer, JSON.stringify(this.rowSchemas.storedClientSchema().parse(client)), now),
    );
  }

  /**
   * Drops the stored registration for `issuer` when it is still `clientId`'s (another login may
   * have replaced it since); true when a row was deleted. A registration the authorization server
   * rejected or forgot is useless, and kept it would fail every later login.
   */
  deleteClient(issuer: string, clientId: string): boolean {
    return this.run(() => this.db.prepare("DELETE FROM subs_clients WHERE issuer = ? AND json_extract(client_json, '$.client_id') = ?").run(issuer, clientId).changes > 0);
  }

  /**
   * Runs `fn` in a BEGIN IMMEDIATE transaction: the write lock is taken before `fn` reads, so
   * two processes refreshing one rotating refresh token serialize, and the second re-reads the
   * row the first wrote.
   */
  exclusive<T>(fn: () => T): T {
    return this.run(() => this.db.transaction(fn).immediate());
  }

  /**
   * Runs `work` (a token refresh over the network) while this process holds the refresh lease of
   * credential `id`, so that of several processes refreshing one rotating refresh token exactly one
   * presents it. Only the lease's own writes take the db's write lock, each for one statement: a
   * slow authorization server holds up no other command (a login, a listing, an apply), which
   * waiting on the write lock across the refresh did, past the busy timeout. A process that finds
   * the lease held waits, asking `settled` each time it looks (the holder's result, once stored,
   * is its answer too); `settled` is asked once more after taking it, since the holder may have
   * stored its result between the look and the take. The holder renews the lease every third of
   * LEASE_MS while `work` runs, so only a dead holder's lease lapses. Leases are between processes,
   * so they are timed by the machine's clock (Date.now), not a context's.
   */
  async withRefreshLease<T>(id: string, settled: () => T | undefined, work: () => Promise<T>, signal?: AbortSignal): Promise<T> {
    const holder = randomUUID();
    const take = () =>
      this.run(
        () =>
          this.db
            .prepare(
              `INSERT INTO subs_refresh_leases (id, holder, until) VALUES (?, ?, ?)
               ON CONFLICT (id) DO UPDATE SET holder = excluded.holder, until = excluded.until WHERE subs_refresh_leases.until <= ?`,
            )
            .run(id, holder, Date.now() + LEASE_MS, Date.now()).changes === 1,
      );
    const waitUntil = Date.now() + LEASE_WAIT_MS;
    for (;;) {
      const done = settled();
      if (done !== undefined) return done;
      if (take()) break;
      if (Date.now() > waitUntil) {
        throw failed(`another subs process has been refreshing the credential of ${id} for over ${LEASE_WAIT_MS / 1000}s`, { hint: "retry; if it goes on, check the authorization server", code: "refresh_busy" });
      }
      if (signal?.aborted) throw interrupted();
      await new Promise((resolve) => setTimeout(resolve, LEASE_POLL_MS + Math.random() * LEASE_POLL_MS));
    }
    const renew = setInterval(() => {
      try {
        this.db.prepare("UPDATE subs_refresh_leases SET until = ? WHERE id = ? AND holder = ?").run(Date.now() + LEASE_MS, id, holder);
      } catch {
        // A busy db: the next renewal tries again, well within the lease.
      }
    }, LEASE_MS / 3);
    renew.unref();
    try {
      return settled() ?? (await work());
    } finally {
      clearInterval(renew);
      try {
        this.run(() => this.db.prepare("DELETE FROM subs_refresh_leases WHERE id = ? AND holder = ?").run(id, holder));
      } catch {
        // Left behind, it lapses in LEASE_MS and is taken over.
      }
    }
  }

  close(): void {
    if (!this.db.open) return;
    this.db.close();
    this.onClose();
  }
}

function parseClient(row: ClientRow | { client_json: string }, dbPath: string, schemas: RowSchemas): StoredClient {
  try {
    return schemas.storedClientSchema().parse(JSON.parse(row.client_json));
  } catch {
    throw failed(`${path.basename(dbPath)}: a stored OAuth client registration is corrupt`, { hint: `move ${dbPath} aside and log in again` });
  }
}
