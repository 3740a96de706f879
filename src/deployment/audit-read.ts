// `subs deployment audit`'s core: a page of the record (docs/deployment-protocol.md section 3.14)
// from the deployment's API (--url, or the project's [remote], with a read or admin token) or from
// its store on its host (--store), and the pages after it while following. Never prints: the
// command renders what it returns.
import type { Context } from "../context.ts";
import { usage } from "../errors.ts";
import type { Reporter } from "../report.ts";
import type { RemoteAuditEntry, RemoteAuditPage } from "../remote/protocol.ts";
import { RetentionSchema } from "./config.ts";
import { deploymentPlace, type TokenCtx, type TokenTarget } from "./tokens.ts";

/** What to read: the filters and the cursor, as the command's flags give them. */
export type AuditRequest = {
  /** An RFC 3339 time, or a duration back from now (`30m`, `12h`, `7d`). */
  since?: string;
  until?: string;
  person?: string;
  agent?: string;
  connection?: string;
  kind?: string;
  /** A cursor from an earlier page: the entries after it. */
  after?: string;
  limit?: number;
};

/** How often `--follow` asks for what is new. */
export const FOLLOW_INTERVAL_MS = 2000;

/** The query of GET /v1/audit for a request; a duration is turned into the time it reaches back to. */
export function auditQuery(request: AuditRequest, now: number): URLSearchParams {
  const query = new URLSearchParams();
  const time = (flag: string, text: string) => {
    const back = RetentionSchema.safeParse(text);
    if (back.success) return new Date(now - back.data).toISOString();
    if (!/^\d{4}-\d\d-\d\dT\d\d:\d\d(:\d\d(\.\d+)?)?(Z|[+-]\d\d:\d\d)$/i.test(text) || Number.isNaN(Date.parse(text))) {
      throw usage(`${flag} ${JSON.stringify(text)}: give a time (2026-12-06T09:00:00Z) or how far back (30m, 12h, 7d)`);
    }
    return new Date(Date.parse(text)).toISOString();
  };
  if (request.since !== undefined) query.set("since", time("--since", request.since));
  if (request.until !== undefined) query.set("until", time("--until", request.until));
  for (const key of ["person", "agent", "connection", "kind", "after"] as const) if (request[key] !== undefined) query.set(key, request[key]!);
  if (request.limit !== undefined) query.set("limit", String(request.limit));
  return query;
}

/** Where the record is read: the deployment's API, or its store on this host. */
type AuditPlace = { where: string; page(query: URLSearchParams): Promise<RemoteAuditPage>; close(): Promise<void> };

/** The record where deploymentPlace (tokens.ts) says. */
async function auditPlace(ctx: TokenCtx, target: TokenTarget, reporter: Reporter): Promise<AuditPlace> {
  const place = await deploymentPlace(ctx, target, reporter, "a read or admin");
  if ("store" in place) {
    const { store } = place;
    const { auditPage } = await import("./routes/audit.ts");
    return {
      where: store.path,
      async page(query) {
        const read = await auditPage(store, query);
        if ("problem" in read) throw usage(read.problem);
        return read.page;
      },
      close: () => store.close(),
    };
  }
  const { DeploymentClient } = await import("../remote/client.ts");
  const client = new DeploymentClient({ remote: place.remote, ctx, reporter });
  return { where: client.base.href.replace(/\/$/, ""), page: (query) => client.auditPage(query), close: async () => {} };
}

/** One page of the record. */
export async function readAudit(ctx: TokenCtx, target: TokenTarget, request: AuditRequest, reporter: Reporter): Promise<{ where: string; page: RemoteAuditPage }> {
  const query = auditQuery(request, ctx.now());
  const place = await auditPlace(ctx, target, reporter);
  try {
    return { where: place.where, page: await place.page(query) };
  } finally {
    await place.close();
  }
}

/**
 * The record as it grows: every entry the request matches, page after page, then what is new
 * every `intervalMs`, each batch handed to `seen` in order, until ctx.signal aborts (interrupted).
 */
export async function followAudit(
  ctx: TokenCtx & Pick<Context, "signal">,
  target: TokenTarget,
  request: AuditRequest,
  reporter: Reporter,
  seen: (entries: RemoteAuditEntry[]) => void,
  intervalMs = FOLLOW_INTERVAL_MS,
): Promise<void> {
  const query = auditQuery(request, ctx.now());
  const place = await auditPlace(ctx, target, reporter);
  const { sleep } = await import("../remote/client.ts");
  try {
    for (;;) {
      const page = await place.page(query);
      if (page.entries.length > 0) seen(page.entries);
      if (page.next !== null && page.next !== undefined) query.set("after", page.next);
      if (!page.has_more) await sleep(intervalMs, ctx.signal);
    }
  } finally {
    await place.close();
  }
}
