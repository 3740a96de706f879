// Every HTTP call subs makes to an authorization server (discovery, registration, token, refresh,
// revocation) and to a deployment goes through this wrapper (SECURITY.md, "Every HTTP exchange with
// an authorization server or a deployment"): a hostile or broken server must not hold a command
// forever, fill memory, or move a request carrying a code, a verifier or a client secret to another
// origin.
// - a deadline for the whole exchange, the body included (a server that trickles bytes forever);
// - a cap on the body's size (a server that answers with gigabytes);
// - redirects followed only within the origin the request was sent to (a 307 to another origin
//   would re-send a token request's body there).

import { failed, refused, type SubsError } from "../errors.ts";
import { addressRefusal, ALLOW_PRIVATE_HINT } from "./address-refusal.ts";

/** Default deadline of one exchange; `SUBS_HTTP_TIMEOUT` (seconds) overrides it. */
export const HTTP_TIMEOUT_MS = 30_000;
/** No OAuth or deployment answer subs reads comes near this. */
export const MAX_BODY_BYTES = 1_000_000;
const MAX_REDIRECTS = 5;

type Fetch = typeof globalThis.fetch;

export type GuardOptions = {
  /** Deadline of each exchange, headers and body (none when undefined). */
  timeoutMs?: number;
  maxBytes?: number;
};

/** The deadline from `SUBS_HTTP_TIMEOUT` (seconds), else the default. */
export function httpTimeoutMs(env: Readonly<Record<string, string | undefined>>): number {
  const seconds = Number(env.SUBS_HTTP_TIMEOUT);
  return env.SUBS_HTTP_TIMEOUT && Number.isFinite(seconds) && seconds > 0 ? seconds * 1000 : HTTP_TIMEOUT_MS;
}

/** The fetch for talking to authorization servers: the context's fetch, guarded. */
export function authFetch(ctx: { fetch: Fetch; env: Readonly<Record<string, string | undefined>> }): Fetch {
  return guardedFetch(ctx.fetch, { timeoutMs: httpTimeoutMs(ctx.env) });
}

/** A refusal by the guard: a deadline passed, a body too large, a redirect elsewhere. */
export class HttpGuardError extends Error {
  override name = "HttpGuardError";
  /** The deadline passed: the server accepted the connection and did not answer in time. */
  readonly timedOut: boolean;
  constructor(message: string, options: { timedOut?: boolean } = {}) {
    super(message);
    this.timedOut = options.timedOut === true;
  }
}

/** Codes of a connection that was never made (undici and libuv names). */
const NOT_CONNECTED = new Set(["ECONNREFUSED", "ENOTFOUND", "EAI_AGAIN", "EHOSTUNREACH", "ENETUNREACH", "EADDRNOTAVAIL", "UND_ERR_CONNECT_TIMEOUT", "ETIMEDOUT"]);
/**
 * The TLS handshake's refusals of a certificate (OpenSSL's verify codes as Node names them, and
 * Node's own host-name check): the server was reached, but it is not the server it must prove to
 * be, so nothing was sent.
 */
const UNTRUSTED_CERTIFICATE = new Set([
  "CERT_HAS_EXPIRED",
  "CERT_NOT_YET_VALID",
  "CERT_REVOKED",
  "CERT_UNTRUSTED",
  "DEPTH_ZERO_SELF_SIGNED_CERT",
  "SELF_SIGNED_CERT_IN_CHAIN",
  "UNABLE_TO_GET_ISSUER_CERT",
  "UNABLE_TO_GET_ISSUER_CERT_LOCALLY",
  "UNABLE_TO_VERIFY_LEAF_SIGNATURE",
  "ERR_TLS_CERT_ALTNAME_INVALID",
]);

/** The TLS handshake refused the server's certificate: retrying cannot change that. */
export function isUntrustedCertificate(error: unknown): boolean {
  const code = errorCode(error);
  return code !== undefined && UNTRUSTED_CERTIFICATE.has(code);
}

