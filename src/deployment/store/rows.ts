// What the SQLite and the Postgres store do alike: the rows they read back, checked with zod before
// anything trusts them (a column the other database types differently, a hand-edited row); the
// sealing of a row's secret with the row itself as the additional authenticated data (keys.ts);
// and the key check that refuses a wrong key before anything is decrypted.
import { z } from "zod";
import { refused } from "../../errors.ts";
import { KeyMismatch, open, seal, type Key, type Sealed } from "../keys.ts";
import { LockSchema, tamperedEntries } from "../lock.ts";
import {
  LOSS_REASONS,
  AUDIT_KINDS,
  ROLES,
  type AuditEntry,
  type AuditFilter,
  type NewAuditEntry,
  type AgentRecord,
  type ApiTokenRecord,
  type AuthorizationOutcome,
  type AuthorizationRecord,
  type AuthorizationSecret,
  type ConnectionRecord,
  type CredentialLoss,
  type CredentialRecord,
  type CredentialSecret,
  type HeaderValueRecord,
  type HeaderValueSummary,
  type HeldMcpSession,
  type LockRecord,
  type McpSessionCheck,
  type McpSessionKey,
  type PersonRecord,
  type ReplicaRecord,
} from "./types.ts";

/** To the minute: a write on every request of every MCP call would cost more than the rest of the request. */
export const LAST_USED_RESOLUTION_MS = 60_000;
/** Sealed under the key at first start: a wrong key is refused before it decrypts anything. */
export const KEY_CHECK = "key_check";
export const KEY_CHECK_TEXT = "subs deployment key check";

/** The last statements of the migration that makes token names unique, alike in both databases. */
export const UNIQUE_TOKEN_NAMES = `UPDATE api_tokens SET name = name || '-' || id WHERE EXISTS (
     SELECT 1 FROM api_tokens AS earlier WHERE earlier.name = api_tokens.name
       AND (earlier.created_at < api_tokens.created_at OR (earlier.created_at = api_tokens.created_at AND earlier.id < api_tokens.id)));
   CREATE UNIQUE INDEX api_tokens_by_name ON api_tokens(name);`;

/** Milliseconds since the epoch: a number from SQLite, a decimal string from a Postgres BIGINT (pg returns 64-bit integers as text). */
const Ms = z.union([z.number().int(), z.string().regex(/^-?\d{1,16}$/).transform(Number)]);
/** SQLite has no boolean: 0 or 1 there, a BOOLEAN in Postgres. */
const Flag = z.union([z.boolean(), z.literal(0), z.literal(1)]).transform((v) => v === true || v === 1);

const OAuthSettingsSchema = z.looseObject({ client_id: z.string().optional(), client_metadata_url: z.string().optional(), scopes: z.array(z.string()).optional() });
const ToolFilterSchema = z.looseObject({
  include: z.array(z.string()).optional(),
  exclude: z.array(z.string()).optional(),
  read_only: z.boolean().optional(),
  non_destructive: z.boolean().optional(),
  idempotent: z.boolean().optional(),
});
const AgentSchema = z.looseObject({
  name: z.string(),
  mcp: z.array(z.looseObject({ id: z.string(), tools: ToolFilterSchema.optional() })),
  tools: z.array(z.string()),
  agents: z.array(z.string()),
});

const json = <T>(schema: z.ZodType<T>) => z.string().transform((text, ctx) => {
  try {
    return schema.parse(JSON.parse(text));
  } catch {
    ctx.addIssue({ code: "custom", message: "not the JSON this column holds" });
    return z.NEVER;
  }
});

