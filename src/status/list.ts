import type { Config } from "../config/types.ts";
import type { Reporter } from "../report.ts";
import { openEnvironmentStore } from "../store/environment.ts";
import type { CredentialRow } from "../store/schema.ts";
import { localStatuses, type ConnectionStatus } from "./status.ts";

/** One db read for the whole list (issue 6): status of every declared connection. */
export async function listLocalConnections(options: {
  config: Config;
  env: Readonly<Record<string, string | undefined>>;
  now: number;
  reporter: Reporter;
}): Promise<ConnectionStatus[]> {
  const opened = await openEnvironmentStore(options.config, { create: false, reporter: options.reporter });
  let rows: CredentialRow[] = [];
  if (opened) {
    try {
      // The purge on open already read every row under its lock: reuse that read.
      rows = opened.credentials ?? opened.store.listCredentials();
    } finally {
      opened.store.close();
    }
  }
  return localStatuses(options.config, new Map(rows.map((row) => [row.id, row])), options.env, options.now);
}
