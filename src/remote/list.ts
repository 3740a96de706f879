// `subs mcp list` with [remote]: the deployment's view merged with the file's. Each id in either
// gets one entry: its status on the deployment and its drift (declared in the file but not
// applied, or on the deployment but no longer in the file).
import { remoteConnectionsOf, type Config } from "../config/types.ts";
import type { DeploymentClient } from "./client.ts";
import { connectionBody, planRemote, type ConnectionField } from "./plan.ts";
import type { HeldSecret, RemoteConnection } from "./protocol.ts";

export type RemoteListStatus =
  /** The deployment holds a credential for this id and the file's url, or every value its headers name. */
  | "authorized"
  /**
   * Declared on the deployment with the file's url, not authorized: no credential, or (its headers
   * naming variables) a value it does not hold (`secrets`).
   */
  | "needs_login"
  /** Declared on the deployment with the file's url, which it refuses to use (its url is outside its catalog). */
  | "refused"
  /** The deployment has this id with another url: `subs apply` re-declares it (and drops its credential). */
  | "url_changed"
  /** In the file, not on the deployment. */
  | "not_applied"
  /** On the deployment, not in the file: `subs apply` removes it and its credential. */
  | "not_in_file";

export type Drift = "not_applied" | "not_in_file" | "differs";

export type RemoteListEntry = {
  id: string;
  /** The file's url; for an id only on the deployment, the deployment's. */
  url: string;
  status: RemoteListStatus;
  usable: boolean;
  drift: Drift | null;
  /** With drift "differs": the fields where file and deployment disagree. */
  differs: ConnectionField[];
  deployment: RemoteConnection | null;
  agents: string[];
  /** Why the deployment will not use it, whatever the status, with the allowed URLs when the deployment gave them. */
  refused: RemoteRefusal | null;
  /**
   * The variables the deployment's `headers` name and whether it holds a value for each
   * (docs/deployment-protocol.md section 2, `secrets`): names only. Empty when they name none.
   */
  secrets: HeldSecret[];
  /**
   * `personal`: one credential per person (docs/deployment-protocol.md section 2), so `status` is
   * the caller's own. The deployment's kind, which its status follows (a file that says otherwise
   * shows `credential` among `differs`); the file's for a connection not applied yet.
   */
  credential: "shared" | "personal";
};

/** `refused` of the deployment's Connection (docs/deployment-protocol.md section 2), with the list's `catalog`. */
export type RemoteRefusal = { error: string; message: string | null; catalog: string[] | null };

export async function listRemoteConnections(config: Config, client: DeploymentClient): Promise<RemoteListEntry[]> {
  const { connections, catalog } = await client.readConnections();
  return mergeRemoteView(config, connections, catalog);
}

export function mergeRemoteView(config: Config, remote: RemoteConnection[], catalog?: string[]): RemoteListEntry[] {
  const refusalOf = (c: RemoteConnection | null): RemoteRefusal | null =>
    c?.refused ? { error: c.refused.error, message: c.refused.message ?? null, catalog: c.refused.error === "url_not_in_catalog" ? (catalog ?? null) : null } : null;
  const byId = new Map(remote.map((c) => [c.id, c]));
  const plan = planRemote(config, { connections: remote, agents: [] });
  const steps = new Map(plan.connections.map((s) => [s.id, s]));
  const agentsOf = (id: string) => config.agents.filter((a) => a.mcp.some((e) => e.id === id)).map((a) => a.name);
  const entries: RemoteListEntry[] = remoteConnectionsOf(config).map((connection) => {
    const deployed = byId.get(connection.id) ?? null;
    const step = steps.get(connection.id)!;
    const base = {
      id: connection.id,
      url: connectionBody(connection).url,
      deployment: deployed,
      agents: agentsOf(connection.id),
      differs: step.changed,
      refused: refusalOf(deployed),
      secrets: deployed?.secrets ?? [],
      credential: deployed ? (deployed.credential ?? ("shared" as const)) : (connection.credential ?? ("shared" as const)),
    };
    if (!deployed) return { ...base, status: "not_applied", usable: false, drift: "not_applied" };
    const drift = step.action === "change" ? ("differs" as const) : null;
    if (step.changed.includes("url")) return { ...base, status: "url_changed", usable: false, drift };
    // Refused whatever its status says: a deployment that uses no credential of it shows it `declared`.
    if (base.refused) return { ...base, status: "refused", usable: false, drift };
    const authorized = deployed.status === "authorized";
    return { ...base, status: authorized ? "authorized" : "needs_login", usable: authorized, drift };
  });
  const declared = new Set(config.connections.map((c) => c.id));
  for (const deployed of remote) {
    if (declared.has(deployed.id)) continue;
    entries.push({
      id: deployed.id,
      url: deployed.url,
      status: "not_in_file",
      usable: false,
      drift: "not_in_file",
      differs: [],
      deployment: deployed,
      agents: [],
      refused: refusalOf(deployed),
      secrets: deployed.secrets ?? [],
      credential: deployed.credential ?? ("shared" as const),
    });
  }
  return entries;
}
