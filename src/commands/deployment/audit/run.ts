// `subs deployment audit`: the record as a table on a terminal (tab-separated lines when piped),
// or the documented JSON: one page `{"entries", "next", "has_more"}`, or with --follow one entry
// per line (JSON Lines). Names and ids in it come from declarations and servers: the table shows
// them through `shown`, never as they are.
import type { Context } from "../../../context.ts";
import { followAudit, readAudit, type AuditRequest } from "../../../deployment/audit-read.ts";
import type { TokenTarget } from "../../../deployment/tokens.ts";
import { writeJson } from "../../../output/json.ts";
import { styleFor } from "../../../output/style.ts";
import { renderTable } from "../../../output/table.ts";
import { shown } from "../../../output/untrusted.ts";
import type { RemoteAuditEntry } from "../../../remote/protocol.ts";
import { tokenReporter } from "../reporter.ts";

const HEADER = ["TIME", "KIND", "PERSON", "AGENT", "CONNECTION", "TOOL", "OUTCOME", "MS"];

/** One row: what an entry says, each field made visible and cut (a tool's name is a server's). */
function row(e: RemoteAuditEntry): string[] {
  const field = (text: string | null | undefined) => (text === null || text === undefined ? "-" : shown(text, { max: 80 }));
  const outcome = e.outcome ?? (typeof e.detail?.error === "string" ? e.detail.error : null);
  return [e.at, e.kind, field(e.person), field(e.agent), field(e.connection), field(e.tool), field(outcome), e.duration_ms === null || e.duration_ms === undefined ? "-" : String(e.duration_ms)];
}

export async function auditCommand(ctx: Context, options: { target: TokenTarget; request: AuditRequest; json: boolean; follow: boolean }) {
  // The settings' warnings as `subs deployment` words them, and the API client's retries.
  const reporter = tokenReporter(ctx);
  const style = styleFor(ctx.color);
  if (options.follow) {
    let first = true;
    await followAudit(ctx, options.target, options.request, reporter, (entries) => {
      if (options.json) {
        for (const e of entries) ctx.stdout.write(`${JSON.stringify(e)}\n`);
        return;
      }
      // The header once, columns as wide as the first batch's: a follow's rows are not realigned.
      const table = renderTable(HEADER, entries.map(row), { tty: ctx.stdoutIsTTY, columns: ctx.stdoutColumns, style: style.bold });
      ctx.stdout.write(first || !ctx.stdoutIsTTY ? table : table.slice(table.indexOf("\n") + 1));
      first = false;
    });
    return;
  }
  const { where, page } = await readAudit(ctx, options.target, options.request, reporter);
  if (options.json) return writeJson(ctx.stdout, page);
  if (page.entries.length === 0) ctx.stderr.write(`subs: no entries on ${shown(where)} match\n`);
  else ctx.stdout.write(renderTable(HEADER, page.entries.map(row), { tty: ctx.stdoutIsTTY, columns: ctx.stdoutColumns, style: style.bold }));
  if (page.has_more && page.next) ctx.stderr.write(`subs: more entries: --after ${shown(page.next)}\n`);
}
