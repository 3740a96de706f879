// `subs mcp list --check` in either place: every connection probed at once (status/check.ts),
// under one progress line. Loaded only with --check: it brings the MCP SDK's callers.
import type { Context } from "../context.ts";
import { fetchingProgress, type Reporter } from "../report.ts";
import { checkConnections, type CheckOptions, type ConnectionCheck } from "../status/check.ts";

/**
 * `reporter` is the command's own: a consent the probing needs (a step-up) is shown on the line of
 * the check's progress, which only one reporter can arrange (output/reporter.ts).
 */
export async function probe(ctx: Pick<Context, "stderrIsTTY" | "env">, reporter: Reporter, options: CheckOptions): Promise<Map<string, ConnectionCheck>> {
  const n = options.targets.length;
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
