// The request of RFC 7009 §2.1, shared by the two places that send it: revoking a credential
// (revoke.ts) and asking whether a stored registration is still known before a login (client.ts).
import { selectClientAuthMethod } from "@modelcontextprotocol/sdk/client/auth.js";
import type { AuthorizationServerMetadata } from "@modelcontextprotocol/sdk/shared/auth.js";

/**
 * One RFC 7009 revocation request, the client authenticated as the server allows (§2.1). Also how
 * login asks whether a stored registration is still known (client.ts).
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
