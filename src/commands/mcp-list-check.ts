// `subs mcp list --check`: the probing around status/check.ts, shared by the local and the
// [remote] listing, and loaded only when --check is given (it brings the MCP SDK, issue 6).
import { localToolSource } from "../agents/local-source.ts";
import type { Config, ConnectionConfig } from "../config/types.ts";
import type { Context } from "../context.ts";
import type { Style } from "../output/style.ts";
import { shown } from "../output/untrusted.ts";
import type { Reporter } from "../report.ts";
import { checkConnections, checkExitCode, statusAfterCheck, type CheckOptions, type ConnectionCheck } from "../status/check.ts";
import { listLocalConnections } from "../status/list.ts";
import type { ConnectionStatus } from "../status/status.ts";
import type { CredentialRow } from "../store/schema.ts";
import { fetchingProgress } from "./mcp-tools.ts";

export { checkExitCode };

/** The `check` object of `subs mcp list --check --json` entries (docs/commands.md, "subs mcp list"). */
export function checkJson(check: ConnectionCheck) {
  return {
    reachable: check.reachable,
    authorized: check.authorized,
    tools: check.tools,
    error: check.problem ? { code: check.problem.code, message: check.problem.message, ...(check.problem.hint ? { hint: check.problem.hint } : {}) } : null,
  };
}

/**
 * `reporter` is the command's own: a consent the probing needs (a step-up) is shown on the line of
 * the check's progress, which only one reporter can arrange (output/reporter.ts).
 *
 * Every connection is probed as `subs mcp tools` would open it (src/mcp/open.ts), so the check
 * says what a command would meet: a variable unset or a url changed fail before any request, a
 * connection with nothing stored is tried without a credential (issue 13). Returns the statuses
 * as they are after the check (status/check.ts, statusAfterCheck).
 */
export async function checkLocal(
  ctx: Context,
  reporter: Reporter,
  config: Config,
  timeoutSeconds: number,
): Promise<{ checks: Map<string, ConnectionCheck>; statuses: ConnectionStatus[]; undeclared: CredentialRow[] }> {
  const targets = config.connections.map((connection) => ({ connection }));
  const { unauthenticatedInitialize } = await import("../auth/discovery.ts");
  const checks = await probe(ctx, reporter, targets.length, {
    targets,
    source: localToolSource(ctx, config, { reporter, timeoutMs: timeoutSeconds * 1000 }),
    reach: async (connection, signal) => {
      const response = await unauthenticatedInitialize(connection.url, ctx.fetch, signal);
      await response.body?.cancel().catch(() => {});
    },
    timeoutMs: timeoutSeconds * 1000,
    signal: ctx.signal,
  });
  // Read again: the check may have refreshed, deleted (a rejected refresh) or recorded (an open server).
  const after = await listLocalConnections({ config, env: ctx.env, now: ctx.now(), reporter });
  return { checks, statuses: after.statuses.map((s) => statusAfterCheck(s, checks.get(s.id)!)), undeclared: after.undeclared };
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

/** The CHECK column. `tokenEnv`: a static connection's variable, named when it is unset. */
export function describeCheck(check: ConnectionCheck, style: Style, tokenEnv?: string | null): string {
  if (check.authorized) return style.green(`${check.tools} tool${check.tools === 1 ? "" : "s"}`);
  if (check.reachable === false) return style.red(check.problem?.code === "timeout" ? "no answer" : "unreachable");
  // An unset variable needs the variable set, not a login (issue 13).
  const why = check.problem?.code === "token_env_unset" && tokenEnv ? `set $${tokenEnv}` : check.problem?.needsLogin ? "needs login" : "failed";
  return style.yellow(check.reachable ? `reachable · ${why}` : why);
}

/**
 * Every failed check on stderr, one per id: its reason and what to do (issue 13: a rejected
 * refresh included). A failure without a next step of its own gets the command that shows it in
 * full, as the CLI does for any error without a hint.
 */
export function reportProblems(ctx: Context, checks: ReadonlyMap<string, ConnectionCheck>): void {
  for (const [id, check] of checks) {
    const problem = check.problem;
    if (!problem) continue;
    const hint = problem.hint ?? `run \`subs mcp tools ${id} --debug\` to see every HTTP exchange (credentials redacted)`;
    // Both may quote the server (a JSON-RPC error's message): shown, never interpreted (issue 14).
    ctx.stderr.write(`${shown(problem.message)}\n  ${shown(hint)}\n`);
  }
}

/** A target for an id the deployment has but the file does not (nothing to probe there with). */
export function bareConnection(id: string, url: string): ConnectionConfig {
  return { id, url, prefixTools: true };
}
