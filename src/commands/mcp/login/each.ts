// `subs mcp login` of several connections (ids, or --all), local or on a deployment: each is tried
// in turn, one that fails does not stop the others, and the person reads each outcome as it
// happens. Only Ctrl-C or SIGTERM stops the rest. The command then fails with the worst of the
// failures (docs/commands.md, "subs mcp login").
import type { ConnectionConfig } from "../../../config/types.ts";
import type { Context } from "../../../context.ts";
import { aboutId, exitCodeFor, SubsError } from "../../../errors.ts";
import { MARK, styleFor } from "../../../output/style.ts";
import { shown } from "../../../output/untrusted.ts";

export type LoginFailure = { id: string; code: string; message: string; hint?: string };

/** Usage, configuration and refusals first (nothing was tried), then failures, then needs-login. */
const SEVERITY: Record<number, number> = { 2: 3, 1: 2, 4: 1 };

/**
 * Runs `loginOne` for every target. With one target its failure is the command's, as it is. With
 * several, each failure is said on stderr at once (✖, its message and hint) and the others are
 * tried; the error thrown at the end carries the worst failure's kind and, for --json, `done` (the
 * results of those that worked), `failed` (each failure) and `not_attempted` (empty unless stopped).
 */
export async function loginEach<R>(
  ctx: Pick<Context, "stderr" | "stderrColor">,
  targets: readonly ConnectionConfig[],
  results: readonly R[],
  loginOne: (connection: ConnectionConfig) => Promise<void>,
): Promise<void> {
  const style = styleFor(ctx.stderrColor);
  const failures: Array<{ id: string; error: SubsError | Error }> = [];
  for (const [n, connection] of targets.entries()) {
    try {
      await loginOne(connection);
    } catch (caught) {
      const error = aboutId(caught, connection.id) as SubsError | Error;
      if (targets.length === 1) throw error;
      if (error instanceof SubsError && error.kind === "interrupted") {
        throw new SubsError("interrupted", error.message, {
          code: "interrupted",
          cause: error,
          details: { done: results, failed: failures.map(({ id, error: e }) => asFailure(id, e)), not_attempted: targets.slice(n).map((c) => c.id) },
        });
      }
      failures.push({ id: connection.id, error });
      ctx.stderr.write(`${style.red(MARK.failure)} ${shown(error.message)}\n`);
      const hint = error instanceof SubsError ? error.hint : undefined;
      if (hint) ctx.stderr.write(`  ${style.dim("hint:")} ${shown(hint, { multiline: true })}\n`);
    }
  }
  if (failures.length === 0) return;
  const worst = failures.reduce((a, b) => ((SEVERITY[exitCodeFor(b.error)] ?? 2) > (SEVERITY[exitCodeFor(a.error)] ?? 2) ? b : a));
  const ids = failures.map((f) => f.id);
  const kind = worst.error instanceof SubsError ? worst.error.kind : "failed";
  const done = targets.length - failures.length;
  throw new SubsError(kind, `${failures.length} of ${targets.length} logins failed (${ids.join(", ")})${done > 0 ? `; the other${done === 1 ? " is" : "s are"} done` : ""}`, {
    code: failures.length === 1 ? codeOf(worst.error) : "logins_failed",
    hint: `see each failure above; then \`subs mcp login ${ids.join(" ")}\``,
    details: { done: results, failed: failures.map(({ id, error }) => asFailure(id, error)), not_attempted: [] },
  });
}

const codeOf = (error: Error) => (error instanceof SubsError ? (error.code ?? error.kind) : "unexpected");

function asFailure(id: string, error: Error): LoginFailure {
  return { id, code: codeOf(error), message: error.message, ...(error instanceof SubsError && error.hint ? { hint: error.hint } : {}) };
}
