// Which OAuth client subs presents to an authorization server, in the spec's order: pre-registered
// (`oauth.client_id`), a Client ID Metadata Document (`oauth.client_metadata_url`, when the server
// says it supports them), dynamic registration (RFC 7591). Registrations are stored per issuer and
// reused (MCP authorization 2026-07-28, "Client Registration").
import { registerClient } from "@modelcontextprotocol/sdk/client/auth.js";
import type { AuthorizationServerMetadata, OAuthClientInformationFull } from "@modelcontextprotocol/sdk/shared/auth.js";
import type { ConnectionConfig } from "../config/types.ts";
import { failed, usage } from "../errors.ts";
import type { StoredClient } from "../store/schema.ts";
import type { Store } from "../store/store.ts";
import { VERSION } from "../version.ts";
import { oauthProblem } from "./errors.ts";

export type ClientKind = "preregistered" | "metadata_document" | "dynamic";

/** What a credential row keeps of its client (`client_json`). A pre-registered client's secret is
 * never stored: it is read from `$client_secret_env` each time it is needed. */
export type CredentialClient = StoredClient & { kind?: ClientKind };

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

export async function chooseClient(options: {
  connection: ConnectionConfig;
  issuer: string;
  metadata: AuthorizationServerMetadata;
  redirectUri: string;
  /** --port was given: the redirect URI must be registered exactly. */
  fixedPort?: boolean;
  scope: string | undefined;
  store: Store;
  env: Readonly<Record<string, string | undefined>>;
  fetch: typeof globalThis.fetch;
  now: number;
}): Promise<{ client: CredentialClient; reused: boolean }> {
  const { connection, metadata, issuer, store } = options;
  const oauth = connection.oauth;
  if (oauth?.clientId) {
    // The secret's variable is remembered so a later revocation (after the section is deleted
    // from the file) can still authenticate; the secret itself is never stored.
    const client: CredentialClient = { client_id: oauth.clientId, kind: "preregistered", ...(oauth.clientSecretEnv ? { client_secret_env: oauth.clientSecretEnv } : {}) };
    // Check the secret is there before the person consents, not after.
    presentedClient(client, connection, options.env);
    return { client, reused: false };
  }
  if (oauth?.clientMetadataUrl && metadata.client_id_metadata_document_supported === true) {
    return { client: { client_id: oauth.clientMetadataUrl, kind: "metadata_document" }, reused: false };
  }
  const stored = store.getClient(issuer);
  // RFC 7591 §3.2.1: a client secret may expire (0 means never); then register anew.
  const expired = stored?.client_secret_expires_at !== undefined && stored.client_secret_expires_at !== 0 && stored.client_secret_expires_at * 1000 <= options.now;
  // With --port the person is matching a server that may compare redirect URIs exactly (not every
  // server allows any loopback port, RFC 8252 §7.3): a registration for another port is replaced.
  const otherRedirect = options.fixedPort === true && stored?.redirect_uris !== undefined && !stored.redirect_uris.includes(options.redirectUri);
  if (stored && !expired && !otherRedirect) return { client: { ...stored, kind: "dynamic" }, reused: true };
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
  return { client: { ...client, kind: "dynamic" }, reused: false };
}
