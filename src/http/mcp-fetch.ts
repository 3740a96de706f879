// The fetch behind every request subs sends whose redirects it follows itself or refuses: MCP
// Streamable HTTP (the SDK's transport follows them: sdk shared/transport.js), the OAuth requests of
// guardedFetch (src/http/guarded-fetch.ts, within one origin) and a deployment's
// (src/remote/client.ts refuses them). They go over node:http on kept-alive sockets, answered with
// a real Response whose body streams as it arrives (SSE). Two costs of Node's global fetch
// (undici) it saves (docs/speed.md, "Serving" and "What makes start-up cheap"): per request, a
// Request with its own AbortController, a clone of the body's web stream, a fetch controller and
// the web streams of the answer, which with `subs agent serve` and `subs mcp proxy` under load was
// the largest share of their CPU per tool call; and once per process, compiling undici's HTTP
// parser (llhttp, WebAssembly) on its first request: one request from `node -e` took 0.35 s of CPU
// with fetch, 0.14 s over node:http, on a 2-core machine. Any other request (a Request object, a
// streamed body, redirects left to fetch) goes to the fetch it wraps, unchanged. `nodeFetch` sends
// every request this way, each socket through a lookup of the caller's: the deployment decides
// there which addresses it reaches (src/http/address-policy.ts).
//
// What it keeps of fetch: a 3xx under redirect "manual" is returned as it is (what undici does in
// Node), and under "error" fails as undici's "unexpected redirect"; an aborted signal rejects with
// its reason, before the answer and while its body is read; a network failure rejects with
// TypeError("fetch failed") and the cause, as undici does; a URLSearchParams body is sent
// form-encoded, with the content-type fetch gives it; `accept: */*` when the caller names none
// (Fetch standard, "fetching"); one listener per request on the signal, removed when the request
// ends (never one left behind: see src/serve/upstream.ts on undici's).
import type { Agent, ClientRequest, IncomingMessage } from "node:http";
import type { LookupFunction, Socket } from "node:net";

type Fetch = typeof globalThis.fetch;

/** Statuses whose answer has no body (Fetch standard, "null body status"). */
const NULL_BODY = new Set([101, 103, 204, 205, 304]);

/** A request sent here: a URL, redirects left to the caller or refused, a string, form or no body. */
function sentHere(input: Parameters<Fetch>[0], init: RequestInit | undefined): init is RequestInit {
  if (init?.redirect !== "manual" && init?.redirect !== "error") return false;
  if (typeof input !== "string" && !(input instanceof URL)) return false;
  const body = init.body;
  return body === undefined || body === null || typeof body === "string" || body instanceof URLSearchParams;
}

function destroyIdle(this: Socket) {
  this.destroy();
}

/** What a request may add to node:http's options: the lookup its socket resolves the host with. */
type RequestOptions = { method: string; headers: Record<string, string>; lookup?: LookupFunction };
type Transports = { request: (url: URL, options: RequestOptions, onResponse: (res: IncomingMessage) => void) => ClientRequest };

let transports: Promise<Transports> | undefined;

/**
 * node:http and node:https, loaded on the first request (a command that sends none never loads
 * them), each with one keep-alive agent. Idle sockets close after 4 s, undici's default, and
 * sooner when the server's Keep-Alive hint says so (Node's agent), so a request rarely meets a
 * socket the server is closing.
 */
function loadTransports() {
  transports ??= Promise.all([import("node:http"), import("node:https")]).then(([http, https]) => {
    const agents: Record<string, Agent> = { "http:": new http.Agent({ keepAlive: true, timeout: 4000 }), "https:": new https.Agent({ keepAlive: true, timeout: 4000 }) };
    // An idle socket the server closed is dropped at its end of stream: left to Node's agent, it
    // stays free until its own end completes, a turn later, and a request sent on it meanwhile
    // fails (ECONNRESET) where one on a new connection would have gone through or been refused.
    for (const agent of Object.values(agents)) agent.on("free", (socket: Socket) => socket.once("end", destroyIdle));
    return {
      request: (url: URL, options: RequestOptions, onResponse: (res: IncomingMessage) => void) => {
        const req = (url.protocol === "https:" ? https.request : http.request)(url, { ...options, agent: agents[url.protocol] }, onResponse);
        req.once("socket", (socket) => socket.off("end", destroyIdle));
        return req;
      },
    };
  });
  return transports;
}

