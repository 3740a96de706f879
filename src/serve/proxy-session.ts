// `subs mcp proxy <id>` (issue 16): one MCP session in front of one declared connection, with its
// stored credential (src/serve/proxy-server.ts, which loads the MCP SDK). What it answers to
// `initialize` is the upstream's answer, so over stdio the upstream's initialize is sent first,
// by hand (src/serve/upstream-handshake.ts), and the client answered from it before that server
// is built; the server then takes the upstream's session over.
import type { InitializeResult, ServerCapabilities } from "@modelcontextprotocol/sdk/types.js";
import type { Config, ConnectionConfig } from "../config/types.ts";
import type { Context } from "../context.ts";
import type { SubsError } from "../errors.ts";
import { learnt } from "../secrets.ts";
import type { Reporter } from "../report.ts";
import { negotiated } from "./handshake.ts";
import type { SessionFactory } from "./session.ts";
import { upstreamHandshake, type UpstreamHandshake, type UpstreamInitializeResult } from "./upstream-handshake.ts";

export type ProxyOptions = {
  /** stderr: the one-line notices of a session (connected, could not connect, upstream gone). */
  reporter: Reporter;
  /** The upstream could not be opened at a session's `initialize` (needs a login, unreachable…). */
  onUnavailable?: (error: SubsError) => void;
  /** --debug shows every HTTP exchange, which only the SDK's client's requests do: no initialize by hand. */
  debug?: boolean;
};

export type ProxyContext = Pick<Context, "env" | "fetch" | "now" | "signal" | "secrets">;

export function proxySessionFactory(ctx: ProxyContext, config: Config, connection: ConnectionConfig, options: ProxyOptions): SessionFactory {
  return () => {
    // Every credential this session sends is learnt before it is sent, and removed from everything
    // the client receives; `run` scrubs stderr of the same secrets.
    const session = learnt(ctx);
    let handshake: Promise<UpstreamHandshake | undefined> | undefined;
    return {
      ...(options.debug
        ? {}
        : {
            early: {
              secrets: session.secrets,
              async initialize(params) {
                handshake = upstreamHandshake({ ctx, config, connection, reporter: options.reporter, secrets: session.secrets, capabilities: params.capabilities });
                const opened = await handshake;
                return opened && proxyInitializeResult(params.protocolVersion, opened.result, connection);
              },
            },
          }),
      open: async () => (await import("./proxy-server.ts")).proxySession(ctx, config, connection, options, session, handshake),
    };
  };
}

/**
 * The proxy's answer to its client's initialize: the upstream's, but for the revision, which is
 * negotiated with both (negotiated). The upstream's own name: what a client shows is the server it
 * is talking to.
 */
export function proxyInitializeResult(
  requestedVersion: string,
  upstream: Partial<Pick<UpstreamInitializeResult, "protocolVersion" | "capabilities" | "serverInfo" | "instructions">>,
  connection: ConnectionConfig,
): InitializeResult {
  return {
    protocolVersion: negotiated(requestedVersion, upstream.protocolVersion),
    capabilities: (upstream.capabilities ?? {}) as ServerCapabilities,
    serverInfo: upstream.serverInfo ?? { name: connection.id, version: "unknown" },
    ...(upstream.instructions ? { instructions: upstream.instructions } : {}),
  };
}
