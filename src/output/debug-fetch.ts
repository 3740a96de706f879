// `--debug` / SUBS_DEBUG=1: every HTTP exchange on stderr, with credentials redacted (SECURITY.md,
// "Redaction"). Redaction is by name, on every layer a secret can travel in: headers, query
// strings, form and JSON bodies. What is not recognised as safe-to-show is shortened, never printed
// whole.
import type { Output } from "../context.ts";
import { REDACTED, SECRET_NAMES, worthScrubbing, type Secrets } from "../secrets.ts";
import { MARK } from "./style.ts";
import { shown } from "./untrusted.ts";

/**
 * A JSON field that holds a secret: by name, but a number is never one. JSON-RPC errors carry a
 * numeric `code` (-32601) that a person debugging needs to see; an authorization code is a
 * string.
 */
const secretField = (name: string, value: unknown) => SECRET_NAMES.test(name) && typeof value !== "number" && typeof value !== "boolean" && value !== null;

export { REDACTED };

function redactParams(params: URLSearchParams): string {
  const out = new URLSearchParams();
  for (const [k, v] of params) out.append(k, SECRET_NAMES.test(k) ? REDACTED : v);
  return out.toString();
}

export function redactUrl(raw: string): string {
  try {
    const url = new URL(raw);
    if (url.username || url.password) {
      url.username = "";
      url.password = "";
    }
    const query = redactParams(url.searchParams);
    return `${url.origin}${url.pathname}${query ? `?${query.replaceAll("%5Bredacted%5D", REDACTED)}` : ""}`;
  } catch {
    return "[unparsable url]";
  }
}

function redactJson(value: unknown): unknown {
  if (Array.isArray(value)) return value.map(redactJson);
  if (value && typeof value === "object") {
    return Object.fromEntries(Object.entries(value).map(([k, v]) => [k, secretField(k, v) ? REDACTED : redactJson(v)]));
  }
  return value;
}

export function redactBody(text: string, contentType: string | null): string {
  const limit = 2000;
  const clip = (s: string) => (s.length > limit ? `${s.slice(0, limit)}… (${s.length} chars)` : s);
  if (!text) return "";
  if (contentType?.includes("application/x-www-form-urlencoded")) return clip(redactParams(new URLSearchParams(text)).replaceAll("%5Bredacted%5D", REDACTED));
  try {
    return clip(JSON.stringify(redactJson(JSON.parse(text))));
  } catch {
    // Not JSON (an HTML page, an SSE stream): its size only; it may embed anything.
    return `(${text.length} chars of ${contentType ?? "unknown content"})`;
  }
}

function headerLines(headers: Headers): string {
  const lines: string[] = [];
  headers.forEach((value, name) => lines.push(`  ${name}: ${SECRET_NAMES.test(name) ? REDACTED : value}`));
  return lines.join("\n");
}

/** The values of secret-named fields in a form or JSON body. */
function secretsInBody(body: string, into: string[]): void {
  if (!body) return;
  new URLSearchParams(body).forEach((v, k) => SECRET_NAMES.test(k) && into.push(v));
  try {
    const walk = (v: unknown): void => {
      if (Array.isArray(v)) v.forEach(walk);
      else if (v && typeof v === "object") for (const [k, inner] of Object.entries(v)) typeof inner === "string" && SECRET_NAMES.test(k) ? into.push(inner) : walk(inner);
    };
    walk(JSON.parse(body));
  } catch {}
}

/**
 * The secret values a request carries (its credential header, secret-named query and form or
 * JSON fields): a server may echo one back (an error_description quoting the token), and a
 * name-based redaction of the answer would miss it there.
 */
function secretValues(request: Request, body: string): string[] {
  const values: string[] = [];
  request.headers.forEach((value, name) => {
    if (!SECRET_NAMES.test(name)) return;
    values.push(value);
    const credentials = /^\S+\s+(\S+)$/.exec(value)?.[1]; // "Bearer <token>", "Basic <base64>"
    if (credentials) values.push(credentials);
  });
  try {
    new URL(request.url).searchParams.forEach((v, k) => SECRET_NAMES.test(k) && values.push(v));
  } catch {}
  secretsInBody(body, values);
  return values;
}


function scrub(text: string, secrets: readonly string[]): string {
  return secrets.reduce((out, secret) => out.replaceAll(secret, REDACTED), text);
}

/**
 * How much of an answer the trace reads. Past it, the answer is not the trace's: held whole here
 * (a clone's bytes stay queued until both copies read them), it would undo the limits on answers
 * behind this fetch (src/mcp/answer-cap.ts, src/http/guarded-fetch.ts). No token answer comes near.
 */
const TRACED_BYTES = 1024 * 1024;

/** A clone of the answer as text, or undefined when it is longer than `max` bytes (the clone is then cancelled). */
async function leadingText(response: Response, max: number): Promise<string | undefined> {
  const body = response.clone().body;
  if (body === null) return "";
  const reader = body.getReader();
  const chunks: Uint8Array[] = [];
  let size = 0;
  for (;;) {
    const { done, value } = await reader.read();
    if (done) return Buffer.concat(chunks).toString("utf8");
    size += value.byteLength;
    if (size > max) {
      void reader.cancel().catch(() => {});
      return undefined;
    }
    chunks.push(value);
  }
}

export function debugFetch(inner: typeof globalThis.fetch, stderr: Output, now: () => number, shared?: Secrets): typeof globalThis.fetch {
  let sequence = 0;
  // Every secret seen in this run, sent or received: a token issued in one answer and quoted by
  // a server in a later one is removed there too, by value, wherever it appears. The
  // run's registry learns them as well, so the `error:` line and --json agree with this trace.
  const known = new Set<string>();
  const remember = (values: string[]) =>
    values.filter(worthScrubbing).forEach((v) => {
      known.add(v);
      shared?.add(v);
    });
  // A status text, a header or an error message is the server's: shown, never interpreted
  // (SECURITY.md, "What subs shows of server text").
  const write = (text: string) => stderr.write(shown(scrub(text, [...known].sort((a, b) => b.length - a.length)), { multiline: true }));
  return async (input, init) => {
    const n = ++sequence;
    const request = new Request(input, init);
    const started = now();
    const requestBody = init?.body !== undefined && typeof init.body === "string" ? init.body : init?.body instanceof URLSearchParams ? init.body.toString() : "";
    remember(secretValues(request, requestBody));
    write(`[debug] #${n} → ${request.method} ${redactUrl(request.url)}\n${headerLines(request.headers)}${requestBody ? `\n  body: ${redactBody(requestBody, request.headers.get("content-type"))}` : ""}\n`);
    try {
      const response = await inner(input, init);
      const type = response.headers.get("content-type");
      let body = "";
      // Event streams stay open; reading them here would hang the exchange.
      if (!type?.includes("text/event-stream")) {
        const text = await leadingText(response, TRACED_BYTES);
        if (text === undefined) body = `(more than ${TRACED_BYTES / 1024 / 1024} MiB of ${type ?? "unknown content"}; not shown)`;
        else {
          const received: string[] = [];
          secretsInBody(text, received);
          remember(received);
          body = redactBody(text, type);
        }
      }
      write(`[debug] #${n} ← ${response.status} ${response.statusText} (${now() - started} ms)\n${headerLines(response.headers)}${body ? `\n  body: ${body}` : ""}\n`);
      return response;
    } catch (error) {
      write(`[debug] #${n} ${MARK.failure} ${error instanceof Error ? error.message : String(error)} (${now() - started} ms)\n`);
      throw error;
    }
  };
}
