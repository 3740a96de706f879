// PUT /v1/state (docs/deployment-protocol.md section 3.10): the whole declared state in one
// request, applied in one store transaction, so two applies at once end in one of their states and
// never in a mix of both. Every rule of the single-object requests holds for each entry.
import { z } from "zod";
import type { OAuth } from "../oauth.ts";
import type { AgentRecord, ConnectionRecord, DeploymentStore } from "../store/types.ts";
import { agentFields, namesEachConnectionOnce } from "./agents.ts";
import { record, requestIdOf, type AuditSink } from "../audit.ts";
import { fail, IdSchema, issueText, readJson, type Route } from "./answer.ts";
import { LockSchema, lockTooLarge, tamperedEntries } from "../lock.ts";
import { connectionFields, connectionRecordOf, connectionsJson, hasLocalOnlyField, LOCAL_ONLY_MESSAGE } from "./connections.ts";

const unique = (ids: string[]) => new Set(ids).size === ids.length;

const StateBody = z
  .strictObject({
    connections: z.array(z.strictObject({ id: IdSchema, ...connectionFields })),
    agents: z.array(
      z
        .strictObject({ name: IdSchema, ...agentFields })
        .refine(namesEachConnectionOnce, "an mcp entry names the same connection twice")
        .refine((a) => !a.agents.includes(a.name), "an agent names itself as a sub-agent"),
    ),
    prune: z.boolean(),
    revision: z.string().min(1).optional(),
    // Section 3.10, "The lock": null holds none; absent keeps the one held.
    lock: LockSchema.nullable().optional(),
  })
  .refine((b) => unique(b.connections.map((c) => c.id)), "two connections have the same id")
  .refine((b) => unique(b.agents.map((a) => a.name)), "two agents have the same name");

export function stateRoutes(o: { store: DeploymentStore; oauth: OAuth; catalog: string[] | undefined; audit?: AuditSink }): Route[] {
  const { store, oauth } = o;
  return [
    {
      pattern: /^\/v1\/state\/?$/,
      route: "/v1/state",
      need: "apply",
      methods: ["PUT"],
      run: async (_m, req, _params, token) => {
        const body = await readJson(req);
        // Section 3.2's order, over every entry: local-only fields, then the body, then the catalog.
        const entries = body && typeof body === "object" ? (body as { connections?: unknown }).connections : undefined;
        if (Array.isArray(entries) && entries.some(hasLocalOnlyField)) return fail(400, "local_only_field", LOCAL_ONLY_MESSAGE);
        const parsed = StateBody.safeParse(body);
        if (!parsed.success) return fail(400, "invalid_request", issueText(parsed.error));
        const { lock } = parsed.data;
        // Each digest recomputed from its entry's fields, as `subs` checks substructure.lock: an
        // entry edited by hand is refused as a whole, never held as a partial lock.
        const tampered = lock ? tamperedEntries(lock) : [];
        if (tampered.length) {
          return fail(400, "invalid_request", `lock: the digest of ${tampered.slice(0, 5).join(", ")}${tampered.length > 5 ? ` and ${tampered.length - 5} more` : ""} does not match its fields; run \`subs lock\` again`);
        }
        const tooLarge = lock ? lockTooLarge(lock) : undefined;
        if (tooLarge) return fail(413, "lock_too_large", tooLarge);
        const outside = o.catalog ? parsed.data.connections.filter((c) => !o.catalog!.includes(c.url)) : [];
        if (outside.length) {
          return fail(403, "url_not_in_catalog", `${outside.map((c) => c.url).join(", ")} ${outside.length === 1 ? "is" : "are"} not in this deployment's catalog`, { catalog: o.catalog });
        }
        const connections: ConnectionRecord[] = parsed.data.connections.map(({ id, ...c }) => connectionRecordOf(id, c));
        const agents: AgentRecord[] = parsed.data.agents.map((a) => ({ name: a.name, mcp: a.mcp, tools: a.tools, agents: a.agents }));
        const put = await store.putState({
          connections,
          agents,
          prune: parsed.data.prune,
          ...(parsed.data.revision !== undefined ? { ifRevision: parsed.data.revision } : {}),
          ...(lock !== undefined ? { lock } : {}),
        });
        if (put.outcome === "revision_changed") {
          return fail(409, "revision_changed", "the declarations changed since the revision this plan was made from; read them again", { revision: put.revision });
        }
        if (put.outcome === "unknown_connection") return fail(409, "unknown_connection", `not declared: ${put.missing.join(", ")}; declare them in the same request`);
        // A repeat that finds everything done (section 7) changed nothing, and is no entry.
        if (put.changes.length > 0) {
          await record(o.audit, {
            kind: "apply",
            actor: token,
            requestId: requestIdOf(req),
            detail: { revision: put.revision, changes: put.changes.map((c) => ({ kind: c.kind, id: c.id, action: c.action, credential_dropped: c.credentialDropped })) },
          });
        }
        // Section 5, after the commit as for a single PUT or DELETE: pending consents of a changed
        // or removed connection end, and dropped credentials are revoked (best effort).
        for (const { id, why } of put.ended) oauth.endPending(id, "connection_changed", why === "deleted" ? "the connection was deleted" : "the connection's url changed");
        await Promise.all(put.dropped.map((c) => oauth.revoke(c)));
        return {
          status: 200,
          body: {
            revision: put.revision,
            connections: await connectionsJson(store, o.catalog, token.person),
            agents: await store.listAgents(),
            lock: (await store.getLock()) ?? null,
            changes: put.changes.map((c) => ({ kind: c.kind, id: c.id, action: c.action, credential_dropped: c.credentialDropped })),
          },
        };
      },
    },
  ];
}
