// Serves one MCP session over stdio, what every MCP client launches (issue 16): the session's
// server reads JSON-RPC from stdin and writes it to stdout, which carries nothing else. It ends
// when the client closes stdin (once every request it sent is answered), when stdout's reader goes
// away, when the transport closes, or when the context's signal aborts (Ctrl-C, SIGTERM:
// src/main.ts); then the session's upstream connections are closed. Knows nothing of what is
// served: `subs agent serve` and `subs mcp proxy` hand it their SessionFactory.
//
// A client waits for the answer to `initialize` before anything else, and a client that starts
// several servers at once (Claude Code does, at its start) waits for them all. Building the
// session's server loads the MCP SDK, which took as long as the rest of the start-up, so what the
// session can answer without it (src/serve/session.ts, `early`) is answered first: `initialize`
// and `ping`. Only then is the server built; what the client sent meanwhile waits, and the server
// reads all of it, in order, as if nothing had been answered: its answers to what was already
// answered are not sent again. So the server's state (the client's capabilities, `initialized`)
// is what it would have been, and every message it sends passes the same scrub.
import { PassThrough, type Readable, type Writable } from "node:stream";
import type { JSONRPCMessage, RequestId } from "@modelcontextprotocol/sdk/types.js";
import type { Context } from "../context.ts";
import { cut } from "../text/cut.ts";
import { initializeParams } from "./handshake.ts";
import { scrubbedSends, type SessionFactory, type SessionServer } from "./session.ts";

/** What may wait before the server reads it, as the SDK's own stdio transport allows (shared/stdio.js). */
const HELD_MAX_BYTES = 10 * 1024 * 1024;

