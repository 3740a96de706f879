// `subs mcp list --check`: the probing around status/check.ts, shared by the local and the
// [remote] listing, and loaded only when --check is given (it brings the MCP SDK, issue 6).
import { localToolSource } from "../agents/local-source.ts";
import type { Config, ConnectionConfig } from "../config/types.ts";
import type { Context } from "../context.ts";
import type { Style } from "../output/style.ts";
import type { Reporter } from "../report.ts";
import { checkConnections, checkExitCode, type CheckOptions, type CheckProblem, type ConnectionCheck } from "../status/check.ts";
import type { ConnectionStatus } from "../status/status.ts";
import { fetchingProgress } from "./mcp-tools.ts";

export { checkExitCode };

/** The `check` object of `subs mcp list --check --json` entries (README, "subs mcp list"). */
export function checkJson(check: ConnectionCheck) {
  return {
    reachable: check.reachable,
    authorized: check.authorized,
    tools: check.tools,
    error: check.problem ? { code: check.problem.code, message: check.problem.message, ...(check.problem.hint ? { hint: check.problem.hint } : {}) } : null,
  };
}

/** What stands in the way of listing tools before any request: the status already says it. */
function withoutCredential(s: ConnectionStatus): CheckProblem | undefined {
  const login = `run \`subs mcp login ${s.id}\``;
  switch (s.status) {
    case "needs_login":
      return { code: "needs_login", message: `${s.id}: not logged in`, hint: login, needsLogin: true };
    case "url_changed":
      return { code: "url_changed", message: `${s.id}: the stored credential is for another url`, hint: login, needsLogin: true };
    case "env_unset":
      return { code: "token_env_unset", message: `${s.id}: $${s.tokenEnv} is not set`, hint: `export ${s.tokenEnv}=…`, needsLogin: true };
    default:
      return undefined;
  }
}

/** Problems the STATUS column does not already show: a credential that failed, a server that did not answer. */
const STATUS_SAYS = new Set(["needs_login", "url_changed", "token_env_unset", "not_applied", "not_in_file"]);

/**
 * `reporter` is the command's own: a consent the probing needs (a step-up) is shown on the line of
 * the check's progress, which only one reporter can arrange (output/reporter.ts).
 */
export async function checkLocal(
  ctx: Context,
  reporter: Reporter,
  config: Config,
  statuses: readonly ConnectionStatus[],
  timeoutSeconds: number,
): Promise<Map<string, ConnectionCheck>> {
  const byId = new Map(config.connections.map((c) => [c.id, c]));
  const targets = statuses.map((s) => {
    const problem = withoutCredential(s);
    return { connection: byId.get(s.id)!, ...(problem ? { withoutCredential: problem } : {}) };
  });
  const { unauthenticatedInitialize } = await import("../auth/discovery.ts");
  return probe(ctx, reporter, targets.length, {
    targets,
    source: localToolSource(ctx, config, { reporter, timeoutMs: timeoutSeconds * 1000 }),
    reach: async (connection, signal) => {
      const response = await unauthenticatedInitialize(connection.url, ctx.fetch, signal);
      await response.body?.cancel().catch(() => {});
    },
    timeoutMs: timeoutSeconds * 1000,
    signal: ctx.signal,
  });
}

export async function probe(ctx: Context, reporter: Reporter, n: number, options: CheckOptions): Promise<Map<string, ConnectionCheck>> {
  const progress = fetchingProgress(ctx, reporter, `Checking ${n} connection${n === 1 ? "" : "s"}`);
  let checks: Map<string, ConnectionCheck>;
  try {
    checks = await checkConnections(options);
  } catch (error) {
    progress.fail("Could not check the connections");
    throw error;
  }
  const ok = [...checks.values()].filter((c) => c.authorized).length;
  const summary = `${ok} of ${n} connection${n === 1 ? "" : "s"} listed ${n === 1 ? "its" : "their"} tools`;
  if (ok === n) progress.succeed(summary);
  else progress.fail(summary);
  return checks;
}

export function describeCheck(check: ConnectionCheck, style: Style): string {
  if (check.authorized) return style.green(`${check.tools} tool${check.tools === 1 ? "" : "s"}`);
  if (check.reachable === false) return style.red(check.problem?.code === "timeout" ? "no answer" : "unreachable");
  const why = check.problem?.needsLogin ? "needs login" : "failed";
  return style.yellow(check.reachable ? `reachable · ${why}` : why);
}

export function reportProblems(ctx: Context, checks: ReadonlyMap<string, ConnectionCheck>): void {
  for (const check of checks.values()) {
    const problem = check.problem;
    if (!problem || STATUS_SAYS.has(problem.code)) continue;
    ctx.stderr.write(`${problem.message}\n${problem.hint ? `  ${problem.hint}\n` : ""}`);
  }
}

/** A target for an id the deployment has but the file does not (nothing to probe there with). */
export function bareConnection(id: string, url: string): ConnectionConfig {
  return { id, url, prefixTools: true };
}
