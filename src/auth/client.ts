// Which OAuth client subs presents to an authorization server, in the spec's order: pre-registered
// (`oauth.client_id`), a Client ID Metadata Document (`oauth.client_metadata_url`, when the server
// says it supports them), dynamic registration (RFC 7591). Registrations are stored per issuer and
// reused (MCP authorization 2026-07-28, "Client Registration") where the server allows it: many
// servers compare redirect_uri exactly, port included, although RFC 8252 §7.3 says a loopback
// port may vary, so a reused registration listens on the port it registered; one the server
// rejects or forgot is dropped and registered again (docs/oauth.md, "What the flow does", 4).
import { randomBytes } from "node:crypto";
import * as z from "zod/mini";
import { registerClient } from "@modelcontextprotocol/sdk/client/auth.js";
import { OAuthError, ServerError } from "@modelcontextprotocol/sdk/server/auth/errors.js";
import type { AuthorizationServerMetadata, OAuthClientInformationFull } from "@modelcontextprotocol/sdk/shared/auth.js";
import type { ConnectionConfig } from "../config/types.ts";
import { failed, interrupted, SubsError, usage } from "../errors.ts";
import { storedClientSchema, type CredentialRow, type StoredClient } from "../store/schema.ts";
import type { Store } from "../store/store.ts";
import { VERSION } from "../version.ts";
import { revocationEndpoint } from "./discovery.ts";
import { oauthProblem } from "./errors.ts";
import { CALLBACK_PATH, startLoopback, type Loopback } from "./loopback.ts";
import { postRevocation } from "./revocation-request.ts";

export type ClientKind = "preregistered" | "metadata_document" | "dynamic";

/** What a credential row keeps of its client (`client_json`). A pre-registered client's secret is
 * never stored: it is read from `$client_secret_env` each time it is needed. */
export type CredentialClient = StoredClient & { kind?: ClientKind };

/** The client a stored credential was issued to, read back from its row. */
export function credentialClient(row: CredentialRow, storePath: string): CredentialClient {
  try {
    return storedClientSchema().parse(JSON.parse(row.client_json)) as CredentialClient;
  } catch {
    throw failed(`the stored OAuth client of '${row.id}' in ${storePath} is corrupt`, { hint: `run \`subs mcp login ${row.id}\` to replace it` });
  }
}

/** The client as presented to the token endpoint: the stored record plus a secret from the environment. */
export function presentedClient(client: CredentialClient, connection: ConnectionConfig, env: Readonly<Record<string, string | undefined>>): CredentialClient {
  if (client.kind !== "preregistered" || !connection.oauth?.clientSecretEnv) return client;
  const secret = env[connection.oauth.clientSecretEnv];
  if (!secret) {
    throw usage(`${connection.id}: $${connection.oauth.clientSecretEnv} is not set`, {
      hint: `export ${connection.oauth.clientSecretEnv}=… (the secret of OAuth client ${connection.oauth.clientId})`,
    });
  }
  return { ...client, client_secret: secret };
}

/** RFC 7591 token_endpoint_auth_method: a public client ("none") when the server allows it. */
function authMethodFor(metadata: AuthorizationServerMetadata): string {
  const supported = metadata.token_endpoint_auth_methods_supported;
  if (!supported || supported.length === 0 || supported.includes("none")) return "none";
  if (supported.includes("client_secret_basic")) return "client_secret_basic";
  if (supported.includes("client_secret_post")) return "client_secret_post";
  return "none";
}

type ClientOptions = {
  connection: ConnectionConfig;
  issuer: string;
  metadata: AuthorizationServerMetadata;
  scope: string | undefined;
  store: Store;
  env: Readonly<Record<string, string | undefined>>;
  fetch: typeof globalThis.fetch;
  now: number;
};

/**
 * The client a login presents and the loopback listener its redirect reaches. A stored
 * registration is reused on the port it registered (servers that compare redirect_uri exactly
 * accept nothing else); when that port is busy, or the server no longer knows the registration,
 * subs registers anew on a port the OS chooses. At most one registration per login.
 */
