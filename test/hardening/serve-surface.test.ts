// The `--http` endpoint of `subs mcp proxy` and `subs agent serve` as a local attacker meets it:
// another program on the machine, or a web page in its browser reaching loopback through DNS
// rebinding (MCP transports, "Security Warning"), with raw requests that choose every header: the
// bearer token (only the exact one), Host and Origin (only loopback), the address it binds (only
// loopback), the token file (0600, never through a symbolic link), request bodies (401 before
// reading, 413 over 4 MiB) and session ids (random, 404 when guessed, one GET stream each).
// The endpoints attacked run the built CLI (bin/subs.cjs) as a user starts it, as does the token
// file made under a process's umask 000. Of the refusals to start (an address not loopback, a
// token file that is a link), each command's first runs the built CLI and the rest run the same
// `run()` in this process: what they check is the refusal and the files left, not the process (a
// child costs a Node start-up and the bundle's load per run).
import assert from "node:assert/strict";
import { randomUUID } from "node:crypto";
import { existsSync, mkdtempSync, readFileSync, rmSync, statSync, symlinkSync, writeFileSync } from "node:fs";
import { request, type IncomingMessage } from "node:http";
import { networkInterfaces, tmpdir } from "node:os";
import path from "node:path";
import { after, afterEach, before, describe, it } from "node:test";
import { runCli, runInProcess, type RunResult } from "../support/cli.ts";
import { startRichServer, type RichServer } from "../support/mcp-rich-server.ts";
import { rawExchange, INITIALIZE, rawRequest, serveOverHttp, type ServedHttp } from "../support/served-http.ts";

const MCP_TOKEN = "surface-upstream-SECRET-token";
/** 4 MiB: what the endpoint reads of a request body at most (docs/serve.md). */
const MAX_BODY = 4 * 1024 * 1024;

/**
 * A refusal to start: the built CLI, or `run()` in this process. Either is stopped after 15 s: a
 * serve that wrongly started is then ended (the child killed, the in-process run's signal aborted,
 * as Ctrl-C would), and the checks on its exit code and stderr fail: with [::] let through by
 * src/serve/address.ts, the in-process `mcp proxy --http [::]:0` served, was ended and failed here.
 */
function refusal(how: "cli" | "in-process", argv: string[], dir: string): Promise<RunResult> {
  if (how === "cli") return runCli(argv, { cwd: dir, env: { MCP_TOKEN }, timeoutMs: 15_000 });
  return runInProcess(argv, { cwd: dir, env: { HOME: dir, MCP_TOKEN }, signal: AbortSignal.timeout(15_000) });
}

/** One served endpoint, in front of an upstream of its own. */
type Endpoint = {
  served: ServedHttp;
  upstream: RichServer;
  /** Initialize requests this endpoint accepted: each starts exactly one upstream session. */
  accepted: number;
  /** The sessions those started, ended after each test (an endpoint may bound how many are open). */
  open: string[];
};

/**
 * The upstream saw exactly one session per initialize the endpoint accepted: none of the refused
 * requests reached it. `subs agent serve` opens its upstream sessions after answering, so the
 * count is awaited; it can only grow, so a session too many is seen once the count settles.
 */
async function onlyAcceptedReachedUpstream(e: Endpoint): Promise<void> {
  const count = () => e.upstream.events.filter((event) => event === "initialize").length;
  const deadline = Date.now() + 10_000;
  while (count() < e.accepted && Date.now() < deadline) await new Promise((r) => setTimeout(r, 20));
  await new Promise((r) => setTimeout(r, 200));
  assert.equal(count(), e.accepted, "one upstream session per accepted initialize, none for a refused request");
}

