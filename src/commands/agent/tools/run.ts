import { describeDropped, describeFiltered, describeWarning, describeWithheld, FIELD_WORDS } from "../../../agents/describe.ts";
import { findAgent, inspectAgentTools, type Inspection } from "../../../agents/inspect.ts";
import type { Claimant, FilteredTool, ModelTool, Warning } from "../../../agents/resolve.ts";
import { backendFor } from "../../../backend/choose.ts";
import type { Backend } from "../../../backend/types.ts";
import { loadConfig } from "../../../config/load.ts";
import { readToolLock } from "../../../config/tool-lock-read.ts";
import type { ToolLock } from "../../../config/tool-lock.ts";
import type { Context } from "../../../context.ts";
import { stderrReporter } from "../../../output/reporter.ts";
import { writeJson } from "../../../output/json.ts";
import { styleFor } from "../../../output/style.ts";
import { renderTable } from "../../../output/table.ts";
import { shown } from "../../../output/untrusted.ts";
import { fetchingProgress, silentProgress, type Reporter } from "../../../report.ts";
import type { LockStep } from "../../../remote/plan.ts";
import { possessive } from "../../../text/possessive.ts";

export type AgentToolsOptions = {
  agent: string;
  config?: string;
  json: boolean;
  /** Per connection. */
  timeoutSeconds: number;
  /** List every filtered tool, not only a count per connection. */
  verbose: boolean;
};

/** Exit codes (docs/commands.md, "subs agent …"): 0 every connection answered; 4 the only failures need a login; 1 otherwise. */
export async function agentToolsCommand(ctx: Context, options: AgentToolsOptions): Promise<number> {
  const config = loadConfig({ configPath: options.config, env: ctx.env, cwd: ctx.cwd });
  const reporter = stderrReporter(ctx);
  // The servers themselves, or with [remote] the deployment, which lists them with its credentials.
  const backend = await backendFor({ ctx, config, reporter });
  const source = backend.toolSource({ timeoutMs: options.timeoutSeconds * 1000 });
  const agentConfig = findAgent(config, options.agent);
  // substructure.lock withholds here as where the agent is served: locally, and under [remote] on
  // the deployment, once `subs apply` has sent it (docs/deployment-protocol.md section 3.10).
  const lock = await readToolLock(config.path, ctx.cwd);
  const n = agentConfig.mcp.length;
  const fetching = n > 0 ? fetchingProgress(ctx, reporter, `Fetching tools from ${n} connection${n === 1 ? "" : "s"} for ${agentConfig.name}`) : silentProgress;
  let result: Inspection;
  try {
    result = await inspectAgentTools({
      config,
      agent: options.agent,
      source,
      timeoutMs: options.timeoutSeconds * 1000,
      signal: ctx.signal,
      lock,
    });
  } catch (error) {
    fetching.fail(`Could not fetch ${possessive(agentConfig.name)} tools`);
    throw error;
  }
  const answered = n - result.unavailable.length;
  if (result.unavailable.length === 0) fetching.succeed(`${answered} of ${n} connection${n === 1 ? "" : "s"} answered`);
  else fetching.fail(`${answered} of ${n} connection${n === 1 ? "" : "s"} answered`);
  if (config.remote) await sayServedLock(backend, lock, reporter);
  if (options.json) writeJson(ctx.stdout, agentToolsJson(result));
  else renderHuman(ctx, result, options.verbose);
  if (result.unavailable.length === 0) return 0;
  return result.unavailable.every((u) => u.needsLogin) ? 4 : 1;
}

/** The `--json` contract of `subs agent tools` (docs/commands.md, "subs agent …"). */
export type AgentToolsJson = {
  agent: string;
  target: "local" | "remote";
  count: number;
  tools: Array<{
    name: string;
    kind: ModelTool["kind"];
    connection: string | null;
    tool: string | null;
    description: string | null;
    annotations: Record<string, unknown> | null;
    input_schema: unknown;
  }>;
  filtered: Array<{
    connection: string;
    tool: string;
    step: FilteredTool["step"];
    annotation: string | null;
    value: boolean | null;
    patterns: string[] | null;
    pattern: string | null;
    message: string;
  }>;
  dropped: Array<{ name: string; connection: string; tool: string; reason: string; with: ClaimantJson[]; message: string }>;
  /** Kept by the filter, withheld by substructure.lock; `fields`: what changed (`changed` only). */
  withheld: Array<{ name: string; connection: string; tool: string; reason: "changed" | "not_locked"; fields: string[] | null; message: string }>;
  unavailable: Array<{ connection: string; code: string; message: string; hint: string | null }>;
  warnings: Array<{ code: Warning["code"]; message: string; connection: string | null; [detail: string]: unknown }>;
};