export async function clientAndLoopback(options: ClientOptions & { /** --port */ port: number | undefined; signal: AbortSignal }): Promise<{ client: CredentialClient; reused: boolean; loopback: Loopback }> {
  const configured = configuredClient(options);
  const stored = configured ? undefined : reusableRegistration(options);
  if (stored) {
    if (await forgotten(stored, options)) {
      options.store.deleteClient(options.issuer, stored.client_id);
    } else {
      let loopback: Loopback | undefined;
      // Under --port, the person's port is used (reusableRegistration checked it is the
      // registered one) or its error reported.
      if (options.port !== undefined) loopback = await startLoopback({ port: options.port });
      else {
        const port = registeredPort(stored);
        // A stored redirect without a port (a server that allows any): the OS chooses one. A busy
        // registered port: a new registration below, on a port the OS chooses, rather than a failure.
        loopback = port === undefined ? await startLoopback({}) : await startLoopback({ port }).catch(() => undefined);
      }
      if (loopback) return { client: { ...stored, kind: "dynamic" }, reused: true, loopback };
    }
  }
  const loopback = await startLoopback(options.port === undefined ? {} : { port: options.port });
  try {
    return { client: configured ?? (await register({ ...options, redirectUri: loopback.redirectUri })), reused: false, loopback };
  } catch (error) {
    await loopback.close();
    throw error;
  }
}

/** A pre-registered client, or a Client ID Metadata Document the server supports; else undefined (dynamic registration). */
function configuredClient(options: ClientOptions): CredentialClient | undefined {
  const { connection, metadata } = options;
  const oauth = connection.oauth;
  if (oauth?.clientId) {
    // The secret's variable is remembered so a later revocation (after the section is deleted
    // from the file) can still authenticate; the secret itself is never stored.
    const client: CredentialClient = { client_id: oauth.clientId, kind: "preregistered", ...(oauth.clientSecretEnv ? { client_secret_env: oauth.clientSecretEnv } : {}) };
    // Check the secret is there before the person consents, not after.
    presentedClient(client, connection, options.env);
    return client;
  }
  if (oauth?.clientMetadataUrl && metadata.client_id_metadata_document_supported === true) {
    return { client_id: oauth.clientMetadataUrl, kind: "metadata_document" };
  }
  return undefined;
}

/** The issuer's stored registration, when it may be presented again for this login. */
function reusableRegistration(options: ClientOptions & { port: number | undefined }): StoredClient | undefined {
  const stored = options.store.getClient(options.issuer);
  if (!stored) return undefined;
  // RFC 7591 §3.2.1: a client secret may expire (0 means never); then register anew.
  if (stored.client_secret_expires_at !== undefined && stored.client_secret_expires_at !== 0 && stored.client_secret_expires_at * 1000 <= options.now) return undefined;
  // Under --port, a registration for another port is replaced: the server may compare exactly.
  if (options.port !== undefined && stored.redirect_uris !== undefined && !stored.redirect_uris.includes(loopbackRedirect(options.port))) return undefined;
  return stored;
}

const loopbackRedirect = (port: number) => `http://127.0.0.1:${port}${CALLBACK_PATH}`;

/** The port of a registration's loopback redirect (http://127.0.0.1:<port>/callback), when it names one. */
function registeredPort(client: StoredClient): number | undefined {
  for (const uri of client.redirect_uris ?? []) {
    if (!URL.canParse(uri)) continue;
    const url = new URL(uri);
    if (url.protocol === "http:" && url.hostname === "127.0.0.1" && url.pathname === CALLBACK_PATH && url.port !== "") return Number(url.port);
  }
  return undefined;
}

/**
 * Whether the authorization server has forgotten a stored registration (an in-memory server
 * restarted, an administrator deleted it). Its authorization endpoint must not redirect for a
 * client it does not know (RFC 6749 §4.1.2.1): the browser would show an error page while subs
 * waited for its timeout. Where the server offers RFC 7009 revocation, it is asked before the
 * browser opens: revoking a token it never issued is answered 200 for a client it knows (§2.2)
 * and `invalid_client` for one it does not (§2.2.1), and changes nothing. Without revocation,
 * or with any other answer, the registration is kept; a forgotten one is then caught at the token
 * endpoint or by the login's timeout or Ctrl-C (dropRegistrationAfterWait). Not a token request
 * with a made-up code: a server may take that for an attack on PKCE.
 */
/** RFC 6749 §5.2: what an OAuth error answer carries; only `error` is read. */
const OAuthErrorBody = z.object({ error: z.string() });