export const ConnectionRow = z.object({
  id: z.string(),
  url: z.string(),
  prefix_tools: Flag,
  oauth_json: json(OAuthSettingsSchema).nullable(),
  headers_json: json(z.record(z.string(), z.string())).nullable(),
  credential: z.enum(["shared", "personal"]),
});
/** The columns of a connection every read selects. */
export const CONNECTION_COLUMNS = "id, url, prefix_tools, oauth_json, headers_json, credential";
/** The credential column of a declaration. */
export const credentialColumn = (c: Pick<ConnectionRecord, "credential">): "shared" | "personal" => c.credential ?? "shared";
export const HeaderValueSummaryRow = z.object({ connection_id: z.string(), name: z.string(), url: z.string(), set_at: Ms, set_by: z.string().nullable() });
export const HeaderValueRow = HeaderValueSummaryRow.extend({ key_id: z.string(), sealed: z.string() });
export const AgentRow = z.object({ body_json: json(AgentSchema) });
export const SummaryRow = z.object({
  id: z.string(),
  person: z.string(),
  url: z.string(),
  issuer: z.string(),
  authorized_at: Ms,
  authorized_by: z.string().nullable(),
  expires_at: Ms.nullable(),
  refresh_expires_at: Ms.nullable(),
  version: z.number().int(),
});
/** The clear columns of a credential every summary selects. */
export const SUMMARY_COLUMNS = "id, person, url, issuer, authorized_at, authorized_by, expires_at, refresh_expires_at, version";
/** The record of a credential lost for good (credential_losses); its message was made visible and bounded before it was stored. */
export const LossRow = z.object({ id: z.string(), person: z.string(), url: z.string(), reason: z.enum(LOSS_REASONS), message: z.string().max(1000), lost_at: Ms });
export const lossOf = (r: z.output<typeof LossRow>): CredentialLoss => ({ id: r.id, person: r.person, url: r.url, reason: r.reason, message: r.message, lostAt: r.lost_at });
export const CredentialRow = SummaryRow.extend({ key_id: z.string(), sealed: z.string() });
/** An agent's MCP session row (no secret in it: the snapshot was scrubbed before it was stored). */
export const McpSessionRow = z.object({ owner: z.string().nullable(), initialize_json: json(z.unknown()), snapshot_json: json(z.unknown()), last_used_at: Ms });
/** A session a process holds, as checkMcpSessions reads it back. */
export const HeldSessionRow = z.object({ agent: z.string(), id: z.string(), last_used_at: Ms });
/** The session an owner's new one takes the place of at the cap (putMcpSession), if any. */
export const SessionKeyRow = z.object({ agent: z.string(), id: z.string() }).nullable();
/** An owner checkMcpSessions found still a token. */
export const OwnerRow = z.object({ id: z.string() });
/** countMcpSessions's one row: how many, and the least recent last use (null when none). */
export const SessionCountRow = z.object({ count: Ms, oldest: Ms.nullable() });
/** A count of rows. */
export const CountRow = z.object({ count: Ms });
export const SealedRow = z.object({ key_id: z.string(), sealed: z.string() });
export const AuthorizationRow = z.object({
  id: z.string(),
  connection_id: z.string(),
  url: z.string(),
  state_hash: z.string(),
  issuer: z.string(),
  iss_advertised: Flag,
  authorized_by: z.string().nullable(),
  person: z.string(),
  expires_at: Ms,
  status: z.enum(["pending", "authorized", "failed", "expired"]),
  error: z.string().nullable(),
  message: z.string().nullable(),
  final_at: Ms.nullable(),
  claimed: Flag,
  key_id: z.string(),
  sealed: z.string(),
});
/** What rekey reads of a sealed authorization: the id is its additional authenticated data. */
export const SealedAuthorizationRow = SealedRow.extend({ id: z.string() });
export const TokenRow = z.object({ id: z.string(), name: z.string(), person: z.string().min(1), role: z.enum(ROLES as [ApiTokenRecord["role"], ...ApiTokenRecord["role"][]]), hash: z.instanceof(Buffer), created_at: Ms, last_used_at: Ms.nullable(), expires_at: Ms.nullable() });

export const ReplicaRow = z.object({ id: z.string(), listen: z.string(), started_at: Ms, seen_at: Ms });
export const replicaOf = (r: z.output<typeof ReplicaRow>): ReplicaRecord => ({ id: r.id, listen: r.listen, startedAt: r.started_at, seenAt: r.seen_at });

