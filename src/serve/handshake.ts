// The MCP handshake (MCP lifecycle, "Initialization") as far as subs answers it before the SDK is
// loaded (src/serve/stdio.ts): which protocol revision to answer with, and what an `initialize`
// must carry to be answered at all.

/**
 * The revisions the MCP SDK speaks, newest first: its types.js SUPPORTED_PROTOCOL_VERSIONS and
 * LATEST_PROTOCOL_VERSION, written out because importing them loads every schema of the SDK
 * (test/serve-handshake.test.ts keeps them equal).
 */
export const LATEST_PROTOCOL_VERSION = "2025-11-25";
export const SUPPORTED_PROTOCOL_VERSIONS: readonly string[] = [LATEST_PROTOCOL_VERSION, "2025-06-18", "2025-03-26", "2024-11-05", "2024-10-07"];

/** A JSON object, as a JSON-RPC message's params and results are: not null, not an array. */
export const isObject = (value: unknown): value is Record<string, unknown> => typeof value === "object" && value !== null && !Array.isArray(value);

/** What an initialize must carry to be answered here (MCP schema, InitializeRequest); everything else in it is passed on as it came. */
export type InitializeParams = {
  protocolVersion: string;
  capabilities: Record<string, unknown>;
  clientInfo: { name: string } & Record<string, unknown>;
} & Record<string, unknown>;

/**
 * `params` as an initialize's, or what is wrong with them. Checked by hand rather than with zod:
 * this runs before the client has its answer, and loading zod was a tenth of serve's start-up
 * (docs/speed.md, "Serve start"); test/serve-handshake.test.ts holds it to the SDK's schema.
 */
export function initializeParams(params: unknown): { params: InitializeParams } | { problem: string } {
  if (!isObject(params)) return { problem: "params must be an object" };
  if (typeof params.protocolVersion !== "string") return { problem: "params.protocolVersion must be a string" };
  if (!isObject(params.capabilities)) return { problem: "params.capabilities must be an object" };
  if (!isObject(params.clientInfo)) return { problem: "params.clientInfo must be an object" };
  if (typeof params.clientInfo.name !== "string") return { problem: "params.clientInfo.name must be a string" };
  return { params: params as InitializeParams };
}

/**
 * The revision a server answers a client that asked for `requested` with: the same when it speaks
 * it, else its latest, which the client may accept or refuse (MCP lifecycle, "Version
 * Negotiation"; the SDK's Server does the same).
 */
export function answeredVersion(requested: string): string {
  return SUPPORTED_PROTOCOL_VERSIONS.includes(requested) ? requested : LATEST_PROTOCOL_VERSION;
}

/**
 * The revision to answer the client with in front of an upstream that answered `upstream`: the
 * one the client asked for when the upstream speaks it or a later one (the spec's rule: the same
 * version when supported), else the upstream's own, older one, which the client may accept or
 * refuse.
 */
export function negotiated(requested: string, upstream: string | undefined): string {
  const supported = (version: string | undefined): version is string => version !== undefined && SUPPORTED_PROTOCOL_VERSIONS.includes(version);
  if (supported(requested) && (!upstream || requested <= upstream)) return requested;
  if (supported(upstream)) return upstream;
  return LATEST_PROTOCOL_VERSION;
}
