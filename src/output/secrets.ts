// Every secret value subs knows in a run, removed by value from everything it prints (issue 14,
// item 3). A server that quotes what it received (an error_description with the refresh token,
// an MCP error with the bearer token, a deployment echoing its API token) would otherwise put a
// live credential in the `error:` line, a `--json` error or `mcp list --check --json`. Removal by
// name cannot see those: the value sits inside a free-text message.
import type { Context, Output } from "../context.ts";

export const REDACTED = "[redacted]";

/** Short values ("1", "true") would blank out unrelated text; no real credential is that short. */
export const worthScrubbing = (value: string) => value.length >= 6;

/**
 * Field and header names whose values are credentials (shared with --debug's redaction by name,
 * src/output/debug-fetch.ts).
 */
export const SECRET_NAMES =
  /^(authorization|proxy-authorization|cookie|set-cookie|x-api-key|api[-_]?key|access_token|refresh_token|id_token|token|client_secret|registration_access_token|code|code_verifier|password|secret|assertion|client_assertion|subject_token|actor_token|device_code|pre-authorized_code)$/i;

/** Past this many values, scrub looks them up by their first characters instead of searching for each. */
const INDEXED_FROM = 64;
/**
 * The keys values are indexed by: their first SHORT_KEY characters (every value scrubbed is that
 * long, worthScrubbing), or LONG_KEY for a value that long. Tokens share their first characters
 * (`Bearer `, `sk-live-`, `ghp_`) and text quotes those often; their first 16 it does not.
 */
const SHORT_KEY = 6;
const LONG_KEY = 16;

export class Secrets {
  private readonly values = new Set<string>();
  private sorted: string[] | undefined = [];
  private index: { short: Map<string, string[]>; long: Map<string, string[]> } | undefined;

  add(value: string | null | undefined): void {
    if (typeof value !== "string" || !worthScrubbing(value) || this.values.has(value)) return;
    this.values.add(value);
    // An encoded form travels too: a token in a query string or a form body is percent-encoded,
    // and a server may quote the encoded text.
    const encoded = encodeURIComponent(value);
    if (encoded !== value) this.values.add(encoded);
    this.sorted = undefined;
    this.index = undefined;
  }

  /** `text` with every known value replaced by [redacted], longest first (a token inside a longer one). */
  scrub(text: string): string {
    if (this.values.size === 0) return text;
    if (this.values.size > INDEXED_FROM) return this.scrubIndexed(text);
    this.sorted ??= [...this.values].sort((a, b) => b.length - a.length);
    let out = text;
    for (const secret of this.sorted) if (out.includes(secret)) out = out.replaceAll(secret, REDACTED);
    return out;
  }

  /**
   * scrub for many values (`subs mcp import` learns every token of thousands of servers): one
   * pass over `text`, each position looked up by the characters that start there, so the cost
   * follows the text's length and not values × text. Every stretch some value covers is
   * replaced, overlapping ones as one.
   */
  private scrubIndexed(text: string): string {
    const index = (this.index ??= this.buildIndex());
    let out = "";
    let copied = 0;
    let start = -1;
    let end = -1;
    const match = (candidates: readonly string[] | undefined, i: number) => {
      if (!candidates) return;
      for (const value of candidates) {
        if (!text.startsWith(value, i)) continue;
        if (start === -1) start = i;
        end = Math.max(end, i + value.length);
      }
    };
    for (let i = 0; i + SHORT_KEY <= text.length; i++) {
      if (start !== -1 && i >= end) {
        out += text.slice(copied, start) + REDACTED;
        copied = end;
        start = -1;
      }
      if (index.short.size > 0) match(index.short.get(text.slice(i, i + SHORT_KEY)), i);
      if (i + LONG_KEY <= text.length) match(index.long.get(text.slice(i, i + LONG_KEY)), i);
    }
    if (start !== -1) {
      out += text.slice(copied, start) + REDACTED;
      copied = end;
    }
    return copied === 0 ? text : out + text.slice(copied);
  }

