// `subs mcp list --check` (product.md, "subs mcp list"): opt-in probing of every server at once,
// each within a short timeout, reporting reachable / authorized / tool count. A plain `mcp list`
// never touches the network; this is the one listing that does, and all of its requests run in
// parallel, so 20 servers cost about what the slowest one does.
import { fetchConnectionTools, type ToolSource } from "../agents/fetch.ts";
import { whereIs, type ConnectionConfig } from "../config/types.ts";
import type { ConnectionStatus } from "./status.ts";

export type CheckProblem = { code: string; message: string; hint?: string; needsLogin: boolean };

export type ConnectionCheck = {
  /** The server answered an HTTP request within the timeout; null when that is not known (with [remote], the deployment says only when it could not reach it). */
  reachable: boolean | null;
  /** The credential in use (the stored one, `$token_env`, or with [remote] the deployment's) listed the tools. */
  authorized: boolean;
  tools: number | null;
  /** Why it is not reachable or not authorized. Messages name ids and variables, never a secret. */
  problem: CheckProblem | null;
};

export type CheckOptions = {
  /** What to probe, each with the problem that already rules out listing its tools (with [remote]: the deployment holds no credential, a section not applied), if any. */
  targets: ReadonlyArray<{ connection: ConnectionConfig; withoutCredential?: CheckProblem }>;
  /** Lists one connection's tools with its credential. */
  source: ToolSource;
  /**
   * Whether the server answers at all, without a credential (locally). Absent with [remote]: the
   * deployment talks to the servers, and only its answers say anything about them.
   */
  reach?: (connection: ConnectionConfig, signal: AbortSignal) => Promise<void>;
  /** Per connection, for each of its requests. */
  timeoutMs: number;
  /** Ctrl-C. */
  signal: AbortSignal;
};

export async function checkConnections(options: CheckOptions): Promise<Map<string, ConnectionCheck>> {
  const listable = options.targets.filter((t) => !t.withoutCredential).map((t) => t.connection);
  const [outcomes, reached] = await Promise.all([
    fetchConnectionTools({ connections: listable, source: options.source, timeoutMs: options.timeoutMs, signal: options.signal }),
    // A local server is reached by starting it, which listing its tools does.
    Promise.all(options.targets.map((t) => (options.reach && t.connection.url !== undefined ? withTimeout(options.reach, t.connection, options) : Promise.resolve(null)))),
  ]);
  const checks = new Map<string, ConnectionCheck>();
  options.targets.forEach(({ connection, withoutCredential }, n) => {
    const reach = reached[n]!;
    const reachable = reach === null ? null : reach.ok;
    if (withoutCredential) {
      // A server that does not answer is the bigger problem: a login would not help yet.
      const problem = reach && !reach.ok ? unreachable(connection, reach, options.timeoutMs) : withoutCredential;
      checks.set(connection.id, { reachable, authorized: false, tools: null, problem });
      return;
    }
    const outcome = outcomes.get(connection.id)!;
    if (outcome.ok) {
      checks.set(connection.id, { reachable: true, authorized: true, tools: outcome.tools.length, problem: null });
      return;
    }
    if (reach && !reach.ok) {
      // Unreachable says more than the listing's failure: what it says about a credential cannot
      // be known yet, and its hint is the one to follow.
      checks.set(connection.id, { reachable: false, authorized: false, tools: null, problem: unreachable(connection, reach, options.timeoutMs) });
      return;
    }
    // With [remote] the deployment's 502 upstream_error is the one answer about reachability.
    const remoteUnreachable = options.reach === undefined && outcome.error.code === "upstream_error" ? false : null;
    checks.set(connection.id, { reachable: options.reach ? reachable : remoteUnreachable, authorized: false, tools: null, problem: outcome.error });
  });
  return checks;
}

type Reach = { ok: true } | { ok: false; timedOut: boolean; reason: string };

async function withTimeout(reach: NonNullable<CheckOptions["reach"]>, connection: ConnectionConfig, options: CheckOptions): Promise<Reach> {
  // Our own timer, not AbortSignal.timeout(), which is unref'd (agents/fetch.ts says why).
  const timeout = new AbortController();
  const timer = setTimeout(() => timeout.abort(new Error("timed out")), options.timeoutMs);
  try {
    await reach(connection, AbortSignal.any([options.signal, timeout.signal]));
    return { ok: true };
  } catch (error) {
    const cause = (error as { cause?: { code?: string; message?: string } }).cause;
    return { ok: false, timedOut: timeout.signal.aborted, reason: cause?.code ?? cause?.message ?? (error instanceof Error ? error.message : String(error)) };
  } finally {
    clearTimeout(timer);
  }
}

function unreachable(connection: ConnectionConfig, reach: Extract<Reach, { ok: false }>, timeoutMs: number): CheckProblem {
  const origin = whereIs(connection);
  return reach.timedOut
    ? { code: "timeout", message: `${connection.id}: no answer from ${origin} within ${timeoutMs / 1000}s`, hint: "check the server, or wait longer with --timeout SECONDS", needsLogin: false }
    : { code: "unreachable", message: `${connection.id}: cannot reach ${origin} (${reach.reason})`, hint: "check the url in the file and that the server is up", needsLogin: false };
}

/** 0 every connection listed its tools; 4 the only problems need a login; 1 otherwise (docs/commands.md, "subs mcp list"). */
export function checkExitCode(checks: Iterable<ConnectionCheck>): number {
  let code = 0;
  for (const check of checks) {
    if (check.authorized) continue;
    if (check.problem?.needsLogin && check.reachable !== false) code = Math.max(code, 4);
    else return 1;
  }
  return code;
}

/**
 * The status a row shows next to its check, so the two never disagree: `status` is
 * what the db holds after the check (a refresh the authorization server rejected deleted the
 * credential; a server that answered without one was recorded open), and a credential or an open
 * finding the server has just refused is not shown as `authorized` or `open` beside "needs login".
 */
export function statusAfterCheck(s: ConnectionStatus, check: ConnectionCheck): ConnectionStatus {
  if (check.authorized || !check.problem?.needsLogin || (s.status !== "authorized" && s.status !== "open")) return s;
  return { ...s, status: "needs_login", usable: false, auth: s.auth === "none" ? "oauth" : s.auth };
}