/** Checks one row read back; a row that fails says which table and column, never its values. */
export function checked<T>(schema: z.ZodType<T, any>, row: unknown, table: string): T {
  const parsed = schema.safeParse(row);
  if (parsed.success) return parsed.data;
  const issue = parsed.error.issues[0];
  throw refused(`the store's ${table} table holds a row this subs cannot read (${issue?.path.join(".") || "row"}: ${issue?.message ?? "invalid"})`, {
    hint: "restore a backup, or run the subs that wrote it",
    code: "store_damaged",
  });
}
export const checkedAll = <T>(schema: z.ZodType<T, any>, rows: unknown[], table: string): T[] => rows.map((row) => checked(schema, row, table));

export const connectionOf = (row: z.output<typeof ConnectionRow>): ConnectionRecord => ({
  id: row.id,
  url: row.url,
  prefixTools: row.prefix_tools,
  oauth: row.oauth_json === null ? undefined : (row.oauth_json as ConnectionRecord["oauth"]),
  ...(row.headers_json !== null ? { headers: row.headers_json } : {}),
  ...(row.credential === "personal" ? { credential: "personal" as const } : {}),
});
/** The headers column of a declaration: none is NULL, so `{}` and absent are one declaration. */
export const headersColumn = (c: Pick<ConnectionRecord, "headers">): string | null => (c.headers === undefined || Object.keys(c.headers).length === 0 ? null : JSON.stringify(c.headers));
/**
 * Whether a connection's raw row already declares `c` exactly (SQLite keeps prefix_tools as 0/1,
 * Postgres as a boolean): such a write changes nothing and leaves the revision alone
 * (docs/deployment-protocol.md section 3.10).
 */
export const declares = (row: RawConnectionRow | undefined, c: ConnectionRecord): boolean =>
  row !== undefined &&
  row.url === c.url &&
  Boolean(row.prefix_tools) === c.prefixTools &&
  row.oauth_json === (c.oauth === undefined ? null : JSON.stringify(c.oauth)) &&
  row.headers_json === headersColumn(c) &&
  row.credential === credentialColumn(c);
/** A connection row as the database holds it (SQLite's prefix_tools is 0/1). */
export type RawConnectionRow = { id: string; url: string; prefix_tools: number | boolean; oauth_json: string | null; headers_json: string | null; credential: string };
/**
 * Whether writing `c` over `row` takes its credentials out: a credential is bound to its url, and
 * belongs to the connection or to a person, never to both kinds (docs/deployment-protocol.md section 5).
 */
export const dropsCredentials = (row: RawConnectionRow | undefined, c: ConnectionRecord): boolean => row !== undefined && (row.url !== c.url || row.credential !== credentialColumn(c));

export const agentOf = (row: z.output<typeof AgentRow>): AgentRecord => row.body_json as AgentRecord;
export const tokenOf = (row: z.output<typeof TokenRow>): ApiTokenRecord => ({ id: row.id, name: row.name, role: row.role, person: row.person, createdAt: row.created_at, lastUsedAt: row.last_used_at, expiresAt: row.expires_at });
export const summaryOf = (r: z.output<typeof SummaryRow>): Omit<CredentialRecord, "secret"> => ({
  id: r.id,
  person: r.person,
  url: r.url,
  issuer: r.issuer,
  authorizedAt: r.authorized_at,
  authorizedBy: r.authorized_by,
  expiresAt: r.expires_at,
  refreshExpiresAt: r.refresh_expires_at,
  version: r.version,
});

/**
 * Who consented: the name of the API token that started the consent, on its pending authorization
 * and on the credential it ends in (docs/deployment-protocol.md, Connection `authorized_by`).
 */
export const AUTHORIZED_BY = `ALTER TABLE credentials ADD COLUMN authorized_by TEXT;
   ALTER TABLE authorizations ADD COLUMN authorized_by TEXT;`;

