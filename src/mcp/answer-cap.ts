// A bound on what one MCP answer may make subs hold. The SDK's Streamable HTTP transport reads a
// JSON answer whole (response.json()) and keeps an event of an event stream until the blank line
// that ends it (eventsource-parser): with no bound, one server sending a 400 MB `tools/list`, or an
// event that never ends, could make a long-running `subs agent serve` or `subs mcp proxy` hold
// gigabytes, and the system kill it. Every answer of an MCP connection passes through here: a JSON
// body (or any other, such as an error's text) is counted whole; an event stream is counted per
// event, since a stream may rightly stay open for hours (MCP "Streamable HTTP": the GET stream) while
// one event has no reason to be large. Past the limit, reading stops, the body is cancelled (which
// closes its connection and releases the socket: src/http/mcp-fetch.ts) and the request fails with
// an error naming the connection, the limit and how to raise it.
import { failed, usage, type SubsError } from "../errors.ts";

/** The default limit, in MiB: no tool list, result or event of a real server comes near it. */
export const DEFAULT_MAX_ANSWER_MIB = 16;
/** The variable that sets the limit (MiB, decimals allowed). */
export const MAX_ANSWER_ENV = "SUBS_MCP_MAX_ANSWER_MB";

const MIB = 1024 * 1024;

export type AnswerLimit = {
  /** The connection, as the error names it. */
  id: string;
  /** The limit in MiB, as set (for the message). */
  mib: number;
};

/** The limit `SUBS_MCP_MAX_ANSWER_MB` sets, else the default; a value that is not a positive number is a usage error. */
export function answerLimitMiB(env: Readonly<Record<string, string | undefined>>): number {
  const raw = env[MAX_ANSWER_ENV]?.trim();
  if (raw === undefined || raw === "") return DEFAULT_MAX_ANSWER_MIB;
  const mib = Number(raw);
  if (!/^\d*\.?\d+$/.test(raw) || !Number.isFinite(mib) || mib <= 0) {
    throw usage(`${MAX_ANSWER_ENV} must be a positive number of MiB, not ${JSON.stringify(raw.slice(0, 40))}`, { hint: `unset it for the default (${DEFAULT_MAX_ANSWER_MIB})` });
  }
  return mib;
}

/** The failure of a request whose answer went past the limit. */
export function answerTooLarge(limit: AnswerLimit, origin: string, event: boolean): SubsError {
  const what = event ? "one event of its event stream" : "its answer";
  return failed(`${limit.id}: ${origin} sent ${what} over ${limit.mib} MiB; subs stopped reading and closed the connection`, {
    code: "answer_too_large",
    hint: `if the server's answers are meant to be that large, raise ${MAX_ANSWER_ENV} (MiB; now ${limit.mib})`,
  });
}

/**
 * The most pages one tool listing (tools/list, following `nextCursor`) may take: a real server's
 * list fits in a few, while a server whose cursor never runs out would otherwise be asked for
 * pages without end.
 */
export const MAX_LISTING_PAGES = 100;

/**
 * The failure of a tool listing past its bound: more pages than MAX_LISTING_PAGES, or pages
 * that add up to more than one answer may hold. A listing fails whole rather than being cut: an
 * agent served a part of a server's tools, as if it were all of them, would be worse than told
 * the server's list could not be read.
 */
export function listingTooLarge(limit: AnswerLimit, origin: string, over: "pages" | "bytes"): SubsError {
  if (over === "pages") {
    return failed(`${limit.id}: the tool list of ${origin} went on past ${MAX_LISTING_PAGES} pages; subs stopped asking for more and lists none of its tools`, {
      code: "tool_list_too_large",
      hint: `a tool list ends within ${MAX_LISTING_PAGES} pages (its last page has no nextCursor); ask the server's operator why this one does not`,
    });
  }
  return failed(`${limit.id}: ${origin} sent tool list pages adding up to over ${limit.mib} MiB; subs stopped asking for more and lists none of its tools`, {
    code: "tool_list_too_large",
    hint: `a tool list, all its pages together, may be as large as one answer; if the server's is meant to be that large, raise ${MAX_ANSWER_ENV} (MiB; now ${limit.mib})`,
  });
}

export const limitBytes = (limit: AnswerLimit) => Math.floor(limit.mib * MIB);

type Fetch = typeof globalThis.fetch;

