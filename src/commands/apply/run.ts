// `subs apply`: make where the credentials live match the file. Locally that deletes the
// credentials the file no longer allows; on a deployment it plans, shows the plan, asks before a
// removal, and carries it out step by step. `--json` is documented per place (docs/commands.md,
// "subs apply"; README.md, "With `[remote]`").
import path from "node:path";
import type { LocalChange } from "../../apply/local.ts";
import { backendFor } from "../../backend/choose.ts";
import type { Applied } from "../../backend/types.ts";
import { loadConfig } from "../../config/load.ts";
import type { Config } from "../../config/types.ts";
import type { Context } from "../../context.ts";
import { refused, SubsError } from "../../errors.ts";
import { writeJson } from "../../output/json.ts";
import { stderrReporter } from "../../output/reporter.ts";
import { MARK, styleFor, type Style } from "../../output/style.ts";
import { shown } from "../../output/untrusted.ts";
import { DeploymentError } from "../../remote/client.ts";
import { hasChanges, type ConnectionStep, type PlanStep, type RemotePlan, type StepOutcome } from "../../remote/plan.ts";

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
  const backend = await backendFor({ ctx, config, reporter });
  const style = styleFor(ctx.color);
  const errStyle = styleFor(ctx.stderrColor);
  const db = path.relative(ctx.cwd, config.dbPath) || config.dbPath;
  const applied = await backend.apply({
    dryRun: options.dryRun,
    confirm: async (plan) => {
      const { confirmRemovals } = await import("../../output/confirm.ts");
      const yes = options.yes ?? false;
      if (plan.target === "local") await confirmRemovals(ctx, { removed: plan.changes.map((c) => `the credential of ${c.id} (${REASONS[c.reason]})`), from: db, yes });
      else await confirmRemovals(ctx, { removed: removals(plan.plan), from: plan.url.href, yes });
    },
    onPlan: (plan, url) => {
      if (!options.json) ctx.stdout.write(renderPlan(plan, url.href, style));
    },
    onStep: (o) => {
      if (options.json) return;
      const mark = o.outcome === "applied" ? errStyle.green(MARK.success) : errStyle.red(MARK.failure);
      ctx.stderr.write(`${mark} ${o.outcome === "failed" ? `could not ${shown(describeStep(o.step))}: ${shown(errorMessage(o.error))}` : describeStepDone(o.step)}\n`);
    },
  });
  if (applied.target === "remote") return reportRemote(ctx, config, applied, options.json);
  const { result } = applied;
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
  const verb = result.dryRun ? "Would delete" : "Deleted";
  for (const change of result.changes) {
    ctx.stdout.write(`${style.red("-")} ${change.id}: ${verb.toLowerCase()} its credential (${REASONS[change.reason]})\n`);
  }
  // The summary is on stderr, as with [remote]: stdout has the changes only, one per line.
  const summary =
    result.changes.length > 0
      ? `${verb} ${result.changes.length} credential${result.changes.length > 1 ? "s" : ""} in ${db}.${result.dryRun ? " Dry run: nothing was changed." : ""}`
      : result.db
        ? `Nothing to do: the local db matches ${config.displayPath}.`
        : `Nothing to do: nothing is stored yet (no ${db}).`;
  ctx.stderr.write(`${summary}\n`);
}

/**
 * After a deployment's plan (printed before it was carried out): the result, or a report of what
 * was applied, what failed and what was not attempted, and the error of the first failure.
 */
