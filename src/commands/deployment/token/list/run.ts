// `subs deployment token list`: one line per token on stdout (tab-separated), or the documented
// JSON array; never a token nor its hash (the place never has them to give).
import type { Context } from "../../../../context.ts";
import { listApiTokens, type TokenTarget } from "../../../../deployment/tokens.ts";
import { writeJson } from "../../../../output/json.ts";
import { tokenReporter } from "../../reporter.ts";
import { shown } from "../../../../output/untrusted.ts";

export async function tokenListCommand(ctx: Context, options: { target: TokenTarget; json: boolean }) {
  const { where, tokens } = await listApiTokens(ctx, options.target, tokenReporter(ctx));
  if (options.json) return writeJson(ctx.stdout, tokens);
  if (!tokens.length) {
    ctx.stderr.write(`subs: no tokens on ${shown(where)} yet; make one with \`subs deployment token create --name NAME --role admin\`\n`);
    return;
  }
  for (const t of tokens) {
    const expires = t.expires_at === null ? "never expires" : `expires ${t.expires_at}`;
    const used = t.last_used_at === null ? "never used" : `last used ${t.last_used_at}`;
    ctx.stdout.write(`${[t.id, t.role, t.name, `created ${t.created_at}`, expires, used, `of ${t.person}`].map((f) => shown(f)).join("\t")}\n`);
  }
}
