// Each connection's state, from the file, the environment and the db only: `subs mcp list`
// never touches the network, so 200 connections cost what 10 do (product.md, "Commands").
import { isLocalServer, type Config, type ConnectionConfig, type RemoteConnection } from "../config/types.ts";
import { headerVariables, localVariables } from "../config/templates.ts";
import type { CredentialRow, LostCredentialRow, OpenConnectionRow } from "../store/schema.ts";

/** What a call carries: an OAuth credential, a static token, or (the server asked for none) nothing. */
export type AuthKind = "oauth" | "static" | "none";

export type LocalStatus =
  /** A credential bound to this id and url that is valid now or can be refreshed. */
  | "authorized"
  /** No credential, or an expired one without a refresh token. */
  | "needs_login"
  /** The credential was issued for another url; it is never sent to the new one. */
  | "url_changed"
  /** Static credential: the variable is set. */
  | "env_set"
  /** Static credential: the variable is not set. */
  | "env_unset"
  /** The server answered `subs mcp login` for this url without asking for a credential. */
  | "open"
  /** A local server whose variables are all set: subs starts it when a command uses it. */
  | "local";

export type ConnectionStatus = {
  id: string;
  /** Null for a local server. */
  url: string | null;
  /** The program a local server runs; null for a remote one. */
  command: string | null;
  /** The variables a local server's templates name that are not set (it cannot start until they are). */
  unsetEnv: string[];
  auth: AuthKind;
  status: LocalStatus;
  usable: boolean;
  issuer: string | null;
  scopes: string[];
  /** Absolute expiry of the access token (ms since epoch), when the server gave one. */
  expiresAt: number | null;
  refreshable: boolean;
  /** When the refresh token (the grant) expires (ms since epoch), where the authorization server said; null when unknown. */
  refreshExpiresAt: number | null;
  /** Why it needs a login when its credential was lost for good at this url (its refresh rejected), until a new login. */
  lost: CredentialLossInfo | null;
  /** Whose credential a deployment would hold (the file's `credential`): locally there is one person either way. Null for a local server. */
  credential: "shared" | "personal" | null;
  tokenEnv: string | null;
  /** The url the stored credential was issued for, when it differs from the file's. */
  loggedInUrl: string | null;
  agents: string[];
};

/**
 * Why a credential was lost for good, as both places say it (the local db's record, a deployment's
 * `lost`): a reason word, one line made visible where it was recorded, and when.
 */
export type CredentialLossInfo = { reason: string; message: string | null; lostAt: number | null };

/** What the local db holds, by connection id. */
export type StoredState = {
  credentials: ReadonlyMap<string, CredentialRow>;
  open: ReadonlyMap<string, OpenConnectionRow>;
  lost: ReadonlyMap<string, LostCredentialRow>;
};

export function storedState({ credentials, open, lost = [] }: { credentials: readonly CredentialRow[]; open: readonly OpenConnectionRow[]; lost?: readonly LostCredentialRow[] }): StoredState {
  return { credentials: new Map(credentials.map((row) => [row.id, row])), open: new Map(open.map((row) => [row.id, row])), lost: new Map(lost.map((row) => [row.id, row])) };
}

export function localStatuses(config: Config, stored: StoredState, env: Readonly<Record<string, string | undefined>>, now: number): ConnectionStatus[] {
  const { credentials } = stored;
  const agentsByConnection = new Map<string, string[]>();
  for (const agent of config.agents) {
    for (const entry of agent.mcp) {
      const list = agentsByConnection.get(entry.id);
      if (list) list.push(agent.name);
      else agentsByConnection.set(entry.id, [agent.name]);
    }
  }
  return config.connections.map((connection) => {
    const agents = agentsByConnection.get(connection.id) ?? [];
    if (isLocalServer(connection)) {
      const unset = localVariables(connection.process).filter((name) => env[name] === undefined);
      return statusOf(connection, agents, unset.length > 0 ? "env_unset" : "local", undefined, unset);
    }
    const status = remoteStatus(connection, agents);
    // Variables the headers read, unset: said beside the status, and the connection is not usable until they are.
    const unsetHeaders = connection.headers ? headerVariables(connection.headers).filter((name) => env[name] === undefined) : [];
    if (unsetHeaders.length > 0) {
      status.unsetEnv = unsetHeaders;
      status.usable = false;
    }
    return status;
  });

  function remoteStatus(connection: RemoteConnection, agents: string[]): ConnectionStatus {
    if (connection.auth) return statusOf(connection, agents, env[connection.auth.tokenEnv] ? "env_set" : "env_unset");
    const row = credentials.get(connection.id);
    // Found open for another url: that finding says nothing about this one.
    if (!row) {
      if (stored.open.get(connection.id)?.url === connection.url) return statusOf(connection, agents, "open");
      // Lost for good at this url: needs a login, and says why. A loss at another url says nothing of this one.
      const lost = stored.lost.get(connection.id);
      const status = statusOf(connection, agents, "needs_login");
      if (lost && lost.url === connection.url) status.lost = { reason: lost.reason, message: lost.message, lostAt: lost.lost_at };
      return status;
    }
    if (row.url !== connection.url) return statusOf(connection, agents, "url_changed", row);
    const expired = row.expires_at !== null && row.expires_at <= now;
    if (expired && row.refresh_token === null) return statusOf(connection, agents, "needs_login", row);
    return statusOf(connection, agents, "authorized", row);
  }
}

/** One object literal per connection, every key in one order: `mcp list` builds one per declared
 *  connection on every run, and spreading partial objects cost several copies each. */
function statusOf(connection: ConnectionConfig, agents: string[], status: LocalStatus, row?: CredentialRow, unsetEnv: string[] = []): ConnectionStatus {
  return {
    id: connection.id,
    url: connection.url ?? null,
    command: connection.process ? connection.process.command : null,
    unsetEnv,
    auth: connection.auth ? "static" : status === "open" || connection.process ? "none" : "oauth",
    status,
    usable: status === "authorized" || status === "env_set" || status === "open" || status === "local",
    issuer: row ? row.issuer : null,
    scopes: row?.scopes ? row.scopes.split(" ") : [],
    expiresAt: row ? row.expires_at : null,
    refreshable: row ? row.refresh_token !== null : false,
    refreshExpiresAt: row && row.refresh_token !== null ? row.refresh_expires_at : null,
    lost: null,
    credential: connection.process ? null : (connection.credential ?? "shared"),
    tokenEnv: connection.auth ? connection.auth.tokenEnv : null,
    loggedInUrl: row && status === "url_changed" ? row.url : null,
    agents,
  };
}

