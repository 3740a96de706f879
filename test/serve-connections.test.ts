// src/serve/connections.ts on a plain node:http server, whose handler trusts a request that says
// `x-trusted: yes` (what serveHttp and the deployment do once a request's token checks out): at
// the cap the oldest untrusted connection gives way, or the newcomer when every other is trusted;
// a connection that sends no whole request in time is closed, one that did or that is trusted is not.
import assert from "node:assert/strict";
import { createServer, type Server } from "node:http";
import { connect, type AddressInfo, type Socket } from "node:net";
import { describe, test } from "node:test";
import { guardConnections, type ConnectionLimits } from "../src/serve/connections.ts";

async function start(limits: ConnectionLimits): Promise<{ server: Server; port: number }> {
  const server = createServer();
  const guard = guardConnections(server, limits);
  server.on("request", (req, res) => {
    if (req.headers["x-trusted"] === "yes") guard.trust(req);
    // A trusted request's body is not waited for: the answer goes at once, the connection stays.
    res.writeHead(200, { "content-length": "2" }).end("ok");
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  return { server, port: (server.address() as AddressInfo).port };
}

type Held = { socket: Socket; closed: () => boolean; answered: () => boolean };

function open(port: number, send?: string): Promise<Held> {
  return new Promise((resolve, reject) => {
    const socket = connect(port, "127.0.0.1");
    let closed = false;
    let answered = false;
    socket.on("close", () => (closed = true));
    socket.on("data", (d) => (answered ||= d.toString().startsWith("HTTP/1.1 200")));
    socket.on("error", () => {});
    socket.once("connect", () => {
      if (send !== undefined) socket.write(send);
      resolve({ socket, closed: () => closed, answered: () => answered });
    });
    socket.once("error", reject);
  });
}

async function waitFor(condition: () => boolean, what: string, timeoutMs = 15_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!condition()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 10));
  }
}

const TRUSTED = "GET / HTTP/1.1\r\nHost: x\r\nx-trusted: yes\r\n\r\n";

describe("guardConnections", () => {
  test("at the cap the oldest connection that carried no trusted request gives way; trusted ones stay; when all are trusted the newcomer is refused", async () => {
    const { server, port } = await start({ maxConnections: 10, preAuthMs: 60_000 });
    try {
      const trusted = await open(port, TRUSTED);
      await waitFor(trusted.answered, "the trusted request's answer");
      const idle: Held[] = [];
      for (let n = 0; n < 30; n++) idle.push(await open(port));
      await waitFor(() => idle.filter((h) => h.closed()).length === 21, "21 idle connections closed");
      assert.deepEqual(
        idle.map((h) => h.closed()),
        idle.map((_, n) => n < 21),
        "the oldest 21 went, the newest 9 stay",
      );
      assert.equal(trusted.closed(), false);

      for (const h of idle) h.socket.destroy();
      const more: Held[] = [];
      for (let n = 0; n < 9; n++) more.push(await open(port, TRUSTED));
      await waitFor(() => more.every((h) => h.answered()), "9 more trusted answers");
      const late = await open(port);
      await waitFor(late.closed, "the newcomer to be refused");
      assert.ok([trusted, ...more].every((h) => !h.closed()), "no trusted connection gave way");
      for (const h of [trusted, ...more]) h.socket.destroy();
    } finally {
      server.closeAllConnections();
      server.close();
    }
  });

  test("a connection with no whole request by the deadline is closed; one whose request was whole, or trusted, is not", async () => {
    const { server, port } = await start({ maxConnections: 100, preAuthMs: 300 });
    try {
      const silent = await open(port);
      const partialHeaders = await open(port, "GET / HTTP/1.1\r\nHost: x\r\n");
      const partialBody = await open(port, "POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n{");
      const whole = await open(port, "GET / HTTP/1.1\r\nHost: x\r\n\r\n");
      const trustedPartialBody = await open(port, "POST / HTTP/1.1\r\nHost: x\r\nx-trusted: yes\r\nContent-Length: 100\r\n\r\n{");
      await waitFor(() => silent.closed() && partialHeaders.closed() && partialBody.closed(), "the three without a whole request to be closed");
      // Well past the deadline: node:http's keep-alive timeout (5 s) is what ends `whole` later.
      await new Promise((r) => setTimeout(r, 600));
      assert.equal(whole.closed(), false, "a whole request, even untrusted, is not cut at the deadline");
      assert.equal(whole.answered(), true);
      assert.equal(trustedPartialBody.closed(), false, "a trusted connection is never cut at the deadline");
      for (const h of [whole, trustedPartialBody]) h.socket.destroy();
    } finally {
      server.closeAllConnections();
      server.close();
    }
  });
});