/**
 * People (each API token belongs to one; docs/deployment-protocol.md section 3.13). A token made
 * before them belongs to a person named after it, as its name is unique. No foreign key from the
 * tokens: SQLite cannot add one with a default, and addToken and removePerson keep the two in step.
 */
export const peopleMigration = (integer: "INTEGER" | "BIGINT", strict: string) => `CREATE TABLE people (name TEXT PRIMARY KEY, created_at ${integer} NOT NULL)${strict};
   ALTER TABLE api_tokens ADD COLUMN person TEXT NOT NULL DEFAULT '';
   UPDATE api_tokens SET person = name;
   INSERT INTO people (name, created_at) SELECT name, created_at FROM api_tokens;
   CREATE INDEX api_tokens_by_person ON api_tokens(person);`;
export const PersonRow = z.object({ name: z.string().min(1), created_at: Ms, tokens: Ms });
export const personOf = (row: z.output<typeof PersonRow>): PersonRecord => ({ name: row.name, createdAt: row.created_at, tokens: row.tokens });

/**
 * Personal credentials (docs/deployment-protocol.md sections 2 and 5): a connection declares
 * `credential` shared or personal, a credential belongs to a person ("" for a shared one, as every
 * credential stored before was) and is keyed by both, and a consent says whose credential it ends
 * in. SQLite cannot change a primary key: its table is made anew with the rows it held.
 */
export const personalCredentialsMigration = (integer: "INTEGER" | "BIGINT", strict: string) =>
  strict
    ? `ALTER TABLE connections ADD COLUMN credential TEXT NOT NULL DEFAULT 'shared';
   CREATE TABLE credentials_by_person (
     id TEXT NOT NULL REFERENCES connections(id) ON DELETE CASCADE, person TEXT NOT NULL, url TEXT NOT NULL, issuer TEXT NOT NULL,
     authorized_at ${integer} NOT NULL, expires_at ${integer}, version INTEGER NOT NULL, key_id TEXT NOT NULL, sealed TEXT NOT NULL,
     authorized_by TEXT, PRIMARY KEY (id, person))${strict};
   INSERT INTO credentials_by_person (id, person, url, issuer, authorized_at, expires_at, version, key_id, sealed, authorized_by)
     SELECT id, '', url, issuer, authorized_at, expires_at, version, key_id, sealed, authorized_by FROM credentials;
   DROP TABLE credentials;
   ALTER TABLE credentials_by_person RENAME TO credentials;
   CREATE INDEX credentials_by_holder ON credentials(person);
   ALTER TABLE authorizations ADD COLUMN person TEXT NOT NULL DEFAULT '';`
    : `ALTER TABLE connections ADD COLUMN credential TEXT NOT NULL DEFAULT 'shared';
   ALTER TABLE credentials ADD COLUMN person TEXT NOT NULL DEFAULT '';
   ALTER TABLE credentials DROP CONSTRAINT credentials_pkey;
   ALTER TABLE credentials ADD PRIMARY KEY (id, person);
   CREATE INDEX credentials_by_holder ON credentials(person);
   ALTER TABLE authorizations ADD COLUMN person TEXT NOT NULL DEFAULT '';`;

/**
 * When a credential's refresh token expires, where its server said (a clear column), and the record
 * a credential lost for good leaves (docs/deployment-protocol.md section 5): one row per connection
 * and person ("" for a shared one), bound to the url, deleted with the connection. No secret is in it.
 */
export const credentialLossesMigration = (integer: "INTEGER" | "BIGINT", strict: string) => `ALTER TABLE credentials ADD COLUMN refresh_expires_at ${integer};
   CREATE TABLE credential_losses (
     id TEXT NOT NULL REFERENCES connections(id) ON DELETE CASCADE, person TEXT NOT NULL DEFAULT '', url TEXT NOT NULL,
     reason TEXT NOT NULL, message TEXT NOT NULL, lost_at ${integer} NOT NULL, PRIMARY KEY (id, person))${strict};`;

