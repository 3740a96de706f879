// `subs deployment person list`: one line per person on stdout (tab-separated), or the documented JSON array.
import type { Context } from "../../../../context.ts";
import { listPeople, type TokenTarget } from "../../../../deployment/tokens.ts";
import { writeJson } from "../../../../output/json.ts";
import { shown } from "../../../../output/untrusted.ts";
import { tokenReporter } from "../../reporter.ts";

export async function personListCommand(ctx: Context, options: { target: TokenTarget; json: boolean }) {
  const { where, people } = await listPeople(ctx, options.target, tokenReporter(ctx));
  if (options.json) return writeJson(ctx.stdout, people);
  if (!people.length) {
    ctx.stderr.write(`subs: nobody on ${shown(where)} yet; a token's person is made with it (\`subs deployment token create --person NAME\`)\n`);
    return;
  }
  for (const p of people) ctx.stdout.write(`${[p.name, `since ${p.created_at}`, `${p.tokens} token${p.tokens === 1 ? "" : "s"}`].map((f) => shown(f)).join("\t")}\n`);
}