/**
 * The ports fetch refuses before connecting (Fetch standard, "port blocking"; undici's list): those
 * of other protocols (SMTP on 25, IRC on 6667, …). The OAuth and deployment requests sent here
 * were fetch's before and keep its refusal: their URLs include what a server's metadata names (a
 * token or registration endpoint), and a hostile one must not make subs post a body to a mail
 * server on localhost. MCP requests never had it (their URL is the file's).
 */
const BAD_PORTS = new Set([
  "1", "7", "9", "11", "13", "15", "17", "19", "20", "21", "22", "23", "25", "37", "42", "43", "53", "69", "77", "79",
  "87", "95", "101", "102", "103", "104", "109", "110", "111", "113", "115", "117", "119", "123", "135", "137",
  "139", "143", "161", "179", "389", "427", "465", "512", "513", "514", "515", "526", "530", "531", "532",
  "540", "548", "554", "556", "563", "587", "601", "636", "989", "990", "993", "995", "1719", "1720", "1723",
  "2049", "3659", "4045", "4190", "5060", "5061", "6000", "6566", "6665", "6666", "6667", "6668", "6669", "6679",
  "6697", "10080",
]);

/** An MCP transport's request: the SDK always accepts text/event-stream. */
function isMcpRequest(init: RequestInit): boolean {
  const accept = init.headers instanceof Headers ? init.headers.get("accept") : new Headers(init.headers).get("accept");
  return accept?.includes("text/event-stream") ?? false;
}

/** `fallback` for what is not sent here (see sentHere); node:http for the rest. */
export function directFetch(fallback: Fetch): Fetch {
  const direct = nodeFetch(() => ({}));
  return (input, init) => {
    if (!sentHere(input, init)) return fallback(input, init);
    const url = new URL(input as string | URL);
    if (url.protocol !== "http:" && url.protocol !== "https:") return fallback(input, init);
    // As undici refuses it (src/http/guarded-fetch.ts, isBlockedPort, reads this cause).
    if (BAD_PORTS.has(url.port) && !isMcpRequest(init)) return Promise.reject(new TypeError("fetch failed", { cause: new Error("bad port") }));
    return direct(input, init);
  };
}

/**
 * Where a request may go and how its socket finds the host: `lookup` resolves it (and may refuse
 * what it resolves to), or the request is refused before anything is sent (`refused`, the reason a
 * fetch failure carries as its cause).
 */
export type Connection = { lookup?: LookupFunction } | { refused: Error };

/**
 * Every request sent with node:http, for a process whose every request must pass `connection`
 * (the deployment: src/http/address-policy.ts), not only its MCP requests. A body is a string,
 * URLSearchParams or none (what the MCP SDK and the OAuth requests send); a 3xx is answered as it
 * is when the caller asked for redirect "manual" (guardedFetch and the SDK's transport follow
 * redirects themselves, within an origin), and is a failure otherwise: nothing is followed here.
 */
export function nodeFetch(connection: (url: URL) => Connection): Fetch {
  return async (input, init = {}) => {
    if (input instanceof Request) throw new TypeError("fetch failed", { cause: new Error("a Request object is not sent here; give a URL and init") });
    const url = new URL(input);
    if (url.protocol !== "http:" && url.protocol !== "https:") throw new TypeError("fetch failed", { cause: new Error(`${url.protocol} is not http(s)`) });
    const body = init.body;
    if (body !== undefined && body !== null && typeof body !== "string" && !(body instanceof URLSearchParams)) {
      throw new TypeError("fetch failed", { cause: new Error("only a string or URLSearchParams body is sent here") });
    }
    const to = connection(url);
    if ("refused" in to) throw new TypeError("fetch failed", { cause: to.refused });
    const headers = new Headers(init.headers);
    // What fetch itself adds for a URLSearchParams body (Fetch standard, "extract a body").
    if (body instanceof URLSearchParams && !headers.has("content-type")) headers.set("content-type", "application/x-www-form-urlencoded;charset=UTF-8");
    const t = await loadTransports();
    const response = await send(t.request, url, { ...init, headers, body: body instanceof URLSearchParams ? body.toString() : body }, to.lookup);
    if (response.status >= 300 && response.status < 400 && response.headers.has("location") && init.redirect !== "manual") {
      await response.body?.cancel().catch(() => {});
      // Under "error", undici's words for it (what a deployment's client reports: src/remote/client.ts).
      throw new TypeError("fetch failed", { cause: new Error(init.redirect === "error" ? "unexpected redirect" : `${url.origin} answered a redirect, which is not followed here`) });
    }
    return response;
  };
}

