// The connections' routes (docs/deployment-protocol.md sections 3.1 to 3.6): declarations, the
// consent's start and poll, and the tools a connection answers with the deployment's credential.
import { z } from "zod";
import type { OAuth } from "../oauth.ts";
import type { ConnectionRecord, DeploymentStore } from "../store/types.ts";
import { inCatalog, NOT_IN_CATALOG, notInCatalogMessage } from "../catalog.ts";
import { isLoopbackHost } from "../config.ts";
import { BadBody, fail, IdSchema, iso, issueText, readJson, type Route } from "./answer.ts";

/** The fields of a declaration, shared by PUT /v1/mcp/{id} and each entry of PUT /v1/state. */
export const connectionFields = {
  url: z.url({ protocol: /^https?$/ }).refine((u) => new URL(u).protocol === "https:" || isLoopbackHost(new URL(u).hostname), "url must be https (plain http only to a loopback host)"),
  prefix_tools: z.boolean(),
  oauth: z
    .strictObject({
      client_id: z.string().min(1).optional(),
      client_metadata_url: z.url({ protocol: /^https$/ }).optional(),
      scopes: z.array(z.string()).optional(),
    })
    .optional(),
};
const ConnectionBody = z.strictObject(connectionFields);

/** Section 3.2: a field that names or holds a secret of the developer's machine, checked before the rest of the body. */
export function hasLocalOnlyField(body: unknown): boolean {
  const fields = body && typeof body === "object" ? (body as Record<string, unknown>) : undefined;
  const oauthField = fields?.oauth && typeof fields.oauth === "object" ? (fields.oauth as object) : undefined;
  return fields !== undefined && ("auth" in fields || (oauthField !== undefined && ("client_secret_env" in oauthField || "client_secret" in oauthField)));
}
export const LOCAL_ONLY_MESSAGE =
  "`auth`, `oauth.client_secret_env` and `oauth.client_secret` belong to the client's machine; authorize on the deployment instead (subs mcp login)";

export type ConnectionRoutesOptions = {
  store: DeploymentStore;
  oauth: OAuth;
  /** The public URL's path (no trailing `/`). */
  base: string;
  catalog: string[] | undefined;
  pollInterval: number;
  ttlSeconds: number;
};

type Held = { id: string; url: string; authorizedAt: number; authorizedBy: string | null; expiresAt: number | null };

/**
 * Section 2: a Connection; `authorized` only with a credential for its current url that the
 * deployment would use. One outside the catalog is `declared` and says why in `refused`, whatever
 * it holds: a client that does not know `refused` then shows it needing a login (which the
 * deployment refuses with the catalog), never as usable.
 */
export function connectionJson(c: ConnectionRecord, held: Held | undefined, catalog: readonly string[] | undefined) {
  const allowed = inCatalog(catalog, c.url);
  const authorized = allowed && held !== undefined && held.url === c.url;
  return {
    id: c.id,
    url: c.url,
    prefix_tools: c.prefixTools,
    ...(c.oauth ? { oauth: c.oauth } : {}),
    status: authorized ? "authorized" : "declared",
    ...(authorized ? { authorized_at: iso(held.authorizedAt) } : {}),
    ...(authorized && held.authorizedBy !== null ? { authorized_by: held.authorizedBy } : {}),
    ...(authorized && held.expiresAt !== null ? { expires_at: iso(held.expiresAt) } : {}),
    ...(allowed ? {} : { refused: { error: NOT_IN_CATALOG, message: notInCatalogMessage(c) } }),
  };
}

/** Every declared Connection, as GET /v1/mcp answers them. */
export async function connectionsJson(store: DeploymentStore, catalog: readonly string[] | undefined) {
  const [connections, held] = await Promise.all([store.listConnections(), store.credentialSummaries()]);
  const byId = new Map(held.map((h) => [h.id, h]));
  return connections.map((c) => connectionJson(c, byId.get(c.id), catalog));
}

