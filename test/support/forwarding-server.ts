// A throwaway forwarder, for tests only: serveHttp in front of one upstream MCP server,
// each session its own SDK Client to it, every request and notification passed on both ways. It
// stands in for `subs mcp proxy <id> --http` so scripts/conformance-server.mjs --via can be
// exercised before that command exists; it is not a product feature and knows nothing of
// credentials.
//
//   node --import tsx test/support/forwarding-server.ts <upstream-url> --http [HOST:]PORT --token-file PATH
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { Server } from "@modelcontextprotocol/sdk/server/index.js";
import { ResultSchema, type Notification, type ProgressToken } from "@modelcontextprotocol/sdk/types.js";
import { processContext } from "../../src/context.ts";
import { parseHttpAddress } from "../../src/serve/address.ts";
import { serveHttp } from "../../src/serve/http.ts";
import type { SessionFactory, SessionServer } from "../../src/serve/session.ts";

/** Long tool calls (the conformance suite's waits are seconds): the SDK's 60 s default is enough, but progress resets it. */
const REQUEST_OPTIONS = { timeout: 300_000, resetTimeoutOnProgress: true };

export function forwardingSessions(upstream: URL): SessionFactory {
  const open = async (): Promise<SessionServer> => {
    const client = new Client({ name: "subs-test-forwarder", version: "0.0.0" }, { capabilities: { sampling: {}, elicitation: {}, roots: { listChanged: true } } });
    await client.connect(new StreamableHTTPClientTransport(upstream));
    const capabilities = client.getServerCapabilities() ?? {};
    const instructions = client.getInstructions();
    const server = new Server(client.getServerVersion() ?? { name: "upstream", version: "0.0.0" }, { capabilities, ...(instructions ? { instructions } : {}) });
    // The SDK answers logging/setLevel itself when logging is declared; the upstream must see it.
    server.removeRequestHandler("logging/setLevel");
    server.fallbackRequestHandler = async (request, extra) => {
      const token: ProgressToken | undefined = request.params?._meta?.progressToken;
      return client.request({ method: request.method, params: request.params }, ResultSchema, {
        ...REQUEST_OPTIONS,
        signal: extra.signal,
        // The upstream's progress comes back under the client's own token; the downstream
        // client knows only the token it sent.
        ...(token !== undefined
          ? { onprogress: (progress) => void extra.sendNotification({ method: "notifications/progress", params: { ...progress, progressToken: token } }) }
          : {}),
      });
    };
    server.fallbackNotificationHandler = async (notification: Notification) => {
      await client.notification(notification as Parameters<Client["notification"]>[0]);
    };
    client.fallbackRequestHandler = async (request, extra) => server.request({ method: request.method, params: request.params }, ResultSchema, { ...REQUEST_OPTIONS, signal: extra.signal });
    client.fallbackNotificationHandler = async (notification: Notification) => {
      await server.notification(notification as Parameters<Server["notification"]>[0]);
    };
    return { server, close: () => client.close() };
  };
  return () => ({ open });
}

async function main(argv: string[]): Promise<void> {
  const upstream = argv[0];
  const http = argv[argv.indexOf("--http") + 1];
  const tokenFile = argv.includes("--token-file") ? argv[argv.indexOf("--token-file") + 1] : undefined;
  if (!upstream || !argv.includes("--http") || !http) throw new Error("usage: forwarding-server.ts <upstream-url> --http [HOST:]PORT [--token-file PATH]");
  const controller = new AbortController();
  for (const signal of ["SIGINT", "SIGTERM"] as const) process.once(signal, () => controller.abort());
  // The forwarder's own requests go through the SDK's transport; the context's fetch sends none.
  const ctx = await processContext(controller.signal, globalThis.fetch);
  await serveHttp(ctx, { ...parseHttpAddress(http), ...(tokenFile ? { tokenFile } : {}), newSession: forwardingSessions(new URL(upstream)) });
}

if (import.meta.url === `file://${process.argv[1]}`) {
  main(process.argv.slice(2)).then(
    () => process.exit(0),
    (error: unknown) => {
      process.stderr.write(`forwarding-server: ${error instanceof Error ? error.message : String(error)}\n`);
      process.exit(1);
    },
  );
}
