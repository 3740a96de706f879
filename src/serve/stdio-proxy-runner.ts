// Runs one MCP session over stdin/stdout (what every MCP client launches; issue 16). Minimal, for
// `subs mcp proxy` until the generic stdio runner of `subs agent serve` takes its place. The
// session ends when stdin closes (the client went away), when the context's signal aborts
// (Ctrl-C, SIGTERM: src/main.ts), or when the session's server closes itself (its upstream went
// away); then the session closes its upstream before the process exits.
import type { Readable, Writable } from "node:stream";
import type { Context } from "../context.ts";
import type { SessionFactory } from "./session.ts";

export async function serveStdio(ctx: Pick<Context, "protocolStreams" | "signal">, factory: SessionFactory): Promise<void> {
  if (!ctx.protocolStreams) throw new Error("this context offers no stdin/stdout to speak MCP on");
  const { input, output } = ctx.protocolStreams();
  const { StdioServerTransport } = await import("@modelcontextprotocol/sdk/server/stdio.js");
  const session = await factory();
  let end: () => void = () => {};
  const ended = new Promise<void>((resolve) => (end = resolve));
  input.once("end", end);
  input.once("close", end);
  // The client went away while an answer was being written (EPIPE): the same end, not a crash.
  output.on("error", end);
  ctx.signal.addEventListener("abort", end, { once: true });
  if (ctx.signal.aborted) end();
  session.server.onclose = end;
  try {
    await session.server.connect(new StdioServerTransport(input as Readable, output as Writable));
    await ended;
  } finally {
    ctx.signal.removeEventListener("abort", end);
    await session.close().catch(() => {});
    await session.server.close().catch(() => {});
  }
}
