// The loopback redirect of a native OAuth client (RFC 8252 §7.3): an HTTP listener on 127.0.0.1
// only, port chosen by the OS unless --port, that accepts one authorization response at
// /callback, shows the browser a short page, and closes.
import { randomBytes } from "node:crypto";
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { failed, usage } from "../errors.ts";

export const CALLBACK_PATH = "/callback";
/** Where the browser is sent first: a one-time address that redirects to the authorization URL. */
const OPEN_PATH = "/open/";

/**
 * What is wrong with an authorization response, or undefined when it may be used. A response
 * that is not for this login (no `state`, another `state`) is ignored and the wait goes on; one
 * that is (its `state` matches) but fails a check ends the login.
 */
export type ResponseProblem = { why: string; forThisLogin: boolean };
export type ResponseCheck = (params: URLSearchParams) => ResponseProblem | undefined;

export type Loopback = {
  redirectUri: string;
  port: number;
  /**
   * Resolves with the authorization response that `check` accepts; rejects when one for this
   * login fails it. Responses not for this login are answered with a page saying so and handed to
   * `ignored`, and the wait goes on: a bogus callback must not end a pending login.
   */
  response: (check: ResponseCheck, ignored?: (problem: ResponseProblem) => void) => Promise<URLSearchParams>;
  /**
   * A one-time address on this listener that redirects the browser to `target`: the
   * browser's argv, which every local user can read in /proc, then holds no `state`. Asked for a
   * second time, someone else had the address: `replayed` runs and gets nothing.
   */
  openUrl: (target: string, replayed: () => void) => string;
  close: () => Promise<void>;
};

export async function startLoopback(options: { port?: number }): Promise<Loopback> {
  let deliver: ((params: URLSearchParams) => { status: number; message: string }) | undefined;
  const opens = new Map<string, { target: string; used: boolean; replayed: () => void }>();
  let expectedHost = "";
  const server: Server = createServer((req, res) => {
    // The browser follows the redirect to http://127.0.0.1:<port>/callback, so its Host is exactly
    // that. Any other Host is a page that reached the listener by another name (DNS rebinding,
    // RFC 8252 §8.3): it gets nothing, and the one response stays open for the real one.
    if (req.headers.host !== expectedHost) {
      res.writeHead(421, { "content-type": "text/plain; charset=utf-8", connection: "close" }).end("Misdirected request\n");
      return;
    }
    const url = new URL(req.url ?? "/", "http://127.0.0.1");
    const open = req.method === "GET" && url.pathname.startsWith(OPEN_PATH) ? opens.get(url.pathname.slice(OPEN_PATH.length)) : undefined;
    if (open) {
      const headers = { "cache-control": "no-store", "referrer-policy": "no-referrer", connection: "close" };
      if (!open.used) {
        open.used = true;
        res.writeHead(302, { ...headers, location: open.target }).end();
      } else {
        res.writeHead(410, { ...headers, "content-type": "text/html; charset=utf-8" }).end(page("This one-time link was already used. See the terminal; you can close this window."));
        open.replayed();
      }
      return;
    }
    if (req.method !== "GET" || url.pathname !== CALLBACK_PATH || !deliver) {
      res.writeHead(404, { "content-type": "text/plain; charset=utf-8" }).end("Not found\n");
      return;
    }
    const answer = deliver(url.searchParams);
    res.writeHead(answer.status, { "content-type": "text/html; charset=utf-8", "cache-control": "no-store", connection: "close" });
    res.end(page(answer.message));
  });
  await new Promise<void>((resolve, reject) => {
    server.once("error", (error: NodeJS.ErrnoException) => {
      if (error.code === "EADDRINUSE") reject(usage(`port ${options.port} on 127.0.0.1 is in use`, { hint: "choose another --port, or omit it to let the system pick one" }));
      else if (error.code === "EACCES") reject(usage(`port ${options.port} on 127.0.0.1 cannot be used (permission denied)`, { hint: "choose a port above 1023, or omit --port" }));
      else reject(failed(`cannot listen on 127.0.0.1 (${error.code ?? error.message})`));
    });
    server.listen(options.port ?? 0, "127.0.0.1", () => resolve());
  });
  const { port } = server.address() as AddressInfo;
  expectedHost = `127.0.0.1:${port}`;
  let closed: Promise<void> | undefined;
  const close = () =>
    (closed ??= new Promise<void>((resolve) => {
      server.close(() => resolve());
      server.closeAllConnections();
    }));
  return {
    port,
    redirectUri: `http://127.0.0.1:${port}${CALLBACK_PATH}`,
    response: (check, ignored) =>
      new Promise<URLSearchParams>((resolve, reject) => {
        deliver = (params) => {
          const problem = check(params);
          if (problem && !problem.forThisLogin) {
            ignored?.(problem);
            return { status: 400, message: "This response does not belong to the login waiting in the terminal; it was ignored. You can close this window." };
          }
          // One response for this login is accepted; the listener closes once the page is sent.
          deliver = undefined;
          setImmediate(() => void close());
          if (problem) {
            reject(failed(problem.why, { code: "invalid_authorization_response" }));
            return { status: 400, message: "Authorization did not complete. See the terminal for details; you can close this window." };
          }
          resolve(params);
          return params.has("error")
            ? { status: 400, message: "Authorization did not complete. See the terminal for details; you can close this window." }
            : { status: 200, message: "Authorized. You can close this window and return to the terminal." };
        };
      }),
    openUrl: (target, replayed) => {
      const nonce = randomBytes(32).toString("base64url");
      opens.set(nonce, { target, used: false, replayed });
      return `http://${expectedHost}${OPEN_PATH}${nonce}`;
    },
    close,
  };
}

