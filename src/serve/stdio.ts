// Serves one MCP session over stdio, what every MCP client launches: the session's
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
  await new StdioSession(ctx, newSession()).run();
}

/** One session on stdin and stdout, from the first byte read to the server's close. */
class StdioSession {
  private readonly input: NodeJS.ReadableStream;
  private readonly output: NodeJS.WritableStream;
  private readonly cleanups: Array<() => void> = [];
  private end: () => void = () => {};
  private readonly ended = new Promise<void>((resolve) => (this.end = resolve));

  // Requests the server has read and neither answered nor seen cancelled: a client that writes
  // its requests and closes stdin (`… | subs agent serve x`) still gets every answer.
  private readonly unanswered = new Set<RequestId>();
  // Requests answered before the server was built, with what they were answered: the server's own
  // answer to each is not sent.
  private readonly answeredEarly = new Map<RequestId, { method: string }>();
  // stdin ended, and the server has read everything before its end.
  private inputEnded = false;

  // stdin as it came, until the server reads it (`sink`). Its end is passed on once the server has
  // read the rest.
  private held: Buffer[] | undefined = [];
  private heldBytes = 0;
  private sink: PassThrough | undefined;
  private inputDone = false;

  private corked = false;

  private opened: SessionServer | undefined;
  private failure: { error: unknown } | undefined;
  private opening: Promise<void> | undefined;

  // What is answered before the server is built: each complete line read, until the server is
  // being built. Lines are split as the SDK's reader splits them (shared/stdio.js ReadBuffer).
  private readonly sendEarly = { send: async (message: JSONRPCMessage) => void this.output.write(`${JSON.stringify(message)}\n`) };
  private scanning: boolean;
  private initializing = false;
  private partial: Buffer | undefined;

  constructor(
    private readonly ctx: Pick<Context, "protocolStreams" | "signal" | "stderr">,
    private readonly session: ReturnType<SessionFactory>,
  ) {
    const { input, output } = ctx.protocolStreams!();
    this.input = input;
    this.output = output;
    if (session.early) scrubbedSends(this.sendEarly, session.early.secrets);
    this.scanning = session.early !== undefined;
  }

  async run(): Promise<void> {
    const { ctx, input, output } = this;
    const end = () => this.end();
    // EPIPE: the client is gone. The listener stays: an error event without one ends the process.
    output.on("error", end);
    this.on(output, "close", end);
    if (ctx.signal.aborted) end();
    ctx.signal.addEventListener("abort", end, { once: true });
    this.cleanups.push(() => ctx.signal.removeEventListener("abort", end));

    this.on(input, "data", (chunk: Buffer) => {
      if (this.sink) return void this.sink.write(chunk);
      this.held!.push(chunk);
      this.heldBytes += chunk.length;
      if (this.scanning) this.scan(chunk);
      // More than the server would take in one go: let it judge (and refuse) that now.
      if (this.heldBytes > HELD_MAX_BYTES) void this.open();
    });
    const inputFinished = () => {
      this.inputDone = true;
      this.sink?.end();
    };
    this.on(input, "end", inputFinished);
    this.on(input, "close", inputFinished);
    this.on(input, "error", end);
    if (!this.session.early) void this.open();

    try {
      await this.ended;
    } finally {
      // Before the process exits (src/main.ts): what is batched is written now.
      this.flush();
      for (const cleanup of this.cleanups) cleanup();
      // Reading stdin no more, so nothing holds the process open.
      (input as Partial<Readable>).pause?.();
      if (this.opening) await this.opening;
      if (this.opened) {
        await this.opened.server.close().catch(() => {});
        await this.opened.close();
      }
    }
    if (this.failure) throw this.failure.error;
  }

  private on(emitter: NodeJS.EventEmitter, event: string, listener: Parameters<NodeJS.EventEmitter["on"]>[1]): void {
    emitter.on(event, listener);
    this.cleanups.push(() => emitter.off(event, listener));
  }

  private settled(id: RequestId | undefined): void {
    if (id === undefined || !this.unanswered.delete(id)) return;
    if (this.inputEnded && this.unanswered.size === 0) this.end();
  }

