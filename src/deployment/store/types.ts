// What the deployment keeps, behind one asynchronous interface: the SQLite file of one machine
// (sqlite.ts), which several processes on that machine may share, or a Postgres database several
// replicas share (postgres.ts). Everything a request needs is here, so any replica answers any
// request: declarations, credentials, consents in progress. Every write the protocol calls atomic
// (docs/deployment-protocol.md section 7) is one call here, and each method says what it locks.
import { SubsError } from "../../errors.ts";
import type { AuthorizationServerMetadata, OAuthClientInformationMixed, OAuthTokens } from "@modelcontextprotocol/sdk/shared/auth.js";

export type OAuthSettings = { client_id?: string; client_metadata_url?: string; scopes?: string[] };
export type ToolFilter = { include?: string[]; exclude?: string[]; read_only?: boolean; non_destructive?: boolean; idempotent?: boolean };

/**
 * `headers`: header name to template (docs/deployment-protocol.md section 3.2), filled only from
 * the values held for it. `credential`: `personal`, one credential per person (section 2); absent,
 * one for the connection.
 */
export type ConnectionRecord = { id: string; url: string; prefixTools: boolean; oauth: OAuthSettings | undefined; headers?: Record<string, string> | undefined; credential?: "personal" | undefined };

/** Whose credential a caller of `connection` uses: their person's for a personal one, else the connection's (`SHARED`). */
export const SHARED = "";
export const holderFor = (connection: Pick<ConnectionRecord, "credential">, person: string): string => (connection.credential === "personal" ? person : SHARED);

/**
 * The value of a variable a connection's header templates name (docs/deployment-protocol.md
 * section 3.12): sealed at rest, bound to the connection, the url it was handed over for and the
 * variable; `setBy` is the name of the API token that handed it over.
 */
export type HeaderValueRecord = { connectionId: string; name: string; url: string; setAt: number; setBy: string | null; value: string };
/** What may be said of a held value: everything but the value. */
export type HeaderValueSummary = Omit<HeaderValueRecord, "value">;
export type AgentRecord = { name: string; mcp: Array<{ id: string; tools?: ToolFilter }>; tools: string[]; agents: string[] };

/** The part of a credential that is encrypted at rest. */
export type CredentialSecret = {
  tokens: OAuthTokens;
  /** The client the tokens were issued to (its secret, if any, included). */
  client: OAuthClientInformationMixed;
  /** The authorization server URL discovery used: refresh and revocation go there and nowhere else. */
  authorizationServerUrl: string;
  metadata?: AuthorizationServerMetadata;
  /** The RFC 8707 resource the tokens were issued for. */
  resource?: string;
  /** The protected resource metadata URL the MCP server's challenge named, if it named one. */
  resourceMetadataUrl?: string;
};

export type CredentialRecord = {
  id: string;
  /** The person it belongs to, for a personal connection; SHARED ("") for a shared one. */
  person: string;
  /** The url it was issued for: it is never sent to another. */
  url: string;
  issuer: string;
  authorizedAt: number;
  /** The name of the API token that started the consent (kept through refreshes); null for a credential stored before it was recorded. */
  authorizedBy: string | null;
  expiresAt: number | null;
  /**
   * When the refresh token (the grant) expires, where the authorization server said so in its token
   * answer (src/auth/grant-expiry.ts); null (or, in a record to store, absent) when unknown. A clear
   * column, so that GET /v1/mcp and /metrics say it without decrypting anything.
   */
  refreshExpiresAt?: number | null;
  /** Bumped on every replacement: a refresh replaces only the version it refreshed. */
  version: number;
  secret: CredentialSecret;
};

export type Role = "admin" | "apply" | "use" | "read";
export const ROLES: readonly Role[] = ["admin", "apply", "use", "read"];

/**
 * `expiresAt`: from then on the token is refused as an unknown one (null: never). `person`: whom it
 * belongs to (a person holds any number of tokens: a laptop, an MCP client, and shares their
 * credentials); a token made before people were kept belongs to the person named after it.
 */