function reportRemote(ctx: Context, config: Config, done: Extract<Applied, { target: "remote" }>, json: boolean): void {
  const { plan, outcomes } = done;
  const url = done.url.href;
  if (done.dryRun || !hasChanges(plan)) {
    if (json) writeJson(ctx.stdout, planJson(plan, url, { dryRun: done.dryRun, outcomes: [] }));
    else ctx.stderr.write(hasChanges(plan) ? "Dry run: nothing was changed.\n" : `Nothing to do: the deployment matches ${config.displayPath}.\n`);
    return;
  }
  const errStyle = styleFor(ctx.stderrColor);
  const failures = outcomes.filter((o) => o.outcome === "failed");
  const applied = outcomes.filter((o) => o.outcome === "applied");
  if (failures.length === 0) {
    if (json) writeJson(ctx.stdout, planJson(plan, url, { dryRun: false, outcomes }));
    // The summary is on stderr, as every other `subs apply` summary is: stdout has the plan only.
    else ctx.stderr.write(`Applied ${applied.length} change${applied.length === 1 ? "" : "s"} to ${url}.\n`);
    return;
  }

  const notAttempted = outcomes.filter((o) => o.outcome === "not_attempted");
  if (!json) {
    ctx.stderr.write(`\nApplied ${applied.length} of ${outcomes.length} changes:\n`);
    for (const o of outcomes) {
      const label = o.outcome === "applied" ? errStyle.green("applied      ") : o.outcome === "failed" ? errStyle.red("failed       ") : errStyle.yellow("not attempted");
      ctx.stderr.write(`  ${label} ${shown(describeStep(o.step))}\n`);
    }
  }
  const details = {
    applied: applied.map((o) => stepRef(o.step)),
    failed: failures.map((o) => ({ ...stepRef(o.step), code: errorCode(o.error), message: errorMessage(o.error) })),
    not_attempted: notAttempted.map((o) => stepRef(o.step)),
  };
  const first = failures[0]!.error;
  // One PUT /v1/state: never a part. A refusal (4xx) changed nothing; after a lost answer the
  // deployment applied all of it or none of it, and a rerun shows which.
  const refusedWhole = first instanceof DeploymentError && first.status < 500 && first.status !== 429;
  const summary = done.atomic
    ? refusedWhole
      ? `nothing was changed: the deployment refused the whole plan (${outcomes.length} change${outcomes.length === 1 ? "" : "s"}), which it applies in one request`
      : `the ${outcomes.length} change${outcomes.length === 1 ? " was" : "s were"} sent in one request, which the deployment applies entirely or not at all`
    : `${applied.length} of ${outcomes.length} changes applied, ${failures.length} failed, ${notAttempted.length} not attempted`;
  if (first instanceof DeploymentError && first.code === "url_not_in_catalog") {
    // The refusal carries the whole catalog: name every connection of the plan outside it, not
    // only the one that was refused first, so one edit of the file fixes them all. That includes
    // an unchanged one: declared before its url left the catalog, it is refused with the rest of
    // the file (PUT /v1/state carries every declaration).
    const catalog = new Set(first.body?.catalog ?? []);
    const outside = plan.connections.filter((s) => s.action !== "remove" && !catalog.has(s.url));
    throw refused(`not in the deployment's catalog: ${outside.map((s) => `${s.id} (${s.url})`).join(", ")} (${summary})`, {
      code: "url_not_in_catalog",
      ...(first.hint ? { hint: first.hint } : {}),
      details: { ...first.details, not_in_catalog: outside.map((s) => ({ id: s.id, url: s.url })), ...details },
    });
  }
  if (first instanceof DeploymentError && first.kind === "refused") {
    throw refused(`${done.atomic ? "" : `${describeStep(failures[0]!.step)}: `}${first.message} (${summary})`, {
      code: first.code ?? "refused",
      ...(first.hint ? { hint: first.hint } : {}),
      details: { ...first.details, ...details },
    });
  }
  // Ctrl-C part-way: the same report, and exit 130.
  const kind = first instanceof SubsError && first.kind === "interrupted" ? "interrupted" : "failed";
  throw new SubsError(kind, `${done.atomic ? "apply failed" : "apply stopped part-way"}: ${summary}. ${errorMessage(first)}`, {
    code: "apply_incomplete",
    hint: "fix the cause and rerun `subs apply`: it reads the deployment again and carries out only what is left",
    details,
  });
}

/** What the plan takes away: removed connections and agents, and credentials the deployment drops. */
/** Why the deployment stops using a credential, in words. */
const DROPPED: Record<NonNullable<ConnectionStep["credentialReason"]>, string> = {
  url_changed: "url changed",
  declaration_removed: "declaration removed",
  headers_changed: "its headers name a value the deployment does not hold",
  credential_changed: "it changes between shared and personal: each person logs in again",
};

export function removals(plan: RemotePlan): string[] {
  const lines: string[] = [];
  for (const step of plan.connections) {
    if (step.action === "remove") lines.push(`connection ${step.id}${step.credential === "dropped" ? " and its credential" : ""}`);
    else if (step.credential === "dropped") lines.push(`the credential of ${step.id} (${DROPPED[step.credentialReason ?? "declaration_removed"]})`);
  }
  for (const step of plan.agents) if (step.action === "remove") lines.push(`agent ${step.id}`);
  // Asked like a removal: without its lock the deployment serves every tool the filters keep.
  if (plan.lock.action === "remove") lines.push("its substructure.lock (no lock file here): its agents are then served every tool their filters keep");
  return lines;
}

const SIGN: Record<string, string> = { add: "+", change: "~", remove: "-", unchanged: "=" };

