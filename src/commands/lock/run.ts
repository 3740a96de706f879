import { FIELD_WORDS } from "../../agents/describe.ts";
import { planLock, type LockChange, type LockPlan } from "../../agents/lock.ts";
import { backendFor } from "../../backend/choose.ts";
import { replaceFile } from "../../config/edit.ts";
import { loadConfig } from "../../config/load.ts";
import { displayPathOf } from "../../config/parse.ts";
import type { Context } from "../../context.ts";
import { declined, failed, formatDiagnostic, refused, usage } from "../../errors.ts";
import { readYes } from "../../output/confirm.ts";
import { writeJson } from "../../output/json.ts";
import { lineDiff } from "../../output/line-diff.ts";
import { stderrReporter } from "../../output/reporter.ts";
import { styleFor } from "../../output/style.ts";
import { shown } from "../../output/untrusted.ts";
import { fetchingProgress } from "../../report.ts";

export type LockOptions = {
  config?: string;
  json: boolean;
  /** Write nothing; exit 1 on any difference. */
  check: boolean;
  /** Write without asking. */
  yes: boolean;
  /** Per connection. */
  timeoutSeconds: number;
};

/** Exit codes (docs/commands.md, "subs lock"): 0 written or up to date; 1 --check found a difference, or the question was answered no. */
export async function lockCommand(ctx: Context, options: LockOptions): Promise<number> {
  const config = loadConfig({ configPath: options.config, env: ctx.env, cwd: ctx.cwd });
  const reporter = stderrReporter(ctx);
  const timeoutMs = options.timeoutSeconds * 1000;
  const source = (await backendFor({ ctx, config, reporter })).toolSource({ timeoutMs });
  const fetching = fetchingProgress(ctx, reporter, "Fetching the tools of every connection an agent names");
  let plan: LockPlan;
  try {
    plan = await planLock({ config, source, timeoutMs, signal: ctx.signal, cwd: ctx.cwd, strict: options.check });
  } catch (error) {
    fetching.fail("Could not list every connection's tools; nothing was written");
    throw error;
  }
  fetching.succeed(`${plan.count} tool${plan.count === 1 ? "" : "s"} to lock`);
  const file = displayPathOf(plan.path, ctx.cwd);
  refuseSecrets(ctx, plan.text, file);
  if (plan.invalid) {
    for (const d of plan.invalid.diagnostics) reporter.warn(`${shown(formatDiagnostic(d))}; it is written anew from what the servers offer`);
  }
  const differs = plan.changes.length > 0 || plan.invalid !== undefined || plan.current === undefined;

  if (!options.json) renderReport(ctx, file, plan);
  if (options.check) {
    if (options.json) writeJson(ctx.stdout, lockJson(file, plan, { written: false, check: true }));
    return differs ? 1 : 0;
  }
  if (!differs && plan.current === plan.text) {
    if (options.json) writeJson(ctx.stdout, lockJson(file, plan, { written: false, check: false }));
    else ctx.stderr.write(`${file} is up to date.\n`);
    return 0;
  }
  // Only the form changed (an older layout, a comment): written again without a question, nothing to review.
  if (differs && !options.yes) await confirmWrite(ctx, file);
  try {
    replaceFile(plan.path, plan.text);
  } catch (error) {
    throw failed(`cannot write ${file}: ${(error as NodeJS.ErrnoException).code ?? String(error)}; nothing was written`);
  }
  if (options.json) writeJson(ctx.stdout, lockJson(file, plan, { written: true, check: false }));
  // With [remote] the deployment enforces the lock `subs apply` sends it (docs/deployment-protocol.md section 3.10).
  else ctx.stderr.write(`Wrote ${file}: ${plan.count} tool${plan.count === 1 ? "" : "s"}. Commit it with substructure.toml${config.remote ? ", and run `subs apply` to send it to the deployment" : ""}.\n`);
  return 0;
}

/**
 * The lock is committed, so a secret of this run in it would be published: a server that echoes
 * the credential it was sent into a tool's text gets nothing written (SECURITY.md, "Redaction").
 * The tool is named, the secret never.
 */