export type ApiTokenRecord = { id: string; name: string; role: Role; person: string; createdAt: number; lastUsedAt: number | null; expiresAt: number | null };
/** Whether a token may no longer be used at `now`. */
export const expired = (token: Pick<ApiTokenRecord, "expiresAt">, now: number) => token.expiresAt !== null && token.expiresAt <= now;

/** A token to store: `hash` is the SHA-256 of the token; the token itself is never stored. `person` is made when new. */
export type NewApiToken = { id: string; name: string; role: Role; person: string; hash: Buffer; lifetimeMs?: number | null };
/**
 * `name_taken`: names are unique; `too_many`: the store already holds `max.tokens` tokens;
 * `too_many_people`: the token's person is new and the store already keeps `max.people`. Nothing
 * is stored then.
 */
export type AddToken = { outcome: "added"; token: ApiTokenRecord } | { outcome: "name_taken" } | { outcome: "too_many"; max: number } | { outcome: "too_many_people"; max: number };
/** The most tokens, and people, a store keeps (addToken). */
export type TokenLimits = { tokens: number; people: number };
/** A person, with how many tokens they hold now (none once all were revoked: they are kept until removed). */
export type PersonRecord = { name: string; createdAt: number; tokens: number };
/**
 * `removed`: the person, every token of theirs and the sessions those started are gone;
 * `last_admin`: one of their tokens is the only admin token that has not expired, and nothing changed.
 */
/**
 * `held`: the personal credentials deleted with them (clear columns); `credentials`: the same,
 * decrypted for revocation, when the key is here (a command on the host has none).
 */
export type RemovePerson =
  | { outcome: "removed"; person: PersonRecord; tokens: ApiTokenRecord[]; held: Array<Omit<CredentialRecord, "secret">>; credentials: CredentialRecord[] }
  | { outcome: "absent" }
  | { outcome: "last_admin" };
/** `last_admin`: it is the only admin token that has not expired, and is kept, so that someone can still manage tokens. */
export type RevokeToken = { outcome: "revoked"; token: ApiTokenRecord } | { outcome: "absent" } | { outcome: "last_admin" };

export type AuthorizationOutcome = { status: "pending" | "authorized" | "failed" | "expired"; error?: string; message?: string };

/** The part of a pending authorization that is encrypted at rest: what its code exchange needs. */
export type AuthorizationSecret = {
  /** RFC 7636: whoever holds it and a code can redeem the code. */
  codeVerifier: string;
  client: OAuthClientInformationMixed;
  metadata: AuthorizationServerMetadata;
  /** The RFC 8707 resource the consent was asked for. */
  resource: string;
  resourceMetadataUrl?: string;
};

/**
 * A consent started with POST /v1/mcp/{id}/authorizations (docs/deployment-protocol.md sections
 * 3.4 and 3.5), kept in the store so that the redirect and the polls may reach any replica, and
 * so that it outlives a restart.
 */
export type AuthorizationRecord = {
  id: string;
  connectionId: string;
  /** The connection's url when it started: a callback for another url ends it. */
  url: string;
  /** SHA-256 (hex) of its `state`: the callback finds it by this; the state itself is not stored. */
  stateHash: string;
  issuer: string;
  /** RFC 9207: the server's metadata says it sends `iss` on the redirect. */
  issAdvertised: boolean;
  /** The name of the API token that started it: the credential it ends in is `authorizedBy` it. */
  by: string | null;
  /** Whose credential it ends in: the starter's person for a personal connection, else SHARED. */
  person: string;
  expiresAt: number;
  outcome: AuthorizationOutcome;
  /** When it became final (null while pending). */
  finalAt: number | null;
  /** Set once, by the one callback that may exchange its code. */
  claimed: boolean;
  secret: AuthorizationSecret;
};

/** A `subs deployment serve` process, as it says in the store that it serves it (rotate-key asks). */
export type ReplicaRecord = { id: string; listen: string; startedAt: number; seenAt: number };

