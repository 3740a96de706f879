import type { Config } from "../config/types.ts";
import type { Reporter } from "../report.ts";
import { openEnvironmentStore, storedRows } from "../store/environment.ts";
import { localStatuses, storedState, type ConnectionStatus } from "./status.ts";

/** One db read for the whole list (issue 6): status of every declared connection. */
export async function listLocalConnections(options: {
  config: Config;
  env: Readonly<Record<string, string | undefined>>;
  now: number;
  reporter: Reporter;
}): Promise<ConnectionStatus[]> {
  const opened = await openEnvironmentStore(options.config, { create: false, reporter: options.reporter });
  let rows: ReturnType<typeof storedRows> = { credentials: [], open: [] };
  if (opened) {
    try {
      // The purge on open already read every row under its lock: reuse that read.
      rows = storedRows(opened);
    } finally {
      opened.store.close();
    }
  }
  return localStatuses(options.config, storedState(rows), options.env, options.now);
}