type ClaimantJson = { kind: Claimant["kind"]; name: string | null; connection: string | null; tool: string | null };

const claimantJson = (c: Claimant): ClaimantJson =>
  c.kind === "connector" ? { kind: c.kind, name: null, connection: c.connection, tool: c.tool } : { kind: c.kind, name: c.name, connection: null, tool: null };

export function agentToolsJson(r: Inspection): AgentToolsJson {
  return {
    agent: r.agent,
    target: r.target,
    count: r.tools.length,
    tools: r.tools.map((t) =>
      t.kind === "connector"
        ? {
            name: t.name,
            kind: t.kind,
            connection: t.connection,
            tool: t.tool.name,
            description: t.tool.description ?? null,
            annotations: t.tool.annotations ?? null,
            input_schema: t.tool.inputSchema ?? null,
          }
        : { name: t.name, kind: t.kind, connection: null, tool: null, description: null, annotations: null, input_schema: null },
    ),
    filtered: r.filtered.map((f) => ({
      connection: f.connection,
      tool: f.tool,
      step: f.step,
      annotation: "annotation" in f ? f.annotation : null,
      value: "value" in f ? f.value : null,
      patterns: "patterns" in f ? f.patterns : null,
      pattern: "pattern" in f ? f.pattern : null,
      message: describeFiltered(f),
    })),
    dropped: r.dropped.map((d) => ({ name: d.name, connection: d.connection, tool: d.tool, reason: d.reason, with: d.with.map(claimantJson), message: describeDropped(d) })),
    withheld: r.withheld.map((w) => ({
      name: w.name,
      connection: w.connection,
      tool: w.tool,
      reason: w.reason,
      fields: w.reason === "changed" ? w.fields : null,
      message: describeWithheld(w),
    })),
    unavailable: r.unavailable.map((u) => ({ connection: u.connection, code: u.code, message: u.message, hint: u.hint ?? null })),
    warnings: r.warnings.map((w) => warningJson(w, r.agent)),
  };
}

function warningJson(w: Warning, agent: string): AgentToolsJson["warnings"][number] {
  const message = describeWarning(w, agent);
  switch (w.code) {
    case "too_many_tools":
      return { code: w.code, message, connection: null, count: w.count, from_connections: w.fromConnections, limit: w.limit };
    case "filter_keeps_nothing":
      return { code: w.code, message, connection: w.connection, offered: w.offered };
    case "glob_matches_nothing":
      return { code: w.code, message, connection: w.connection, key: w.key, pattern: w.pattern };
    case "name_declared_twice":
      return { code: w.code, message, connection: null, name: w.name, as: w.as };
  }
}

