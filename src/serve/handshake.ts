// The MCP handshake (MCP lifecycle, "Initialization") as far as subs answers it before the SDK is
// loaded (src/serve/stdio.ts): which protocol revision to answer with, and what an `initialize`
// must carry to be answered at all.
import { z } from "zod";
import { VERSION } from "../version.ts";

/** What subs calls itself as an MCP client (src/mcp/connect.ts, src/serve/upstream-handshake.ts). */
export const SUBS_CLIENT_INFO = { name: "subs", version: VERSION };

/**
 * The revisions the MCP SDK speaks, newest first: its types.js SUPPORTED_PROTOCOL_VERSIONS and
 * LATEST_PROTOCOL_VERSION, written out because importing them loads every schema of the SDK
 * (test/serve-handshake.test.ts keeps them equal).
 */
export const LATEST_PROTOCOL_VERSION = "2025-11-25";
export const SUPPORTED_PROTOCOL_VERSIONS: readonly string[] = [LATEST_PROTOCOL_VERSION, "2025-06-18", "2025-03-26", "2024-11-05", "2024-10-07"];

/** What an initialize must carry to be answered here; everything else in it is passed on as it came. */
const initializeParams = () =>
  z.looseObject({
    protocolVersion: z.string(),
    capabilities: z.looseObject({}),
    clientInfo: z.looseObject({ name: z.string() }),
  });
let schema: ReturnType<typeof initializeParams> | undefined;
export const InitializeParams = { safeParse: (value: unknown) => (schema ??= initializeParams()).safeParse(value) };
export type InitializeParams = z.output<ReturnType<typeof initializeParams>>;

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
