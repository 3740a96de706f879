// The loopback redirect of a native OAuth client (RFC 8252 §7.3): an HTTP listener on 127.0.0.1
// only, port chosen by the OS unless --port, that accepts one authorization response at
// /callback, shows the browser a short page, and closes.
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { failed, usage } from "../errors.ts";

export const CALLBACK_PATH = "/callback";

/** Says what is wrong with an authorization response, or undefined when it may be used. */
export type ResponseCheck = (params: URLSearchParams) => string | undefined;

export type Loopback = {
  redirectUri: string;
  port: number;
  /** Resolves with the first authorization response that reaches /callback; rejects when `check` refuses it. */
  response: (check: ResponseCheck) => Promise<URLSearchParams>;
  close: () => Promise<void>;
};

export async function startLoopback(options: { port?: number }): Promise<Loopback> {
  let deliver: ((params: URLSearchParams) => string | undefined) | undefined;
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
    if (req.method !== "GET" || url.pathname !== CALLBACK_PATH || !deliver) {
      res.writeHead(404, { "content-type": "text/plain; charset=utf-8" }).end("Not found\n");
      return;
    }
    const problem = deliver(url.searchParams);
    deliver = undefined; // one response is accepted; the listener closes after it
    const ok = problem === undefined && !url.searchParams.has("error");
    res.writeHead(ok ? 200 : 400, { "content-type": "text/html; charset=utf-8", "cache-control": "no-store", connection: "close" });
    res.end(page(ok ? "Authorized. You can close this window and return to the terminal." : "Authorization did not complete. See the terminal for details; you can close this window."));
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
    response: (check) =>
      new Promise<URLSearchParams>((resolve, reject) => {
        deliver = (params) => {
          const problem = check(params);
          if (problem) reject(failed(problem, { code: "invalid_authorization_response" }));
          else resolve(params);
          // Close once the page has been sent.
          setImmediate(() => void close());
          return problem;
        };
      }),
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
 * be wrong and the wait goes on; only a response `check` accepts ends it (issue 13). What was
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
          tell(`${/`state`/.test(problem) ? "that address is not from this login" : problem}; ${again}`);
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
