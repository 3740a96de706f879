// The connections' routes (docs/deployment-protocol.md sections 3.1 to 3.6 and 3.12): declarations,
// the consent's start and poll, the values of header templates, and the tools a connection answers
// with the deployment's credential.
import { z } from "zod";
import { ENV_NAME_PATTERN, isValidName } from "../../config/rules.ts";
import { HEADER_NAME_PATTERN, HEADER_VALUE_CONTROL as CONTROL, headerVariables, MAX_HEADER_VALUE_BYTES, MAX_HEADER_VARIABLES, literalSecretProblem, reservedHeaderProblem, templateProblem } from "../../config/templates.ts";
import type { OAuth } from "../oauth.ts";
import { holderFor, SHARED, type ConnectionRecord, type CredentialLoss, type DeploymentStore, type HeaderValueSummary } from "../store/types.ts";
import { inCatalog, NOT_IN_CATALOG, notInCatalogMessage } from "../catalog.ts";
import { isLoopbackHost } from "../config.ts";
import { record, requestIdOf, type AuditSink } from "../audit.ts";
import { BadBody, fail, IdSchema, iso, issueText, readJson, type Route } from "./answer.ts";

/** Section 3.2: how many headers a declaration may set, and how long a value (a template, or one held) may be. */
export const MAX_HEADERS = 32;

/** Why a declaration's `headers` are refused (section 3.2), or undefined. Never quotes a value: a literal one may be a secret. */
export function headersProblem(headers: Readonly<Record<string, string>>): string | undefined {
  const names = Object.keys(headers);
  if (names.length > MAX_HEADERS) return `headers: at most ${MAX_HEADERS}`;
  if (headerVariables(headers).length > MAX_HEADER_VARIABLES) return `headers: they name more than ${MAX_HEADER_VARIABLES} variables`;
  const seen = new Set<string>();
  for (const [name, value] of Object.entries(headers)) {
    if (!HEADER_NAME_PATTERN.test(name)) return `headers: ${JSON.stringify(name.slice(0, 100))} is not a header name`;
    if (seen.has(name.toLowerCase())) return `headers: ${name} is set twice (header names ignore case)`;
    seen.add(name.toLowerCase());
    const reserved = reservedHeaderProblem(name);
    if (reserved) return `headers: ${reserved.message}`;
    if (Buffer.byteLength(value) > MAX_HEADER_VALUE_BYTES) return `headers: the value of ${name} is longer than ${MAX_HEADER_VALUE_BYTES} bytes`;
    if (CONTROL.test(value)) return `headers: the value of ${name} has a control character`;
    const template = templateProblem(value);
    if (template) return `headers: the value of ${name} ${template}`;
    // A literal credential would be listed to every `read` token: it is handed over as a value instead (section 3.12).
    if (literalSecretProblem(name, value)) return `headers: ${name} has a literal value; write a \`\${NAME}\` template and hand the value over with PUT /v1/mcp/{id}/secrets/{NAME}`;
  }
  return undefined;
}

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
  headers: z
    .record(z.string(), z.string())
    .superRefine((headers, ctx) => {
      const problem = headersProblem(headers);
      if (problem) ctx.addIssue({ code: "custom", message: problem });
    })
    .optional(),
  /** Section 2: absent, `shared`. */
  credential: z.enum(["shared", "personal"]).optional(),
};
const ConnectionBody = z.strictObject(connectionFields);

/** A declaration as the store keeps it, from a checked body; `{}` headers are none. */
export const connectionRecordOf = (id: string, body: z.output<typeof ConnectionBody>): ConnectionRecord => ({
  id,
  url: body.url,
  prefixTools: body.prefix_tools,
  oauth: body.oauth,
  ...(body.headers && Object.keys(body.headers).length > 0 ? { headers: body.headers } : {}),
  ...(body.credential === "personal" ? { credential: "personal" as const } : {}),
});

const ValueBody = z.strictObject({ value: z.string() });

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
  now?: () => number;
  /** The record of changes (audit.ts): each is written before its answer is sent. */
  audit?: AuditSink;
};

type Held = { id: string; person: string; url: string; authorizedAt: number; authorizedBy: string | null; expiresAt: number | null; refreshExpiresAt?: number | null };

/**
 * Section 2: a Connection; `authorized` only with a credential for its current url that the
 * deployment would use, or a value held for every variable its headers name (section 3.12). One
 * outside the catalog is `declared` and says why in `refused`, whatever it holds: a client that
 * does not know `refused` then shows it needing a login (which the deployment refuses with the
 * catalog), never as usable. `values`: the header values held for it (never a value itself).
 * `held`: the credential the caller would use: for a personal connection their own person's
 * (`status` and the times are theirs), else the connection's. `loss`: the record that
 * credential's loss for good left (section 5), said as `lost` while the connection is not
 * authorized at the url it was lost at: the status stays `declared` (section 9: a client of v1
 * knows two values), and `lost` says why.
 */
