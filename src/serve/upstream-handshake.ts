// The upstream's `initialize` for `subs mcp proxy` over stdio, sent by hand (MCP Streamable HTTP,
// "Sending Messages to the Server"). The proxy's answer to its client's initialize is the
// upstream's, and the MCP SDK's client with Node's fetch behind it took longer to load than the
// rest of the proxy's start-up: here it is node:http alone. Only the plain case is done: a POST
// with the credential openConnection would send first (src/mcp/credential.ts), answered 200 with
// the result as JSON or as the first message of an event stream. Anything else (a 401, a redirect,
// an error, a server of the 2024-11-05 revision, an answer too large) gives undefined, and the
// SDK's client sends the initialize again and handles it as it handles every other
// (src/mcp/open.ts), with the messages that go with it. A session that did open is taken over by
// that client (src/mcp/connect.ts, `adopt`), never opened twice.
import type { IncomingHttpHeaders } from "node:http";
import type { Config, ConnectionConfig } from "../config/types.ts";
import type { Context } from "../context.ts";
import { answerLimitMiB } from "../mcp/answer-cap.ts";
import { SUBS_CLIENT_INFO, type UpstreamHandshake, type UpstreamInitializeResult } from "../mcp/client-handshake.ts";
import { fileHeaders, firstCredential } from "../mcp/credential.ts";
import type { Reporter } from "../report.ts";
import { isObject, LATEST_PROTOCOL_VERSION, SUPPORTED_PROTOCOL_VERSIONS } from "./handshake.ts";

/**
 * `result` when it has what the proxy reads of an initialize result (MCP schema, InitializeResult),
 * the rest as it came. By hand, not with zod, for the reason initializeParams gives (handshake.ts);
 * test/serve-handshake.test.ts holds it to the SDK's schema.
 */
export function upstreamInitializeResult(result: unknown): UpstreamInitializeResult | undefined {
  if (!isObject(result) || typeof result.protocolVersion !== "string" || !isObject(result.capabilities)) return undefined;
  const { serverInfo, instructions } = result;
  if (!isObject(serverInfo) || typeof serverInfo.name !== "string" || typeof serverInfo.version !== "string") return undefined;
  if (instructions !== undefined && typeof instructions !== "string") return undefined;
  return result as UpstreamInitializeResult;
}

/** The SDK's first request id, which the client taking the session over gives its initialize. */
const INITIALIZE_ID = 0;

export type UpstreamHandshakeOptions = {
  ctx: Pick<Context, "env" | "fetch" | "now" | "signal">;
  config: Config;
  connection: ConnectionConfig;
  reporter: Reporter;
  /** Learns the credential before it is sent, so nothing the server says hands it to the client. */
  secrets: { add(value: string | null | undefined): void };
  /** The proxy's client's capabilities: the upstream is told all of them. */
  capabilities: Record<string, unknown>;
};

/** The upstream's answer to an initialize sent by hand, or undefined for the SDK's client to do it all. */
export async function upstreamHandshake(options: UpstreamHandshakeOptions): Promise<UpstreamHandshake | undefined> {
  const { ctx, connection } = options;
  // A local server is started by the SDK's client, not greeted by hand.
  if (connection.url === undefined) return undefined;
  try {
    const url = new URL(connection.url);
    if (url.protocol !== "http:" && url.protocol !== "https:") return undefined;
    const credential = await firstCredential(options);
    if (!credential || ctx.signal.aborted) return undefined;
    const headers: Record<string, string> = {
      "content-type": "application/json",
      accept: "application/json, text/event-stream",
      // What src/http/mcp-fetch.ts sends every MCP request with.
      "user-agent": "node",
      "accept-encoding": "identity",
    };
    // The file's headers, then the credential: what openConnection sends (src/mcp/open.ts).
    for (const [name, value] of Object.entries(fileHeaders({ env: ctx.env, secrets: options.secrets }, connection))) headers[name.toLowerCase()] = value;
    if (credential.authorization) {
      options.secrets.add(/^\S+\s+(\S+)$/.exec(credential.authorization)?.[1]);
      headers.authorization = credential.authorization;
    }
    const body = JSON.stringify({
      jsonrpc: "2.0",
      id: INITIALIZE_ID,
      method: "initialize",
      params: { protocolVersion: LATEST_PROTOCOL_VERSION, capabilities: options.capabilities, clientInfo: SUBS_CLIENT_INFO },
    });
    return await post(url, headers, body, Math.floor(answerLimitMiB(ctx.env) * 1024 * 1024), ctx.signal);
  } catch {
    return undefined;
  }
}

