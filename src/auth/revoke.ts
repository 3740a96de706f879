// A credential `subs apply` deletes (its section deleted, its url changed) or a login replaces is
// also revoked where the authorization server offers it (RFC 7009; product.md, "The file"); no
// command that only looks deletes or revokes one (docs/file.md, "Looking never deletes").
// Revocation is best effort and bounded in time: a slow or absent server never holds a command
// up for long.
import type { Context } from "../context.ts";
import type { Reporter } from "../report.ts";
import type { CredentialRow } from "../store/schema.ts";
import { authorizationServerMetadata, revocationEndpoint } from "./discovery.ts";
import { credentialClient } from "./client.ts";
import { postRevocation } from "./revocation-request.ts";
import { withDeadline } from "../http/deadline.ts";
import { guardedFetch } from "../http/guarded-fetch.ts";

export const REVOCATION_TIMEOUT_MS = 3000;

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
