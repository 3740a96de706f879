// Every secret value subs knows in a run, removed by value from everything it prints (SECURITY.md,
// "Redaction"). A server that quotes what it received (an error_description with the refresh token,
// an MCP error with the bearer token, a deployment echoing its API token) would otherwise put a
// live credential in the `error:` line, a `--json` error or `mcp list --check --json`. Removal by
// name cannot see those: the value sits inside a free-text message.
import type { Context, Output } from "./context.ts";
import { CUT } from "./text/cut.ts";

export const REDACTED = "[redacted]";

/** Shorter values ("1", "true") would blank out unrelated text; no real credential is that short. */
const MIN_SECRET_LENGTH = 6;

export const worthScrubbing = (value: string) => value.length >= MIN_SECRET_LENGTH;

/**
 * Field and header names whose values are credentials (shared with --debug's redaction by name,
 * src/output/debug-fetch.ts).
 */
export const SECRET_NAMES =
  /^(authorization|proxy-authorization|cookie|set-cookie|x-api-key|api[-_]?key|access_token|refresh_token|id_token|token|client_secret|registration_access_token|code|code_verifier|password|secret|assertion|client_assertion|subject_token|actor_token|device_code|pre-authorized_code)$/i;

/**
 * The forms a secret is quoted back in, each removed wherever it appears: as it is;
 * percent-encoded (a query string, a form body); JSON-escaped (a value with `"` or `\` in --json);
 * hex, either case; base64 and base64url (RFC 4648 §4, §5). Base64 writes each three bytes as four
 * characters of six bits, so what a character shows depends on where the secret starts: learnt for
 * each of the three byte alignments are the characters whose bits all come from the secret. One of
 * the three is in the base64 of any text holding the secret (the secret alone, padded or not,
 * `Bearer <secret>`, a JSON blob), which is why no padded or whole-text form is needed. At each end
 * at most one character, which mixes at most four bits of the secret with its neighbour's, stays.
 * Each form is longer than the secret itself, so none matches unrelated text more than it does.
 */
function formsOf(value: string): string[] {
  const bytes = Buffer.from(value, "utf8");
  const forms = [value, encodeURIComponent(value), JSON.stringify(value).slice(1, -1), bytes.toString("hex"), bytes.toString("hex").toUpperCase()];
  for (const before of [0, 1, 2]) {
    const aligned = Buffer.concat([Buffer.alloc(before), bytes]);
    const from = Math.ceil((8 * before) / 6);
    const to = Math.floor((8 * aligned.length) / 6);
    forms.push(aligned.toString("base64").slice(from, to), aligned.toString("base64url").slice(from, to));
  }
  return forms;
}

/** Fewer characters of a secret say next to nothing about it, and would match ordinary words before a cut. */
const MIN_CUT_FORM = 4;

/** Past this many forms, scrub looks them up by their first characters instead of searching for each. */
const INDEXED_FROM = 1024;
/**
 * The keys values are indexed by: their first SHORT_KEY characters (every value scrubbed is that
 * long, worthScrubbing), or LONG_KEY for a value that long. Tokens share their first characters
 * (`Bearer `, `sk-live-`, `ghp_`) and text quotes those often; their first 16 it does not.
 */
const SHORT_KEY = 6;
const LONG_KEY = 16;

export class Secrets {
  private readonly values = new Set<string>();
  private readonly forms = new Set<string>();
  private sorted: string[] | undefined = [];
  private index: { short: Map<string, string[]>; long: Map<string, string[]> } | undefined;

  add(value: string | null | undefined): void {
    if (typeof value !== "string" || !worthScrubbing(value) || this.values.has(value)) return;
    this.values.add(value);
    for (const form of formsOf(value)) this.forms.add(form);
    this.sorted = undefined;
    this.index = undefined;
  }

