// Serves one MCP session over stdio, what every MCP client launches (issue 16): the session's
// server reads JSON-RPC from stdin and writes it to stdout, which carries nothing else. It ends
// when the client closes stdin (once every request it sent is answered), when stdout's reader goes
// away, when the transport closes, or when the context's signal aborts (Ctrl-C, SIGTERM:
// src/main.ts); then the session's upstream connections are closed. Knows nothing of what is
// served: `subs agent serve` and `subs mcp proxy` hand it their SessionFactory.
import type { Readable, Writable } from "node:stream";
import { StdioServerTransport } from "@modelcontextprotocol/sdk/server/stdio.js";
import type { JSONRPCMessage } from "@modelcontextprotocol/sdk/types.js";
import type { Context } from "../context.ts";
import type { SessionFactory } from "./session.ts";

export async function serveStdio(ctx: Pick<Context, "protocolStreams" | "signal">, factory: SessionFactory): Promise<void> {
  if (!ctx.protocolStreams) throw new Error("this context offers no stdin and stdout to speak MCP on");
  const { input, output } = ctx.protocolStreams();
  const session = await factory();
  const { server } = session;
  const cleanups: Array<() => void> = [];
  // Requests the client sent and has neither been answered nor cancelled: a client that writes
  // its requests and closes stdin (`… | subs agent serve x`) still gets every answer.
  const unanswered = new Set<string | number>();
  let inputEnded = false;
  let end = () => {};
  const ended = new Promise<void>((resolve) => {
    end = resolve;
    const onInputEnd = () => {
      inputEnded = true;
      if (unanswered.size === 0) resolve();
    };
    const on = (emitter: NodeJS.EventEmitter, event: string, listener: () => void) => {
      emitter.on(event, listener);
      cleanups.push(() => emitter.off(event, listener));
    };
    on(input, "end", onInputEnd);
    on(input, "close", onInputEnd);
    on(input, "error", resolve);
    // EPIPE: the client is gone. The listener stays: an error event without one ends the process.
    output.on("error", () => resolve());
    on(output, "close", resolve);
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
  // Messages written in one turn of the event loop (the answers to every upstream response read
  // in it) leave in one writev: a write to a pipe is a system call, and under load (issue 16,
  // "Speed": 32 calls in flight) one per message was a large share of serve's CPU per call.
  const writable = output as Partial<Writable>;
  let corked = false;
  const flush = () => {
    if (!corked) return;
    corked = false;
    writable.uncork?.();
  };
  const batch = () => {
    if (corked || typeof writable.cork !== "function") return;
    corked = true;
    writable.cork();
    setImmediate(flush);
  };
  const settled = (id: string | number | undefined) => {
    if (id === undefined || !unanswered.delete(id)) return;
    if (inputEnded && unanswered.size === 0) end();
  };
  try {
    if (!ctx.signal.aborted) {
      const transport = new StdioServerTransport(input as Readable, output as Writable);
      await server.connect(transport);
      // Wrapped after connect (which sets onmessage); stdin's data events come later, as macrotasks.
      const receive = transport.onmessage!.bind(transport);
      transport.onmessage = ((message: JSONRPCMessage) => {
        if ("method" in message && "id" in message) unanswered.add(message.id);
        if ("method" in message && message.method === "notifications/cancelled") settled((message.params as { requestId?: string | number } | undefined)?.requestId);
        receive(message);
      }) as typeof transport.onmessage;
      const send = transport.send.bind(transport);
      transport.send = async (message: JSONRPCMessage) => {
        batch();
        await send(message);
        if (!("method" in message) && "id" in message) settled(message.id as string | number);
      };
    }
    await ended;
  } finally {
    // Before the process exits (src/main.ts): what is batched is written now.
    flush();
    for (const cleanup of cleanups) cleanup();
    // Closing the transport stops reading stdin, so nothing holds the process open.
    await server.close().catch(() => {});
    await session.close();
  }
}