function page(message: string): string {
  return `<!doctype html><html><head><meta charset="utf-8"><title>subs</title></head><body style="font-family: system-ui, sans-serif; margin: 3em"><p>${message}</p></body></html>\n`;
}

/**
 * Under --no-browser (or when no browser could be opened) on a terminal: the person may paste the
 * URL the browser was redirected to (its page failed to load because the loopback is on another
 * machine, e.g. over SSH). Anything else pasted (junk, a redirect from another login) is said to
 * be wrong and the wait goes on; only a response `check` accepts ends it. What was
 * pasted is never echoed: it may hold a code.
 */
export function pastedResponse(options: {
  stdin: NodeJS.ReadableStream;
  check: ResponseCheck;
  signal: AbortSignal;
  redirectUri: string;
  /** Says why a pasted line was not taken. */
  tell: (message: string) => void;
}): Promise<URLSearchParams> {
  const { stdin, check, signal, redirectUri, tell } = options;
  const again = "paste the address from this login's browser window, or press Ctrl-C to stop";
  return new Promise((resolve) => {
    let buffer = "";
    const onData = (chunk: Buffer | string) => {
      buffer += chunk.toString();
      let newline: number;
      while ((newline = buffer.indexOf("\n")) !== -1) {
        const line = buffer.slice(0, newline).trim();
        buffer = buffer.slice(newline + 1);
        if (!line) continue;
        let url: URL | undefined;
        try {
          url = new URL(line);
        } catch {}
        if (!url || (!url.searchParams.has("code") && !url.searchParams.has("error"))) {
          tell(`that is not the address the browser was redirected to (it starts with ${redirectUri}?code=…); ${again}`);
          continue;
        }
        const problem = check(url.searchParams);
        if (problem) {
          tell(`${problem.forThisLogin ? problem.why : "that address is not from this login"}; ${again}`);
          continue;
        }
        cleanup();
        resolve(url.searchParams);
        return;
      }
    };
    const cleanup = () => {
      stdin.off("data", onData);
      signal.removeEventListener("abort", cleanup);
      (stdin as NodeJS.ReadStream).pause?.();
    };
    signal.addEventListener("abort", cleanup, { once: true });
    stdin.on("data", onData);
    (stdin as NodeJS.ReadStream).resume?.();
  });
}
