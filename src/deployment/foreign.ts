// What the deployment says of a foreign server's failure. Every server it talks to is named by one
// of its users (an MCP server's url, the endpoints that server's metadata names), so a failure's
// text is the server's to choose: a raw body (an internal admin page, a password), the client
// secret, code or verifier it was sent and echoes back, escape sequences. An API answer, a poll's
// status and a log line carry only a short summary: the HTTP status, the OAuth `error` code
// (RFC 6749 section 5.2), and an `error_description` or a JSON-RPC message made visible, cut short
// and scrubbed of every secret of that exchange.
import { OAuthError, ServerError } from "@modelcontextprotocol/sdk/server/auth/errors.js";
import { addressRefusal, ALLOW_PRIVATE_HINT } from "../http/address-refusal.ts";
import { errorCode, isUntrustedCertificate, UNTRUSTED_CERTIFICATE_HINT } from "../http/guarded-fetch.ts";
import { SubsError } from "../errors.ts";
import type { Secrets } from "../secrets.ts";
import { cut } from "../text/cut.ts";
import { escaped } from "../text/unsafe.ts";

/** Longer than any description a person needs; short enough that no page fits. */
const MAX_TEXT = 200;

/** A server's text, one line: control characters made visible, cut, then scrubbed (a cut can end inside a secret: Secrets.scrub knows). */
export function foreignText(text: string, secrets: Pick<Secrets, "scrub">, max = MAX_TEXT): string {
  return secrets.scrub(cut(escaped(text.replace(/\s+/g, " ").trim()), max));
}

/** An OAuth `error` code as RFC 6749 section 5.2 allows it (%x20-21 / %x23-5B / %x5D-7E), else a word that says it was not one. */
export function oauthErrorCode(text: string): string {
  return /^[\x20\x21\x23-\x5b\x5d-\x7e]{1,64}$/.test(text) ? text : "invalid_error_code";
}

/** A failed exchange with a server (an OAuth request, an MCP request), summarised for its caller. */
export function foreignProblem(error: unknown, secrets: Pick<Secrets, "scrub">): string {
  const refusal = addressRefusal(error);
  if (refusal) return `${refusal.message}; ${ALLOW_PRIVATE_HINT}`;
  // The handshake refused the server's certificate: the deployment's operator decides what it trusts.
  if (error instanceof SubsError && error.code === "untrusted_certificate") return `${error.message}. The deployment's operator can ${UNTRUSTED_CERTIFICATE_HINT}`;
  if (isUntrustedCertificate(error)) return `its certificate is not trusted (${errorCode(error)}); nothing was sent. The deployment's operator can ${UNTRUSTED_CERTIFICATE_HINT}`;
  // The SDK's answer to an error body it cannot parse quotes the whole body: its status only.
  if (error instanceof ServerError) return /^HTTP (\d{3})/.exec(error.message)?.[0] ?? "server_error";
  if (error instanceof OAuthError) {
    const code = oauthErrorCode(error.errorCode);
    return error.message ? `${code}: ${foreignText(error.message, secrets)}` : code;
  }
  if (!(error instanceof Error)) return foreignText(String(error), secrets);
  if (error.name === "ZodError" || error.constructor.name === "ZodError") return "its answer is not a valid OAuth response";
  // The MCP SDK's transport error quotes the answer's body after the status.
  const status = (error as { code?: unknown }).code;
  if (error.message.startsWith("Streamable HTTP error:") && typeof status === "number") return `HTTP ${status}`;
  // A JSON-RPC error: its code, and its message as a description.
  if (error.name === "McpError") return foreignText(error.message, secrets);
  const cause = error.cause instanceof Error ? `: ${error.cause.message}` : "";
  return foreignText(`${error.message}${cause}`, secrets);
}