export async function serveStdio(ctx: Pick<Context, "protocolStreams" | "signal" | "stderr">, newSession: SessionFactory): Promise<void> {
  if (!ctx.protocolStreams) throw new Error("this context offers no stdin and stdout to speak MCP on");
  const { input, output } = ctx.protocolStreams();
  const session = newSession();
  const cleanups: Array<() => void> = [];
  const on = (emitter: NodeJS.EventEmitter, event: string, listener: Parameters<NodeJS.EventEmitter["on"]>[1]) => {
    emitter.on(event, listener);
    cleanups.push(() => emitter.off(event, listener));
  };
  let end = () => {};
  const ended = new Promise<void>((resolve) => (end = resolve));
  // EPIPE: the client is gone. The listener stays: an error event without one ends the process.
  output.on("error", () => end());
  on(output, "close", end);
  if (ctx.signal.aborted) end();
  const onAbort = () => end();
  ctx.signal.addEventListener("abort", onAbort, { once: true });
  cleanups.push(() => ctx.signal.removeEventListener("abort", onAbort));

  // Requests the server has read and neither answered nor seen cancelled: a client that writes
  // its requests and closes stdin (`… | subs agent serve x`) still gets every answer.
  const unanswered = new Set<RequestId>();
  // Requests answered before the server was built, with what they were answered: the server's own
  // answer to each is not sent.
  const answeredEarly = new Map<RequestId, { method: string }>();
  // stdin ended, and the server has read everything before its end.
  let inputEnded = false;
  const settled = (id: RequestId | undefined) => {
    if (id === undefined || !unanswered.delete(id)) return;
    if (inputEnded && unanswered.size === 0) end();
  };

  // stdin as it came, until the server reads it (`sink`). Its end is passed on once the server has
  // read the rest.
  let held: Buffer[] | undefined = [];
  let heldBytes = 0;
  let sink: PassThrough | undefined;
  let inputDone = false;
  on(input, "data", (chunk: Buffer) => {
    if (sink) return void sink.write(chunk);
    held!.push(chunk);
    heldBytes += chunk.length;
    if (scanning) scan(chunk);
    // More than the server would take in one go: let it judge (and refuse) that now.
    if (heldBytes > HELD_MAX_BYTES) open();
  });
  const inputFinished = () => {
    inputDone = true;
    sink?.end();
  };
  on(input, "end", inputFinished);
  on(input, "close", inputFinished);
  on(input, "error", end);

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

  let opened: SessionServer | undefined;
  let failure: { error: unknown } | undefined;
  let opening: Promise<void> | undefined;
  const open = () =>
    (opening ??= (async () => {
      scanning = false;
      const served = await session.open();
      opened = served;
      const { server } = served;
      const { StdioServerTransport } = await import("@modelcontextprotocol/sdk/server/stdio.js");
      const reading = new PassThrough();
      const transport = new StdioServerTransport(reading, output as Writable);
      await server.connect(transport);
      const previous = server.onclose;
      server.onclose = () => {
        previous?.();
        end();
      };
      // Wrapped after connect (which sets onmessage); the messages come later, from `reading`.
      const receive = transport.onmessage!.bind(transport);
      transport.onmessage = ((message: JSONRPCMessage) => {
        if ("method" in message && "id" in message && !answeredEarly.has(message.id)) unanswered.add(message.id);
        if ("method" in message && message.method === "notifications/cancelled") settled((message.params as { requestId?: RequestId } | undefined)?.requestId);
        receive(message);
      }) as typeof transport.onmessage;
      const send = transport.send.bind(transport);
      transport.send = async (message: JSONRPCMessage) => {
        if (!("method" in message) && "id" in message && message.id !== undefined && answeredEarly.has(message.id)) {
          const early = answeredEarly.get(message.id)!;
          answeredEarly.delete(message.id);
          // The server refused what the client was already told it accepted (an initialize the
          // SDK's schema finds fault with deeper than the early check looks): the session cannot go on.
          if ("error" in message) {
            ctx.stderr.write(`subs: the server refused the client's ${early.method} (${cut(message.error.message.replace(/\s+/g, " "), 300)}); ending the session\n`);
            end();
          }
          return;
        }
        batch();
        await send(message);
        if (!("method" in message) && "id" in message) settled(message.id as RequestId);
      };
      sink = reading;
      reading.on("end", () => {
        inputEnded = true;
        if (unanswered.size === 0) end();
      });
      // In the chunks they came in: the server's reader takes at most HELD_MAX_BYTES at once.
      for (const chunk of held!) reading.write(chunk);
      held = undefined;
      if (inputDone) reading.end();
    })().catch((error: unknown) => {
      failure = { error };
      end();
    }));

  // What is answered before the server is built: each complete line read, until the server is
  // being built. Lines are split as the SDK's reader splits them (shared/stdio.js ReadBuffer).
  const early = session.early;
  const sendEarly = { send: async (message: JSONRPCMessage) => void output.write(`${JSON.stringify(message)}\n`) };
  if (early) scrubbedSends(sendEarly, early.secrets);
  let scanning = early !== undefined;
  let initializing = false;
  let partial: Buffer | undefined;
  const answer = (id: RequestId, method: string, result: Record<string, unknown>) => {
    answeredEarly.set(id, { method });
    void sendEarly.send({ jsonrpc: "2.0", id, result } as JSONRPCMessage);
  };
  const scan = (chunk: Buffer) => {
    partial = partial ? Buffer.concat([partial, chunk]) : chunk;
    for (let n = partial.indexOf(10); n >= 0 && scanning; n = partial.indexOf(10)) {
      const line = partial.toString("utf8", 0, n).replace(/\r$/, "");
      partial = partial.subarray(n + 1);
      answerEarly(line);
    }
  };
  const answerEarly = (line: string) => {
    const message = request(line);
    // A notification (`notifications/initialized`) waits for the server with the rest.
    if (message && message.id === undefined) return;
    const id = message?.id;
    if (message?.method === "ping" && id !== undefined) return answer(id, "ping", {});
    // Anything else waits for the initialize answer, then for the server, which it opens.
    if (initializing) return;
    if (message?.method !== "initialize" || id === undefined) return void open();
    initializing = true;
    const checked = initializeParams(message.params);
    if (!("params" in checked)) return void open();
    early!.initialize(checked.params).then(
      (result) => {
        // Unless the server is being built already (the client sent too much to hold): it answers.
        if (result && !opening) answer(id, "initialize", result);
        open();
      },
      () => open(),
    );
  };
  if (!early) open();

  try {
    await ended;
  } finally {
    // Before the process exits (src/main.ts): what is batched is written now.
    flush();
    for (const cleanup of cleanups) cleanup();
    // Reading stdin no more, so nothing holds the process open.
    (input as Partial<Readable>).pause?.();
    if (opening) await opening;
    if (opened) {
      await opened.server.close().catch(() => {});
      await opened.close();
    }
  }
  if (failure) throw failure.error;
}

/** A JSON-RPC request or notification, as far as deciding whether it can be answered early needs. */
function request(line: string): { id?: RequestId; method: string; params?: unknown } | undefined {
  let message: unknown;
  try {
    message = JSON.parse(line);
  } catch {
    return undefined;
  }
  if (message === null || typeof message !== "object" || Array.isArray(message)) return undefined;
  const { jsonrpc, id, method, params } = message as Record<string, unknown>;
  if (jsonrpc !== "2.0" || typeof method !== "string") return undefined;
  if (!("id" in message)) return { method, params };
  // The ids the SDK's schema takes (RequestIdSchema): a string or an integer.
  if (typeof id !== "string" && !Number.isInteger(id)) return undefined;
  return { id: id as RequestId, method, params };
}