/** What to do about an untrusted certificate, wherever it was met. */
export const UNTRUSTED_CERTIFICATE_HINT = "point NODE_EXTRA_CA_CERTS at the certificate of the CA that issued it (a PEM file), if it is your own CA's";

/** The innermost system error code of a failed fetch (fetch failed → cause → AggregateError). */
export function errorCode(error: unknown): string | undefined {
  for (let e: unknown = error, depth = 0; e && typeof e === "object" && depth < 5; depth++) {
    const code = (e as { code?: unknown }).code;
    if (typeof code === "string") return code;
    const inner = (e as { errors?: unknown[] }).errors?.[0];
    e = (e as { cause?: unknown }).cause ?? inner;
  }
  return undefined;
}

export const BLOCKED_PORT_HINT = "serve it on another port and change the url in the file";

/**
 * Fetch refuses some ports before connecting (Fetch standard, "port blocking": 1, 9, 6000, 10080,
 * …), as browsers do, so a server that is up on one still cannot be reached. Said as such, or the
 * usual hint sends people looking for a server that is down.
 */
export function isBlockedPort(error: unknown): boolean {
  for (let e: unknown = error, depth = 0; e instanceof Error && depth < 5; depth++) {
    if (e.message === "bad port") return true;
    e = e.cause;
  }
  return false;
}

/**
 * The name did not resolve (getaddrinfo's ENOTFOUND, or EAI_AGAIN: no DNS server answered). No
 * connection was tried and trying again at once cannot help: said at once, naming the host.
 */
export function isDnsFailure(error: unknown): boolean {
  const code = errorCode(error);
  return code === "ENOTFOUND" || code === "EAI_AGAIN";
}

/**
 * A failed exchange with `origin`, in the person's terms: "cannot reach" only when no
 * connection was made; a server that accepted and then said nothing is "no answer within N s";
 * one that hung up is said to have closed the connection. Each hint fits its failure.
 */
export function networkFailure(origin: string, error: unknown): SubsError {
  // Not a failure of the network: a request the process's own address rules kept from leaving.
  const notAllowed = addressRefusal(error);
  if (notAllowed) return refused(notAllowed.message, { cause: error, code: "address_not_allowed", hint: ALLOW_PRIVATE_HINT });
  const code = errorCode(error);
  if (error instanceof HttpGuardError && error.timedOut) {
    return failed(`${origin} accepted the connection but gave ${error.message.replace(/^no complete answer from \S+ /, "no answer ")}`, {
      cause: error,
      code: "timeout",
      hint: "the server may be overloaded or down; try again later, or raise SUBS_HTTP_TIMEOUT (seconds)",
    });
  }
  if (isDnsFailure(error)) {
    return failed(`cannot resolve ${new URL(origin).hostname} (${code})`, { cause: error, code: "unreachable", hint: "check the host name in the url, and your network or DNS" });
  }
  if (code !== undefined && UNTRUSTED_CERTIFICATE.has(code)) {
    return failed(`the certificate of ${origin} is not trusted (${code}); nothing was sent`, {
      cause: error,
      code: "untrusted_certificate",
      hint: `check the url; ${UNTRUSTED_CERTIFICATE_HINT}`,
    });
  }
  if (code === undefined && isBlockedPort(error)) {
    return failed(`cannot reach ${origin}: fetch refuses port ${new URL(origin).port} (a port the Fetch standard blocks) without connecting`, {
      cause: error,
      code: "unreachable",
      hint: BLOCKED_PORT_HINT,
    });
  }
  if (code === undefined || NOT_CONNECTED.has(code)) {
    const why = code ?? (error instanceof Error ? error.message : String(error));
    return failed(`cannot reach ${origin} (${why})`, { cause: error, code: "unreachable", hint: "check the url in the file and that the server is up" });
  }
  return failed(`${origin} closed the connection without answering (${code})`, { cause: error, code: "connection_closed", hint: "check that the server is up and speaks HTTP at that url" });
}

