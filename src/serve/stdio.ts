// Serves one MCP session over stdio, what every MCP client launches (issue 16): the session's
// server reads JSON-RPC from stdin and writes it to stdout, which carries nothing else. It ends
// when the client closes stdin, when stdout's reader goes away, when the transport closes, or when
// the context's signal aborts (Ctrl-C, SIGTERM: src/main.ts); then the session's upstream
// connections are closed. Knows nothing of what is served: `subs agent serve` and
// `subs mcp proxy` hand it their SessionFactory.
import type { Readable, Writable } from "node:stream";
import { StdioServerTransport } from "@modelcontextprotocol/sdk/server/stdio.js";
import type { Context } from "../context.ts";
import type { SessionFactory } from "./session.ts";

export async function serveStdio(ctx: Pick<Context, "protocolStreams" | "signal">, factory: SessionFactory): Promise<void> {
  if (!ctx.protocolStreams) throw new Error("this context offers no stdin and stdout to speak MCP on");
  const { input, output } = ctx.protocolStreams();
  const session = await factory();
  const { server } = session;
  const cleanups: Array<() => void> = [];
  const ended = new Promise<void>((resolve) => {
    const on = (emitter: NodeJS.EventEmitter, event: string) => {
      emitter.on(event, resolve);
      cleanups.push(() => emitter.off(event, resolve));
    };
    on(input, "end");
    on(input, "close");
    on(input, "error");
    // EPIPE: the client is gone. The listener stays: an error event without one ends the process.
    output.on("error", () => resolve());
    on(output, "close");
    if (ctx.signal.aborted) resolve();
    const onAbort = () => resolve();
    ctx.signal.addEventListener("abort", onAbort, { once: true });
    cleanups.push(() => ctx.signal.removeEventListener("abort", onAbort));
    const previous = server.onclose;
    server.onclose = () => {
      previous?.();
      resolve();
    };
  });
  try {
    if (!ctx.signal.aborted) await server.connect(new StdioServerTransport(input as Readable, output as Writable));
    await ended;
  } finally {
    for (const cleanup of cleanups) cleanup();
    // Closing the transport stops reading stdin, so nothing holds the process open.
    await server.close().catch(() => {});
    await session.close();
  }
}
