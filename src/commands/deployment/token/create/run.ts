// `subs deployment token create`: the token on stdout, once (or the documented JSON with it);
// what was made, on stderr, without it.
import type { Context, Output } from "../../../../context.ts";
import { createApiToken, type TokenTarget } from "../../../../deployment/tokens.ts";
import { writeJson } from "../../../../output/json.ts";
import { tokenReporter } from "../../reporter.ts";
import { shown } from "../../../../output/untrusted.ts";

/** `answer`: where the token goes (stdout, unscrubbed); everything else is written to ctx. */
export async function tokenCreateCommand(ctx: Context, options: { target: TokenTarget; name: string; role: string; person?: string; expiresIn?: number; json: boolean; answer: Output }) {
  const request = { name: options.name, role: options.role, ...(options.person !== undefined ? { person: options.person } : {}), ...(options.expiresIn !== undefined ? { expires_in: options.expiresIn } : {}) };
  const { where, created } = await createApiToken(ctx, options.target, request, tokenReporter(ctx));
  if (options.json) writeJson(options.answer, created);
  else options.answer.write(`${created.token}\n`);
  const expires = created.expires_at === null ? "it never expires" : `it expires ${created.expires_at}`;
  ctx.stderr.write(`subs: made ${shown(created.role)} token ${shown(created.id)} (${shown(created.name)}${created.person === created.name ? "" : `, of ${shown(created.person)}`}) on ${shown(where)}; ${expires}. It is shown this once: only its hash is kept\n`);
}