describe("--http as an attacker meets it (subs mcp proxy and subs agent serve, the built CLI)", () => {
  let dir: string;
  let proxy: Endpoint;
  let agent: Endpoint;

  /** `rawRequest`, counting the initialize requests the endpoint accepts. */
  const send = async (e: Endpoint, options: Parameters<typeof rawRequest>[1], url = e.served.url) => {
    const answer = await rawRequest(url, options);
    if (answer.status === 200 && typeof options.body === "string" && options.body.includes('"initialize"')) {
      e.accepted++;
      e.open.push(String(answer.headers["mcp-session-id"]));
    }
    return answer;
  };

  afterEach(async () => {
    for (const e of [proxy, agent]) {
      for (const id of e.open.splice(0)) await rawRequest(e.served.url, { method: "DELETE", headers: { Authorization: `Bearer ${e.served.token}`, "Mcp-Session-Id": id } });
    }
  });

  before(async () => {
    dir = mkdtempSync(path.join(tmpdir(), "subs-surface-"));
    const [forProxy, forAgent] = await Promise.all([startRichServer(), startRichServer()]);
    writeFileSync(
      path.join(dir, "substructure.toml"),
      `[mcp.proxied]\nurl = "${forProxy.url}"\nauth = { token_env = "MCP_TOKEN" }\n\n[mcp.served]\nurl = "${forAgent.url}"\nauth = { token_env = "MCP_TOKEN" }\n\n[agent.triage]\nmcp = ["served"]\n`,
    );
    const [p, a] = await Promise.all([
      serveOverHttp(dir, ["mcp", "proxy", "proxied"], { env: { MCP_TOKEN }, tokenFile: "proxy.token" }),
      serveOverHttp(dir, ["agent", "serve", "triage"], { env: { MCP_TOKEN }, tokenFile: "agent.token" }),
    ]);
    proxy = { served: p, upstream: forProxy, accepted: 0, open: [] };
    agent = { served: a, upstream: forAgent, accepted: 0, open: [] };
  });

  after(async () => {
    for (const e of [proxy, agent]) {
      const { served } = e;
      assert.equal(await served.stop(), 0, served.stderr());
      assert.equal(served.stdout(), "");
      assert.ok(!served.stderr().includes(served.token), "with --token-file the token is never printed");
      assert.ok(!served.stderr().includes(MCP_TOKEN));
      await e.upstream.close();
    }
    rmSync(dir, { recursive: true, force: true });
  });

  it("the bearer check: only the exact token passes; a prefix, an extension, one character changed, another case or scheme, any length is 401 and starts nothing", async () => {
    for (const e of [proxy, agent]) {
      const { token } = e.served;
      assert.match(token, /^[A-Za-z0-9_-]{43}$/, "32 random bytes, base64url");
      const flipped = token.slice(0, 20) + (token[20] === "A" ? "B" : "A") + token.slice(21);
      const wrong = [
        token.slice(0, -1),
        `${token}x`,
        `x${token}`,
        token.slice(0, 16),
        flipped,
        token.toUpperCase() === token ? token.toLowerCase() : token.toUpperCase(),
        `${token}=`,
        "",
        "a",
        "x".repeat(8000),
        "é".repeat(43),
        encodeURIComponent(token) + "%00",
      ];
      const missing = await send(e, { body: INITIALIZE });
      assert.equal(missing.status, 401);
      assert.equal(missing.headers["www-authenticate"], 'Bearer realm="subs"');
      for (const value of wrong) {
        const answer = await send(e, { body: INITIALIZE, headers: { Authorization: `Bearer ${value}` } });
        assert.equal(answer.status, 401, `Bearer ${value.slice(0, 50)}: ${answer.body}`);
        assert.equal(answer.headers["www-authenticate"], 'Bearer realm="subs", error="invalid_token"');
        assert.ok(!answer.body.includes(token), "an answer never quotes the token");
      }
      for (const header of [`Basic ${token}`, `Basic ${Buffer.from(`user:${token}`).toString("base64")}`, token, `Token ${token}`, `Bearer ${token} ${token}`, `Bearer\t${token}`]) {
        assert.equal((await send(e, { body: INITIALIZE, headers: { Authorization: header } })).status, 401, header.slice(0, 30));
      }
      // The token sent elsewhere than Authorization does not count either.
      assert.equal((await send(e, { body: INITIALIZE }, new URL(`${e.served.url.href}?access_token=${token}`))).status, 401);
      assert.equal((await send(e, { body: INITIALIZE, headers: { Cookie: `token=${token}`, "X-Api-Key": token } })).status, 401);
      assert.equal(e.accepted, 0);

      // The control: the exact token passes, the scheme in any case (RFC 9110 §11.1).
      for (const scheme of ["Bearer", "bearer"]) {
        const right = await send(e, { body: INITIALIZE, headers: { Authorization: `${scheme} ${token}` } });
        assert.equal(right.status, 200, `${scheme}: ${right.body}`);
        assert.match(right.body, /"protocolVersion"/);
      }
      await onlyAcceptedReachedUpstream(e);
    }
    // The two endpoints have their own tokens: one's is no good at the other.
    assert.notEqual(proxy.served.token, agent.served.token);
    assert.equal((await send(agent, { body: INITIALIZE, headers: { Authorization: `Bearer ${proxy.served.token}` } })).status, 401);
    await onlyAcceptedReachedUpstream(agent);
  });

  it("DNS rebinding: a Host or Origin that does not name loopback is 403 before the token is even looked at, whatever its spelling, port or address form", async () => {
    for (const e of [proxy, agent]) {
      const port = e.served.url.port;
      const auth = { Authorization: `Bearer ${e.served.token}` };
      const hosts = [
        "evil.example.com",
        `evil.example.com:${port}`,
        `localhost.evil.com:${port}`,
        `LOCALHOST.EVIL.COM:${port}`,
        `localhost.evil.com.:${port}`,
        `127.0.0.1.nip.io:${port}`,
        `127.0.0.1.nip.io.:${port}`,
        `127.0.0.1.evil.example.com:${port}`,
        `[::ffff:127.0.0.1]:${port}`,
        `[::ffff:7f00:1]:${port}`,
        `0.0.0.0:${port}`,
        `[::]:${port}`,
        `localhost@evil.example.com:${port}`,
        // Read by URL parsing as user info before a loopback host: not a Host at all.
        `evil.example.com:${port}@localhost`,
        `evil.example.com@127.0.0.1:${port}`,
        `127.0.0.1:${port}/path`,
      ];
      for (const host of hosts) {
        for (const headers of [{ ...auth, Host: host }, { Host: host }] as Array<Record<string, string>>) {
          const answer = await send(e, { body: INITIALIZE, headers });
          assert.equal(answer.status, 403, `Host: ${host} (${headers.Authorization ? "with" : "without"} the token): ${answer.body}`);
          assert.match(answer.body, /Forbidden/);
        }
      }
      const origins = [
        "null",
        "http://evil.example.com",
        `http://localhost.evil.com:${port}`,
        `HTTP://LOCALHOST.EVIL.COM.:${port}`,
        `https://127.0.0.1.nip.io:${port}`,
        `http://127.0.0.1.evil.example.com:${port}`,
        `http://[::ffff:127.0.0.1]:${port}`,
        `http://0.0.0.0:${port}`,
        `http://localhost@evil.example.com:${port}`,
        "file://",
        "chrome-extension://localhost",
        "ftp://localhost",
        "localhost",
        "",
      ];
      for (const origin of origins) {
        const answer = await send(e, { body: INITIALIZE, headers: { ...auth, Host: `127.0.0.1:${port}`, Origin: origin } });
        assert.equal(answer.status, 403, `Origin: ${origin}: ${answer.body}`);
      }
      // A session already started is no way in either: the check comes before the session's.
      const started = await send(e, { body: INITIALIZE, headers: auth });
      const session = String(started.headers["mcp-session-id"]);
      const ping = JSON.stringify({ jsonrpc: "2.0", id: 2, method: "ping" });
      assert.equal((await send(e, { body: ping, headers: { ...auth, "Mcp-Session-Id": session, Host: `evil.example.com:${port}` } })).status, 403);
      assert.equal((await send(e, { body: ping, headers: { ...auth, "Mcp-Session-Id": session, Origin: "http://evil.example.com" } })).status, 403);

      // The control: loopback names, with this port, in Host and Origin.
      for (const name of ["localhost", "127.0.0.1", "[::1]"]) {
        const ok = await send(e, { body: INITIALIZE, headers: { ...auth, Host: `${name}:${port}`, Origin: `http://${name}:${port}` } });
        assert.equal(ok.status, 200, `${name}: ${ok.body}`);
      }
      await onlyAcceptedReachedUpstream(e);
    }
  });

  it("bodies: 401 (and 403) come before the body is read; over 4 MiB is 413, declared or streamed, in a session or not; just under passes", async () => {
    const { url, token } = proxy.served;
    const host = `Host: 127.0.0.1:${url.port}`;
    const post = `POST /mcp HTTP/1.1\r\n${host}\r\nContent-Type: application/json\r\nAccept: application/json, text/event-stream\r\n`;
    // Headers that announce 64 MiB, and no byte of it: the answer comes at once, unread.
    const announce = `${post}Content-Length: ${64 * 1024 * 1024}\r\n`;
    const answer = (head: string, body?: Buffer[]) => rawExchange(url, head, { body, waitMs: 10_000 });
    assert.match(await answer(announce), /^HTTP\/1\.1 401 /);
    assert.match(await answer(`${announce}Authorization: Bearer not-the-token\r\n`), /^HTTP\/1\.1 401 /);
    assert.match(await answer(`${post}Transfer-Encoding: chunked\r\n`), /^HTTP\/1\.1 401 /);
    assert.match(await answer(`${announce.replace(host, "Host: evil.example.com")}Authorization: Bearer ${token}\r\n`), /^HTTP\/1\.1 403 /);
    // With the token, a declared length over the bound is refused unread too.
    assert.match(await answer(`${announce}Authorization: Bearer ${token}\r\n`), /^HTTP\/1\.1 413 /);

    const auth = `Authorization: Bearer ${token}\r\n`;
    const padded = (size: number) => Buffer.from(INITIALIZE + " ".repeat(size - Buffer.byteLength(INITIALIZE)));
    const pieces = (body: Buffer) => Array.from({ length: Math.ceil(body.length / 65536) }, (_, n) => body.subarray(n * 65536, (n + 1) * 65536));
    const chunked = (body: Buffer) => [...pieces(body).map((p) => Buffer.concat([Buffer.from(`${p.length.toString(16)}\r\n`), p, Buffer.from("\r\n")])), Buffer.from("0\r\n\r\n")];
    const over = padded(MAX_BODY + 1);
    assert.match(await answer(`${post}${auth}Content-Length: ${over.length}\r\n`, pieces(over)), /^HTTP\/1\.1 413 /);
    // Streamed without a length: counted as it comes.
    assert.match(await answer(`${post}${auth}Transfer-Encoding: chunked\r\n`, chunked(over)), /^HTTP\/1\.1 413 /);
    // The control: just under the bound is read, declared or streamed.
    const under = padded(MAX_BODY - 64);
    assert.match(await answer(`${post}${auth}Content-Length: ${under.length}\r\n`, pieces(under)), /^HTTP\/1\.1 200 /);
    assert.match(await answer(`${post}${auth}Transfer-Encoding: chunked\r\n`, chunked(under)), /^HTTP\/1\.1 200 /);
    proxy.accepted += 2;
    // Inside a session, the same bound.
    const started = await send(proxy, { body: INITIALIZE, headers: { Authorization: `Bearer ${token}` } });
    const session = `Mcp-Session-Id: ${String(started.headers["mcp-session-id"])}\r\nMcp-Protocol-Version: 2025-11-25\r\n`;
    const ping = JSON.stringify({ jsonrpc: "2.0", id: 2, method: "ping" });
    const big = Buffer.from(ping + " ".repeat(MAX_BODY));
    assert.match(await answer(`${post}${auth}${session}Content-Length: ${big.length}\r\n`, pieces(big)), /^HTTP\/1\.1 413 /);
    assert.match(await answer(`${post}${auth}${session}Transfer-Encoding: chunked\r\n`, chunked(big)), /^HTTP\/1\.1 413 /);
    assert.match(await answer(`${post}${auth}${session}Content-Length: ${Buffer.byteLength(ping)}\r\n`, [Buffer.from(ping)]), /^HTTP\/1\.1 200 /);
    assert.equal(proxy.served.child.exitCode, null, "still serving");
    await onlyAcceptedReachedUpstream(proxy);
  });

  it("session ids: random, never guessable from another; a guessed or altered one is 404; one GET stream per session", async () => {
    const { url, token } = proxy.served;
    const auth = { Authorization: `Bearer ${token}` };
    const ids: string[] = [];
    for (let n = 0; n < 8; n++) {
      const answer = await send(proxy, { body: INITIALIZE, headers: auth });
      assert.equal(answer.status, 200, answer.body);
      ids.push(String(answer.headers["mcp-session-id"]));
    }
    // UUID version 4: 122 random bits each (RFC 9562 §5.4), all different.
    for (const id of ids) assert.match(id, /^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/);
    assert.equal(new Set(ids).size, ids.length);
    const shared = (a: string, b: string) => {
      let n = 0;
      while (n < a.length && a[n] === b[n]) n++;
      return n;
    };
    assert.ok(Math.max(...ids.slice(1).map((id, n) => shared(id, ids[n]!))) < 8, `consecutive ids share a long prefix: ${ids.join(" ")}`);

    const real = ids[0]!;
    const headersFor = (id: string) => ({ ...auth, "Mcp-Session-Id": id, "Mcp-Protocol-Version": "2025-11-25" });
    const ping = JSON.stringify({ jsonrpc: "2.0", id: 2, method: "ping" });
    assert.equal((await rawRequest(url, { body: ping, headers: headersFor(real) })).status, 200, "the control: the issued id works");
    const last = real.at(-1) === "0" ? "1" : "0";
    for (const guess of [randomUUID(), real.slice(0, -1) + last, real.toUpperCase(), `${real},${real}`, real.replaceAll("-", ""), "1", "0", "", "00000000-0000-4000-8000-000000000000"]) {
      const answer = await rawRequest(url, { body: ping, headers: headersFor(guess) });
      assert.equal(answer.status, 404, `${JSON.stringify(guess)}: ${answer.body}`);
      assert.equal((await rawRequest(url, { method: "GET", headers: headersFor(guess) })).status, 404, `GET ${JSON.stringify(guess)}`);
      assert.equal((await rawRequest(url, { method: "DELETE", headers: headersFor(guess) })).status, 404, `DELETE ${JSON.stringify(guess)}`);
    }

    // One standalone GET (SSE) stream per session: a second is refused while the first is open.
    const stream = () =>
      new Promise<IncomingMessage>((resolve, reject) => {
        const req = request(url, { method: "GET", headers: { ...headersFor(ids[1]!), Accept: "text/event-stream" } }, resolve);
        req.on("error", reject);
        req.end();
      });
    const first = await stream();
    let second: IncomingMessage | undefined;
    try {
      assert.equal(first.statusCode, 200);
      assert.match(String(first.headers["content-type"]), /text\/event-stream/);
      second = await stream();
      assert.equal(second.statusCode, 409);
    } finally {
      first.destroy();
      second?.destroy();
    }
  });
});