/**
 * `fetch` with every answer's body bounded by `limit`. A request whose event stream went past it
 * cannot fail through the body alone (the transport reports a broken stream to `onerror` and the
 * request would wait for its timeout): `onTooLarge` is told the id of each JSON-RPC request the
 * stream was answering, so the caller can fail that request at once.
 */
export function cappedAnswers(fetch: Fetch, limit: AnswerLimit, onTooLarge?: (requestId: string | number, error: SubsError) => void): Fetch {
  const maxBytes = limitBytes(limit);
  return async (input, init) => {
    const response = await fetch(input, init);
    const body = response.body;
    if (body === null) return response;
    const headers = response.headers;
    const event = mediaType(headers.get("content-type")) === "text/event-stream";
    const declared = headers.has("content-length") && !headers.has("transfer-encoding") ? Number(headers.get("content-length")) : Number.NaN;
    // A declared length is all the body there is (RFC 9112 §6.3; Node's parser and undici stop
    // there): within the limit, nothing to count.
    if (!event && Number.isInteger(declared) && declared >= 0 && declared <= maxBytes) return response;
    const origin = new URL(input instanceof Request ? input.url : String(input)).origin;
    const reader = body.getReader();
    const count = event ? eventMeter() : totalMeter();
    const overflow = (controller: ReadableStreamDefaultController<Uint8Array>) => {
      const error = answerTooLarge(limit, origin, event);
      void reader.cancel(error).catch(() => {});
      if (event && onTooLarge) for (const id of requestIds(init)) onTooLarge(id, error);
      controller.error(error);
    };
    const capped = new ReadableStream<Uint8Array>(
      {
        start(controller) {
          // Over the limit as declared: refused unread, where the body is read.
          if (!event && Number.isFinite(declared) && declared > maxBytes) overflow(controller);
        },
        async pull(controller) {
          const chunk = await reader.read();
          if (chunk.done) return controller.close();
          if (count(chunk.value) > maxBytes) return overflow(controller);
          controller.enqueue(chunk.value);
        },
        cancel: (reason) => reader.cancel(reason),
      },
      // Read only as the transport reads: the socket's own backpressure holds the rest.
      { highWaterMark: 0 },
    );
    const bounded = new Response(capped, { status: response.status, statusText: response.statusText, headers });
    Object.defineProperty(bounded, "url", { value: response.url });
    return bounded;
  };
}

/** `text/event-stream; charset=utf-8` → `text/event-stream`. */
function mediaType(contentType: string | null): string {
  return (contentType ?? "").split(";")[0]!.trim().toLowerCase();
}

/** The ids of the JSON-RPC requests a POST carried (the SDK sends one message, or a batch). */
function requestIds(init: RequestInit | undefined): Array<string | number> {
  if (typeof init?.body !== "string") return [];
  let sent: unknown;
  try {
    sent = JSON.parse(init.body);
  } catch {
    return [];
  }
  return (Array.isArray(sent) ? sent : [sent]).flatMap((message: unknown) => {
    const { id, method } = (message ?? {}) as { id?: unknown; method?: unknown };
    return typeof method === "string" && (typeof id === "string" || typeof id === "number") ? [id] : [];
  });
}

/** All bytes read so far. */
function totalMeter(): (chunk: Uint8Array) => number {
  let total = 0;
  return (chunk) => (total += chunk.byteLength);
}

const CR = 0x0d;
const LF = 0x0a;
const endsLine = (byte: number | undefined) => byte === CR || byte === LF;

/**
 * The bytes of the event being read: those since the last blank line. An event ends at an empty
 * line, and a line at CRLF, LF or CR (HTML, "Server-sent events", parsing an event stream): two
 * line ends in a row, other than the two bytes of one CRLF, end an event. Scanned from the chunk's
 * end, where a stream of small events has its blank line, so most chunks cost a byte or two.
 */
function eventMeter(): (chunk: Uint8Array) => number {
  let pending = 0;
  let previous: number | undefined;
  return (chunk) => {
    const n = chunk.byteLength;
    if (n === 0) return pending;
    const prior = previous;
    previous = chunk[n - 1];
    for (let i = n - 1; i >= 0; i--) {
      const byte = chunk[i];
      if (!endsLine(byte)) continue;
      const before = i > 0 ? chunk[i - 1] : prior;
      if (endsLine(before) && !(before === CR && byte === LF)) return (pending = n - 1 - i);
    }
    return (pending += n);
  };
}