/**
 * Why a credential was lost for good (docs/deployment-protocol.md section 5): the authorization
 * server rejected its refresh (`invalid_grant` and its kin), it held no refresh token when its access
 * token expired, the MCP server now names another authorization server, or the server refused the
 * access token a refresh had just issued.
 */
export const LOSS_REASONS = ["refresh_rejected", "no_refresh_token", "server_moved", "refused_after_refresh"] as const;
export type LossReason = (typeof LOSS_REASONS)[number];
/** What is said of a loss: its reason, and one line (foreign.ts's visible, bounded, scrubbed form; never a token). */
export type Loss = { reason: LossReason; message: string };
/**
 * The record a lost credential leaves (its secret material is deleted: it is useless): the
 * connection it belonged to, the url it was issued for, why and when. A new consent for the
 * connection, a change of its url or its deletion clears it.
 */
export type CredentialLoss = Loss & { id: string; person: string; url: string; lostAt: number };

/** What a refresh under the credential's lock does with the credential it was given: a new one, or its deletion and why. */
export type RefreshExchange = (current: CredentialRecord) => Promise<Omit<CredentialRecord, "version"> | { delete: Loss }>;
/**
 * `refreshed`: the exchange ran and its result (or its deletion) is stored; `credential` is what is
 * held now (undefined once deleted). `moved`: the credential was no longer at that version (another
 * replica refreshed it, or a DELETE, url change or new consent came first) — the exchange did not
 * run, or its result was not stored; `credential` is what is held now.
 */
export type CredentialRefresh = { outcome: "refreshed" | "moved"; credential: CredentialRecord | undefined };

/** An agent's MCP session (Streamable HTTP), kept so any replica continues it (src/serve/http-sessions.ts). */
export type McpSessionRecord = {
  agent: string;
  id: string;
  /** The API token id that started it: only it may continue it. */
  owner: string | undefined;
  /** The client's initialize request, as JSON. */
  initialize: unknown;
  /** The tools as served (scrubbed of every secret), as JSON. */
  snapshot: unknown;
};

/** Which session of which agent: the key of the `mcp_sessions` table. */
export type McpSessionKey = { agent: string; id: string };
/** A session a process holds, with the owner it holds it for. */
export type HeldMcpSession = McpSessionKey & { owner: string | undefined };

/**
 * `saved` (`displaced`: the owner's session it took the place of); or not stored: `owner_gone` (its
 * token was revoked while the session started), `owner_full` (its owner already holds `max`
 * sessions used since `idleBefore`, none unused since `displaceBefore`; `oldestUse` is the last use
 * of the least recently used of them).
 */
export type PutMcpSession = { outcome: "saved"; displaced?: McpSessionKey } | { outcome: "owner_gone" } | { outcome: "owner_full"; oldestUse: number };

/**
 * How many sessions one owner may hold, and from when a session of theirs unused since counts as
 * left behind: at the cap, the least recently used of those gives its place to a new one.
 */
export type OwnerCap = { max: number; displaceBefore: number };

/** What checkMcpSessions found of the sessions a process holds. */
export type McpSessionCheck = {
  /** Those still stored, with an owner that is still a token. */
  kept: McpSessionKey[];
  /** Their owners that are no longer tokens: every session of theirs is deleted. */
  revoked: string[];
};

/** `dropped`: the credentials taken out with it (every person's), decrypted when the key is here, for revocation. */
export type PutConnection = { created: boolean; urlChanged: boolean; dropped: CredentialRecord[] };
export type DeleteConnection = { outcome: "deleted"; dropped: CredentialRecord[] } | { outcome: "absent" } | { outcome: "in_use"; agents: string[] };
export type PutAgent = { outcome: "created" | "updated" } | { outcome: "unknown_connection"; missing: string[] };

/**
 * The whole declared state (PUT /v1/state): with `prune`, whatever it does not name goes. With
 * `ifRevision`, applied only while the declarations are still at that revision.
 */
