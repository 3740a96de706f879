import path from "node:path";
import type { Config } from "../config/types.ts";
import type { Reporter } from "../report.ts";
import type { CredentialRow, OpenConnectionRow } from "./schema.ts";
import { openStore, type Store } from "./store.ts";

export type EnvironmentStore = {
  store: Store;
  /** Credentials deleted on open because their ids are no longer declared. */
  purged: CredentialRow[];
  /** The credentials left after the purge, from the purge's own read (undefined without a purge). */
  credentials?: CredentialRow[];
  /** Likewise the connections found to need no credential (undefined without a purge). */
  open?: OpenConnectionRow[];
};

/**
 * Opens the environment's db for a command. Deleting a `[mcp.<id>]` section disconnects it, so
 * every open deletes credentials of ids the file no longer declares and says so (issue 2).
 * Returns undefined when there is no db and `create` is false.
 */
export async function openEnvironmentStore(
  config: Config,
  options: { create: boolean; purge?: boolean; reporter: Reporter },
): Promise<EnvironmentStore | undefined> {
  const opened = await openStore({ dbPath: config.dbPath, create: options.create, expectRows: config.connections.length, root: path.dirname(config.path) });
  if (!opened) return undefined;
  for (const warning of opened.warnings) options.reporter.warn(warning);
  if (opened.created) {
    // Loaded only here: node:child_process (with net and dgram behind it) is a few ms of start-up
    // that a command opening an existing db never needs (issue 6).
    const { unignoredDbWarning } = await import("./gitignore.ts");
    const warning = unignoredDbWarning(config.dbPath);
    if (warning) options.reporter.warn(warning);
  }
  const { purged, kept, open } = options.purge === false ? { purged: [], kept: undefined, open: undefined } : purgeUndeclared(opened.store, config);
  if (purged.length > 0) {
    const ids = purged.map((row) => row.id).join(", ");
    options.reporter.info(`Deleted the stored credential${purged.length > 1 ? "s" : ""} of ${ids}: no longer declared in ${config.displayPath}`);
  }
  return kept === undefined || open === undefined ? { store: opened.store, purged } : { store: opened.store, purged, credentials: kept, open };
}

/** Everything stored for the declared connections, from the purge's own read when there was one. */
export function storedRows(opened: EnvironmentStore): { credentials: CredentialRow[]; open: OpenConnectionRow[] } {
  return { credentials: opened.credentials ?? opened.store.listCredentials(), open: opened.open ?? opened.store.listOpenConnections() };
}

export function undeclaredCredentials<Row extends { id: string }>(rows: readonly Row[], config: Config): Row[] {
  const declared = new Set(config.connections.map((c) => c.id));
  return rows.filter((row) => !declared.has(row.id));
}

function purgeUndeclared(store: Store, config: Config): { purged: CredentialRow[]; kept: CredentialRow[]; open: OpenConnectionRow[] } {
  // Read first, without the write lock: almost always nothing is undeclared, and a listing then
  // neither waits on another process's write nor pays for a transaction (issue 6). WAL gives the
  // read a consistent snapshot.
  const rows = store.listCredentials();
  const open = store.listOpenConnections();
  if (undeclaredCredentials(rows, config).length === 0 && undeclaredCredentials(open, config).length === 0) return { purged: [], kept: rows, open };
  // Something to delete: decide again under the write lock, on what is there now. A finding that
  // a server needs no credential goes with its section too, silently: it is no secret.
  return store.exclusive(() => {
    const current = store.listCredentials();
    const purged = undeclaredCredentials(current, config);
    const openNow = store.listOpenConnections();
    const gone = new Set([...purged, ...undeclaredCredentials(openNow, config)].map((row) => row.id));
    store.deleteCredentials([...gone]);
    return { purged, kept: current.filter((row) => !gone.has(row.id)), open: openNow.filter((row) => !gone.has(row.id)) };
  });
}