export function connectionJson(c: ConnectionRecord, held: Held | undefined, catalog: readonly string[] | undefined, values: readonly HeaderValueSummary[] = [], loss?: CredentialLoss) {
  const allowed = inCatalog(catalog, c.url);
  const credential = held !== undefined && held.url === c.url ? held : undefined;
  const variables = headerVariables(c.headers ?? {});
  const secrets = variables.map((name) => {
    const value = values.find((v) => v.name === name && v.url === c.url);
    return { name, held: value !== undefined, ...(value ? { set_at: iso(value.setAt), ...(value.setBy !== null ? { set_by: value.setBy } : {}) } : {}) };
  });
  const valuesHeld = variables.length > 0 && secrets.every((s) => s.held);
  // Missing values keep it from being used (section 3.12), whatever credential it also holds.
  const authorized = allowed && (variables.length === 0 ? credential !== undefined : valuesHeld);
  const latest = values.filter((v) => v.url === c.url && variables.includes(v.name)).sort((a, b) => b.setAt - a.setAt)[0];
  const since = credential ? { at: credential.authorizedAt, by: credential.authorizedBy } : latest ? { at: latest.setAt, by: latest.setBy } : undefined;
  return {
    id: c.id,
    url: c.url,
    prefix_tools: c.prefixTools,
    ...(c.oauth ? { oauth: c.oauth } : {}),
    ...(c.headers ? { headers: c.headers } : {}),
    ...(secrets.length > 0 ? { secrets } : {}),
    ...(c.credential === "personal" ? { credential: "personal" } : {}),
    status: authorized ? "authorized" : "declared",
    ...(authorized && since ? { authorized_at: iso(since.at) } : {}),
    ...(authorized && since && since.by !== null ? { authorized_by: since.by } : {}),
    ...(authorized && credential && credential.expiresAt !== null ? { expires_at: iso(credential.expiresAt) } : {}),
    ...(authorized && credential && credential.refreshExpiresAt != null ? { refresh_expires_at: iso(credential.refreshExpiresAt) } : {}),
    ...(!authorized && credential === undefined && loss !== undefined && loss.url === c.url ? { lost: { reason: loss.reason, message: loss.message, lost_at: iso(loss.lostAt) } } : {}),
    ...(allowed ? {} : { refused: { error: NOT_IN_CATALOG, message: notInCatalogMessage(c) } }),
  };
}