export type DeclaredState = {
  connections: ConnectionRecord[];
  agents: AgentRecord[];
  prune: boolean;
  ifRevision?: string;
  /**
   * The lock its agents are served under (docs/deployment-protocol.md section 3.10, "The lock"):
   * null holds none; absent keeps the one held (a client that does not know locks).
   */
  lock?: LockRecord | null;
};
/** A held lock: substructure.lock's entries, as PUT /v1/state carries them (src/deployment/lock.ts checks them). */
export type LockRecord = {
  tools: Array<{ connection: string; name: string; digest: string; title?: string; description?: string; input_schema?: unknown; output_schema?: unknown; annotations?: Record<string, unknown> }>;
};
/** The lock's change is named by the file it comes from. */
export const LOCK_CHANGE_ID = "substructure.lock";
export type StateChange = { kind: "connection" | "agent" | "lock"; id: string; action: "add" | "change" | "remove"; credentialDropped: boolean };
export type PutState =
  | {
      outcome: "applied";
      /** What differed from the state before, in the order it was applied. */
      changes: StateChange[];
      /** Connections whose url changed or that were removed: their pending consents end. */
      ended: Array<{ id: string; why: "url_changed" | "deleted" }>;
      /** Credentials taken out with them (decrypted when the key is here), for revocation. */
      dropped: CredentialRecord[];
      /** The revision after it. */
      revision: string;
    }
  | { outcome: "unknown_connection"; missing: string[] }
  | { outcome: "revision_changed"; revision: string };

/**
 * What the record holds (docs/deployment-protocol.md section 3.14): every served tool call and every
 * change. `person.remove` is written by the offboarding of a person, where it exists.
 */
export const AUDIT_KINDS = [
  "tool.call",
  "apply",
  "connection.declare",
  "connection.delete",
  "agent.declare",
  "agent.delete",
  "secret.set",
  "secret.delete",
  "consent.start",
  "consent.finish",
  "token.create",
  "token.revoke",
  "person.remove",
  "key.rotate",
] as const;
export type AuditKind = (typeof AUDIT_KINDS)[number];
/** How a served tool call ended (section 3.13). */
export const CALL_OUTCOMES = ["ok", "tool_error", "refused", "upstream_error"] as const;
export type CallOutcome = (typeof CALL_OUTCOMES)[number];

/**
 * One entry of the record, as written. Never a tool's arguments nor its result, never a secret:
 * `detail` holds ids, counts and codes only. `id` is unique (random): a batch written again after
 * an answer that was lost is not written twice.
 */
export type NewAuditEntry = {
  id: string;
  at: number;
  kind: AuditKind;
  person: string | null;
  tokenId: string | null;
  agent: string | null;
  connection: string | null;
  tool: string | null;
  outcome: string | null;
  durationMs: number | null;
  requestId: string | null;
  detail: Record<string, unknown> | null;
};
/** An entry as read back: `seq` orders the record and is the cursor of its pages. */
export type AuditEntry = NewAuditEntry & { seq: number };
/** A listing's filters; each absent one matches everything. `since` inclusive, `until` exclusive. */
export type AuditFilter = { since?: number; until?: number; person?: string; agent?: string; connection?: string; kind?: AuditKind };

export interface DeploymentStore {
  readonly path: string;
  listConnections(): Promise<ConnectionRecord[]>;
  getConnection(id: string): Promise<ConnectionRecord | undefined>;
  /** Declares or replaces; a different url, or a change between shared and personal, deletes every credential of it in the same transaction. */
  putConnection(connection: ConnectionRecord): Promise<PutConnection>;
  /** Refused while an agent names it; the credential goes with it. */
  deleteConnection(id: string): Promise<DeleteConnection>;

