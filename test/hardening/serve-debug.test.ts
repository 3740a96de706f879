// `--debug` (and SUBS_DEBUG=1) on `subs mcp proxy` and `subs agent serve` prints every HTTP exchange
// with their upstreams on stderr, which a person pastes into a bug report: no secret of the run may
// be in it. A static token, an OAuth access token and its refresh (the refresh token and the
// client secret in the request, new tokens in the answer), an upstream quoting the credential back,
// and the bearer token of `--http` written to --token-file. Over stdio and over --http. The
// SUBS_DEBUG=1 sessions over stdio and the --http ones run the built CLI (bin/subs.cjs): the debug
// log on a real process's stderr, turned on from its environment, where anything the command or a
// library wrote past ctx.stderr would be seen too. The --debug sessions over stdio and the login
// before them run the same `run()` in this process (test/support/serve-client.ts, serveInProcess):
// what they check is what the redaction prints, not the process (a child costs a Node start-up and
// the bundle's load per run).
import assert from "node:assert/strict";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { after, before, describe, it } from "node:test";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { runAs } from "../support/cli.ts";
import { startRichServer, type RichServer } from "../support/mcp-rich-server.ts";
import { startAuthServer, type RunningAuthServer } from "../support/oauth-server.ts";
import { serveInProcess, serveSession, type ClientSession } from "../support/serve-client.ts";
import { serveOverHttp } from "../support/served-http.ts";

const STATIC = "debug-static-SECRET-token-8e1f";
const CLIENT_SECRET = "debug-client-SECRET-value-2b7d";

describe("--debug on the serve commands prints no secret", () => {
  let dir: string;
  let as: RunningAuthServer;
  let withOauth: RichServer;
  let withStatic: RichServer;
  const env = { MCP_TOKEN: STATIC, PRE_SECRET: CLIENT_SECRET };

  before(async () => {
    dir = mkdtempSync(path.join(tmpdir(), "subs-serve-debug-"));
    as = await startAuthServer({ tokenEndpointAuthMethods: ["client_secret_post"], preRegistered: [{ client_id: "pre-client", client_secret: CLIENT_SECRET }] });
    withOauth = await startRichServer({ oauth: { authServer: as } });
    withStatic = await startRichServer();
    writeFileSync(
      path.join(dir, "substructure.toml"),
      `[mcp.o]\nurl = "${withOauth.url}"\noauth = { client_id = "pre-client", client_secret_env = "PRE_SECRET" }\n\n` +
        `[mcp.s]\nurl = "${withStatic.url}"\nauth = { token_env = "MCP_TOKEN" }\n\n[agent.a]\nmcp = ["o", "s"]\n`,
    );
    const login = await runAs("in-process", ["mcp", "login", "o"], { cwd: dir, env, consents: true });
    assert.equal(login.code, 0, login.stderr);
  });

  after(async () => {
    await Promise.all([as.close(), withOauth.close(), withStatic.close()]);
    rmSync(dir, { recursive: true, force: true });
  });

  /** Every secret of the run so far: the static token, the client secret, every token the server issued, and `more`. */
  const secrets = (more: string[] = []) => [STATIC, CLIENT_SECRET, ...as.issuedTokens(), ...more];

  function noSecretIn(stderr: string, what: string, more: string[] = []): void {
    assert.match(stderr, /\[debug\] #\d+ → POST /, `${what}: the debug log is on`);
    for (const secret of secrets(more)) assert.ok(!stderr.includes(secret), `${what}: a secret (${secret.slice(0, 10)}…) in the debug output:\n${stderr}`);
  }

  for (const [how, flag, extra, where] of [
    ["--debug", ["--debug"], {}, "in-process"],
    ["SUBS_DEBUG=1", [], { SUBS_DEBUG: "1" }, "cli"],
  ] as const) {
    /**
     * A session on `argv` over stdio: the built CLI as a child, or `run()` in this process, whose
     * stderr is what run() wrote to ctx.stderr (with the redaction of src/output/debug-fetch.ts and
     * the scrubbing of src/secrets.ts taken out, the in-process --debug test failed here on the
     * static token).
     */
    const session = (argv: string[]): Promise<ClientSession> => (where === "cli" ? serveSession : serveInProcess)(argv, { cwd: dir, env: { ...env, ...extra } });
    it(`${how}, over stdio: mcp proxy (a static token quoted back; an OAuth token refreshed mid-session) and agent serve`, async () => {
      const refreshes = as.counters.refreshes;
      const proxyStatic = await session(["mcp", "proxy", "s", ...flag]);
      try {
        await proxyStatic.client.listTools();
        await proxyStatic.client.callTool({ name: "echo", arguments: { text: "hi" } });
        // The server's own refusal, passed on with its code, the header it quotes scrubbed.
        await assert.rejects(proxyStatic.client.callTool({ name: "quote_credential" }), { code: -32600, message: "MCP error -32600: MCP error -32600: you sent [redacted]" });
        await proxyStatic.client.callTool({ name: "log", arguments: { text: "x", quote: true } });
      } finally {
        await proxyStatic.close();
      }
      noSecretIn(proxyStatic.stderr(), `${how} mcp proxy s`);

      const proxyOauth = await session(["mcp", "proxy", "o", ...flag]);
      try {
        await proxyOauth.client.callTool({ name: "echo", arguments: { text: "before" } });
        as.forgetAccessTokens();
        await proxyOauth.client.callTool({ name: "echo", arguments: { text: "after a refresh" } });
        await assert.rejects(proxyOauth.client.callTool({ name: "quote_credential" }), { code: -32600, message: "MCP error -32600: MCP error -32600: you sent [redacted]" });
      } finally {
        await proxyOauth.close();
      }
      assert.equal(as.counters.refreshes, refreshes + 1, "a refresh ran, logged");
      assert.match(proxyOauth.stderr(), /\[debug\] #\d+ → POST .*\/token/);
      noSecretIn(proxyOauth.stderr(), `${how} mcp proxy o`);

      const agent = await session(["agent", "serve", "a", ...flag]);
      try {
        const { tools } = await agent.client.listTools();
        assert.ok(tools.some((t) => t.name === "o__echo") && tools.some((t) => t.name === "s__echo"), JSON.stringify(tools.map((t) => t.name)));
        await agent.client.callTool({ name: "o__echo", arguments: { text: "o" } });
        await agent.client.callTool({ name: "s__echo", arguments: { text: "s" } });
        await agent.client.callTool({ name: "s__quote_credential" }).catch(() => {});
      } finally {
        await agent.close();
      }
      noSecretIn(agent.stderr(), `${how} agent serve a`);
    });
  }

  it("--debug with --http: the endpoint's own token, written to --token-file, is printed by neither command", async () => {
    for (const argv of [["mcp", "proxy", "s", "--debug"], ["agent", "serve", "a", "--debug"]]) {
      const served = await serveOverHttp(dir, argv, { env, tokenFile: "debug.token" });
      try {
        const client = new Client({ name: "debug-http", version: "1.0.0" });
        await client.connect(new StreamableHTTPClientTransport(served.url, { requestInit: { headers: { Authorization: `Bearer ${served.token}` } } }));
        const { tools } = await client.listTools();
        await client.callTool({ name: tools.find((t) => t.name.endsWith("echo"))!.name, arguments: { text: "over http" } });
        await client.close();
      } finally {
        assert.equal(await served.stop(), 0, served.stderr());
      }
      noSecretIn(served.stderr(), argv.join(" "), [served.token]);
    }
  });
});
