// `subs deployment token revoke`: what was revoked, on stderr (with --remove-person, the person too).
import type { Context } from "../../../../context.ts";
import { revokeApiToken, type TokenTarget } from "../../../../deployment/tokens.ts";
import { removedPersonText, tokenReporter } from "../../reporter.ts";
import { shown } from "../../../../output/untrusted.ts";

export async function tokenRevokeCommand(ctx: Context, options: { target: TokenTarget; token: string; removePerson: boolean }) {
  const { where, revoked: t, removedPerson } = await revokeApiToken(ctx, options.target, options.token, tokenReporter(ctx), { removePerson: options.removePerson });
  ctx.stderr.write(`subs: revoked ${shown(t.role)} token ${shown(t.id)} (${shown(t.name)}) on ${shown(where)}; requests with it are refused from now on\n`);
  if (removedPerson) ctx.stderr.write(removedPersonText(removedPerson, where));
}
