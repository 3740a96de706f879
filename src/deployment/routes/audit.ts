// GET /v1/audit (docs/deployment-protocol.md section 3.14): the record of served tool calls and
// changes, oldest first, filtered by the query and paged with a cursor (an entry's `seq`). Only the
// admin and read roles read it: it says who called what, which a `use` or `apply` token has no
// need to know of others.
import { z } from "zod";
import { auditJson, type AuditEntryJson } from "../audit.ts";
import { AUDIT_KINDS, type AuditFilter, type DeploymentStore } from "../store/types.ts";
import { fail, issueText, type Route } from "./answer.ts";

/** A page's size when the query names none, and the most one may ask for. */
export const AUDIT_PAGE = 100;
export const AUDIT_PAGE_MAX = 1000;

const Timestamp = z.iso.datetime({ offset: true }).transform((text) => Date.parse(text));
const Name = z.string().min(1).max(200);
const AuditQuery = z.strictObject({
  since: Timestamp.optional(),
  until: Timestamp.optional(),
  person: Name.optional(),
  agent: Name.optional(),
  connection: Name.optional(),
  kind: z.enum(AUDIT_KINDS).optional(),
  after: z.string().regex(/^(0|[1-9][0-9]{0,15})$/, "not a cursor this deployment gave").transform(Number).optional(),
  limit: z.string().regex(/^[1-9][0-9]{0,3}$/, `a whole number from 1 to ${AUDIT_PAGE_MAX}`).transform(Number).refine((n) => n <= AUDIT_PAGE_MAX, `at most ${AUDIT_PAGE_MAX}`).optional(),
});

/** A page of the record as section 3.14 answers it, or why the query is refused. */
export type AuditPage = { entries: AuditEntryJson[]; next: string | null; has_more: boolean };

/** The page a query asks for: the route's answer, and `subs deployment audit --store`'s on the host. */
export async function auditPage(store: Pick<DeploymentStore, "listAudit">, params: URLSearchParams): Promise<{ page: AuditPage } | { problem: string }> {
  const names = [...params.keys()];
  const twice = names.find((name, n) => names.indexOf(name) !== n);
  if (twice !== undefined) return { problem: `${twice.slice(0, 50)}: given twice` };
  const parsed = AuditQuery.safeParse(Object.fromEntries(params));
  if (!parsed.success) return { problem: issueText(parsed.error) };
  const { after, limit = AUDIT_PAGE, ...rest } = parsed.data;
  const filter = Object.fromEntries(Object.entries(rest).filter(([, v]) => v !== undefined)) as AuditFilter;
  // One more than the page: whether there is more, without a count.
  const found = await store.listAudit(filter, after ?? 0, limit + 1);
  const page = found.slice(0, limit);
  const last = page.at(-1);
  return { page: { entries: page.map(auditJson), next: last !== undefined ? String(last.seq) : after !== undefined ? String(after) : null, has_more: found.length > limit } };
}

export function auditRoutes(o: { store: DeploymentStore }): Route[] {
  const { store } = o;
  return [
    {
      pattern: /^\/v1\/audit\/?$/,
      route: "/v1/audit",
      need: "audit",
      methods: ["GET"],
      run: async (_m, req) => {
        const read = await auditPage(store, new URL(req.url ?? "/", "http://x").searchParams);
        return "problem" in read ? fail(400, "invalid_request", read.problem) : { status: 200, body: read.page };
      },
    },
  ];
}