  // Messages written in one turn of the event loop (the answers to every upstream response read
  // in it) leave in one writev: a write to a pipe is a system call, and under load (docs/speed.md,
  // "Serving": 32 calls in flight) one per message was a large share of serve's CPU per call.
  private flush(): void {
    if (!this.corked) return;
    this.corked = false;
    (this.output as Partial<Writable>).uncork?.();
  }

  private batch(): void {
    const writable = this.output as Partial<Writable>;
    if (this.corked || typeof writable.cork !== "function") return;
    this.corked = true;
    writable.cork();
    setImmediate(() => this.flush());
  }

  private open(): Promise<void> {
    this.opening ??= this.connect().catch((error: unknown) => {
      this.failure = { error };
      this.end();
    });
    return this.opening;
  }

  /** Builds the session's server and hands it everything read so far, then the rest of stdin. */
  private async connect(): Promise<void> {
    this.scanning = false;
    const served = await this.session.open();
    this.opened = served;
    const { server } = served;
    const { StdioServerTransport } = await import("@modelcontextprotocol/sdk/server/stdio.js");
    const reading = new PassThrough();
    const transport = new StdioServerTransport(reading, this.output as Writable);
    await server.connect(transport);
    const previous = server.onclose;
    server.onclose = () => {
      previous?.();
      this.end();
    };
    // Wrapped after connect (which sets onmessage); the messages come later, from `reading`.
    const receive = transport.onmessage!.bind(transport);
    transport.onmessage = ((message: JSONRPCMessage) => {
      if ("method" in message && "id" in message && !this.answeredEarly.has(message.id)) this.unanswered.add(message.id);
      if ("method" in message && message.method === "notifications/cancelled") this.settled((message.params as { requestId?: RequestId } | undefined)?.requestId);
      receive(message);
    }) as typeof transport.onmessage;
    const send = transport.send.bind(transport);
    transport.send = async (message: JSONRPCMessage) => {
      if (!("method" in message) && "id" in message && message.id !== undefined && this.answeredEarly.has(message.id)) {
        const early = this.answeredEarly.get(message.id)!;
        this.answeredEarly.delete(message.id);
        // The server refused what the client was already told it accepted (an initialize the
        // SDK's schema finds fault with deeper than the early check looks): the session cannot go on.
        if ("error" in message) {
          this.ctx.stderr.write(`subs: the server refused the client's ${early.method} (${cut(message.error.message.replace(/\s+/g, " "), 300)}); ending the session\n`);
          this.end();
        }
        return;
      }
      this.batch();
      await send(message);
      if (!("method" in message) && "id" in message) this.settled(message.id as RequestId);
    };
    this.sink = reading;
    reading.on("end", () => {
      this.inputEnded = true;
      if (this.unanswered.size === 0) this.end();
    });
    // In the chunks they came in: the server's reader takes at most HELD_MAX_BYTES at once.
    for (const chunk of this.held!) reading.write(chunk);
    this.held = undefined;
    if (this.inputDone) reading.end();
  }

  private answer(id: RequestId, method: string, result: Record<string, unknown>): void {
    this.answeredEarly.set(id, { method });
    void this.sendEarly.send({ jsonrpc: "2.0", id, result } as JSONRPCMessage);
  }

  private scan(chunk: Buffer): void {
    this.partial = this.partial ? Buffer.concat([this.partial, chunk]) : chunk;
    for (let n = this.partial.indexOf(10); n >= 0 && this.scanning; n = this.partial.indexOf(10)) {
      const line = this.partial.toString("utf8", 0, n).replace(/\r$/, "");
      this.partial = this.partial.subarray(n + 1);
      this.answerEarly(line);
    }
  }

  private answerEarly(line: string): void {
    const message = request(line);
    // A notification (`notifications/initialized`) waits for the server with the rest.
    if (message && message.id === undefined) return;
    const id = message?.id;
    if (message?.method === "ping" && id !== undefined) return this.answer(id, "ping", {});
    // Anything else waits for the initialize answer, then for the server, which it opens.
    if (this.initializing) return;
    if (message?.method !== "initialize" || id === undefined) return void this.open();
    this.initializing = true;
    const checked = initializeParams(message.params);
    if (!("params" in checked)) return void this.open();
    this.session.early!.initialize(checked.params).then(
      (result) => {
        // Unless the server is being built already (the client sent too much to hold): it answers.
        if (result && !this.opening) this.answer(id, "initialize", result);
        void this.open();
      },
      () => void this.open(),
    );
  }
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