  listAgents(): Promise<AgentRecord[]>;
  getAgent(name: string): Promise<AgentRecord | undefined>;
  /** Refused when an `mcp` entry names an undeclared connection. */
  putAgent(agent: AgentRecord): Promise<PutAgent>;
  deleteAgent(name: string): Promise<boolean>;
  /**
   * Makes the declarations exactly `state` in one transaction: every connection and agent put,
   * and with `prune` every other agent and connection (and its credential) deleted. Refused, with
   * nothing changed, when an agent names a connection the result would not hold.
   */
  putState(state: DeclaredState): Promise<PutState>;
  /**
   * The declarations' revision: it changes with every change of a connection or an agent (not of a
   * credential, nor a write of what is already declared). Read before the rows it is answered
   * with, so it can be older than they are, never newer: a plan made from them is then refused by
   * PUT /v1/state, never applied over a change.
   */
  revision(): Promise<string>;
  /** The lock PUT /v1/state last set (checked as it is read: a corrupt row is an error); undefined when none is held. */
  getLock(): Promise<LockRecord | undefined>;

  /** Every held header value's clear columns (never the value): what GET /v1/mcp needs. */
  headerValueSummaries(): Promise<HeaderValueSummary[]>;
  /** The values held for the connection and its url `url`, decrypted. */
  headerValues(connectionId: string, url: string): Promise<HeaderValueRecord[]>;
  /**
   * Stores it, replacing one held for the same variable, only while the connection is declared
   * with `value.url` and its headers name the variable; false (nothing stored) otherwise. A write
   * of the connection that changes its url, or stops naming a variable, deletes the values that no
   * longer apply in the same transaction.
   */
  putHeaderValue(value: HeaderValueRecord): Promise<boolean>;
  /** Whether one was held (and is now deleted). */
  deleteHeaderValue(connectionId: string, name: string): Promise<boolean>;

  /** The clear columns (no secret) of the credentials of `person` (SHARED's are every shared one), or of everyone's: what GET /v1/mcp needs. */
  credentialSummaries(person?: string): Promise<Array<Omit<CredentialRecord, "secret">>>;
  /** The credential `person` holds for connection `id` (SHARED: the connection's). */
  getCredential(id: string, person: string): Promise<CredentialRecord | undefined>;
  /**
   * Stores a new credential for a connection still declared with `url`, and as shared or personal
   * as the credential's person says, clearing the record of its loss (a new consent); false
   * (nothing stored) otherwise.
   */
  putCredential(credential: Omit<CredentialRecord, "version">): Promise<boolean>;
  /** Replaces the credential only if it is still at `version` (a refresh); false otherwise. */
  replaceCredential(version: number, credential: Omit<CredentialRecord, "version">): Promise<boolean>;
  /**
   * Deletes it only if still at `version`; false otherwise. With `loss`, the same transaction
   * records why (credentialLosses), at `at`.
   */
  deleteCredential(id: string, person: string, version: number, loss?: Loss, at?: number): Promise<boolean>;
  /**
   * The record of every credential lost for good and not replaced since (no secret in it), of
   * `person` (SHARED's: the shared ones) or of everyone's. A loss is recorded with the deletion
   * that answers it, and cleared by putCredential for the same holder, by a write of the
   * connection that changes its url or its kind, with the connection's deletion, and with its
   * person's removal.
   */
  credentialLosses(person?: string): Promise<CredentialLoss[]>;
  /**
   * One refresh per credential (a connection's, or one person's of it) across every process on the store, so a rotating refresh token is
   * sent once (OAuth 2.1 section 4.3.1: a reused one revokes the grant). Takes the credential's
   * lock, waiting while another holds it; under the lock re-reads the credential: not at `version`
   * any more (or gone, or for another url), it is `moved` and `exchange` is never called. Else it
   * calls `exchange` (the request to the authorization server) still holding the lock, then in one
   * transaction stores its result at `version + 1` — or deletes the credential and records its
   * loss (credentialLosses) when it answers `{ delete }` — only if the credential is still at `version` (a DELETE or url change may run
   * meanwhile: they take no lock). The lock is released however it ends; when `exchange` throws,
   * nothing is written and the error is thrown.
   *
   * SQLite: the lock is a lease row (holder, until) taken by one INSERT … ON CONFLICT DO UPDATE …
   * WHERE until <= now, 15 s long and renewed while `exchange` runs, so a holder killed mid-refresh
   * blocks the others for at most 15 s; the others poll it. Postgres: SELECT … FOR UPDATE on the
   * credential's row (or pg_advisory_xact_lock on its id) in a transaction held across `exchange`,
   * which a dead session's disconnect releases. Waiting longer than a minute throws.
   */
  refreshCredential(id: string, person: string, version: number, exchange: RefreshExchange): Promise<CredentialRefresh>;