async function forgotten(client: StoredClient, options: ClientOptions & { signal: AbortSignal }): Promise<boolean> {
  const endpoint = revocationEndpoint(options.metadata);
  if (!endpoint) return false;
  try {
    const response = await postRevocation({
      fetch: options.fetch,
      endpoint,
      metadata: options.metadata,
      client,
      token: `subs-registration-check-${randomBytes(16).toString("hex")}`,
      hint: "refresh_token",
    });
    if (response.ok) {
      await response.body?.cancel().catch(() => {});
      return false;
    }
    const answer = OAuthErrorBody.safeParse(await response.json().catch(() => undefined));
    return answer.success && (answer.data.error === "invalid_client" || answer.data.error === "unauthorized_client");
  } catch {
    if (options.signal.aborted) throw interrupted();
    return false;
  }
}

/** The token endpoint rejects the client itself, not the grant (RFC 6749 §5.2). */
export function clientRejected(error: unknown): boolean {
  return error instanceof OAuthError && !(error instanceof ServerError) && (error.errorCode === "invalid_client" || error.errorCode === "unauthorized_client");
}

/** Drops `client`'s stored registration for `issuer` (a dynamic one only); true when it was dropped. */
export function dropRegistration(store: Store, issuer: string, client: CredentialClient): boolean {
  if (client.kind !== undefined && client.kind !== "dynamic") return false;
  return store.deleteClient(issuer, client.client_id);
}

/** The token endpoint no longer accepts the registration a login presented: it is dropped. */
export function registrationRejected(id: string, issuer: string, error: unknown): SubsError {
  return failed(`${id}: the authorization server ${issuer} no longer accepts subs' registration (${oauthProblem(error)}); it was dropped`, {
    hint: `run \`subs mcp login ${id}\` again: it registers anew`,
    code: "registration_rejected",
    cause: error,
  });
}

/**
 * A login that reused a registration and got no answer (timed out, or the person gave up with
 * Ctrl-C): the likeliest cause is an error page in the browser from a server that no longer
 * knows the registration or its redirect, so it is dropped and the next login registers anew.
 * Returns the error to report.
 */
export function dropRegistrationAfterWait(error: unknown, options: { store: Store; issuer: string; client: CredentialClient; reused: boolean; id: string }): unknown {
  if (!options.reused || !(error instanceof SubsError) || (error.code !== "timeout" && error.kind !== "interrupted")) return error;
  if (!dropRegistration(options.store, options.issuer, options.client) || error.kind === "interrupted") return error;
  return failed(error.message, {
    hint: `run \`subs mcp login ${options.id}\` again, or raise --timeout; the stored registration was dropped (the browser may show the server's error page for it), so the next login registers anew`,
    code: "timeout",
    cause: error,
  });
}

async function register(options: ClientOptions & { redirectUri: string }): Promise<CredentialClient> {
  const { connection, metadata, issuer, store } = options;
  if (!metadata.registration_endpoint) {
    throw failed(`${connection.id}: the authorization server ${issuer} offers no way for subs to register (no Client ID Metadata Document support, no dynamic registration)`, {
      hint: `register an OAuth client with it and set oauth = { client_id = "…" } in [mcp.${connection.id}]`,
      code: "registration_unavailable",
    });
  }
  const clientMetadata = {
    client_name: "subs",
    software_id: "subs",
    software_version: VERSION,
    redirect_uris: [options.redirectUri],
    grant_types: ["authorization_code", "refresh_token"],
    response_types: ["code"],
    token_endpoint_auth_method: authMethodFor(metadata),
    // OpenID Connect Registration: a CLI with a loopback redirect is a native application; the
    // default ("web") would make OIDC servers reject the http://127.0.0.1 redirect.
    application_type: "native",
  };
  let registered: OAuthClientInformationFull;
  try {
    registered = await registerClient(issuer, { metadata, clientMetadata, ...(options.scope ? { scope: options.scope } : {}), fetchFn: options.fetch });
  } catch (error) {
    throw failed(`${connection.id}: dynamic client registration at ${issuer} failed (${oauthProblem(error)})`, { cause: error, code: "registration_failed" });
  }
  const client: StoredClient = {
    client_id: registered.client_id,
    ...(registered.client_secret !== undefined ? { client_secret: registered.client_secret } : {}),
    ...(registered.client_id_issued_at !== undefined ? { client_id_issued_at: registered.client_id_issued_at } : {}),
    ...(registered.client_secret_expires_at !== undefined ? { client_secret_expires_at: registered.client_secret_expires_at } : {}),
    redirect_uris: registered.redirect_uris,
    ...(registered.token_endpoint_auth_method !== undefined ? { token_endpoint_auth_method: registered.token_endpoint_auth_method } : {}),
  };
  store.putClient(issuer, client, options.now);
  return { ...client, kind: "dynamic" };
}
