// OAuth errors as short, secret-free text. The SDK's fallback error quotes the raw response body,
// which may hold anything the server sent back; only the OAuth error code and description are
// shown (RFC 6749 §5.2), and never more than a line.
import { OAuthError, ServerError } from "@modelcontextprotocol/sdk/server/auth/errors.js";
import { cut } from "../text/cut.ts";

export function oauthProblem(error: unknown): string {
  if (error instanceof ServerError) {
    const status = /^HTTP (\d{3})/.exec(error.message)?.[1];
    return status ? `HTTP ${status}` : "server_error";
  }
  if (error instanceof OAuthError) {
    const description = error.message ? `: ${cut(error.message.replace(/\s+/g, " "), 200)}` : "";
    return `${error.errorCode}${description}`;
  }
  if (error instanceof Error && (error.name === "ZodError" || error.constructor.name === "ZodError")) return "the server's answer is not a valid OAuth response";
  if (error instanceof Error) return cut(error.cause instanceof Error ? `${error.message}: ${error.cause.message}` : error.message, 200);
  return cut(String(error), 200);
}

/** An OAuth error that means the grant itself is dead (revoked, expired, or the client is gone):
 * retrying cannot help, only a new login can. */
export function grantRejected(error: unknown): boolean {
  if (!(error instanceof OAuthError) || error instanceof ServerError) return false;
  return ["invalid_grant", "invalid_client", "unauthorized_client"].includes(error.errorCode);
}
