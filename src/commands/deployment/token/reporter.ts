// What `subs deployment token create|list|revoke` report on stderr while they work: the settings'
// warnings in the words `subs deployment serve` and `rotate-key` use for them (`subs: warning: …`),
// and the API client's retries.
import type { Context } from "../../../context.ts";
import { stderrReporter } from "../../../output/reporter.ts";
import { shown } from "../../../output/untrusted.ts";
import type { Reporter } from "../../../report.ts";

export function tokenReporter(ctx: Context): Reporter {
  return { ...stderrReporter(ctx), warn: (message) => void ctx.stderr.write(`subs: warning: ${shown(message, { multiline: true })}\n`) };
}
