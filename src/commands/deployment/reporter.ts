// What `subs deployment token …` and `person …` report on stderr while they work: the settings'
// warnings in the words `subs deployment serve` and `rotate-key` use for them (`subs: warning: …`),
// and the API client's retries.
import type { Context } from "../../context.ts";
import { stderrReporter } from "../../output/reporter.ts";
import { shown } from "../../output/untrusted.ts";
import type { Reporter } from "../../report.ts";
import type { RemovedPersonJson } from "../../deployment/tokens.ts";

export function tokenReporter(ctx: Context): Reporter {
  return { ...stderrReporter(ctx), warn: (message) => void ctx.stderr.write(`subs: warning: ${shown(message, { multiline: true })}\n`) };
}

/** What removing a person did, for stderr: who, and each token revoked with them. */
export function removedPersonText(removed: RemovedPersonJson, where: string): string {
  const tokens = removed.tokens.map((t) => `${shown(t.id)} (${shown(t.name)})`);
  const revoked = tokens.length === 0 ? "they held no token" : `revoked with them: ${tokens.join(", ")}`;
  return `subs: removed ${shown(removed.person.name)} from ${shown(where)}; ${revoked}\n`;
}
