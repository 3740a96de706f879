// A credential `subs apply` deletes (its section deleted, its url changed) or a login replaces is
// also revoked where the authorization server offers it (RFC 7009; product.md, "The file"); no
// command that only looks deletes or revokes one (issue 15). Revocation is best effort and
// bounded in time: a slow or absent server never holds a command up for long.
import { selectClientAuthMethod } from "@modelcontextprotocol/sdk/client/auth.js";
import type { AuthorizationServerMetadata } from "@modelcontextprotocol/sdk/shared/auth.js";
import type { Context } from "../context.ts";
import type { Reporter } from "../report.ts";
import type { CredentialRow } from "../store/schema.ts";
import { authorizationServerMetadata, revocationEndpoint } from "./discovery.ts";
import { credentialClient } from "./refresh.ts";
import { withDeadline } from "../http/deadline.ts";
import { guardedFetch } from "../http/guarded-fetch.ts";

export const REVOCATION_TIMEOUT_MS = 3000;

/**
 * One RFC 7009 revocation request, the client authenticated as the server allows (§2.1). Also how
 * login asks whether a stored registration is still known (src/auth/client.ts).
 */
export function postRevocation(options: {
  fetch: typeof globalThis.fetch;
  endpoint: string;
  metadata: AuthorizationServerMetadata;
  client: { client_id: string; client_secret?: string | undefined };
  token: string;
  hint: string;
}): Promise<Response> {
  const { client } = options;
  const headers = new Headers({ "content-type": "application/x-www-form-urlencoded", accept: "application/json" });
  const body = new URLSearchParams({ token: options.token, token_type_hint: options.hint });
  const method = selectClientAuthMethod(client, options.metadata.token_endpoint_auth_methods_supported ?? []);
  if (method === "client_secret_basic" && client.client_secret) {
    headers.set("authorization", `Basic ${Buffer.from(`${encodeURIComponent(client.client_id)}:${encodeURIComponent(client.client_secret)}`).toString("base64")}`);
  } else {
    body.set("client_id", client.client_id);
    if (client.client_secret) body.set("client_secret", client.client_secret);
  }
  return options.fetch(options.endpoint, { method: "POST", headers, body, redirect: "error" });
}

type RevokeContext = Pick<Context, "env" | "fetch"> & Partial<Pick<Context, "signal">>;

/** Revokes each row's refresh and access token; returns the ids revoked. Never throws. */
export async function revokeCredentials(rows: readonly CredentialRow[], options: { ctx: RevokeContext; reporter: Reporter; storePath: string; timeoutMs?: number }): Promise<string[]> {
  if (rows.length === 0) return [];
  // Ctrl-C ends it too: the credentials are already deleted here, revocation is best effort.
  // A deadline that holds under GC (src/http/deadline.ts), cleared once every revocation is over.
  const deadline = withDeadline(options.ctx.signal, options.timeoutMs ?? REVOCATION_TIMEOUT_MS);
  const { signal } = deadline;
  const guarded = guardedFetch(options.ctx.fetch);
  const fetch: typeof globalThis.fetch = (input, init) => guarded(input, { ...init, signal });
  const results = await Promise.all(
    rows.map(async (row) => {
      try {
        const metadata = await authorizationServerMetadata(row.issuer, { fetch, requirePkce: false });
        const endpoint = revocationEndpoint(metadata);
        if (!endpoint) return undefined;
        const client = credentialClient(row, options.storePath);
        const secretEnv = typeof client.client_secret_env === "string" ? client.client_secret_env : undefined;
        const secret = client.client_secret ?? (secretEnv ? options.ctx.env[secretEnv] : undefined);
        const presented = secret ? { ...client, client_secret: secret } : { ...client, client_secret: undefined };
        const tokens: Array<[string, string]> = [];
        if (row.refresh_token) tokens.push([row.refresh_token, "refresh_token"]);
        tokens.push([row.access_token, "access_token"]);
        let ok = true;
        for (const [token, hint] of tokens) {
          const response = await postRevocation({ fetch, endpoint, metadata, client: presented, token, hint });
          await response.body?.cancel().catch(() => {});
          ok &&= response.ok;
        }
        return ok ? row.id : undefined;
      } catch {
        return undefined;
      }
    }),
  ).finally(deadline.clear);
  const revoked = results.filter((id): id is string => id !== undefined);
  if (revoked.length > 0) options.reporter.info(`Revoked the credential${revoked.length > 1 ? "s" : ""} of ${revoked.join(", ")} at the authorization server.`);
  return revoked;
}