/** Every declared Connection, as GET /v1/mcp answers them to a caller of `person`. */
export async function connectionsJson(store: DeploymentStore, catalog: readonly string[] | undefined, person: string) {
  const [connections, shared, own, values, sharedLosses, ownLosses] = await Promise.all([
    store.listConnections(),
    store.credentialSummaries(SHARED),
    store.credentialSummaries(person),
    store.headerValueSummaries(),
    store.credentialLosses(SHARED),
    store.credentialLosses(person),
  ]);
  const byId = <T extends { id: string }>(rows: T[]) => new Map(rows.map((r) => [r.id, r]));
  const [sharedById, ownById, sharedLost, ownLost] = [byId(shared), byId(own), byId(sharedLosses), byId(ownLosses)];
  return connections.map((c) => {
    const personal = c.credential === "personal";
    return connectionJson(c, (personal ? ownById : sharedById).get(c.id), catalog, values.filter((v) => v.connectionId === c.id), (personal ? ownLost : sharedLost).get(c.id));
  });
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
      run: async (_m, _req, _params, token) => {
        const revision = await store.revision();
        const connections = await connectionsJson(store, o.catalog, token.person);
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
      run: async (method, req, [id], token) => {
        if (method === "DELETE") {
          const outcome = await store.deleteConnection(id!);
          if (outcome.outcome === "in_use") return fail(409, "connection_in_use", `agents ${outcome.agents.join(", ")} name ${id}; delete them first`, { agents: outcome.agents });
          if (outcome.outcome === "absent") return fail(404, "not_found", `no connection ${id}`);
          await record(o.audit, { kind: "connection.delete", actor: token, connection: id!, requestId: requestIdOf(req), detail: { credentials_dropped: outcome.dropped.length } });
          await oauth.endPending(id!, "connection_changed", "the connection was deleted");
          await Promise.all(outcome.dropped.map((c) => oauth.revoke(c)));
          return { status: 204 };
        }
        const body = await readJson(req);
        if (hasLocalOnlyField(body)) return fail(400, "local_only_field", LOCAL_ONLY_MESSAGE);
        const parsed = ConnectionBody.safeParse(body);
        if (!parsed.success) return fail(400, "invalid_request", issueText(parsed.error));
        if (o.catalog && !o.catalog.includes(parsed.data.url)) {
          return fail(403, "url_not_in_catalog", `${parsed.data.url} is not in this deployment's catalog`, { catalog: o.catalog });
        }
        const declared = connectionRecordOf(id!, parsed.data);
        const put = await store.putConnection(declared);
        await record(o.audit, {
          kind: "connection.declare",
          actor: token,
          connection: id!,
          requestId: requestIdOf(req),
          detail: { created: put.created, url_changed: put.urlChanged, credentials_dropped: put.dropped.length },
        });
        // Section 5: a changed url ends pending consents too, whether or not a credential was held.
        if (put.urlChanged) await oauth.endPending(id!, "connection_changed", "the connection's url changed");
        await Promise.all(put.dropped.map((c) => oauth.revoke(c)));
        const held = (await store.credentialSummaries(holderFor(declared, token.person))).find((h) => h.id === id);
        const values = (await store.headerValueSummaries()).filter((v) => v.connectionId === id);
        const loss = (await store.credentialLosses(holderFor(declared, token.person))).find((l) => l.id === id);
        return { status: put.created ? 201 : 200, body: connectionJson(declared, held, o.catalog, values, loss) };
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
        const started = await oauth.start(connection, token.name, token.person, oauth.exchange(secrets));
        await record(o.audit, { kind: "consent.start", actor: token, connection: id!, requestId: requestIdOf(req), detail: { authorization: started.id } });
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
      pattern: /^\/v1\/mcp\/([^/]+)\/secrets\/([^/]+)\/?$/,
      route: "/v1/mcp/{id}/secrets/{name}",
      // Handing over an API key is consenting without a browser (section 3.12).
      need: "consent",
      methods: ["PUT", "DELETE"],
      checkParams: ([id, name]) =>
        id === undefined || !isValidName(id)
          ? `${JSON.stringify(id ?? "")} is not a valid connection id`
          : name === undefined || !ENV_NAME_PATTERN.test(name)
            ? `${JSON.stringify((name ?? "").slice(0, 100))} is not a variable name (letters, digits and '_', not starting with a digit)`
            : undefined,
      run: async (method, req, [id, name], token, _res, secrets) => {
        const connection = await store.getConnection(id!);
        if (method === "DELETE") {
          if (!connection) return fail(404, "not_found", `no connection ${id}`);
          if (!(await store.deleteHeaderValue(id!, name!))) return fail(404, "not_found", `the deployment holds no value of ${name} for ${id}`);
          await record(o.audit, { kind: "secret.delete", actor: token, connection: id!, requestId: requestIdOf(req), detail: { name: name! } });
          return { status: 204 };
        }
        const body = await readJson(req);
        const parsed = ValueBody.safeParse(body);
        if (!parsed.success) return fail(400, "invalid_request", issueText(parsed.error));
        const value = parsed.data.value;
        secrets.add(value);
        if (value === "") return fail(400, "invalid_request", "value: empty");
        if (Buffer.byteLength(value) > MAX_HEADER_VALUE_BYTES) return fail(400, "invalid_request", `value: longer than ${MAX_HEADER_VALUE_BYTES} bytes`);
        if (CONTROL.test(value)) return fail(400, "invalid_request", "value: a header value cannot hold a control character (RFC 9110 section 5.5)");
        if (!connection) return fail(404, "not_found", `no connection ${id}; declare it first (subs apply)`);
        if (!inCatalog(o.catalog, connection.url)) return fail(403, NOT_IN_CATALOG, notInCatalogMessage(connection), { catalog: o.catalog });
        const named = headerVariables(connection.headers ?? {});
        if (!named.includes(name!)) {
          const which = named.length > 0 ? `its headers name ${named.join(", ")}` : "its headers name no variable";
          return fail(400, "unknown_variable", `${id} on the deployment does not use ${name}: ${which}; run \`subs apply\` if the file says otherwise`);
        }
        const stored = await store.putHeaderValue({ connectionId: id!, name: name!, url: connection.url, setAt: (o.now ?? Date.now)(), setBy: token.name, value });
        // Its url or headers changed between the read and the write: what was handed over may not apply any more.
        if (!stored) return fail(409, "connection_changed", `${id} changed while the value was handed over; run \`subs mcp login ${id}\` again`);
        await record(o.audit, { kind: "secret.set", actor: token, connection: id!, requestId: requestIdOf(req), detail: { name: name! } });
        return { status: 204 };
      },
    },
    {
      pattern: /^\/v1\/mcp\/([^/]+)\/tools\/?$/,
      route: "/v1/mcp/{id}/tools",
      need: "read",
      methods: ["GET"],
      run: async (_m, _req, [id], token, _res, secrets) => {
        const connection = await store.getConnection(id!);
        if (!connection) return fail(404, "not_found", `no connection ${id}; run \`subs apply\``);
        return { status: 200, body: { tools: await oauth.tools(connection, token.person, secrets) } };
      },
    },
  ];
}