export function connectionRoutes(o: ConnectionRoutesOptions): Route[] {
  const { store, oauth } = o;
  return [
    {
      pattern: /^\/v1\/mcp\/?$/,
      route: "/v1/mcp",
      need: "read",
      methods: ["GET"],
      // The revision before the rows (store/types.ts, revision()).
      run: async () => {
        const revision = await store.revision();
        const connections = await connectionsJson(store, o.catalog);
        // Section 3.1: the catalog goes with the refusals it explains, and only then.
        const refused = connections.some((c) => c.refused?.error === NOT_IN_CATALOG);
        return { status: 200, body: { connections, revision, ...(refused ? { catalog: o.catalog } : {}) } };
      },
    },
    {
      pattern: /^\/v1\/mcp\/([^/]+)\/?$/,
      route: "/v1/mcp/{id}",
      need: "apply",
      methods: ["PUT", "DELETE"],
      run: async (method, req, [id]) => {
        if (method === "DELETE") {
          const outcome = await store.deleteConnection(id!);
          if (outcome.outcome === "in_use") return fail(409, "connection_in_use", `agents ${outcome.agents.join(", ")} name ${id}; delete them first`, { agents: outcome.agents });
          if (outcome.outcome === "absent") return fail(404, "not_found", `no connection ${id}`);
          await oauth.endPending(id!, "connection_changed", "the connection was deleted");
          await oauth.revoke(outcome.dropped);
          return { status: 204 };
        }
        const body = await readJson(req);
        if (hasLocalOnlyField(body)) return fail(400, "local_only_field", LOCAL_ONLY_MESSAGE);
        const parsed = ConnectionBody.safeParse(body);
        if (!parsed.success) return fail(400, "invalid_request", issueText(parsed.error));
        if (o.catalog && !o.catalog.includes(parsed.data.url)) {
          return fail(403, "url_not_in_catalog", `${parsed.data.url} is not in this deployment's catalog`, { catalog: o.catalog });
        }
        const record: ConnectionRecord = { id: id!, url: parsed.data.url, prefixTools: parsed.data.prefix_tools, oauth: parsed.data.oauth };
        const put = await store.putConnection(record);
        // Section 5: a changed url ends pending consents too, whether or not a credential was held.
        if (put.urlChanged) await oauth.endPending(id!, "connection_changed", "the connection's url changed");
        await oauth.revoke(put.dropped);
        const held = (await store.credentialSummaries()).find((h) => h.id === id);
        return { status: put.created ? 201 : 200, body: connectionJson(record, held, o.catalog) };
      },
    },
    {
      pattern: /^\/v1\/mcp\/([^/]+)\/authorizations\/?$/,
      route: "/v1/mcp/{id}/authorizations",
      need: "consent",
      methods: ["POST"],
      run: async (_m, req, [id], token, _res, secrets) => {
        // Section 3.4: the body defines no fields and its content is ignored (JSON or not).
        await readJson(req).catch((error) => {
          if (error instanceof BadBody && /larger/.test(error.message)) throw error;
        });
        const connection = await store.getConnection(id!);
        if (!connection) return fail(404, "not_found", `no connection ${id}; declare it first (subs apply)`);
        const started = await oauth.start(connection, token.name, oauth.exchange(secrets));
        return {
          status: 201,
          body: { authorization_url: started.authorizationUrl, poll_url: `${o.base}/v1/authorizations/${started.id}`, interval: o.pollInterval, expires_in: o.ttlSeconds },
        };
      },
    },
    {
      pattern: /^\/v1\/authorizations\/([^/]+)\/?$/,
      route: "/v1/authorizations/{id}",
      need: "read",
      methods: ["GET"],
      run: async (_m, _req, [aid]) => {
        const outcome = await oauth.poll(aid!);
        if (!outcome) return fail(404, "not_found", "no such authorization (or it ended long ago)");
        return { status: 200, body: { status: outcome.status, ...(outcome.error ? { error: outcome.error } : {}), ...(outcome.message && outcome.status !== "authorized" ? { message: outcome.message } : {}) } };
      },
    },
    {
      pattern: /^\/v1\/mcp\/([^/]+)\/tools\/?$/,
      route: "/v1/mcp/{id}/tools",
      need: "read",
      methods: ["GET"],
      run: async (_m, _req, [id], _token, _res, secrets) => {
        const connection = await store.getConnection(id!);
        if (!connection) return fail(404, "not_found", `no connection ${id}; run \`subs apply\``);
        return { status: 200, body: { tools: await oauth.tools(connection, secrets) } };
      },
    },
  ];
}