const REDIRECTS = new Set([301, 302, 303, 307, 308]);
const NULL_BODY = new Set([101, 204, 205, 304]);

export function guardedFetch(inner: Fetch, options: GuardOptions = {}): Fetch {
  const maxBytes = options.maxBytes ?? MAX_BODY_BYTES;
  return async (input, init) => {
    const first = new URL(input instanceof Request ? input.url : String(input));
    // Our own timer, unref'd: an open socket keeps the process alive while it matters.
    const deadline = new AbortController();
    let timer: NodeJS.Timeout | undefined;
    if (options.timeoutMs !== undefined) {
      timer = setTimeout(() => deadline.abort(new HttpGuardError(`no complete answer from ${first.origin} within ${Math.round(options.timeoutMs! / 1000)}s`, { timedOut: true })), options.timeoutMs);
      timer.unref();
    }
    const signal = init?.signal ? AbortSignal.any([init.signal, deadline.signal]) : deadline.signal;
    // A caller asking for "manual" or "error" gets exactly that; "follow" is done here, same-origin only.
    const follow = (init?.redirect ?? "follow") === "follow";
    let url = first;
    let request: RequestInit = { ...init, signal, redirect: follow ? "manual" : init!.redirect! };
    let target: Parameters<Fetch>[0] = input;
    try {
      for (let hop = 0; ; hop++) {
        const response = await inner(target, request);
        const location = response.headers.get("location");
        if (REDIRECTS.has(response.status) && location !== null) {
          const next = new URL(location, url);
          // Refused under "manual" too: the SDK follows manual redirects itself (within the
          // origin) and would report one to elsewhere only as a bare status.
          if (next.origin !== url.origin) {
            await response.body?.cancel().catch(() => {});
            throw new HttpGuardError(`${url.origin} redirected to another origin (${next.origin}); refusing to follow`);
          }
        }
        if (follow && REDIRECTS.has(response.status) && location !== null) {
          await response.body?.cancel().catch(() => {});
          const next = new URL(location, url);
          if (hop >= MAX_REDIRECTS) throw new HttpGuardError(`${url.origin} redirected more than ${MAX_REDIRECTS} times`);
          // RFC 9110 §15.4: 303 (and, as browsers do, 301/302 after a POST) continue as a GET.
          const asGet = response.status === 303 || ((response.status === 301 || response.status === 302) && (request.method ?? "GET").toUpperCase() === "POST");
          if (asGet) {
            const { body: _body, ...rest } = request;
            request = { ...rest, method: "GET" };
          }
          url = next;
          target = next;
          continue;
        }
        return limitBody(response, url, maxBytes, () => clearTimeout(timer));
      }
    } catch (error) {
      clearTimeout(timer);
      throw error;
    }
  };
}

function limitBody(response: Response, url: URL, maxBytes: number, done: () => void): Response {
  if (response.body === null || NULL_BODY.has(response.status)) {
    done();
    return response;
  }
  const tooLarge = () => new HttpGuardError(`the answer from ${url.origin} is larger than ${Math.round(maxBytes / 1000)} kB; refusing it`);
  const declared = Number(response.headers.get("content-length"));
  let seen = 0;
  // A declared length above the cap fails the first read, unread: callers see the refusal where
  // they read the body, as with a body that turns out too large.
  const source =
    Number.isFinite(declared) && declared > maxBytes
      ? (void response.body.cancel().catch(() => {}), new ReadableStream<Uint8Array>({ start: (controller) => controller.error(tooLarge()) }))
      : response.body;
  const counted = source.pipeThrough(
    new TransformStream<Uint8Array, Uint8Array>({
      transform(chunk, controller) {
        seen += chunk.byteLength;
        if (seen > maxBytes) controller.error(tooLarge());
        else controller.enqueue(chunk);
      },
      flush: done,
    }),
  );
  const limited = new Response(counted, { status: response.status, statusText: response.statusText, headers: response.headers });
  Object.defineProperty(limited, "url", { value: response.url });
  return limited;
}