  /** `text` with every form of every known value replaced by [redacted], longest first (a token inside a longer one). */
  scrub(text: string): string {
    if (this.forms.size === 0) return text;
    this.sorted ??= [...this.forms].sort((a, b) => b.length - a.length);
    const out = this.forms.size > INDEXED_FROM ? this.scrubIndexed(text) : this.scrubEach(text, this.sorted);
    return out.includes(CUT) ? this.withoutCutForms(out, this.sorted) : out;
  }

  private scrubEach(text: string, forms: readonly string[]): string {
    let out = text;
    for (const form of forms) if (out.includes(form)) out = out.replaceAll(form, REDACTED);
    return out;
  }

  /**
   * `text` without the start of a form that a cut ended: a server's text is shortened before it
   * is shown (`cut`, a table's column), so a server that pads its message to put the cut inside
   * a token would otherwise have all of it but its last characters shown.
   */
  private withoutCutForms(text: string, forms: readonly string[]): string {
    let out = "";
    let from = 0;
    for (let at = text.indexOf(CUT); at !== -1; at = text.indexOf(CUT, at + 1)) {
      let longest = 0;
      for (const form of forms) {
        for (let kept = Math.min(form.length - 1, at - from); kept > longest && kept >= MIN_CUT_FORM; kept--) {
          if (form.charCodeAt(kept - 1) === text.charCodeAt(at - 1) && text.startsWith(form.slice(0, kept), at - kept)) {
            longest = kept;
            break;
          }
        }
      }
      if (longest === 0) continue;
      out += `${text.slice(from, at - longest)}${REDACTED}`;
      from = at;
    }
    return from === 0 ? text : out + text.slice(from);
  }

