// `subs deployment token revoke`: what was revoked, on stderr.
import type { Context } from "../../../../context.ts";
import { revokeApiToken, type TokenTarget } from "../../../../deployment/tokens.ts";
import { tokenReporter } from "../reporter.ts";
import { shown } from "../../../../output/untrusted.ts";

export async function tokenRevokeCommand(ctx: Context, options: { target: TokenTarget; token: string }) {
  const { where, revoked: t } = await revokeApiToken(ctx, options.target, options.token, tokenReporter(ctx));
  ctx.stderr.write(`subs: revoked ${shown(t.role)} token ${shown(t.id)} (${shown(t.name)}) on ${shown(where)}; requests with it are refused from now on\n`);
}