function renderPlan(plan: RemotePlan, url: string, style: Style): string {
  const color = (action: string, s: string) =>
    action === "add" ? style.green(s) : action === "remove" ? style.red(s) : action === "change" ? style.yellow(s) : style.dim(s);
  const lines = [`Plan for ${url}:`];
  const section = (title: string, steps: PlanStep[]) => {
    lines.push(`  ${title}:${steps.length ? "" : " none"}`);
    const width = Math.max(0, ...steps.map((s) => shown(s.id).length));
    // Ids and urls may be the deployment's (a connection not in the file): shown, never interpreted
    // (SECURITY.md, "What subs shows of server text").
    for (const step of steps) lines.push(`    ${color(step.action, `${SIGN[step.action]} ${shown(step.id).padEnd(width)}`)}  ${shown(stepDetail(step))}`);
  };
  section("connections", plan.connections);
  section("agents", plan.agents);
  const lock = plan.lock;
  // Said only where there is a lock, in the file or on the deployment: a plan without one is as before.
  const lockShown = lock.tools > 0 || lock.action !== "unchanged";
  if (lockShown) lines.push(`  lock:`, `    ${color(lock.action, `${SIGN[lock.action]} ${lock.id}`)}  ${stepDetail(lock)}`);
  if (plan.surface?.length === 0) lines.push("  tools each agent's model is served: no change");
  if (plan.surface?.length) {
    // Tool names and servers' words are the servers': shown, never interpreted.
    lines.push("  tools each agent's model would be served, against what it is served now:");
    for (const s of plan.surface) {
      const parts = [
        ...(s.gain.length ? [style.green(`+ ${s.gain.map((t) => shown(t)).join(", ")}`)] : []),
        ...(s.lose.length ? [style.red(`- ${s.lose.map((t) => shown(t)).join(", ")}`)] : []),
      ];
      lines.push(`    ${shown(s.agent)}: ${parts.length ? parts.join("; ") : "no change"}`);
      for (const u of s.unlisted) lines.push(`      ${style.yellow("?")} ${shown(u.connection)}: not listed (${shown(u.message)}); its tools are not counted`);
    }
  }
  const count = (a: string) => [...plan.connections, ...plan.agents, ...(lockShown ? [plan.lock] : [])].filter((s) => s.action === a).length;
  lines.push(`  ${count("add")} to add, ${count("change")} to change, ${count("remove")} to remove, ${count("unchanged")} unchanged.`);
  return lines.join("\n") + "\n";
}

function stepDetail(step: PlanStep): string {
  if (step.kind === "lock") {
    // Section 9: a deployment without locks serves every tool its agents' filters keep.
    if (!step.enforced) return "not sent: the deployment does not enforce locks; its agents are served every tool their filters keep";
    const tools = `${step.tools} tool${step.tools === 1 ? "" : "s"}`;
    if (step.action === "remove") return "no lock file: the deployment's lock is removed, nothing withheld";
    if (step.action === "unchanged") return step.body ? `unchanged (${tools})` : "none";
    return `${step.action === "add" ? "sent" : "changed"} (${tools}); the deployment withholds every other tool`;
  }
  if (step.kind === "agent") {
    if (step.action === "change") return `${step.changed.join(", ")} changed`;
    return step.action === "unchanged" ? "unchanged" : step.action === "add" ? "new agent" : "not in the file";
  }
  const parts: string[] = [];
  if (step.action === "add") parts.push(`${step.url}`, `declared; authorize with \`subs mcp login ${step.id}\``);
  if (step.action === "change") {
    if (step.changed.includes("url")) parts.push(`url ${step.previousUrl} → ${step.url}`);
    const other = step.changed.filter((f) => f !== "url");
    if (other.length) parts.push(`${other.join(", ")} changed`);
  }
  if (step.action === "remove") parts.push(`${step.url}`, "not in the file");
  if (step.action === "unchanged") parts.push(step.credential === "kept" ? "unchanged (authorized)" : "unchanged (not authorized)");
  if (step.credential === "dropped") parts.push(`credential dropped: ${DROPPED[step.credentialReason ?? "declaration_removed"]}`);
  else if (step.action === "change") parts.push(step.credential === "kept" ? "credential kept" : "no credential");
  return parts.join("; ");
}

function describeStep(step: PlanStep): string {
  return `${step.action} ${step.kind} ${step.id}`;
}

function describeStepDone(step: PlanStep): string {
  const verb = step.action === "add" ? "added" : step.action === "remove" ? "removed" : "changed";
  const credential = step.kind === "connection" && step.credential === "dropped" ? " (credential dropped)" : "";
  return `${verb} ${step.kind} ${step.id}${credential}`;
}

function stepRef(step: PlanStep) {
  return { kind: step.kind, id: step.id, action: step.action };
}

const errorMessage = (error: unknown) => (error instanceof Error ? error.message : String(error));
const errorCode = (error: unknown) => (error instanceof SubsError ? (error.code ?? error.kind) : "unexpected");

/** The `subs apply --json` document for [remote] (README.md, "With `[remote]`"). */
function planJson(plan: RemotePlan, url: string, options: { dryRun: boolean; outcomes: StepOutcome[] }) {
  const applied = new Set(options.outcomes.filter((o) => o.outcome === "applied").map((o) => o.step));
  return {
    target: "remote",
    url,
    dry_run: options.dryRun,
    changed: applied.size > 0,
    connections: plan.connections.map((s) => ({
      id: s.id,
      action: s.action,
      changed: s.changed,
      url: s.url,
      previous_url: s.previousUrl ?? null,
      credential: s.credential,
      credential_reason: s.credentialReason ?? null,
      applied: applied.has(s),
    })),
    agents: plan.agents.map((s) => ({ name: s.id, action: s.action, changed: s.changed, applied: applied.has(s) })),
    lock: { action: plan.lock.action, enforced: plan.lock.enforced, tools: plan.lock.tools, applied: applied.has(plan.lock) },
    surface: plan.surface?.map((s) => ({ agent: s.agent, gain: s.gain, lose: s.lose, unlisted: s.unlisted })) ?? null,
  };
}