describe("--http binds loopback only", () => {
  it("0.0.0.0, ::, a LAN address, this machine's own addresses, a host name (resolving anywhere) are refused with exit 2 before anything is served", async () => {
    const dir = mkdtempSync(path.join(tmpdir(), "subs-surface-bind-"));
    try {
      writeFileSync(path.join(dir, "substructure.toml"), `[mcp.rich]\nurl = "http://127.0.0.1:9/mcp"\nauth = { token_env = "MCP_TOKEN" }\n\n[agent.triage]\nmcp = ["rich"]\n`);
      const own = Object.values(networkInterfaces())
        .flat()
        .filter((i) => i && !i.internal)
        .map((i) => (i!.family === "IPv6" ? `[${i!.address}]:0` : `${i!.address}:0`));
      const specs = [
        "0.0.0.0:0",
        "[::]:0",
        "[0:0:0:0:0:0:0:0]:0",
        "192.168.1.10:8931",
        "10.0.0.1:0",
        "[fe80::1]:0",
        ...own,
        "example.com:0",
        "localhost.evil.com:0",
        "127.0.0.1.nip.io:0",
        "LOCALHOST.:0",
        "[::ffff:0.0.0.0]:0",
      ];
      for (const command of [["mcp", "proxy", "rich"], ["agent", "serve", "triage"]]) {
        for (const [n, spec] of specs.entries()) {
          const argv = [...command, "--http", spec, "--token-file", "bind.token"];
          const r = await refusal(n === 0 ? "cli" : "in-process", argv, dir);
          assert.equal(r.code, 2, `${argv.join(" ")}: ${r.stderr}`);
          assert.match(r.stderr, /loopback/, argv.join(" "));
          assert.doesNotMatch(r.stderr, /serving MCP/, argv.join(" "));
          assert.equal(r.stdout, "");
          assert.ok(!existsSync(path.join(dir, "bind.token")), `${spec}: no token was made`);
        }
      }
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});

describe("--token-file", () => {
  let dir: string;
  let rich: RichServer;

  before(async () => {
    dir = mkdtempSync(path.join(tmpdir(), "subs-surface-token-"));
    rich = await startRichServer();
    writeFileSync(path.join(dir, "substructure.toml"), `[mcp.rich]\nurl = "${rich.url}"\nauth = { token_env = "MCP_TOKEN" }\n\n[agent.triage]\nmcp = ["rich"]\n`);
  });

  after(async () => {
    await rich.close();
    rmSync(dir, { recursive: true, force: true });
  });

  it("is created 0600 even under umask 000, and holds the token the endpoint takes", async () => {
    const served = await serveOverHttp(dir, ["mcp", "proxy", "rich"], { env: { MCP_TOKEN }, tokenFile: "fresh.token", shell: "umask 000;" });
    try {
      assert.equal(statSync(path.join(dir, "fresh.token")).mode & 0o777, 0o600);
      assert.equal((await rawRequest(served.url, { body: INITIALIZE, headers: { Authorization: `Bearer ${served.token}` } })).status, 200);
    } finally {
      assert.equal(await served.stop(), 0, served.stderr());
    }
  });

  it("a symbolic link at its path (to a file another user reads, or dangling to where one would be made) is refused with exit 2; its target is never written", async () => {
    const victim = path.join(dir, "victim.txt");
    writeFileSync(victim, "not a token\n", { mode: 0o644 });
    symlinkSync(victim, path.join(dir, "to-victim.token"));
    const dangling = path.join(dir, "readable-by-others.txt");
    symlinkSync(dangling, path.join(dir, "dangling.token"));
    for (const command of [["mcp", "proxy", "rich"], ["agent", "serve", "triage"]]) {
      for (const [n, link] of ["to-victim.token", "dangling.token"].entries()) {
        const argv = [...command, "--http", "127.0.0.1:0", "--token-file", link];
        const r = await refusal(n === 0 ? "cli" : "in-process", argv, dir);
        assert.equal(r.code, 2, `${argv.join(" ")}: ${r.stderr}`);
        assert.match(r.stderr, /--token-file[\s\S]*(symbolic link|ELOOP)/, argv.join(" "));
        assert.doesNotMatch(r.stderr, /serving MCP/);
        assert.equal(r.stdout, "");
        assert.equal(readFileSync(victim, "utf8"), "not a token\n", "the link's target is unchanged");
        assert.equal(statSync(victim).mode & 0o777, 0o644, "nor its mode");
        assert.ok(!existsSync(dangling), "a dangling link's target is not created");
      }
    }
  });
});