function post(url: URL, headers: Record<string, string>, body: string, maxBytes: number, signal: AbortSignal): Promise<UpstreamHandshake | undefined> {
  return (url.protocol === "https:" ? import("node:https") : import("node:http")).then(
    ({ request }) =>
      new Promise((resolve) => {
        let done = false;
        const finish = (value: UpstreamHandshake | undefined) => {
          if (done) return;
          done = true;
          signal.removeEventListener("abort", onAbort);
          // Read to its end or not needed further: either way this exchange is over.
          req.destroy();
          resolve(value);
        };
        const onAbort = () => finish(undefined);
        // A connection of its own, closed once answered: nothing of it holds the process open.
        const req = request(url, { method: "POST", headers: { ...headers, "content-length": String(Buffer.byteLength(body)) }, agent: false }, (res) => {
          const read = reader(res.headers);
          if (res.statusCode !== 200 || !read) return finish(undefined);
          const sessionId = one(res.headers["mcp-session-id"]);
          const found = (message: unknown) => {
            const result = answered(message);
            finish(result && { result, ...(sessionId !== undefined ? { sessionId } : {}) });
          };
          let bytes = 0;
          res.on("data", (chunk: Buffer) => {
            bytes += chunk.length;
            if (bytes > maxBytes) return finish(undefined);
            read.add(chunk, found);
          });
          res.on("end", () => read.end(found));
          res.on("error", () => finish(undefined));
          res.on("close", () => finish(undefined));
        });
        req.on("error", () => finish(undefined));
        if (signal.aborted) return finish(undefined);
        signal.addEventListener("abort", onAbort, { once: true });
        req.end(body);
      }),
  );
}

function one(value: string | string[] | undefined): string | undefined {
  return Array.isArray(value) ? value[0] : value;
}

type Reader = { add(chunk: Buffer, found: (message: unknown) => void): void; end(found: (message: unknown) => void): void };

/** Reads the answer's messages by its content type: JSON (one message or a batch) or an event stream. */
function reader(headers: IncomingHttpHeaders): Reader | undefined {
  const type = (headers["content-type"] ?? "").toLowerCase();
  if (type.startsWith("application/json")) {
    const chunks: Buffer[] = [];
    return {
      add: (chunk) => void chunks.push(chunk),
      end: (found) => {
        let parsed: unknown;
        try {
          parsed = JSON.parse(Buffer.concat(chunks).toString("utf8"));
        } catch {
          return found(undefined);
        }
        found(Array.isArray(parsed) ? parsed.find((m) => (m as { id?: unknown } | null)?.id === INITIALIZE_ID) : parsed);
      },
    };
  }
  if (type.startsWith("text/event-stream")) return eventStream();
  return undefined;
}

/**
 * The first message of an event stream (HTML Living Standard, "Server-sent events": lines end in
 * CRLF, LF or CR; `data` lines of one event are joined with LF; an event with no data is not
 * dispatched, as the empty event a resumable server starts with). Only a `message` event counts,
 * and the first is taken: the answer, or something this plain path does not handle.
 */
function eventStream(): Reader {
  const decoder = new TextDecoder();
  let buffer = "";
  let data: string[] = [];
  let event = "";
  const lines = /\r\n|\r|\n/g;
  return {
    add(chunk, found) {
      buffer += decoder.decode(chunk, { stream: true });
      let start = 0;
      lines.lastIndex = 0;
      for (let match = lines.exec(buffer); match; match = lines.exec(buffer)) {
        // A CR at the end may be the first half of a CRLF.
        if (match[0] === "\r" && match.index === buffer.length - 1) break;
        const line = buffer.slice(start, match.index);
        start = lines.lastIndex;
        if (line === "") {
          const text = data.join("\n");
          const type = event || "message";
          data = [];
          event = "";
          if (text === "" || type !== "message") continue;
          let message: unknown;
          try {
            message = JSON.parse(text);
          } catch {}
          return found(message);
        }
        if (line.startsWith(":")) continue;
        const colon = line.indexOf(":");
        const field = colon < 0 ? line : line.slice(0, colon);
        const value = colon < 0 ? "" : line.slice(colon + (line[colon + 1] === " " ? 2 : 1));
        if (field === "data") data.push(value);
        else if (field === "event") event = value;
      }
      buffer = buffer.slice(start);
    },
    end: (found) => found(undefined),
  };
}

/** The initialize result `message` carries, when it is the answer and a result the SDK's client would take. */
function answered(message: unknown): UpstreamInitializeResult | undefined {
  if (message === null || typeof message !== "object") return undefined;
  const { jsonrpc, id, result } = message as { jsonrpc?: unknown; id?: unknown; result?: unknown };
  if (jsonrpc !== "2.0" || id !== INITIALIZE_ID) return undefined;
  const checked = upstreamInitializeResult(result);
  // The SDK's client refuses a revision it does not speak; so does the path that sends it again.
  if (!checked || !SUPPORTED_PROTOCOL_VERSIONS.includes(checked.protocolVersion)) return undefined;
  return checked;
}
