import { applyLocal, type LocalChange } from "../apply/local.ts";
import path from "node:path";
import { loadConfig } from "../config/load.ts";
import type { Context } from "../context.ts";
import { writeJson } from "../output/json.ts";
import { stderrReporter } from "../output/reporter.ts";
import { styleFor } from "../output/style.ts";

export type ApplyOptions = {
  config?: string;
  json: boolean;
  dryRun: boolean;
  /** `--yes`: no question before a plan that removes. */
  yes?: boolean;
};

const REASONS: Record<LocalChange["reason"], string> = {
  not_declared: "no longer declared",
  url_changed: "url changed since login",
  now_static: "now uses a static token (auth)",
};

export async function applyCommand(ctx: Context, options: ApplyOptions): Promise<void> {
  const config = loadConfig({ configPath: options.config, env: ctx.env, cwd: ctx.cwd });
  const reporter = stderrReporter(ctx);
  if (config.remote) {
    const { applyRemote } = await import("./apply-remote.ts");
    return applyRemote(ctx, config, { json: options.json, dryRun: options.dryRun, yes: options.yes ?? false });
  }
  const db = path.relative(ctx.cwd, config.dbPath) || config.dbPath;
  const result = await applyLocal({
    config,
    dryRun: options.dryRun,
    reporter,
    revoke: ctx,
    confirm: async (changes) => {
      const { confirmRemovals } = await import("../output/confirm.ts");
      await confirmRemovals(ctx, { removed: changes.map((c) => `the credential of ${c.id} (${REASONS[c.reason]})`), from: db, yes: options.yes ?? false });
    },
  });
  if (options.json) {
    writeJson(ctx.stdout, {
      target: "local",
      db: config.dbPath,
      dry_run: result.dryRun,
      changes: result.changes.map((c) => ({ id: c.id, action: c.action, reason: c.reason })),
      unchanged: result.unchanged,
    });
    return;
  }
  const style = styleFor(ctx.color);
  const verb = result.dryRun ? "Would delete" : "Deleted";
  for (const change of result.changes) {
    ctx.stdout.write(`${style.red("-")} ${change.id}: ${verb.toLowerCase()} its credential (${REASONS[change.reason]})\n`);
  }
  // The summary is on stderr, as with [remote] (issue 15); stdout has the changes, one per line.
  const summary =
    result.changes.length > 0
      ? `${verb} ${result.changes.length} credential${result.changes.length > 1 ? "s" : ""} in ${db}.${result.dryRun ? " Dry run: nothing was changed." : ""}`
      : result.db
        ? `Nothing to do: the local db matches ${config.displayPath}.`
        : `Nothing to do: nothing is stored yet (no ${db}).`;
  ctx.stderr.write(`${summary}\n`);
}
