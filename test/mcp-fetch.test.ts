// The node:http fetch behind every request subs follows the redirects of itself (src/http/mcp-fetch.ts)
// against a real loopback server: what the SDK's transport and the OAuth requests rely on of fetch.
import assert from "node:assert/strict";
import { getEventListeners } from "node:events";
import { createServer, type IncomingMessage, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { after, before, describe, it } from "node:test";
import { directFetch } from "../src/http/mcp-fetch.ts";
import { refusedUrl } from "./support/ports.ts";
import { within } from "./support/wait.ts";

const MCP_ACCEPT = "application/json, text/event-stream";

describe("directFetch", () => {
  let base = "";
  const sockets = new Set<unknown>();
  let release = () => {};
  const server = createServer((req: IncomingMessage, res: ServerResponse) => {
    sockets.add(req.socket);
    const chunks: Buffer[] = [];
    req.on("data", (c: Buffer) => chunks.push(c));
    req.on("end", () => {
      const body = Buffer.concat(chunks).toString("utf8");
      switch (req.url) {
        case "/json":
          res.writeHead(200, { "content-type": "application/json", "mcp-session-id": "s1" });
          res.end(JSON.stringify({ method: req.method, body, length: req.headers["content-length"], accept: req.headers.accept, authorization: req.headers.authorization }));
          return;
        case "/sse":
          res.writeHead(200, { "content-type": "text/event-stream" });
          res.write("data: one\n\n");
          // The second event only once the client has read the first: the body streams.
          release = () => res.end("data: two\n\n");
          return;
        case "/form":
          res.writeHead(200, { "content-type": "application/json" });
          res.end(JSON.stringify({ body, type: req.headers["content-type"], length: req.headers["content-length"] }));
          return;
        case "/hang":
          return;
        case "/redirect":
          res.writeHead(307, { location: "/json" }).end();
          return;
        case "/accepted":
          res.writeHead(202).end();
          return;
        default:
          res.writeHead(404).end("no");
      }
    });
  });
  before(async () => {
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
    base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  });
  after(() => {
    server.closeAllConnections();
    server.close();
  });
  const refuse: typeof globalThis.fetch = async () => {
    throw new Error("the fallback fetch was used");
  };
  const fetch = directFetch(refuse);
  const post = (path: string, extra: RequestInit = {}) =>
    fetch(`${base}${path}`, {
      method: "POST",
      redirect: "manual",
      headers: new Headers({ accept: MCP_ACCEPT, "content-type": "application/json", authorization: "Bearer t" }),
      body: '{"jsonrpc":"2.0","id":1,"method":"ping","é":1}',
      ...extra,
    });

  it("sends the body and headers, answers with status, headers and JSON, on one kept-alive socket", async () => {
    const before = sockets.size;
    for (let i = 0; i < 3; i++) {
      const response = await post("/json");
      assert.equal(response.status, 200);
      assert.equal(response.ok, true);
      assert.equal(response.headers.get("mcp-session-id"), "s1");
      assert.equal(response.url, `${base}/json`);
      const got = (await response.json()) as Record<string, string>;
      assert.deepEqual(got, {
        method: "POST",
        body: '{"jsonrpc":"2.0","id":1,"method":"ping","é":1}',
        length: String(Buffer.byteLength('{"jsonrpc":"2.0","id":1,"method":"ping","é":1}')),
        accept: MCP_ACCEPT,
        authorization: "Bearer t",
      });
    }
    assert.equal(sockets.size - before, 1);
  });

  it("streams an SSE body as it arrives", async () => {
    const response = await within(post("/sse"), "the answer's headers, sent with its first event, before its second");
    assert.equal(response.headers.get("content-type"), "text/event-stream");
    const reader = response.body!.pipeThrough(new TextDecoderStream()).getReader();
    let text = "";
    // The second event is held until the first has been read: a body read whole never gets here.
    while (!text.includes("data: one\n\n")) {
      const r = await within(reader.read(), `the first event while the second is held (so far: ${JSON.stringify(text)})`);
      assert.ok(!r.done, `the stream ended before its first event: ${JSON.stringify(text)}`);
      text += r.value;
    }
    release();
    for (let r = await reader.read(); !r.done; r = await reader.read()) text += r.value;
    assert.equal(text, "data: one\n\ndata: two\n\n");
  });

  it("returns a redirect as it is under redirect manual (the SDK follows it)", async () => {
    const response = await post("/redirect");
    assert.equal(response.status, 307);
    assert.equal(response.headers.get("location"), "/json");
  });

  it("answers 202 with an empty body and 404 with its text", async () => {
    const accepted = await post("/accepted");
    assert.equal(accepted.status, 202);
    assert.equal(await accepted.text(), "");
    const missing = await post("/missing");
    assert.equal(missing.status, 404);
    assert.equal(await missing.text(), "no");
  });

  it("rejects with the signal's reason, before the answer and while the body is read, and leaves no listener", async () => {
    const early = new AbortController();
    const pending = post("/hang", { signal: early.signal });
    setTimeout(() => early.abort(new Error("gave up")), 50);
    await assert.rejects(pending, /gave up/);
    assert.equal(getEventListeners(early.signal, "abort").length, 0);

    const late = new AbortController();
    const response = await post("/sse", { signal: late.signal });
    const reader = response.body!.getReader();
    await reader.read();
    late.abort(new Error("cancelled mid-stream"));
    await assert.rejects(reader.read(), /cancelled mid-stream/);
    assert.equal(getEventListeners(late.signal, "abort").length, 0);

    const done = new AbortController();
    await (await post("/json", { signal: done.signal })).json();
    assert.equal(getEventListeners(done.signal, "abort").length, 0);
    await assert.rejects(post("/json", { signal: AbortSignal.abort(new Error("already")) }), /already/);
  });

  it("rejects a network failure as fetch does: TypeError with the cause", async () => {
    const error = await fetch(await refusedUrl(), { method: "POST", redirect: "manual", headers: { accept: MCP_ACCEPT }, body: "{}" }).then(
      () => assert.fail("answered"),
      (e: unknown) => e,
    );
    assert.ok(error instanceof TypeError);
    assert.equal(error.message, "fetch failed");
    assert.equal((error.cause as { code?: string }).code, "ECONNREFUSED");
  });

  it("sends a form body as fetch does (an OAuth token request): encoded, with fetch's content-type", async () => {
    const response = await fetch(`${base}/form`, { method: "POST", redirect: "manual", headers: { accept: "application/json" }, body: new URLSearchParams({ grant_type: "authorization_code", code: "a b&c" }) });
    assert.equal(response.status, 200);
    assert.deepEqual(await response.json(), { body: "grant_type=authorization_code&code=a+b%26c", type: "application/x-www-form-urlencoded;charset=UTF-8", length: "42" });
  });

  it("sends a GET that accepts JSON only (OAuth discovery, a deployment) the same way", async () => {
    const response = await fetch(`${base}/json`, { method: "GET", redirect: "manual", headers: { accept: "application/json" } });
    assert.equal(response.status, 200);
    assert.equal(((await response.json()) as { method: string }).method, "GET");
    // With no accept of the caller's, fetch's: */* (a registration request names none).
    const bare = await fetch(`${base}/json`, { method: "POST", redirect: "manual", body: "{}" });
    assert.equal(((await bare.json()) as { accept: string }).accept, "*/*");
  });

  it("refuses a port fetch blocks before connecting, as undici does, except to an MCP request", async () => {
    // Refused before any connection: one tried would be answered or fail ECONNREFUSED, not "bad port".
    for (const port of [25, 6000, 10080]) {
      const error = await fetch(`http://127.0.0.1:${port}/token`, { method: "POST", redirect: "manual", headers: { accept: "application/json" }, body: new URLSearchParams({ a: "b" }) }).then(
        () => assert.fail("answered"),
        (e: unknown) => e,
      );
      assert.ok(error instanceof TypeError);
      assert.equal((error.cause as Error).message, "bad port", String(port));
    }
    // Sent: answered (another test file's server may be on 6000) or refused by the kernel, not by the list.
    const outcome = await fetch("http://127.0.0.1:6000/mcp", { method: "POST", redirect: "manual", headers: { accept: MCP_ACCEPT }, body: "{}" }).then(
      () => "answered",
      (e: unknown) => ((e as Error).cause as Error | undefined)?.message,
    );
    assert.notEqual(outcome, "bad port");
  });

  it("leaves every other request to the fetch it wraps", async () => {
    const seen: string[] = [];
    const wrapped = directFetch(async (input) => {
      seen.push(input instanceof Request ? input.url : String(input));
      return new Response("fallback");
    });
    // Redirects followed by fetch, a body that is neither a string nor a form, a Request object.
    await wrapped(`${base}/json`, { method: "POST", headers: { accept: MCP_ACCEPT }, body: "{}" });
    await wrapped(`${base}/json`, { method: "POST", redirect: "manual", headers: { accept: MCP_ACCEPT }, body: new Blob(["{}"]) });
    await wrapped(new Request(`${base}/json`), { redirect: "manual" });
    assert.deepEqual(seen, [`${base}/json`, `${base}/json`, `${base}/json`]);
  });
});