  private buildIndex(): { short: Map<string, string[]>; long: Map<string, string[]> } {
    const index = { short: new Map<string, string[]>(), long: new Map<string, string[]>() };
    for (const value of this.values) {
      const [map, key] = value.length >= LONG_KEY ? [index.long, value.slice(0, LONG_KEY)] : [index.short, value.slice(0, SHORT_KEY)];
      const list = map.get(key);
      if (list) list.push(value);
      else map.set(key, [value]);
    }
    return index;
  }
}

/**
 * `value` with every secret `scrub` knows replaced: a string, an Error (its message and data), or
 * anything JSON (tokens are URL-safe, so its JSON text can be scrubbed as text). For messages
 * passed on to an MCP client (src/serve/), which no scrubbed output stream sees.
 */
export function scrubbedValue<T>(value: T, scrub: (text: string) => string): T {
  if (value === undefined || value === null) return value;
  if (typeof value === "string") return scrub(value) as T;
  if (value instanceof Error) {
    const message = scrub(value.message);
    const data = (value as { data?: unknown }).data;
    const cleanData = data === undefined ? undefined : scrubbedValue(data, scrub);
    if (message === value.message && cleanData === data) return value;
    return Object.assign(new Error(message), { ...value, ...(cleanData !== undefined ? { data: cleanData } : {}) }) as T;
  }
  const text = JSON.stringify(value);
  if (text === undefined) return value;
  const clean = scrub(text);
  return clean === text ? value : (JSON.parse(clean) as T);
}

/**
 * `out` with every chunk scrubbed before it is written. A terminal stream stays itself in every
 * other respect (the spinner reads `isTTY`, `columns`, calls `cursorTo`, listens for `resize`):
 * only `write` is replaced. yocto-spinner hooks `write` (it saves `stream.write`, sets its own,
 * and calls the saved one): the hook is kept on this wrapper, so it wraps the scrubbing write and
 * the scrubbing write goes to the stream's own, never back to the hook.
 */
export function scrubbedOutput<T extends Output>(out: T, secrets: Secrets): T {
  const own = out.write as (...args: unknown[]) => unknown;
  const scrubbing = (chunk: unknown, ...rest: unknown[]) => own.call(out, typeof chunk === "string" ? secrets.scrub(chunk) : chunk, ...rest);
  let write: unknown = scrubbing;
  return new Proxy(out, {
    get(target, property) {
      if (property === "write") return write;
      const value = Reflect.get(target, property, target) as unknown;
      return typeof value === "function" ? (value as (...args: unknown[]) => unknown).bind(target) : value;
    },
    set(target, property, value) {
      if (property === "write") write = value;
      else Reflect.set(target, property, value, target);
      return true;
    },
  });
}

function headersOf(input: Parameters<typeof fetch>[0], init: Parameters<typeof fetch>[1]): Headers {
  const headers = new Headers(input instanceof Request ? input.headers : undefined);
  if (init?.headers) new Headers(init.headers).forEach((value, name) => headers.set(name, value));
  return headers;
}

/** The secret-named fields of a form or JSON text. */
export function secretsInText(text: string, add: (value: string, name: string) => void): void {
  if (!text) return;
  const trimmed = text.trimStart();
  if (trimmed.startsWith("{") || trimmed.startsWith("[")) {
    try {
      const walk = (v: unknown): void => {
        if (Array.isArray(v)) v.forEach(walk);
        else if (v && typeof v === "object") for (const [k, inner] of Object.entries(v)) typeof inner === "string" && SECRET_NAMES.test(k) ? add(inner, k) : walk(inner);
      };
      walk(JSON.parse(text));
    } catch {}
    return;
  }
  new URLSearchParams(text).forEach((v, k) => SECRET_NAMES.test(k) && add(v, k));
}

