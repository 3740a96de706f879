// JSON-RPC errors for the MCP servers subs serves. Thrown from a request handler, an
// Error with a numeric `code` (and `data`) is answered as that JSON-RPC error by the SDK's
// Protocol. Not an McpError: its message carries a "MCP error <code>: " prefix, which the client's
// own McpError would then repeat.
import type { McpError } from "@modelcontextprotocol/sdk/types.js";

export type RpcError = Error & { code: number; data?: unknown };

export function rpcError(code: number, message: string, data?: unknown): RpcError {
  return Object.assign(new Error(message), { code, ...(data !== undefined ? { data } : {}) });
}

/** The JSON-RPC error an upstream server answered, passed on as it answered it: code, message, data. */
export function passedOn(error: McpError): RpcError {
  const prefix = `MCP error ${error.code}: `;
  return rpcError(error.code, error.message.startsWith(prefix) ? error.message.slice(prefix.length) : error.message, error.data);
}