  /**
   * scrub for many forms (`subs mcp import` learns every token of thousands of servers): one
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
    for (const value of this.forms) {
      const [map, key] = value.length >= LONG_KEY ? [index.long, value.slice(0, LONG_KEY)] : [index.short, value.slice(0, SHORT_KEY)];
      const list = map.get(key);
      if (list) list.push(value);
      else map.set(key, [value]);
    }
    return index;
  }
}

/**
 * `value` (JSON: a message for an MCP client, which no scrubbed output stream sees) with every
 * secret `scrub` knows removed from each of its strings, keys included, and a number that spells
 * one replaced; `value` itself when none holds one. The strings are checked as one text first, so
 * a message without a secret (nearly every one) costs one pass per form, and neither a copy nor a
 * JSON round trip.
 */
export function scrubbedJson<T>(value: T, scrub: (text: string) => string): T {
  const texts: string[] = [];
  collect(value, texts);
  if (texts.length === 0) return value;
  const joined = texts.join("\n");
  return scrub(joined) === joined ? value : (rewritten(value, scrub) as T);
}

/** The strings of `value` long enough to hold a secret, and the numbers long enough to spell one. */
function collect(value: unknown, into: string[]): void {
  if (typeof value === "string") {
    if (value.length >= MIN_SECRET_LENGTH) into.push(value);
  } else if (typeof value === "number") {
    if (Math.abs(value) >= 10 ** (MIN_SECRET_LENGTH - 1)) into.push(String(value));
  } else if (Array.isArray(value)) {
    for (const item of value) collect(item, into);
  } else if (value !== null && typeof value === "object") {
    for (const key in value) {
      if (key.length >= MIN_SECRET_LENGTH) into.push(key);
      collect((value as Record<string, unknown>)[key], into);
    }
  }
}

function rewritten(value: unknown, scrub: (text: string) => string): unknown {
  if (typeof value === "string") return scrub(value);
  if (typeof value === "number") return scrub(String(value)) === String(value) ? value : REDACTED;
  if (Array.isArray(value)) return value.map((item) => rewritten(item, scrub));
  if (value !== null && typeof value === "object") return Object.fromEntries(Object.entries(value).map(([key, item]) => [scrub(key), rewritten(item, scrub)]));
  return value;
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
/**
 * The fields of an authorization server's answer that issue a credential (RFC 6749 section 5.1,
 * OpenID Connect's id_token, RFC 7591 section 3.2.1): what a server that serves others learns from
 * an answer, read at its top level only. Anything else an answer holds was not issued to it, and a
 * hostile server would otherwise choose what it hides (the deployment, SECURITY.md).
 */
const ISSUED = new Set(["access_token", "refresh_token", "id_token", "client_secret", "registration_access_token"]);
/** No credential comes near this; a longer value under such a name is not learnt. */
const MAX_ISSUED_LENGTH = 8192;

export type LearningOptions = {
  /**
   * What an answer teaches: every secret-named field at any depth (a CLI run, which ends soon and
   * prints what a server says), or only the credentials issued at its top level (a server that
   * acts for others, whose secrets per exchange stay few whatever a server returns).
   */
  answers?: "secret-named" | "issued";
};

export function learningFetch(inner: typeof globalThis.fetch, secrets: Secrets, options: LearningOptions = {}): typeof globalThis.fetch {
  const add = (value: string) => secrets.add(value);
  return async (input, init) => {
    const headers = headersOf(input, init);
    headers.forEach((value, name) => {
      if (!SECRET_NAMES.test(name)) return;
      // "Bearer <token>", "Basic <base64>" (RFC 9110 §11.4): the scheme is no secret, so the
      // credentials alone are learnt (every form of the whole value holds one of theirs).
      const credentials = /authorization$/i.test(name) ? /^\S+\s+(\S+)$/.exec(value)?.[1] : undefined;
      add(credentials ?? value);
      if (credentials) {
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
    // A URL a server named (a token endpoint's) may carry what it likes in its query: learnt only
    // by a run that ends soon, where a code in a loopback redirect's query is its own.
    if (options.answers !== "issued") {
      try {
        new URL(input instanceof Request ? input.url : String(input)).searchParams.forEach((v, k) => SECRET_NAMES.test(k) && add(v));
      } catch {}
    }
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
      const learning = learnFrom(response.clone(), add, options.answers ?? "secret-named");
      if (length <= 65_536) await learning;
    }
    return response;
  };
}

/** Reads a clone of the answer, at most 64 KiB, which no token answer comes near; never throws. */
async function learnFrom(response: Response, add: (value: string) => void, answers: NonNullable<LearningOptions["answers"]>): Promise<void> {
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
  const text = Buffer.concat(chunks).toString("utf8");
  if (answers === "issued") {
    let json: unknown;
    try {
      json = JSON.parse(text);
    } catch {
      return;
    }
    if (json === null || typeof json !== "object" || Array.isArray(json)) return;
    for (const name of ISSUED) {
      const value = (json as Record<string, unknown>)[name];
      if (typeof value === "string" && value.length <= MAX_ISSUED_LENGTH) add(value);
    }
    return;
  }
  // An answer's `code` is an error code ("not_found"), never a credential: blanking it would hide it.
  secretsInText(text, (value, name) => name.toLowerCase() !== "code" && add(value));
}

/**
 * The run's secrets and the fetch that learns them (withSecrets); a context built without them (a
 * test's) gets a pair of its own.
 */
export function learnt(ctx: Pick<Context, "fetch" | "secrets">): { secrets: NonNullable<Context["secrets"]>; fetch: typeof globalThis.fetch } {
  if (ctx.secrets) return { secrets: ctx.secrets, fetch: ctx.fetch };
  const secrets = new Secrets();
  return { secrets, fetch: learningFetch(ctx.fetch, secrets) };
}

/** The context `run` gives every command: output scrubbed of `secrets`, fetch learning them. */
export function withSecrets(ctx: Context, secrets: Secrets): Context {
  return { ...ctx, stdout: scrubbedOutput(ctx.stdout, secrets), stderr: scrubbedOutput(ctx.stderr, secrets), fetch: learningFetch(ctx.fetch, secrets), secrets };
}
