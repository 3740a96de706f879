// `subs deployment person remove`: who went and the tokens revoked with them, on stderr (`--json`: on stdout).
import type { Context } from "../../../../context.ts";
import { removePerson, type TokenTarget } from "../../../../deployment/tokens.ts";
import { writeJson } from "../../../../output/json.ts";
import { removedPersonText, tokenReporter } from "../../reporter.ts";

export async function personRemoveCommand(ctx: Context, options: { target: TokenTarget; name: string; json: boolean }) {
  const { where, removed } = await removePerson(ctx, options.target, options.name, tokenReporter(ctx));
  if (options.json) writeJson(ctx.stdout, removed);
  ctx.stderr.write(removedPersonText(removed, where));
}