/** How a removed person's consents in progress end (removePerson). */
export const PERSON_REMOVED = { error: "person_removed", message: "the person who started it was removed from the deployment" };

/**
 * The additional authenticated data of a sealed value: the row it belongs to. A personal
 * credential's names its person, so one person's sealed row moved under another's opens for nobody;
 * a shared one's is as it always was.
 */
export const credentialAad = (id: string, url: string, person: string) => (person === "" ? `credential\0${id}\0${url}` : `credential\0${id}\0${url}\0${person}`);
export const headerValueAad = (connectionId: string, url: string, name: string) => `header-value\0${connectionId}\0${url}\0${name}`;
export const registrationAad = (server: string, redirectUri: string) => `registration\0${server}\0${redirectUri}`;
export const authorizationAad = (id: string) => `authorization\0${id}`;

export function needKey(key: Key | undefined): Key {
  if (!key) throw refused("this command has no encryption key, and the value it needs is encrypted", { code: "no_key" });
  return key;
}

export const sealCredential = (key: Key | undefined, c: Omit<CredentialRecord, "version">): Sealed => seal(needKey(key), JSON.stringify(c.secret), credentialAad(c.id, c.url, c.person));

export function credentialOf(key: Key | undefined, row: z.output<typeof CredentialRow>): CredentialRecord {
  const secret = JSON.parse(open(needKey(key), { keyId: row.key_id, value: row.sealed }, credentialAad(row.id, row.url, row.person))) as CredentialSecret;
  return { ...summaryOf(row), secret };
}

export const sealHeaderValue = (key: Key | undefined, v: HeaderValueRecord): Sealed => seal(needKey(key), v.value, headerValueAad(v.connectionId, v.url, v.name));
export const headerValueSummaryOf = (r: z.output<typeof HeaderValueSummaryRow>): HeaderValueSummary => ({ connectionId: r.connection_id, name: r.name, url: r.url, setAt: r.set_at, setBy: r.set_by });
export const headerValueOf = (key: Key | undefined, r: z.output<typeof HeaderValueRow>): HeaderValueRecord => ({
  ...headerValueSummaryOf(r),
  value: open(needKey(key), { keyId: r.key_id, value: r.sealed }, headerValueAad(r.connection_id, r.url, r.name)),
});

/**
 * The migration that gives connections their header templates and the store the values of their
 * variables (docs/deployment-protocol.md section 3.12), alike in both databases but for types.
 */
export const headerValuesMigration = (integer: "INTEGER" | "BIGINT", strict: string) => `ALTER TABLE connections ADD COLUMN headers_json TEXT;
   CREATE TABLE header_values (
     connection_id TEXT NOT NULL REFERENCES connections(id) ON DELETE CASCADE, name TEXT NOT NULL, url TEXT NOT NULL,
     set_at ${integer} NOT NULL, set_by TEXT, key_id TEXT NOT NULL, sealed TEXT NOT NULL,
     PRIMARY KEY (connection_id, name))${strict};`;

export const sealRegistration = (key: Key | undefined, server: string, redirectUri: string, client: object): Sealed => seal(needKey(key), JSON.stringify(client), registrationAad(server, redirectUri));
export const openRegistration = (key: Key | undefined, server: string, redirectUri: string, row: z.output<typeof SealedRow>) =>
  JSON.parse(open(needKey(key), { keyId: row.key_id, value: row.sealed }, registrationAad(server, redirectUri)));

export const sealAuthorization = (key: Key | undefined, a: Pick<AuthorizationRecord, "id" | "secret">): Sealed => seal(needKey(key), JSON.stringify(a.secret), authorizationAad(a.id));

export function authorizationOf(key: Key | undefined, row: z.output<typeof AuthorizationRow>): AuthorizationRecord {
  const secret = JSON.parse(open(needKey(key), { keyId: row.key_id, value: row.sealed }, authorizationAad(row.id))) as AuthorizationSecret;
  const outcome: AuthorizationOutcome = { status: row.status, ...(row.error !== null ? { error: row.error } : {}), ...(row.message !== null ? { message: row.message } : {}) };
  return {
    id: row.id,
    connectionId: row.connection_id,
    url: row.url,
    stateHash: row.state_hash,
    issuer: row.issuer,
    issAdvertised: row.iss_advertised,
    by: row.authorized_by,
    person: row.person,
    expiresAt: row.expires_at,
    outcome,
    finalAt: row.final_at,
    claimed: row.claimed,
    secret,
  };
}