  /** A client registered with an authorization server for a redirect URI, reused across consents. */
  getRegistration(authorizationServer: string, redirectUri: string): Promise<OAuthClientInformationMixed | undefined>;
  putRegistration(authorizationServer: string, redirectUri: string, client: OAuthClientInformationMixed): Promise<void>;
  deleteRegistration(authorizationServer: string, redirectUri: string): Promise<void>;

  /**
   * One transaction: every pending authorization of the same connection and person ends with
   * `superseded` (final at `at`), then `authorization` is stored pending and unclaimed (section
   * 3.4: a newer start supersedes a pending one, on whichever replica it ran; two people consenting
   * to a personal connection at once do not).
   */
  startAuthorization(authorization: Omit<AuthorizationRecord, "outcome" | "finalAt" | "claimed">, superseded: AuthorizationOutcome, at: number): Promise<void>;
  getAuthorization(id: string): Promise<AuthorizationRecord | undefined>;
  /** By the SHA-256 of its state; undefined when none (a forged or forgotten callback). */
  authorizationByState(stateHash: string): Promise<AuthorizationRecord | undefined>;
  /**
   * Atomic test-and-set, one statement (UPDATE … WHERE status = 'pending' AND claimed = 0 AND
   * expires_at > now): true for exactly one caller across every replica, which alone exchanges the
   * code; false when it is final, expired or already claimed. A claim is never released: a replica
   * that dies during the exchange leaves it pending until it expires, and its code unspent twice.
   */
  claimAuthorization(id: string, now: number): Promise<boolean>;
  /** Makes it final with `outcome` at `at`, only if it is still pending (one statement); whether it was. */
  finishAuthorization(id: string, outcome: AuthorizationOutcome, at: number): Promise<boolean>;
  /** Makes every pending authorization of the connection final with `outcome` (section 5: a url change, a DELETE). */
  endAuthorizations(connectionId: string, outcome: AuthorizationOutcome, at: number): Promise<void>;
  /**
   * Ends `expired` (final at their expiry) the pending ones whose expiry is at or before `now`,
   * then deletes those final before `forgetBefore`. Any replica may run it at any time.
   */
  sweepAuthorizations(now: number, expired: AuthorizationOutcome, forgetBefore: number): Promise<void>;

  /**
   * One transaction: deletes every session last used before `idleBefore` (nobody can continue
   * those), then stores a new session, used at `now` — unless it has an owner that is no longer a
   * token, or, with `cap`, one that already holds `cap.max` sessions (on every agent): then the
   * least recently used of them takes its place when unused since `cap.displaceBefore`, else
   * nothing is stored. Concurrent calls for one owner, from any process, are serialized: the cap is
   * never exceeded.
   */
  putMcpSession(session: McpSessionRecord, now: number, idleBefore: number, cap?: OwnerCap): Promise<PutMcpSession>;
  /** How many sessions `owner` holds (on every agent) last used at or after `idleBefore`, and the least recent of those uses. */
  countMcpSessions(owner: string, idleBefore: number): Promise<{ count: number; oldestUse: number | undefined }>;
  /**
   * The periodic check of the sessions one process holds: of `held`, those still stored whose
   * owner is still a token. Each owner of theirs that is no longer one (revoked, however its row
   * was removed) is named in `revoked` and loses every session it had, on every agent. Each of
   * `busy` (a request or a GET stream open on it there) last used before `touchBefore` is marked
   * used at `now`, so that no process ends it as idle nor leaves it out of its owner's count.
   */
  checkMcpSessions(held: HeldMcpSession[], busy: McpSessionKey[], now: number, touchBefore: number): Promise<McpSessionCheck>;
  /**
   * One transaction: the session, its last use set to `now` — or, when it was last used before
   * `idleBefore`, deleted and undefined (idle past the timeout on every replica at once).
   */
  useMcpSession(agent: string, id: string, now: number, idleBefore: number): Promise<McpSessionRecord | undefined>;
  /** Deletes it (DELETE on any replica), or with `idleBefore` only if it was last used before then; whether it did. */
  endMcpSession(agent: string, id: string, idleBefore?: number): Promise<boolean>;