function renderHuman(ctx: Context, r: Inspection, verbose: boolean): void {
  const style = styleFor(ctx.color);
  const err = styleFor(ctx.stderrColor);
  const source = (t: ModelTool) => (t.kind === "connector" ? t.connection : t.kind === "declared" ? "(declared)" : "(sub-agent)");
  const rows = r.tools.map((t) => [shown(t.name), source(t), t.kind === "connector" ? shown(t.tool.name) : "-"]);
  if (rows.length > 0) ctx.stdout.write(renderTable(["NAME", "FROM", "TOOL ON CONNECTION"], rows, { tty: ctx.stdoutIsTTY, columns: ctx.stdoutColumns, style: style.bold }));

  for (const u of r.unavailable) {
    // Messages quote servers; tool names are theirs: shown, never interpreted
    // (SECURITY.md, "What subs shows of server text").
    ctx.stderr.write(`${err.yellow("unavailable:")} ${shown(u.message)}; the model runs without ${possessive(u.connection)} tools\n`);
    if (u.hint) ctx.stderr.write(`  ${err.dim("hint:")} ${shown(u.hint, { multiline: true })}\n`);
  }
  for (const d of r.dropped) ctx.stderr.write(`${err.yellow("dropped:")} ${shown(describeDropped(d))}\n`);
  for (const w of r.withheld) {
    const why = w.reason === "changed" ? `changed since locked (${w.fields.map((f) => FIELD_WORDS[f]).join(", ")})` : "not locked";
    ctx.stderr.write(`${err.yellow("withheld:")} ${possessive(w.connection)} \`${shown(w.tool)}\` would be \`${shown(w.name)}\`: ${why}; \`subs lock\` reviews it\n`);
  }

  const byConnection = new Map<string, FilteredTool[]>();
  for (const f of r.filtered) byConnection.set(f.connection, [...(byConnection.get(f.connection) ?? []), f]);
  for (const [connection, removed] of byConnection) {
    if (verbose) {
      for (const f of removed) ctx.stderr.write(`${err.dim("filtered:")} ${possessive(connection)} \`${shown(f.tool)}\`: ${shown(describeFiltered(f))}\n`);
      continue;
    }
    const counts = new Map<string, number>();
    for (const f of removed) {
      const label = f.step === "exclude" ? `exclude ${f.pattern}` : f.step;
      counts.set(label, (counts.get(label) ?? 0) + 1);
    }
    const detail = [...counts].map(([label, n]) => `${label}: ${n}`).join(", ");
    ctx.stderr.write(`${err.dim("filtered:")} ${connection}: ${removed.length} tool${removed.length === 1 ? "" : "s"} removed by the agent's filter (${detail}); -v lists them\n`);
  }
  for (const w of r.warnings) ctx.stderr.write(`${err.yellow("warning:")} ${shown(describeWarning(w, r.agent))}\n`);

  const fromConnections = r.tools.filter((t) => t.kind === "connector");
  const declared = r.tools.filter((t) => t.kind === "declared").length;
  const subAgents = r.tools.filter((t) => t.kind === "sub_agent").length;
  const connections = new Set(fromConnections.map((t) => (t.kind === "connector" ? t.connection : ""))).size;
  const parts = [
    `${fromConnections.length} from ${connections} connection${connections === 1 ? "" : "s"}`,
    ...(declared ? [`${declared} declared`] : []),
    ...(subAgents ? [`${subAgents} sub-agent${subAgents === 1 ? "" : "s"}`] : []),
  ];
  ctx.stderr.write(`Agent \`${r.agent}\`: its model sees ${r.tools.length} tool${r.tools.length === 1 ? "" : "s"} (${parts.join(", ")})${r.target === "remote" ? ", as the deployment lists them" : ""}.\n`);
}


/**
 * Under [remote] the list above is resolved with the lock beside the file, which is what `subs
 * apply` sends; said when the deployment serves under another lock or none (a lock not applied
 * yet, or a deployment that does not hold locks: docs/deployment-protocol.md sections 3.10, 9).
 * Its failure is said, never the command's: the list stands.
 */
async function sayServedLock(backend: Backend, lock: ToolLock | undefined, reporter: Reporter): Promise<void> {
  let step: LockStep | undefined;
  try {
    step = await backend.servedLock(lock);
  } catch (error) {
    reporter.warn(`could not read the lock the deployment holds: ${shown(error instanceof Error ? error.message : String(error))}`);
    return;
  }
  if (!step) return;
  if (!step.enforced) {
    if (lock) reporter.warn("the deployment does not enforce substructure.lock: its agents are served every tool their filters keep");
    return;
  }
  if (step.action === "add") reporter.warn("the deployment holds no substructure.lock yet, and serves every tool the filters keep: run `subs apply` to send this one");
  else if (step.action === "change") reporter.warn("the deployment holds another substructure.lock than this one, and serves what that one allows: run `subs apply` to send this one");
  else if (step.action === "remove") reporter.warn("the deployment holds a substructure.lock and there is none here: it withholds what that lock does not allow until `subs apply`");
}