/** One sealed value re-encrypted under `next`, for the same row (rotate-key). */
export function reseal(key: Key, next: Key, row: z.output<typeof SealedRow>, aad: string): Sealed {
  return seal(next, open(key, { keyId: row.key_id, value: row.sealed }, aad), aad);
}

/** What the key check reads and writes, in either database. */
export type KeyCheckAccess = {
  read(): Promise<Sealed | undefined>;
  /** The key id of any value sealed before the check existed. */
  anySealedKeyId(): Promise<string | undefined>;
  /** Writes the check unless one is there already (another replica's, started at the same time). */
  write(sealed: Sealed): Promise<void>;
};

/** Refuses a key that does not open the store's check value; seals one on the first start with a key. */
export async function checkKey(key: Key | undefined, where: string, access: KeyCheckAccess): Promise<void> {
  if (!key) return;
  let held = await access.read();
  if (!held) {
    const sealedAny = await access.anySealedKeyId();
    if (sealedAny && sealedAny !== key.id) throw wrongKey(where, sealedAny, key.id);
    await access.write(seal(key, KEY_CHECK_TEXT, KEY_CHECK));
    held = await access.read();
    if (!held) return;
  }
  try {
    if (open(key, held, KEY_CHECK) !== KEY_CHECK_TEXT) throw new KeyMismatch("check");
  } catch {
    throw wrongKey(where, held.keyId, key.id);
  }
}

export function wrongKey(where: string, stored: string, given: string) {
  return refused(`the encryption key (id ${given}) does not open ${where}: its values are sealed under key ${stored}`, {
    hint: "start with the key the store was written with (--key-file or $SUBS_DEPLOYMENT_KEY); nothing was decrypted",
    code: "wrong_key",
  });
}

/**
 * checkMcpSessions's decision, from the owners of the held sessions that are still tokens and the
 * rows of those still stored: the sessions kept, the owners no longer tokens (their sessions are
 * deleted), and the busy sessions kept whose last use is older than `touchBefore` (marked used now).
 */
export function sortHeldSessions(
  held: HeldMcpSession[],
  owners: ReadonlySet<string>,
  rows: Array<z.infer<typeof HeldSessionRow>>,
  busy: McpSessionKey[],
  touchBefore: number,
): McpSessionCheck & { touch: McpSessionKey[] } {
  const key = (s: McpSessionKey) => `${s.agent}\n${s.id}`;
  const revoked = [...new Set(held.flatMap((h) => (h.owner !== undefined && !owners.has(h.owner) ? [h.owner] : [])))];
  const ownerOf = new Map(held.map((h) => [key(h), h.owner]));
  const busyKeys = new Set(busy.map(key));
  const kept = rows.filter((r) => {
    const owner = ownerOf.get(key(r));
    return owner === undefined || owners.has(owner);
  });
  return {
    kept: kept.map((r) => ({ agent: r.agent, id: r.id })),
    revoked,
    touch: kept.filter((r) => busyKeys.has(key(r)) && r.last_used_at < touchBefore).map((r) => ({ agent: r.agent, id: r.id })),
  };
}

/** The distinct owners of the held sessions. */
export const ownersOf = (held: HeldMcpSession[]): string[] => [...new Set(held.flatMap((h) => (h.owner === undefined ? [] : [h.owner])))];

/**
 * The record (docs/deployment-protocol.md section 3.14), alike in both databases but for types:
 * `seq` never reused (AUTOINCREMENT, a sequence), so a cursor past a pruned entry stays valid; `id`
 * unique, so a batch written again after a lost answer adds nothing.
 */