function send(request: Transports["request"], url: URL, init: RequestInit, lookup: LookupFunction | undefined): Promise<Response> {
  const signal = init.signal ?? undefined;
  if (signal?.aborted) return Promise.reject(signal.reason);
  const headers: Record<string, string> = {};
  new Headers(init.headers).forEach((value, name) => (headers[name] = value));
  // undici's defaults where the caller set none; no compression is asked for (none to undo).
  headers["accept"] ??= "*/*";
  headers["user-agent"] ??= "node";
  headers["accept-encoding"] = "identity";
  const body = typeof init.body === "string" ? init.body : undefined;
  if (body !== undefined) headers["content-length"] = String(Buffer.byteLength(body));
  return new Promise<Response>((resolve, reject) => {
    // Before the answer, aborting ends the request; once it came, it errors the body.
    let onAbort = () => {};
    const listener = () => onAbort();
    const done = () => signal?.removeEventListener("abort", listener);
    const req = request(url, { method: init.method ?? "GET", headers, ...(lookup ? { lookup } : {}) }, (res) => {
      const status = res.statusCode ?? 0;
      const answer = new Headers();
      try {
        for (let i = 0; i < res.rawHeaders.length; i += 2) answer.append(res.rawHeaders[i]!, res.rawHeaders[i + 1]!);
      } catch (error) {
        done();
        res.destroy();
        return reject(new TypeError("fetch failed", { cause: error }));
      }
      if (status < 200 || status > 599) {
        done();
        res.destroy();
        return reject(new TypeError("fetch failed", { cause: new Error(`invalid HTTP status ${status}`) }));
      }
      let stream: ReadableStream<Uint8Array> | null = null;
      if (NULL_BODY.has(status) || init.method === "HEAD") {
        done();
        res.resume();
      } else {
        let finished = false;
        stream = new ReadableStream<Uint8Array>({
          start(controller) {
            const fail = (error: unknown) => {
              if (finished) return;
              finished = true;
              done();
              controller.error(error);
              res.destroy();
            };
            onAbort = () => fail(signal!.reason);
            res.on("data", (chunk: Buffer) => {
              if (finished) return;
              controller.enqueue(new Uint8Array(chunk.buffer, chunk.byteOffset, chunk.byteLength));
              // Backpressure: the socket is read as fast as the body is.
              if ((controller.desiredSize ?? 1) <= 0) res.pause();
            });
            res.on("end", () => {
              if (finished) return;
              finished = true;
              done();
              controller.close();
            });
            res.on("error", (error) => fail(new TypeError("terminated", { cause: error })));
            // Closed before its end (the connection dropped mid-body).
            res.on("close", () => fail(new TypeError("terminated", { cause: new Error("the connection closed before the body ended") })));
          },
          pull() {
            res.resume();
          },
          cancel() {
            finished = true;
            done();
            res.destroy();
          },
        });
      }
      const response = new Response(stream, { status, statusText: res.statusMessage ?? "", headers: answer });
      Object.defineProperty(response, "url", { value: url.href });
      resolve(response);
    });
    onAbort = () => {
      done();
      req.destroy();
      reject(signal!.reason);
    };
    signal?.addEventListener("abort", listener, { once: true });
    req.on("error", (error) => {
      done();
      reject(new TypeError("fetch failed", { cause: error }));
    });
    req.end(body);
  });
}
