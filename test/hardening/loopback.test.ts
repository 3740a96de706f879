// The loopback listener (src/auth/loopback.ts): it binds 127.0.0.1 only, accepts one
// authorization response at /callback with the right `state` from a request addressed to
// 127.0.0.1, and refuses everything else. Requests are made with node:http so the Host header
// can be chosen (fetch does not let a page, or a test, set it).
import assert from "node:assert/strict";
import { request } from "node:http";
import { connect } from "node:net";
import { networkInterfaces } from "node:os";
import { describe, test } from "node:test";
import { startLoopback, type ResponseCheck } from "../../src/auth/loopback.ts";
import { SubsError } from "../../src/errors.ts";
import { responseCheck } from "../../src/auth/login.ts";

const STATE = "the-state-this-login-sent";
/** The check login makes (src/auth/login.ts), state first. */
const check: ResponseCheck = responseCheck({ state: STATE, issuer: "http://127.0.0.1/", issAdvertised: false });

function get(port: number, path: string, options: { host?: string; method?: string; address?: string } = {}): Promise<{ status: number; body: string }> {
  return new Promise((resolve, reject) => {
    const req = request({ host: options.address ?? "127.0.0.1", port, path, method: options.method ?? "GET", headers: { host: options.host ?? `127.0.0.1:${port}` } }, (res) => {
      let body = "";
      res.on("data", (d) => (body += d));
      res.on("end", () => resolve({ status: res.statusCode ?? 0, body }));
    });
    req.on("error", reject);
    req.end();
  });
}

/** Resolves "connected" or the connection error's code. */
function tryConnect(host: string, port: number): Promise<string> {
  return new Promise((resolve) => {
    const socket = connect({ host, port });
    socket.once("connect", () => {
      socket.destroy();
      resolve("connected");
    });
    socket.once("error", (error: NodeJS.ErrnoException) => resolve(error.code ?? "error"));
  });
}

const settled = (p: Promise<unknown>) => Promise.race([p.then(() => "resolved", () => "rejected"), new Promise((r) => setTimeout(() => r("pending"), 50))]);