export const auditMigration = (seq: string, integer: "INTEGER" | "BIGINT", real: "REAL" | "DOUBLE PRECISION", strict: string) => `CREATE TABLE audit (
     seq ${seq}, id TEXT NOT NULL UNIQUE, at ${integer} NOT NULL, kind TEXT NOT NULL,
     person TEXT, token_id TEXT, agent TEXT, connection TEXT, tool TEXT, outcome TEXT,
     duration_ms ${real}, request_id TEXT, detail_json TEXT)${strict};
   CREATE INDEX audit_by_at ON audit(at);`;

export const AUDIT_COLUMNS = "id, at, kind, person, token_id, agent, connection, tool, outcome, duration_ms, request_id, detail_json";
export const AuditRow = z.object({
  seq: Ms,
  id: z.string(),
  at: Ms,
  kind: z.enum(AUDIT_KINDS),
  person: z.string().nullable(),
  token_id: z.string().nullable(),
  agent: z.string().nullable(),
  connection: z.string().nullable(),
  tool: z.string().nullable(),
  outcome: z.string().nullable(),
  duration_ms: z.number().nullable(),
  request_id: z.string().nullable(),
  detail_json: json(z.record(z.string(), z.unknown())).nullable(),
});
export const auditOf = (r: z.output<typeof AuditRow>): AuditEntry => ({
  seq: r.seq,
  id: r.id,
  at: r.at,
  kind: r.kind,
  person: r.person,
  tokenId: r.token_id,
  agent: r.agent,
  connection: r.connection,
  tool: r.tool,
  outcome: r.outcome,
  durationMs: r.duration_ms,
  requestId: r.request_id,
  detail: r.detail_json as Record<string, unknown> | null,
});
/** An entry's values in AUDIT_COLUMNS's order. */
export const auditValues = (e: NewAuditEntry): unknown[] => [
  e.id,
  e.at,
  e.kind,
  e.person,
  e.tokenId,
  e.agent,
  e.connection,
  e.tool,
  e.outcome,
  e.durationMs,
  e.requestId,
  e.detail === null ? null : JSON.stringify(e.detail),
];

/**
 * A listing's WHERE clause and its parameters, `placeholder(n)` naming the nth (from 1): `?` in
 * SQLite, `$n` in Postgres.
 */
export function auditWhere(filter: AuditFilter, after: number, placeholder: (n: number) => string): { where: string; params: unknown[] } {
  const params: unknown[] = [after];
  const terms = [`seq > ${placeholder(1)}`];
  const add = (column: string, op: string, value: unknown) => {
    params.push(value);
    terms.push(`${column} ${op} ${placeholder(params.length)}`);
  };
  if (filter.since !== undefined) add("at", ">=", filter.since);
  if (filter.until !== undefined) add("at", "<", filter.until);
  if (filter.person !== undefined) add("person", "=", filter.person);
  if (filter.agent !== undefined) add("agent", "=", filter.agent);
  if (filter.connection !== undefined) add("connection", "=", filter.connection);
  if (filter.kind !== undefined) add("kind", "=", filter.kind);
  return { where: terms.join(" AND "), params };
}

// ---- The lock (docs/deployment-protocol.md section 3.10, "The lock") ----------------------------

/** One row or none: the lock its agents are served under, in its canonical text (src/deployment/lock.ts). */
export const lockMigration = (integer: "INTEGER" | "BIGINT", strict: string) =>
  `CREATE TABLE tool_lock (id ${integer} PRIMARY KEY CHECK (id = 1), body_json TEXT NOT NULL, updated_at ${integer} NOT NULL)${strict};`;
/** Checked as PUT /v1/state checks it, digests included: a row edited by hand is damage, never a lock. */
export const LockRow = z.object({
  body_json: json(LockSchema).refine((lock) => tamperedEntries(lock).length === 0, "an entry's digest does not match its fields"),
});
export const lockOf = (row: z.output<typeof LockRow>): LockRecord => row.body_json as LockRecord;
