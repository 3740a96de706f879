import path from "node:path";
import type { Config } from "../config/types.ts";
import type { Reporter } from "../report.ts";
import type { CredentialRow, LostCredentialRow, OpenConnectionRow } from "./schema.ts";
import { openStore, type Store } from "./store.ts";

export type EnvironmentStore = { store: Store };

/**
 * Opens the environment's db for a command. Opening deletes nothing: what is stored for an id the
 * file no longer declares stays until `subs apply` (docs/file.md, "Looking never deletes"), so a
 * section commented out for a minute needs no new consent once it is back. Nothing can name such an
 * id meanwhile, so its credential is never used. Returns undefined when there is no db and `create`
 * is false.
 */
export async function openEnvironmentStore(config: Config, options: { create: boolean; reporter: Reporter; readsOnly?: boolean }): Promise<EnvironmentStore | undefined> {
  const opened = await openStore({ dbPath: config.dbPath, create: options.create, root: path.dirname(config.path), ...(options.readsOnly ? { readsOnly: true } : {}) });
  if (!opened) return undefined;
  for (const warning of opened.warnings) options.reporter.warn(warning);
  if (opened.created) {
    // Loaded only here: node:child_process (with net and dgram behind it) is a few ms of start-up
    // that a command opening an existing db never needs.
    const { unignoredDbWarning } = await import("./gitignore.ts");
    const warning = unignoredDbWarning(config.dbPath);
    if (warning) options.reporter.warn(warning);
  }
  return { store: opened.store };
}

/** Everything stored: credentials, findings that a server needs none, records of a lost credential, declared or not. */
export function storedRows(opened: EnvironmentStore): { credentials: CredentialRow[]; open: OpenConnectionRow[]; lost: LostCredentialRow[] } {
  return { credentials: opened.store.listCredentials(), open: opened.store.listOpenConnections(), lost: opened.store.listLostCredentials() };
}

export function undeclaredCredentials<Row extends { id: string }>(rows: readonly Row[], config: Config): Row[] {
  const declared = new Set(config.connections.map((c) => c.id));
  return rows.filter((row) => !declared.has(row.id));
}