describe("loopback listener", () => {
  test("binds 127.0.0.1 only: not other loopback addresses, not ::1, not the machine's other interfaces", async () => {
    const loopback = await startLoopback({});
    try {
      assert.equal(await tryConnect("127.0.0.1", loopback.port), "connected");
      // 127.0.0.2 is loopback too on Linux: reachable only if the listener bound every address.
      assert.equal(await tryConnect("127.0.0.2", loopback.port), "ECONNREFUSED");
      assert.notEqual(await tryConnect("::1", loopback.port), "connected");
      const external = Object.values(networkInterfaces())
        .flat()
        .filter((i) => i && !i.internal)
        .map((i) => i!.address);
      for (const address of external) assert.notEqual(await tryConnect(address, loopback.port), "connected", address);
      assert.match(loopback.redirectUri, /^http:\/\/127\.0\.0\.1:\d+\/callback$/);
    } finally {
      await loopback.close();
    }
  });

  test("a wrong path, a method other than GET, and a Host other than 127.0.0.1:<port> are refused; the real response still gets through", async () => {
    const loopback = await startLoopback({});
    try {
      const response = loopback.response(check);
      const query = `?code=c1&state=${STATE}`;
      assert.equal((await get(loopback.port, `/other${query}`)).status, 404);
      assert.equal((await get(loopback.port, `/callback/${query}`)).status, 404);
      assert.equal((await get(loopback.port, `/callback${query}`, { method: "POST" })).status, 404);
      for (const host of [`evil.example:${loopback.port}`, `localhost:${loopback.port}`, "127.0.0.1", `127.0.0.1:${loopback.port + 1}`]) {
        const answer = await get(loopback.port, `/callback${query}`, { host });
        assert.equal(answer.status, 421, host);
        assert.doesNotMatch(answer.body, /Authorized/);
      }
      assert.equal(await settled(response), "pending", "nothing refused above was taken as the response");
      assert.equal((await get(loopback.port, `/callback${query}`)).status, 200);
      assert.equal((await response).get("code"), "c1");
    } finally {
      await loopback.close();
    }
  });

  test("a missing or wrong `state` is ignored (the browser is told so) and the wait goes on; the right one then ends it", async () => {
    const loopback = await startLoopback({});
    try {
      const ignored: string[] = [];
      const response = loopback.response(check, (problem) => ignored.push(problem.why));
      for (const query of ["?code=c1", "?code=c1&state=another", `?code=c1&state=${STATE}x`, "?error=access_denied&state=another"]) {
        const answer = await get(loopback.port, `/callback${query}`);
        assert.equal(answer.status, 400, query);
        assert.match(answer.body, /does not belong to the login/);
        assert.equal(await settled(response), "pending", `${query} did not end the wait`);
      }
      assert.equal(ignored.length, 4);
      assert.ok(ignored.every((why) => /state/.test(why)));
      assert.equal((await get(loopback.port, `/callback?code=right&state=${STATE}`)).status, 200);
      assert.equal((await response).get("code"), "right");
      await new Promise((r) => setTimeout(r, 20));
      assert.equal(await tryConnect("127.0.0.1", loopback.port), "ECONNREFUSED", "the listener closes after the right one");
    } finally {
      await loopback.close();
    }
  });

  test("a response for this login that fails a later check (iss) ends the login and closes the listener", async () => {
    const strict = responseCheck({ state: STATE, issuer: "http://127.0.0.1/", issAdvertised: true });
    const loopback = await startLoopback({});
    try {
      const response = loopback.response(strict);
      response.catch(() => {});
      const answer = await get(loopback.port, `/callback?code=c1&state=${STATE}&iss=${encodeURIComponent("https://attacker.example/")}`);
      assert.equal(answer.status, 400);
      assert.match(answer.body, /did not complete/);
      await assert.rejects(response, (error: unknown) => error instanceof SubsError && error.code === "invalid_authorization_response" && /issuer/.test(error.message));
    } finally {
      await loopback.close();
    }
  });

  test("the one-time link redirects once to the authorization URL; a second visit gets nothing and is reported", async () => {
    const loopback = await startLoopback({});
    try {
      let replays = 0;
      const target = `https://auth.example/authorize?state=${STATE}`;
      const link = loopback.openUrl(target, () => replays++);
      assert.doesNotMatch(link, /state|auth\.example/, "the link itself carries no state");
      const path = new URL(link).pathname;
      assert.equal((await get(loopback.port, path, { host: `evil.example:${loopback.port}` })).status, 421, "another Host gets nothing and uses nothing up");
      const first = await new Promise<{ status: number; location: string | undefined }>((resolve, reject) => {
        const req = request({ host: "127.0.0.1", port: loopback.port, path }, (res) => {
          res.resume();
          resolve({ status: res.statusCode ?? 0, location: res.headers.location });
        });
        req.on("error", reject);
        req.end();
      });
      assert.equal(first.status, 302);
      assert.equal(first.location, target);
      assert.equal(replays, 0);
      const second = await get(loopback.port, path);
      assert.equal(second.status, 410);
      assert.doesNotMatch(second.body, /state/);
      assert.equal(replays, 1);
      assert.equal((await get(loopback.port, "/open/guessed")).status, 404);
    } finally {
      await loopback.close();
    }
  });

  test("a second callback is not accepted: the first response stands and the port closes", async () => {
    const loopback = await startLoopback({});
    try {
      const response = loopback.response(check);
      assert.equal((await get(loopback.port, `/callback?code=first&state=${STATE}`)).status, 200);
      const second = await get(loopback.port, `/callback?code=second&state=${STATE}`).catch((error: NodeJS.ErrnoException) => ({ status: 0, body: error.code ?? "" }));
      assert.notEqual(second.status, 200, "the second callback is never accepted");
      assert.equal((await response).get("code"), "first");
      await new Promise((r) => setTimeout(r, 20));
      assert.equal(await tryConnect("127.0.0.1", loopback.port), "ECONNREFUSED");
    } finally {
      await loopback.close();
    }
  });
});
