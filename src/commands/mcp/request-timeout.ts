// What `subs mcp tools` and `subs mcp call` say when an MCP request goes unanswered: both take
// --request-timeout (src/commands/options.ts), and both point to it.
import { SubsError } from "../../errors.ts";

/**
 * The SDK's "no answer" (src/mcp/open.ts, code `timeout`) with the flag that waits longer: a slow
 * server, or a long tool, is not always a dead one.
 */
export function withRequestTimeoutHint(error: unknown): unknown {
  // Only the MCP request deadline (the SDK's RequestTimeout, -32001) is --request-timeout's: a
  // step-up's consent wait (--timeout) or an HTTP deadline (SUBS_HTTP_TIMEOUT) keeps its own hint.
  if (!(error instanceof SubsError) || error.code !== "timeout" || (error.cause as { code?: unknown } | undefined)?.code !== -32001) return error;
  return new SubsError(error.kind, error.message, { code: error.code, cause: error, hint: "check that the server is up, or wait longer with --request-timeout SECONDS" });
}
