// One HTTP exchange for the test browsers, the $BROWSER scripts a child `subs` runs (browser.mjs,
// click-approve.mjs), over node:http(s) rather than fetch: a process's first fetch compiles
// undici's HTTP parser (WebAssembly), about 0.2 s of CPU on a 2-core machine, which every login in
// the suite paid once more. Each exchange has a connection of its own, closed after it: a kept-alive
// socket would hold the browser's process open after its last request.
import { request as httpRequest } from "node:http";
import { request as httpsRequest } from "node:https";

/**
 * Sends one request and follows no redirect: the status, the redirect's target (absolute) if any,
 * and with `read` the body as text (without, the body is left unread, as a browser leaving the
 * page would, so a server that never ends one holds nothing here).
 */
export function exchange(url, { method = "GET", headers = {}, body, read = false } = {}) {
  const target = new URL(url);
  const send = target.protocol === "https:" ? httpsRequest : httpRequest;
  const sent = body === undefined ? headers : { ...headers, "content-length": String(Buffer.byteLength(body)) };
  return new Promise((resolve, reject) => {
    const req = send(target, { method, headers: sent, agent: false }, (res) => {
      const answer = { status: res.statusCode ?? 0, url: target.href, location: res.headers.location ? new URL(res.headers.location, target).href : undefined, text: "" };
      if (!read) {
        res.destroy();
        return resolve(answer);
      }
      const chunks = [];
      res.on("data", (chunk) => chunks.push(chunk));
      res.on("end", () => resolve({ ...answer, text: Buffer.concat(chunks).toString("utf8") }));
      res.on("error", reject);
    });
    req.on("error", reject);
    req.end(body);
  });
}

/** Whether an answer sends the browser on (a 3xx with a Location). */
const redirects = (answer) => answer.status >= 300 && answer.status < 400 && answer.location !== undefined;

/** GET, following up to five redirects as a browser does: the last answer, with how many redirects led to it. */
export async function visit(url, { read = false } = {}) {
  let answer = await exchange(url, { read });
  let hops = 0;
  for (; hops < 5 && redirects(answer); hops++) answer = await exchange(answer.location, { read });
  return { ...answer, hops };
}
