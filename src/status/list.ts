import type { Config } from "../config/types.ts";
import type { Reporter } from "../report.ts";
import { openEnvironmentStore, storedRows, undeclaredCredentials } from "../store/environment.ts";
import type { CredentialRow } from "../store/schema.ts";
import { localStatuses, storedState, type ConnectionStatus } from "./status.ts";

export type LocalListing = {
  /** Every declared connection, in file order. */
  statuses: ConnectionStatus[];
  /**
   * Credentials stored for ids the file no longer declares, by id: kept until `subs apply`
   * (docs/file.md, "Looking never deletes"), never used meanwhile.
   */
  undeclared: CredentialRow[];
};

/** One db read for the whole list: status of every declared connection, and what is stored for undeclared ids. */
export async function listLocalConnections(options: {
  config: Config;
  env: Readonly<Record<string, string | undefined>>;
  now: number;
  reporter: Reporter;
}): Promise<LocalListing> {
  const opened = await openEnvironmentStore(options.config, { create: false, readsOnly: true, reporter: options.reporter });
  let rows: ReturnType<typeof storedRows> = { credentials: [], open: [], lost: [] };
  if (opened) {
    try {
      rows = storedRows(opened);
    } finally {
      opened.store.close();
    }
  }
  return { statuses: localStatuses(options.config, storedState(rows), options.env, options.now), undeclared: undeclaredCredentials(rows.credentials, options.config) };
}
