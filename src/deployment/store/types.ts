// What the deployment keeps, behind one asynchronous interface: the SQLite file of one machine
// (sqlite.ts), or a Postgres database several replicas share (postgres.ts), where the same calls
// are transactions with row locks (a refresh is a compare-and-swap on the credential's version, so two
// replicas never both spend one rotating refresh token). Every write the protocol calls atomic
// (docs/deployment-protocol.md section 7) is one call here.
import { SubsError } from "../../errors.ts";
import type { AuthorizationServerMetadata, OAuthClientInformationMixed, OAuthTokens } from "@modelcontextprotocol/sdk/shared/auth.js";

export type OAuthSettings = { client_id?: string; client_metadata_url?: string; scopes?: string[] };
export type ToolFilter = { include?: string[]; exclude?: string[]; read_only?: boolean; non_destructive?: boolean; idempotent?: boolean };

export type ConnectionRecord = { id: string; url: string; prefixTools: boolean; oauth: OAuthSettings | undefined };
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
  /** The url it was issued for: it is never sent to another. */
  url: string;
  issuer: string;
  authorizedAt: number;
  expiresAt: number | null;
  /** Bumped on every replacement: a refresh replaces only the version it refreshed. */
  version: number;
  secret: CredentialSecret;
};

export type Role = "admin" | "apply" | "use" | "read";
export const ROLES: readonly Role[] = ["admin", "apply", "use", "read"];

export type ApiTokenRecord = { id: string; name: string; role: Role; createdAt: number; lastUsedAt: number | null };

export type PutConnection = { created: boolean; urlChanged: boolean; dropped: CredentialRecord | undefined };
export type DeleteConnection = { outcome: "deleted"; dropped: CredentialRecord | undefined } | { outcome: "absent" } | { outcome: "in_use"; agents: string[] };
export type PutAgent = { outcome: "created" | "updated" } | { outcome: "unknown_connection"; missing: string[] };

/**
 * The whole declared state (PUT /v1/state): with `prune`, whatever it does not name goes. With
 * `ifRevision`, applied only while the declarations are still at that revision.
 */
export type DeclaredState = { connections: ConnectionRecord[]; agents: AgentRecord[]; prune: boolean; ifRevision?: string };
export type StateChange = { kind: "connection" | "agent"; id: string; action: "add" | "change" | "remove"; credentialDropped: boolean };
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

export interface DeploymentStore {
  readonly path: string;
  listConnections(): Promise<ConnectionRecord[]>;
  getConnection(id: string): Promise<ConnectionRecord | undefined>;
  /** Declares or replaces; a different url deletes the credential in the same transaction. */
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
   * The declarations' revision: it changes with every write of a connection or an agent (not of a
   * credential). Read before the rows it is answered with, so it can be older than they are, never
   * newer: a plan made from them is then refused by PUT /v1/state, never applied over a change.
   */
  revision(): Promise<string>;

  /** Every credential's clear columns (no secret): what GET /v1/mcp needs. */
  credentialSummaries(): Promise<Array<Omit<CredentialRecord, "secret">>>;
  getCredential(id: string): Promise<CredentialRecord | undefined>;
  /** Stores a new credential for a connection still declared with `url`; false (nothing stored) otherwise. */
  putCredential(credential: Omit<CredentialRecord, "version">): Promise<boolean>;
  /** Replaces the credential only if it is still at `version` (a refresh); false otherwise. */
  replaceCredential(version: number, credential: Omit<CredentialRecord, "version">): Promise<boolean>;
  /** Deletes it only if still at `version`; false otherwise. */
  deleteCredential(id: string, version: number): Promise<boolean>;

  /** A client registered with an authorization server for a redirect URI, reused across consents. */
  getRegistration(authorizationServer: string, redirectUri: string): Promise<OAuthClientInformationMixed | undefined>;
  putRegistration(authorizationServer: string, redirectUri: string, client: OAuthClientInformationMixed): Promise<void>;
  deleteRegistration(authorizationServer: string, redirectUri: string): Promise<void>;

  /** `hash`: SHA-256 of the token; the token itself is never stored. */
  addToken(token: { id: string; name: string; role: Role; hash: Buffer }): Promise<void>;
  listTokens(): Promise<ApiTokenRecord[]>;
  /** By id or name; the tokens it removed. */
  revokeToken(idOrName: string): Promise<ApiTokenRecord[]>;
  /** The token whose hash this is (the caller compares the hash again, in constant time). */
  findToken(hash: Buffer): Promise<(ApiTokenRecord & { hash: Buffer }) | undefined>;

  close(): Promise<void>;
}

export interface RekeyableStore extends DeploymentStore {
  /** Re-encrypts every sealed value under `next`, in one transaction; how many values. */
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
