// `subs mcp list --check`: how the checks read, in either place (the probing is the backend's,
// src/backend/probe.ts); loaded only when --check is given.
import type { Context } from "../../../context.ts";
import type { Style } from "../../../output/style.ts";
import { shown } from "../../../output/untrusted.ts";
import { checkExitCode, type ConnectionCheck } from "../../../status/check.ts";

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

/** The CHECK column. `tokenEnv`: a static connection's variable, named when it is unset. */
export function describeCheck(check: ConnectionCheck, style: Style, tokenEnv?: string | null): string {
  if (check.authorized) return style.green(`${check.tools} tool${check.tools === 1 ? "" : "s"}`);
  if (check.reachable === false) return style.red(check.problem?.code === "timeout" ? "no answer" : "unreachable");
  // An unset variable needs the variable set, not a login.
  // A connection the deployment refuses to use (outside its catalog) was not asked for.
  const why =
    check.problem?.code === "server_not_started" || check.problem?.code === "server_exited" ? "did not start" :
    check.problem?.code === "variable_unset" ? "variable unset" :
    check.problem?.code === "token_env_unset" && tokenEnv ? `set $${tokenEnv}` : check.problem?.needsLogin ? "needs login" : check.problem?.code === "url_not_in_catalog" ? "refused" : "failed";
  return style.yellow(check.reachable ? `reachable · ${why}` : why);
}

/**
 * Every failed check on stderr, one per id: its reason and what to do (a rejected refresh
 * included). A failure without a next step of its own gets the command that shows it in
 * full, as the CLI does for any error without a hint.
 */
export function reportProblems(ctx: Context, checks: ReadonlyMap<string, ConnectionCheck>): void {
  for (const [id, check] of checks) {
    const problem = check.problem;
    if (!problem) continue;
    const hint = problem.hint ?? `run \`subs mcp tools ${id} --debug\` to see every HTTP exchange (credentials redacted)`;
    // Both may quote the server (a JSON-RPC error's message): shown, never interpreted
    // (SECURITY.md, "What subs shows of server text").
    ctx.stderr.write(`${shown(problem.message)}\n  ${shown(hint)}\n`);
  }
}
