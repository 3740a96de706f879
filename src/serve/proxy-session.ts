// `subs mcp proxy <id>`: one MCP session in front of one declared connection, with its
// stored credential (src/serve/proxy-server.ts, which loads the MCP SDK). What it answers to
// `initialize` is the upstream's answer, so over stdio the upstream's initialize is sent first,
// by hand (src/serve/upstream-handshake.ts), and the client answered from it before that server
// is built; the server then takes the upstream's session over.
import type { Config, ConnectionConfig } from "../config/types.ts";
import { learnt } from "../secrets.ts";
import { proxyInitializeResult, type ProxyContext, type ProxyOptions } from "./proxy-answer.ts";
import type { SessionFactory } from "./session.ts";
import type { UpstreamHandshake } from "../mcp/client-handshake.ts";
import { upstreamHandshake } from "./upstream-handshake.ts";

export type { ProxyContext, ProxyOptions } from "./proxy-answer.ts";

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