/**
 * `fetch` that learns every secret a request carries (its credential header, secret-named query
 * and form fields: codes, verifiers, refresh tokens, client secrets, static and deployment tokens)
 * before it is sent, and those an authorization server's JSON answer issues (tokens, client
 * secrets, registration access tokens). A server can only echo what it was sent or issued, so
 * everything it could quote back is known before its answer is read. MCP answers (JSON-RPC) and
 * event streams are not read here: they carry no credentials, and reading them would cost.
 */
export function learningFetch(inner: typeof globalThis.fetch, secrets: Secrets): typeof globalThis.fetch {
  const add = (value: string) => secrets.add(value);
  return async (input, init) => {
    const headers = headersOf(input, init);
    headers.forEach((value, name) => {
      if (!SECRET_NAMES.test(name)) return;
      add(value);
      const credentials = /^\S+\s+(\S+)$/.exec(value)?.[1]; // "Bearer <token>", "Basic <base64>"
      if (credentials) {
        add(credentials);
        if (/^basic$/i.test(value.split(/\s/)[0] ?? "")) {
          // Basic carries id:secret (RFC 6749 §2.3.1, each form-encoded): the secret alone too.
          const decoded = Buffer.from(credentials, "base64").toString("utf8");
          const secret = decoded.slice(decoded.indexOf(":") + 1);
          add(secret);
          try {
            add(decodeURIComponent(secret.replaceAll("+", " ")));
          } catch {}
        }
      }
    });
    try {
      new URL(input instanceof Request ? input.url : String(input)).searchParams.forEach((v, k) => SECRET_NAMES.test(k) && add(v));
    } catch {}
    const body = init?.body;
    const bodyText = typeof body === "string" ? body : body instanceof URLSearchParams ? body.toString() : "";
    const jsonRpc = /^\s*[[{]/.test(bodyText) && bodyText.includes('"jsonrpc"');
    if (!jsonRpc) secretsInText(bodyText, add);
    const response = await inner(input, init);
    const method = (init?.method ?? (input instanceof Request ? input.method : "GET")).toUpperCase();
    // Tokens and registrations are issued in answers to POSTs (RFC 6749 §5.1, RFC 7591 §3.2.1).
    if (!jsonRpc && method === "POST" && response.body && response.headers.get("content-type")?.includes("json")) {
      // A small answer of announced length is read before the caller sees it, so an error the
      // caller builds from it at once (a token answer it refuses) is scrubbed too; the caller
      // would wait for the same bytes. Any other is read alongside the caller.
      const length = Number(response.headers.get("content-length") ?? NaN);
      const learning = learnFrom(response.clone(), add);
      if (length <= 65_536) await learning;
    }
    return response;
  };
}

/** Reads a clone of the answer, at most 64 KiB, which no token answer comes near; never throws. */
async function learnFrom(response: Response, add: (value: string) => void): Promise<void> {
  const reader = response.body!.getReader();
  const chunks: Uint8Array[] = [];
  let size = 0;
  try {
    for (;;) {
      const { done, value } = await reader.read();
      if (done) break;
      size += value.byteLength;
      if (size > 65_536) {
        await reader.cancel();
        return;
      }
      chunks.push(value);
    }
  } catch {
    return;
  }
  // An answer's `code` is an error code ("not_found"), never a credential: blanking it would hide it.
  secretsInText(Buffer.concat(chunks).toString("utf8"), (value, name) => name.toLowerCase() !== "code" && add(value));
}

/** The context `run` gives every command: output scrubbed of `secrets`, fetch learning them. */
export function withSecrets(ctx: Context, secrets: Secrets): Context {
  return { ...ctx, stdout: scrubbedOutput(ctx.stdout, secrets), stderr: scrubbedOutput(ctx.stderr, secrets), fetch: learningFetch(ctx.fetch, secrets), secrets };
}
