// Judges one run of the conformance harness (scripts/conformance.mjs): each scenario's checks as
// the harness saved them (checks.json), the adapter's own report (adapter.ts), and the expected
// failures file. A scenario passes when no check is a FAILURE or a WARNING (the harness counts
// both against a scenario, conformance src/expected-failures.ts evaluateBaseline) and the adapter
// exited 0 (unless the scenario expects the client to give up, like auth/scope-retry-limit).
import { z } from "zod";

export const Check = z.object({
  id: z.string(),
  name: z.string(),
  description: z.string(),
  status: z.enum(["SUCCESS", "FAILURE", "WARNING", "SKIPPED", "INFO"]),
  errorMessage: z.string().optional(),
  details: z.record(z.string(), z.unknown()).optional(),
});
export type Check = z.infer<typeof Check>;

export const AdapterReport = z.object({
  scenario: z.string(),
  exitCode: z.number(),
  steps: z.array(z.object({ argv: z.array(z.string()), code: z.number(), stderr: z.string() })),
});
export type AdapterReport = z.infer<typeof AdapterReport>;

/**
 * The only scenarios expected-failures.json may list: the harness's protocol extensions (OAuth
 * client credentials, SEP-1046; cross-app access, SEP-990), which a person-facing native client
 * does not implement (conformance src/scenarios/client/auth/index.ts extensionScenariosList).
 */
export const EXTENSION_SCENARIOS = ["auth/client-credentials-jwt", "auth/client-credentials-basic", "auth/cross-app-access-complete-flow"];

/** tools/conformance/expected-failures.json: scenario name -> why it is expected to fail. */
export const ExpectedFailures = z
  .object({
    client: z.record(
      z.string().refine((s) => EXTENSION_SCENARIOS.includes(s), { error: "only extension scenarios may be expected to fail (issue 3)" }),
      z.string().min(1),
    ),
  })
  .strict();
export type ExpectedFailures = z.infer<typeof ExpectedFailures>;

export type ScenarioRun = {
  scenario: string;
  /** undefined when the harness saved no checks for the scenario (it crashed or never ran it). */
  checks: Check[] | undefined;
  adapter: AdapterReport | undefined;
  /** The harness lets the client exit non-zero in this scenario (Scenario.allowClientError). */
  allowClientError: boolean;
};

export type Verdict = "passed" | "failed" | "expected failure" | "unexpectedly passed";
export type ScenarioVerdict = { scenario: string; verdict: Verdict; problems: string[]; reason?: string };

/** Why the scenario fails, in the harness's own words; empty when it passes. */
export function problemsOf(run: ScenarioRun): string[] {
  const problems: string[] = [];
  if (!run.checks) problems.push("the harness saved no checks for this scenario");
  for (const check of run.checks ?? []) {
    if (check.status !== "FAILURE" && check.status !== "WARNING") continue;
    const detail = check.errorMessage ? ` (${check.errorMessage})` : "";
    problems.push(`${check.status} [${check.id}] ${check.description}${detail}`);
  }
  if (!run.adapter) problems.push("the adapter left no report (it crashed or was killed by the harness's timeout)");
  else if (run.adapter.exitCode !== 0 && !run.allowClientError) {
    const last = run.adapter.steps.at(-1);
    const said = last ? `: \`subs ${last.argv.join(" ")}\` exited ${last.code}: ${lastLines(last.stderr)}` : "";
    problems.push(`the client exited ${run.adapter.exitCode}${said}`);
  }
  return problems;
}

function lastLines(text: string): string {
  return text.trim().split("\n").slice(-3).join(" / ") || "(no stderr)";
}

export function judge(runs: ScenarioRun[], expected: ExpectedFailures) {
  const verdicts: ScenarioVerdict[] = runs.map((run) => {
    const problems = problemsOf(run);
    const reason = expected.client[run.scenario];
    const failed = problems.length > 0;
    const verdict: Verdict = reason === undefined ? (failed ? "failed" : "passed") : failed ? "expected failure" : "unexpectedly passed";
    return { scenario: run.scenario, verdict, problems, ...(reason === undefined ? {} : { reason }) };
  });
  const count = (v: Verdict) => verdicts.filter((x) => x.verdict === v).length;
  const passed = count("passed");
  const failed = count("failed");
  const expectedFailures = count("expected failure");
  const unexpectedPasses = count("unexpectedly passed");
  const ran = new Set(runs.map((r) => r.scenario));
  const notRun = Object.keys(expected.client).filter((s) => !ran.has(s));
  const summary =
    `conformance: ${passed} passed, ${failed} failed, ${expectedFailures} expected failures` +
    (unexpectedPasses ? `, ${unexpectedPasses} unexpectedly passed (remove them from the expected-failures file)` : "");
  return { verdicts, passed, failed, expectedFailures, unexpectedPasses, notRun, summary, ok: failed === 0 && unexpectedPasses === 0 };
}