  /**
   * Stores a token, made now and expiring `lifetimeMs` later (never when absent), and its person
   * when new, unless another token has its name or the store holds `max` tokens (or, for a new
   * person, people) already; token writes are serialized across processes, so no check is raced past.
   */
  addToken(token: NewApiToken, max?: TokenLimits): Promise<AddToken>;
  listTokens(): Promise<ApiTokenRecord[]>;
  /** Every person, oldest first, with how many tokens each holds. */
  listPeople(): Promise<PersonRecord[]>;
  /**
   * The person, every token of theirs, every MCP session those started and every personal
   * credential of theirs (returned, decrypted when the key is here, for revocation), in one transaction;
   * refused (nothing changed) when that would take the last admin token not expired at `now`.
   * Serialized with addToken and revokeToken.
   */
  removePerson(name: string, now: number): Promise<RemovePerson>;
  /**
   * By id, with every MCP session it had, in one transaction; refused (nothing changed) for the
   * last admin token not expired at `now`. Serialized with addToken and every other revocation.
   */
  revokeToken(id: string, now: number): Promise<RevokeToken>;

  /** Says that the process `replica.id` serves this store, at `now` (its row made or renewed). */
  heartbeat(replica: { id: string; listen: string }, now: number): Promise<void>;
  /** Its row removed: it stopped serving (a clean stop). */
  endReplica(id: string): Promise<void>;
  /** The processes that said they serve this store at or after `since`, the longest serving first. */
  liveReplicas(since: number): Promise<ReplicaRecord[]>;
  /**
   * The token whose hash this is (the caller compares the hash again, in constant time, and
   * refuses an expired one). Its last use is recorded at most once a minute, and not once expired.
   */
  findToken(hash: Buffer): Promise<(ApiTokenRecord & { hash: Buffer }) | undefined>;

  /**
   * Writes the entries in one transaction, in order; an entry whose `id` is already there is
   * skipped (a batch retried after a lost answer). Writers on every process are serialized, so
   * `seq` grows in the order entries become visible: a reader following the cursor misses none.
   */
  appendAudit(entries: readonly NewAuditEntry[]): Promise<void>;
  /** Up to `limit` entries matching `filter` with `seq` above `after` (0: from the first), oldest first. */
  listAudit(filter: AuditFilter, after: number, limit: number): Promise<AuditEntry[]>;
  /** Deletes at most `max` of the oldest entries made before `before`; how many it deleted. */
  pruneAudit(before: number, max: number): Promise<number>;

  close(): Promise<void>;
}

export interface RekeyableStore extends DeploymentStore {
  /** Re-encrypts every sealed value (credentials, header values, registrations, pending authorizations) under `next`, in one transaction; how many values. */
  rekey(next: import("../keys.ts").Key): Promise<number>;
}

/**
 * The store's database cannot be reached or did not answer in time (a shared database restarting,
 * a network partition): the request may be retried as it is; the server answers 503.
 */
export class StoreUnavailable extends SubsError {
  constructor(message: string, options: { cause?: unknown } = {}) {
    super("failed", message, { code: "store_unavailable", hint: "check that the database is up and that the store URL names it", ...options });
    this.name = "StoreUnavailable";
  }
}
