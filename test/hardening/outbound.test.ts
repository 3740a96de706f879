// Where subs sends a credential, as an attacker who runs or sits next to a server would try to move
// it: a redirect to another origin (an MCP server, or an authorization server's token endpoint,
// answering 307 or 308, which keep the method and the body), a proxy named in the environment
// (HTTP_PROXY and friends), and a TLS server whose certificate is not trusted or names another
// host. Each goes through the commands that call a server, and `subs mcp proxy` and `subs agent
// serve` in front of one.
//
// Which run the built CLI (bin/subs.cjs as a child), and why:
// - the proxy test, whole: what it checks is the environment of a real process (a proxy variable
//   a library could read from process.env) and NODE_EXTRA_CA_CERTS, which Node reads at its start;
//   it runs every command this file covers (mcp login, tools, call, list --check, proxy; agent
//   tools, serve) on the built CLI;
// - the TLS tests' runs that trust a certificate through NODE_EXTRA_CA_CERTS (the self-signed
//   server's control, and every run of the certificate for another host name);
// - one representative case of each redirect table: `mcp tools` after a 307 (static token), `mcp
//   login` after a 307 (client_secret_post) and a refresh after a 307 (token endpoint), `mcp proxy`
//   after a 307 (OAuth MCP server).
// Every other run is run() in this process (what it checks is what is printed, its exit code and
// what reached which server, not the process), with all the child had: cwd, HOME, the environment,
// a browser that consents as $BROWSER's script does, and the process's fetch (`inProcess` below).
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { createServer, request as httpRequest, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import { createServer as createHttpsServer, type Server as HttpsServer } from "node:https";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import path from "node:path";
import { after, before, describe, it } from "node:test";
import type { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { browserCommand, consentingBrowser } from "../support/browser.ts";
import { runCli, runInProcess, type How, type RunResult, type TestContextOptions } from "../support/cli.ts";
import { annotatedTool, startMcpServer, type RunningMcpServer } from "../support/mcp-server.ts";
import { startAuthServer, type RunningAuthServer } from "../support/oauth-server.ts";
import { runServeInProcess, serveInProcess, serveSession } from "../support/serve-client.ts";

const STATIC = "outbound-static-SECRET-token";
const CLIENT_SECRET = "outbound-client-SECRET-value";
const TOOLS = [annotatedTool("search", { readOnlyHint: true })];

/** A server that answers 404 to everything and keeps what reached it: connections, and each request whole. */
type Recorder = { url: string; connections: number; requests: string[]; close: () => Promise<void> };

async function recorder(): Promise<Recorder> {
  const state = { connections: 0, requests: [] as string[] };
  const server: Server = createServer(async (req, res) => {
    const chunks: Buffer[] = [];
    for await (const chunk of req) chunks.push(chunk as Buffer);
    state.requests.push(`${req.method} ${req.url} ${JSON.stringify(req.headers)} ${Buffer.concat(chunks).toString("utf8")}`);
    res.writeHead(404).end();
  });
  server.on("connection", () => state.connections++);
  server.on("connect", (req, socket) => {
    state.requests.push(`CONNECT ${req.url} ${JSON.stringify(req.headers)}`);
    socket.destroy();
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    get connections() {
      return state.connections;
    },
    requests: state.requests,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

/** A self-signed certificate made for this run, for `san` (e.g. "IP:127.0.0.1"). */
function certificate(dir: string, name: string, san: string): { cert: string; key: string; certFile: string } {
  const certFile = path.join(dir, `${name}.pem`);
  const keyFile = path.join(dir, `${name}.key`);
  execFileSync("openssl", ["req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", keyFile, "-out", certFile, "-days", "1", "-subj", `/CN=${name}`, "-addext", `subjectAltName=${san}`], { stdio: "ignore" });
  return { cert: readFileSync(certFile, "utf8"), key: readFileSync(keyFile, "utf8"), certFile };
}

/** TLS in front of the plain server at `target` (every request and answer passed on as they are); counts the requests that got past the handshake. */
async function tlsFront(target: string, tls: { cert: string; key: string }): Promise<{ url: string; requests: () => number; close: () => Promise<void> }> {
  const upstream = new URL(target);
  let requests = 0;
  const server: HttpsServer = createHttpsServer(tls, (req, res) => {
    requests++;
    const forward = httpRequest({ host: upstream.hostname, port: upstream.port, path: req.url, method: req.method, headers: { ...req.headers, host: upstream.host } }, (answer) => {
      res.writeHead(answer.statusCode ?? 502, answer.headers);
      answer.pipe(res);
    });
    forward.on("error", () => res.destroy());
    req.pipe(forward);
  });
  server.on("tlsClientError", () => {});
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  return {
    url: `https://127.0.0.1:${(server.address() as AddressInfo).port}`,
    requests: () => requests,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

/** A `gate` for startMcpServer: while `state.redirect` is set, POST /mcp answers it, to `state.to`. */
function redirecting(state: { redirect?: number; to: () => string }) {
  return (req: IncomingMessage, res: ServerResponse) => {
    if (state.redirect === undefined || req.url !== "/mcp") return false;
    res.writeHead(state.redirect, { location: state.to() }).end();
    return true;
  };
}

/**
 * What an in-process run is given of what the built CLI's child had: its cwd, HOME (runCli sets
 * HOME=cwd), its environment, and a browser that consents as $BROWSER's script does (browser.mjs);
 * testContext gives the process's fetch, so a redirect or a certificate meets the same code either way.
 */
const inProcess = (dir: string, env: Record<string, string>, visited?: string[]): TestContextOptions => ({
  cwd: dir,
  env: { HOME: dir, ...env },
  openBrowser: consentingBrowser(visited),
});

/** `subs <argv>` in `dir` with `env`, as `how` says; the child's $BROWSER consents (browser.mjs). */
function subsIn(how: How, dir: string, argv: string[], env: Record<string, string>): Promise<RunResult> {
  return how === "cli" ? runCli(argv, { cwd: dir, env: { BROWSER: browserCommand(), ...env } }) : runInProcess(argv, inProcess(dir, env));
}

type Served = { client: Client; stderr(): string; close(): Promise<void> };

/** An MCP client's session with `subs <argv>` (a serving command), as `how` says: serveSession's child, or run() in this process. */
function serve(how: How, argv: string[], options: { cwd: string; env: Record<string, string> }): Promise<Served> {
  return how === "cli" ? serveSession(argv, options) : serveInProcess(argv, options);
}

/** `subs mcp proxy <id>` given a client's initialize and then the end of its input: it opens the upstream, or says why not. */
async function proxyStart(how: How, dir: string, id: string, env: Record<string, string>): Promise<RunResult> {
  const initialize = { jsonrpc: "2.0", id: 1, method: "initialize", params: { protocolVersion: "2025-06-18", capabilities: {}, clientInfo: { name: "test", version: "1" } } };
  const line = `${JSON.stringify(initialize)}\n`;
  if (how === "cli") return runCli(["mcp", "proxy", id], { cwd: dir, env: { BROWSER: browserCommand(), ...env }, input: line });
  return runServeInProcess(["mcp", "proxy", id], { cwd: dir, env, input: line });
}

/** The refusal of a redirect to another origin (the SDK's redirectPolicy), as every command words it. */
const notFollowed = (id: string) =>
  new RegExp(`${id}: cannot reach http://127\\.0\\.0\\.1:\\d+ \\(Streamable HTTP error: Error POSTing to endpoint: Redirect to http://127\\.0\\.0\\.1:\\d+/mcp not followed \\(redirectPolicy: 'same-origin'\\)\\)`);

/** The commands that call a connection, each run as `how` says. */
async function everyCaller(how: How, dir: string, id: string, env: Record<string, string>): Promise<Array<[string, RunResult]>> {
  const runs: Array<[string, RunResult]> = [];
  for (const argv of [["mcp", "tools", id], ["mcp", "call", id, "search", "--args", "{}"], ["mcp", "list", "--check"], ["agent", "tools", "a"]]) {
    runs.push([argv.join(" "), await subsIn(how, dir, argv, env)]);
  }
  return runs;
}

describe("no credential crosses a redirect to another origin", () => {
  let dir: string;
  let elsewhere: Recorder;
  let staticServer: RunningMcpServer;
  const staticState: { redirect?: number; to: () => string } = { to: () => `${elsewhere.url}/mcp` };

  before(async () => {
    dir = mkdtempSync(path.join(tmpdir(), "subs-outbound-redirect-"));
    elsewhere = await recorder();
    staticServer = await startMcpServer({ tools: TOOLS, gate: redirecting(staticState) });
    writeFileSync(path.join(dir, "substructure.toml"), `[mcp.s]\nurl = "${staticServer.url}"\nauth = { token_env = "MCP_TOKEN" }\n\n[agent.a]\nmcp = ["s"]\n`);
  });

  after(async () => {
    await Promise.all([elsewhere.close(), staticServer.close()]);
    rmSync(dir, { recursive: true, force: true });
  });

  it("a static token: an MCP server answering 307 or 308 to another origin gets nothing sent there, by any command, mcp proxy or agent serve; within its origin the redirect is followed", async () => {
    // The control: a redirect within the origin is followed, the token with it.
    const env = { MCP_TOKEN: STATIC };
    staticState.redirect = 307;
    staticState.to = () => `${staticServer.url}/moved`;
    const within = await subsIn("in-process", dir, ["mcp", "tools", "s", "--json"], env);
    assert.equal(within.code, 0, within.stderr);
    assert.deepEqual(JSON.parse(within.stdout).tools.map((t: { name: string }) => t.name), ["search"]);
    assert.equal(staticServer.authorizations.at(-1), `Bearer ${STATIC}`);

    staticState.to = () => `${elsewhere.url}/mcp`;
    for (const status of [307, 308]) {
      staticState.redirect = status;
      const runs = [...(await everyCaller("in-process", dir, "s", env)), ["mcp proxy s", await proxyStart("in-process", dir, "s", env)] as [string, RunResult]];
      // The representative case on the built CLI.
      if (status === 307) runs.push(["mcp tools s (built CLI)", await subsIn("cli", dir, ["mcp", "tools", "s"], env)]);
      for (const [what, r] of runs) {
        // Refused as a redirect not followed, not any failure.
        assert.equal(r.code, 1, `${what} after a ${status}: ${r.stderr}`);
        assert.match(r.stderr, notFollowed("s"), what);
        assert.ok(!(r.stdout + r.stderr).includes(STATIC), what);
      }
      const served = await serve("in-process", ["agent", "serve", "a"], { cwd: dir, env });
      try {
        assert.deepEqual((await served.client.listTools()).tools, [], "the connection is left out");
      } finally {
        await served.close();
      }
      assert.equal(elsewhere.connections, 0, `after a ${status}, something was sent to the other origin:\n${elsewhere.requests.join("\n")}`);
    }
  });
});

describe("no OAuth credential crosses a redirect to another origin", () => {
  let dir: string;
  let elsewhere: Recorder;
  let as: RunningAuthServer;
  let front: Server;
  let frontOrigin: string;
  let mcp: RunningMcpServer;
  /** What reached the authorization server's stated token endpoint (the front), whole. */
  const tokenRequests: string[] = [];
  /** How the front's token endpoint answers: passed on to the real one, or a redirect elsewhere. */
  const tokenEndpoint: { redirect?: number; methods: string[] } = { methods: ["client_secret_post"] };
  const mcpState: { redirect?: number; to: () => string } = { to: () => `${elsewhere.url}/mcp` };

  before(async () => {
    dir = mkdtempSync(path.join(tmpdir(), "subs-outbound-oauth-"));
    elsewhere = await recorder();
    // The real test authorization server issues and checks tokens; it sends no `iss`, so the
    // front below can state itself as the issuer (its metadata, the real one's endpoints but the token endpoint).
    as = await startAuthServer({ iss: "absent", advertiseIss: false, preRegistered: [{ client_id: "pre-client", client_secret: CLIENT_SECRET }] });
    front = createServer(async (req, res) => {
      const chunks: Buffer[] = [];
      for await (const chunk of req) chunks.push(chunk as Buffer);
      const body = Buffer.concat(chunks).toString("utf8");
      if (req.url === "/.well-known/oauth-authorization-server") {
        const real = (await (await fetch(`${as.url}/.well-known/oauth-authorization-server`)).json()) as Record<string, unknown>;
        res.writeHead(200, { "content-type": "application/json" }).end(JSON.stringify({ ...real, issuer: `${frontOrigin}/`, token_endpoint: `${frontOrigin}/token`, token_endpoint_auth_methods_supported: tokenEndpoint.methods }));
      } else if (req.url === "/token") {
        tokenRequests.push(`${JSON.stringify(req.headers)} ${body}`);
        if (tokenEndpoint.redirect !== undefined) {
          res.writeHead(tokenEndpoint.redirect, { location: `${elsewhere.url}/token` }).end();
          return;
        }
        const answer = await fetch(`${as.url}/token`, {
          method: "POST",
          headers: { "content-type": String(req.headers["content-type"]), ...(req.headers.authorization ? { authorization: req.headers.authorization } : {}) },
          body,
        });
        res.writeHead(answer.status, { "content-type": answer.headers.get("content-type") ?? "application/json" }).end(await answer.text());
      } else res.writeHead(404).end();
    });
    await new Promise<void>((resolve) => front.listen(0, "127.0.0.1", resolve));
    frontOrigin = `http://127.0.0.1:${(front.address() as AddressInfo).port}`;
    mcp = await startMcpServer({ tools: TOOLS, gate: redirecting(mcpState), oauth: { authServer: { issuer: `${frontOrigin}/`, verifier: as.verifier } } });
    writeFileSync(
      path.join(dir, "substructure.toml"),
      `[mcp.demo]\nurl = "${mcp.url}"\noauth = { client_id = "pre-client", client_secret_env = "PRE_SECRET" }\n\n[agent.a]\nmcp = ["demo"]\n`,
    );
  });

  after(async () => {
    front.closeAllConnections();
    await new Promise((resolve) => front.close(resolve));
    await Promise.all([elsewhere.close(), as.close(), mcp.close()]);
    rmSync(dir, { recursive: true, force: true });
  });

  const subs = (how: How, argv: string[]) => subsIn(how, dir, argv, { PRE_SECRET: CLIENT_SECRET });
  const noneElsewhere = (what: string) => assert.equal(elsewhere.connections, 0, `${what}: something was sent to the other origin:\n${elsewhere.requests.join("\n")}`);

  it("a token endpoint answering 307 or 308 to another origin, at login and at a refresh: the code, the verifier, the refresh token and the client secret never go there", async () => {
    // The client secret in the body (client_secret_post) or in a Basic header (client_secret_basic, RFC 6749 §2.3.1).
    for (const [method, carried] of [
      ["client_secret_post", `client_secret=${CLIENT_SECRET}`],
      ["client_secret_basic", `"authorization":"Basic ${Buffer.from(`pre-client:${CLIENT_SECRET}`).toString("base64")}"`],
    ]) {
      tokenEndpoint.methods = [method!];
      for (const status of [307, 308]) {
        tokenEndpoint.redirect = status;
        // Every case in this process; the representative one on the built CLI too.
        for (const how of status === 307 && method === "client_secret_post" ? (["in-process", "cli"] as const) : (["in-process"] as const)) {
          const sent = tokenRequests.length;
          const login = await subs(how, ["mcp", "login", "demo"]);
          noneElsewhere(`login (${method}, ${how}) after a ${status}`);
          assert.equal(login.code, 1, login.stderr);
          assert.match(login.stderr, /redirected to another origin/);
          assert.equal(tokenRequests.length, sent + 1, "the code exchange went to the stated token endpoint");
          assert.ok(tokenRequests.at(-1)!.includes(carried!), `with the client secret (${method}): ${tokenRequests.at(-1)}`);
          assert.ok(!(login.stdout + login.stderr).includes(CLIENT_SECRET));
        }
      }
    }

    // Logged in through the honest endpoint, then the access token dies and the refresh meets the redirect.
    tokenEndpoint.methods = ["client_secret_post"];
    delete tokenEndpoint.redirect;
    const login = await subs("in-process", ["mcp", "login", "demo"]);
    assert.equal(login.code, 0, login.stderr);
    for (const status of [307, 308]) {
      tokenEndpoint.redirect = status;
      for (const how of status === 307 ? (["in-process", "cli"] as const) : (["in-process"] as const)) {
        as.forgetAccessTokens();
        const sent = tokenRequests.length;
        const tools = await subs(how, ["mcp", "tools", "demo"]);
        assert.equal(tools.code, 1, tools.stderr);
        assert.match(tools.stderr, /error: demo: refreshing the access token at http:\/\/127\.0\.0\.1:\d+\/ failed \(http:\/\/127\.0\.0\.1:\d+ redirected to another origin \(http:\/\/127\.0\.0\.1:\d+\); refusing to follow\)/);
        assert.ok(tokenRequests.length > sent && tokenRequests.slice(sent).every((r) => r.includes("grant_type=refresh_token")), "a refresh went to the stated token endpoint");
        noneElsewhere(`a refresh (${how}) after a ${status}`);
      }
    }
    assert.equal(as.counters.refreshes, 0, "no refresh was redeemed anywhere");
  });

  it("an MCP server answering 307 or 308 to another origin never has the access token sent there, by any command, mcp proxy or agent serve", async () => {
    tokenEndpoint.methods = ["client_secret_post"];
    delete tokenEndpoint.redirect;
    delete mcpState.redirect;
    const login = await subs("in-process", ["mcp", "login", "demo"]);
    assert.equal(login.code, 0, login.stderr);
    const tools = await subs("in-process", ["mcp", "tools", "demo"]);
    assert.equal(tools.code, 0, `the control: ${tools.stderr}`);
    for (const status of [307, 308]) {
      mcpState.redirect = status;
      const env = { MCP_TOKEN: STATIC, PRE_SECRET: CLIENT_SECRET };
      const runs = [...(await everyCaller("in-process", dir, "demo", env)), ["mcp proxy demo", await proxyStart("in-process", dir, "demo", env)] as [string, RunResult]];
      // The representative case on the built CLI.
      if (status === 307) runs.push(["mcp proxy demo (built CLI)", await proxyStart("cli", dir, "demo", env)]);
      for (const [what, r] of runs) {
        assert.equal(r.code, 1, `${what} after a ${status}: ${r.stderr}`);
        assert.match(r.stderr, notFollowed("demo"), what);
      }
      const served = await serve("in-process", ["agent", "serve", "a"], { cwd: dir, env: { PRE_SECRET: CLIENT_SECRET } });
      try {
        assert.deepEqual((await served.client.listTools()).tools, []);
      } finally {
        await served.close();
      }
      noneElsewhere(`after a ${status} from the MCP server`);
    }
  });
});

describe("a proxy named in the environment is never used", () => {
  let dir: string;
  let proxy: Recorder;
  let as: RunningAuthServer;
  let plain: RunningMcpServer;
  let oauth: RunningMcpServer;
  let tls: Awaited<ReturnType<typeof tlsFront>>;
  let certFile: string;

  before(async () => {
    dir = mkdtempSync(path.join(tmpdir(), "subs-outbound-proxy-"));
    proxy = await recorder();
    as = await startAuthServer();
    plain = await startMcpServer({ tools: TOOLS });
    oauth = await startMcpServer({ tools: TOOLS, oauth: { authServer: as } });
    const cert = certificate(dir, "local", "IP:127.0.0.1");
    certFile = cert.certFile;
    tls = await tlsFront(plain.url, cert);
    writeFileSync(
      path.join(dir, "substructure.toml"),
      `[mcp.s]\nurl = "${plain.url}"\nauth = { token_env = "MCP_TOKEN" }\n\n[mcp.tls]\nurl = "${tls.url}/mcp"\nauth = { token_env = "MCP_TOKEN" }\n\n[mcp.demo]\nurl = "${oauth.url}"\n\n[agent.a]\nmcp = ["s", "tls", "demo"]\n`,
    );
  });

  after(async () => {
    await Promise.all([proxy.close(), as.close(), plain.close(), oauth.close(), tls.close()]);
    rmSync(dir, { recursive: true, force: true });
  });

  it("HTTP_PROXY, HTTPS_PROXY, ALL_PROXY (either case) set to a proxy: login, every command, mcp proxy and agent serve go straight to the servers; the proxy sees not one connection", async () => {
    const through = `${proxy.url}/`;
    const proxyEnv = { HTTP_PROXY: through, HTTPS_PROXY: through, ALL_PROXY: through, http_proxy: through, https_proxy: through, all_proxy: through, MCP_TOKEN: STATIC, NODE_EXTRA_CA_CERTS: certFile };
    const login = await runCli(["mcp", "login", "demo"], { cwd: dir, env: { ...proxyEnv, BROWSER: browserCommand() } });
    assert.equal(login.code, 0, login.stderr);
    // Each command once; each server (plain HTTP, HTTPS, OAuth with its authorization server) is
    // reached by mcp list --check, agent tools and agent serve, which list every connection's tools
    // (and fail unless each answers): `mcp tools` on the HTTPS one alone, where a run for each of the
    // other two went the same way.
    for (const argv of [
      ["mcp", "tools", "tls"],
      ["mcp", "call", "tls", "search", "--args", "{}"],
      ["mcp", "list", "--check"],
      ["agent", "tools", "a"],
    ]) {
      const r = await runCli(argv, { cwd: dir, env: proxyEnv });
      assert.equal(r.code, 0, `${argv.join(" ")}: ${r.stderr}`);
    }
    for (const argv of [["mcp", "proxy", "tls"], ["agent", "serve", "a"]]) {
      const served = await serveSession(argv, { cwd: dir, env: proxyEnv });
      try {
        const { tools } = await served.client.listTools();
        const name = argv[0] === "agent" ? "tls__search" : "search";
        assert.ok(tools.some((t) => t.name === name), `${argv.join(" ")}: ${JSON.stringify(tools)}`);
        if (argv[0] === "agent") assert.deepEqual(tools.map((t) => t.name).sort(), ["demo__search", "s__search", "tls__search"]);
        const result = await served.client.callTool({ name, arguments: { q: "x" } });
        assert.notEqual(result.isError, true, JSON.stringify(result));
      } finally {
        await served.close();
      }
    }
    assert.equal(proxy.connections, 0, `the proxy was used:\n${proxy.requests.join("\n")}`);
    assert.ok(tls.requests() > 0 && plain.requests.length > 0 && as.counters.codeExchanges > 0, "the requests went to the servers themselves");
  });
});

describe("TLS that cannot be trusted is refused before anything is sent", () => {
  let dir: string;
  let upstream: RunningMcpServer;
  let as: RunningAuthServer;
  let oauth: RunningMcpServer;
  let selfSigned: Awaited<ReturnType<typeof tlsFront>>;
  let otherName: Awaited<ReturnType<typeof tlsFront>>;
  let asFront: Awaited<ReturnType<typeof tlsFront>>;
  let ownCert: string;
  let otherNameCert: string;

  before(async () => {
    dir = mkdtempSync(path.join(tmpdir(), "subs-outbound-tls-"));
    upstream = await startMcpServer({ tools: TOOLS });
    const own = certificate(dir, "self-signed", "IP:127.0.0.1");
    const other = certificate(dir, "other-name", "DNS:other.example");
    ownCert = own.certFile;
    otherNameCert = other.certFile;
    selfSigned = await tlsFront(upstream.url, own);
    otherName = await tlsFront(upstream.url, other);
    // An authorization server behind the same untrusted certificate, named by a plain loopback MCP server.
    as = await startAuthServer();
    asFront = await tlsFront(as.url, own);
    oauth = await startMcpServer({ tools: TOOLS, oauth: { authServer: { issuer: `${asFront.url}/`, verifier: as.verifier } } });
    writeFileSync(
      path.join(dir, "substructure.toml"),
      `[mcp.tls]\nurl = "${selfSigned.url}/mcp"\nauth = { token_env = "MCP_TOKEN" }\n\n[mcp.named]\nurl = "${otherName.url}/mcp"\nauth = { token_env = "MCP_TOKEN" }\n\n[mcp.demo]\nurl = "${oauth.url}"\n\n[agent.a]\nmcp = ["tls"]\n`,
    );
  });

  after(async () => {
    await Promise.all([upstream.close(), as.close(), oauth.close(), selfSigned.close(), otherName.close(), asFront.close()]);
    rmSync(dir, { recursive: true, force: true });
  });

  it("a self-signed MCP server: mcp call, mcp proxy and agent serve refuse it (untrusted_certificate) and send it nothing; trusted through NODE_EXTRA_CA_CERTS it works", async () => {
    // In this process, which trusts no certificate of this run's; the control, which must be given
    // one through NODE_EXTRA_CA_CERTS (read by Node as a process starts), runs the built CLI.
    const call = await runInProcess(["mcp", "call", "tls", "search", "--args", "{}", "--json"], inProcess(dir, { MCP_TOKEN: STATIC }));
    assert.equal(call.code, 1, call.stderr);
    assert.equal(JSON.parse(call.stdout).error.code, "untrusted_certificate");
    await assert.rejects(serve("in-process", ["mcp", "proxy", "tls"], { cwd: dir, env: { MCP_TOKEN: STATIC } }), /not trusted \(DEPTH_ZERO_SELF_SIGNED_CERT\); nothing was sent/);
    const served = await serve("in-process", ["agent", "serve", "a"], { cwd: dir, env: { MCP_TOKEN: STATIC } });
    try {
      assert.deepEqual((await served.client.listTools()).tools, []);
      assert.match(served.stderr(), /not trusted \(DEPTH_ZERO_SELF_SIGNED_CERT\)/);
    } finally {
      await served.close();
    }
    assert.equal(selfSigned.requests(), 0, "nothing got past the handshake");
    assert.ok(!upstream.authorizations.includes(`Bearer ${STATIC}`));

    // The control: the same server, its certificate trusted.
    const trusted = await runCli(["mcp", "call", "tls", "search", "--args", "{}"], { cwd: dir, env: { MCP_TOKEN: STATIC, NODE_EXTRA_CA_CERTS: ownCert } });
    assert.equal(trusted.code, 0, trusted.stderr);
    assert.ok(selfSigned.requests() > 0);
  });

  it("a certificate trusted but for another host name is refused (ERR_TLS_CERT_ALTNAME_INVALID), nothing sent", async () => {
    const tools = await runCli(["mcp", "tools", "named", "--json"], { cwd: dir, env: { MCP_TOKEN: STATIC, NODE_EXTRA_CA_CERTS: otherNameCert } });
    assert.equal(tools.code, 1, tools.stderr);
    const { error } = JSON.parse(tools.stdout);
    assert.equal(error.code, "untrusted_certificate");
    assert.match(error.message, /ERR_TLS_CERT_ALTNAME_INVALID/);
    await assert.rejects(serveSession(["mcp", "proxy", "named"], { cwd: dir, env: { MCP_TOKEN: STATIC, NODE_EXTRA_CA_CERTS: otherNameCert } }), /ERR_TLS_CERT_ALTNAME_INVALID/);
    assert.equal(otherName.requests(), 0);
  });

  it("an authorization server whose certificate is not trusted: mcp login stops before its metadata is read; no browser, nothing sent", async () => {
    // In this process, its browser the one the child's $BROWSER script is (consentingBrowser): every
    // URL it is given is kept in `visited`. Seen to fail with the browser opened before the metadata
    // was read (ctx.openBrowser called at the start of the login, in src/).
    const visited: string[] = [];
    const login = await runInProcess(["mcp", "login", "demo"], inProcess(dir, {}, visited));
    assert.notEqual(login.code, 0, login.stderr);
    assert.match(login.stderr, /cannot read the authorization server metadata .*certificate/);
    assert.equal(asFront.requests(), 0, "nothing got past the handshake");
    assert.equal(as.counters.authorizations + as.counters.registrations, 0);
    assert.deepEqual(visited, [], "no browser was opened");
  });
});