function refuseSecrets(ctx: Context, text: string, file: string): void {
  if (!ctx.secrets || ctx.secrets.scrub(text) === text) return;
  let table = "";
  for (const line of text.split("\n")) {
    if (line.startsWith("[")) table = line;
    else if (ctx.secrets.scrub(line) !== line) break;
  }
  throw refused(`a tool's text holds a credential this run sent (${table || "the lock"}): a server echoed it; nothing was written to ${file}`, {
    code: "secret_in_tool",
    hint: "the server quotes the credential in what it tells the model; do not give it to an agent",
  });
}

/** The question before a write: only a person at a terminal can review what the lock will allow. */
async function confirmWrite(ctx: Context, file: string): Promise<void> {
  const stdin = ctx.stderrIsTTY ? await ctx.terminalStdin?.() : undefined;
  if (!stdin) throw usage(`${file} would change, and there is no terminal to ask: nothing was written`, { hint: "pass --yes to write it, or --check to only compare" });
  ctx.stderr.write(`Write ${file}? [y/N] `);
  if (await readYes(stdin, ctx.signal)) return;
  throw declined(`not written: ${file} is unchanged`, { hint: "`subs lock --yes` writes without asking; `subs lock --check` only compares" });
}

/** The `--json` contract of `subs lock` (docs/commands.md, "subs lock"). */
export type LockJson = {
  path: string;
  check: boolean;
  written: boolean;
  /** The lock holds exactly what the servers offer now (and can be read). */
  up_to_date: boolean;
  /** How many tools the lock holds once written. */
  count: number;
  /** The lock could not be read: each problem at file:line:col; it is written anew. */
  invalid: Array<{ file: string; line: number; col: number; message: string }> | null;
  changes: Array<{ connection: string; tool: string; change: LockChange["change"]; fields: Array<{ field: string; before: string | null; after: string | null }> }>;
};

function lockJson(file: string, plan: LockPlan, how: { written: boolean; check: boolean }): LockJson {
  return {
    path: file,
    check: how.check,
    written: how.written,
    up_to_date: plan.changes.length === 0 && plan.invalid === undefined && plan.current !== undefined,
    count: plan.count,
    invalid: plan.invalid ? plan.invalid.diagnostics.map((d) => ({ file: d.file, line: d.line, col: d.col, message: d.message })) : null,
    changes: plan.changes.map((c) => ({ connection: c.connection, tool: c.tool, change: c.change, fields: c.change === "changed" ? c.fields : [] })),
  };
}

/** The difference, on stdout: it is the command's answer (a CI log shows it). Server text is shown, never interpreted. */
function renderReport(ctx: Context, file: string, plan: LockPlan): void {
  const style = styleFor(ctx.color);
  if (plan.current === undefined) ctx.stdout.write(`${file} does not exist yet: every tool is new.\n`);
  const counts = { added: 0, changed: 0, removed: 0 };
  for (const c of plan.changes) counts[c.change]++;
  for (const c of plan.changes) {
    const id = `${c.connection} ${shown(c.tool)}`;
    if (c.change === "added") ctx.stdout.write(`${style.green("+")} ${id}: added\n`);
    else if (c.change === "removed") ctx.stdout.write(`${style.red("-")} ${id}: removed\n`);
    else if (c.change === "changed") {
      ctx.stdout.write(`${style.yellow("~")} ${id}: changed (${c.fields.map((f) => FIELD_WORDS[f.field]).join(", ")})\n`);
      for (const f of c.fields) {
        ctx.stdout.write(`    ${FIELD_WORDS[f.field]}:\n`);
        if (f.before === null) ctx.stdout.write(`      ${style.green("+ (added)")}\n`);
        if (f.after === null) ctx.stdout.write(`      ${style.red("- (removed)")}\n`);
        for (const line of lineDiff(f.before ?? "", f.after ?? "")) {
          const text = `${line.sign} ${shown(line.text)}`;
          ctx.stdout.write(`      ${line.sign === "-" ? style.red(text) : style.green(text)}\n`);
        }
      }
    }
  }
  const parts = (["added", "changed", "removed"] as const).filter((k) => counts[k] > 0).map((k) => `${counts[k]} ${k}`);
  ctx.stdout.write(parts.length ? `${file}: ${parts.join(", ")}; ${plan.count} tool${plan.count === 1 ? "" : "s"} in all.\n` : `${file}: no change in its ${plan.count} tool${plan.count === 1 ? "" : "s"}.\n`);
}
