// `subs apply` without [remote]: the target is the local db, and making it match the file means
// deleting the credentials the file no longer allows (product.md, "Commands"). Besides `subs mcp
// remove`, it is the one command that deletes what is stored for an id no longer declared: every
// other command leaves it alone (docs/file.md, "Looking never deletes").
import type { Config, ConnectionConfig } from "../config/types.ts";
import type { Context } from "../context.ts";
import type { Reporter } from "../report.ts";
import type { CredentialRow } from "../store/schema.ts";
import { openEnvironmentStore } from "../store/environment.ts";

export type LocalChange = {
  id: string;
  action: "remove";
  reason: "not_declared" | "url_changed" | "now_static";
};

export type LocalApplyResult = {
  dryRun: boolean;
  changes: LocalChange[];
  /** Ids whose stored credential stays. */
  unchanged: string[];
  /** False when there is no db at all: nothing is stored, so nothing can differ from the file. */
  db: boolean;
};

/** Why what is stored for `row.id` no longer fits the file, or undefined when it still does. */
function removalReason(row: { id: string; url: string }, declared: ReadonlyMap<string, ConnectionConfig>): LocalChange["reason"] | undefined {
  const connection = declared.get(row.id);
  if (!connection) return "not_declared";
  // A credential is bound to the url it was issued for; it is never sent to another.
  if (connection.url !== row.url) return "url_changed";
  if (connection.auth) return "now_static";
  return undefined;
}

export async function applyLocal(options: {
  config: Config;
  dryRun: boolean;
  reporter: Reporter;
  /** When given, deleted credentials are also revoked at their authorization server (best effort, bounded). */
  revoke?: Pick<Context, "env" | "fetch"> & Partial<Pick<Context, "signal">>;
  /**
   * Asked with the plan before anything is deleted (the person's "Apply?"); throws to change
   * nothing. Only what it was shown is deleted: a removal planned since (another process stored a
   * credential meanwhile) waits for the next run.
   */
  confirm?: (changes: readonly LocalChange[]) => Promise<void>;
}): Promise<LocalApplyResult> {
  const { config, dryRun } = options;
  const opened = await openEnvironmentStore(config, { create: false, reporter: options.reporter });
  if (!opened) return { dryRun, changes: [], unchanged: [], db: false };
  const { store } = opened;
  const declared = new Map(config.connections.map((c) => [c.id, c]));
  try {
    const plan = () => {
      const changes: LocalChange[] = [];
      const unchanged: string[] = [];
      for (const row of store.listCredentials()) {
        const reason = removalReason(row, declared);
        if (reason) changes.push({ id: row.id, action: "remove", reason });
        else unchanged.push(row.id);
      }
      return { changes, unchanged };
    };
    if (dryRun) return { dryRun, db: true, ...plan() };
    let approved: ReadonlySet<string> | undefined;
    if (options.confirm) {
      const shown = plan().changes;
      await options.confirm(shown);
      approved = new Set(shown.map((c) => c.id));
    }
    // Plan and delete under one write lock, so what we report is exactly what we deleted.
    let deleted: CredentialRow[] = [];
    const result = store.exclusive(() => {
      const planned = plan();
      if (approved) {
        const later = planned.changes.filter((c) => !approved.has(c.id));
        planned.changes = planned.changes.filter((c) => approved.has(c.id));
        planned.unchanged.push(...later.map((c) => c.id));
      }
      const ids = new Set(planned.changes.map((c) => c.id));
      deleted = store.listCredentials().filter((row) => ids.has(row.id));
      // Findings that a server needs no credential go the same way, unreported: they are no secret.
      const stale = store.listOpenConnections().filter((row) => removalReason(row, declared) !== undefined);
      store.deleteCredentials([...ids, ...stale.map((row) => row.id)]);
      return planned;
    });
    if (options.revoke && deleted.length > 0) {
      const { revokeCredentials } = await import("../auth/revoke.ts");
      await revokeCredentials(deleted, { ctx: options.revoke, reporter: options.reporter, storePath: store.path });
    }
    return { dryRun, db: true, ...result };
  } finally {
    store.close();
  }
}
