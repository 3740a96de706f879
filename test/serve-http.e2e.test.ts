// `--http` of `subs agent serve` and `subs mcp proxy`, end to end (issue 16): the built CLI
// (bin/subs.cjs) as a child, exactly as a user starts it, driven by the SDK's own Streamable HTTP
// client with the bearer token it wrote to --token-file. Each client session gets its own upstream
// session and its own snapshot of the agent's tools.
import assert from "node:assert/strict";
import { spawn, type ChildProcess } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { after, before, describe, it } from "node:test";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { BIN, ensureBuilt, runCli } from "./support/cli.ts";
import { RICH_TOOLS, startRichServer, type RichServer } from "./support/mcp-rich-server.ts";

const MCP_TOKEN = "serve-http-SECRET-upstream-token";

type Served = { child: ChildProcess; url: URL; token: string; stderr: () => string; exited: Promise<number | null> };

/** Starts `argv` (which ends in --http 127.0.0.1:0 --token-file …) and waits for its endpoint. */
async function serve(dir: string, argv: string[], tokenFile: string): Promise<Served> {
  ensureBuilt();
  const child = spawn(process.execPath, [BIN, ...argv], { cwd: dir, env: { PATH: process.env.PATH, HOME: dir, MCP_TOKEN }, stdio: ["ignore", "pipe", "pipe"] });
  let stderr = "";
  let stdout = "";
  child.stderr!.on("data", (d) => (stderr += d));
  child.stdout!.on("data", (d) => (stdout += d));
  const exited = new Promise<number | null>((resolve) => child.once("exit", (code) => resolve(code)));
  const deadline = Date.now() + 15_000;
  let url: URL | undefined;
  while (!url) {
    const match = /serving MCP on (http:\/\/127\.0\.0\.1:\d+\/mcp)/.exec(stderr);
    if (match) url = new URL(match[1]!);
    else if (child.exitCode !== null || Date.now() > deadline) throw new Error(`no endpoint: exit ${child.exitCode}\n${stderr}`);
    else await new Promise((r) => setTimeout(r, 50));
  }
  assert.equal(stdout, "", "nothing on stdout: the protocol is on HTTP");
  return { child, url, token: readFileSync(path.join(dir, tokenFile), "utf8").trim(), stderr: () => stderr, exited };
}

async function connect(served: Served, token = served.token): Promise<Client> {
  const client = new Client({ name: "serve-http-e2e", version: "1.0.0" });
  await client.connect(new StreamableHTTPClientTransport(served.url, { requestInit: { headers: { authorization: `Bearer ${token}` } } }));
  return client;
}

describe("--http, through the built CLI", () => {
  let dir: string;
  let rich: RichServer;

  before(async () => {
    dir = mkdtempSync(path.join(tmpdir(), "subs-serve-http-"));
    rich = await startRichServer();
    writeFileSync(path.join(dir, "substructure.toml"), `[mcp.rich]\nurl = "${rich.url}"\nauth = { token_env = "MCP_TOKEN" }\n\n[agent.triage]\nmcp = ["rich"]\n`);
  });

  after(async () => {
    await rich.close();
    rmSync(dir, { recursive: true, force: true });
  });

  it("subs mcp proxy --http: two clients, each its own upstream session; the token file is 0600; a wrong token gets 401; SIGTERM ends it (exit 0)", async () => {
    const deletes = () => rich.events.filter((e) => e === "HTTP DELETE").length;
    const deletesBefore = deletes();
    const served = await serve(dir, ["mcp", "proxy", "rich", "--http", "127.0.0.1:0", "--token-file", "proxy.token"], "proxy.token");
    try {
      assert.equal(statSync(path.join(dir, "proxy.token")).mode & 0o777, 0o600);
      assert.ok(!served.stderr().includes(served.token), "with --token-file the token is not printed");
      const [a, b] = [await connect(served), await connect(served)];
      const [listA, listB] = await Promise.all([a.listTools(), b.listTools()]);
      assert.deepEqual(listA.tools.map((t) => t.name), RICH_TOOLS.map((t) => t.name));
      assert.deepEqual(listB.tools.map((t) => t.name), RICH_TOOLS.map((t) => t.name));
      const echoed = await a.callTool({ name: "echo", arguments: { text: "hello" } });
      assert.match(JSON.stringify(echoed.content), /hello/);
      await Promise.all([a.close(), b.close()]);
      const wrong = await fetch(served.url, {
        method: "POST",
        headers: { "content-type": "application/json", accept: "application/json, text/event-stream", authorization: "Bearer not-the-token" },
        body: JSON.stringify({ jsonrpc: "2.0", id: 1, method: "initialize", params: { protocolVersion: "2025-06-18", capabilities: {}, clientInfo: { name: "x", version: "1" } } }),
      });
      assert.equal(wrong.status, 401);
      assert.match(wrong.headers.get("www-authenticate") ?? "", /^Bearer/);
    } finally {
      served.child.kill("SIGTERM");
    }
    assert.equal(await served.exited, 0, served.stderr());
    // Each client session had its own upstream session, and the stop ended both of them.
    assert.equal(deletes(), deletesBefore + 2, "one upstream session per client session, each ended");
    assert.ok(!served.stderr().includes(MCP_TOKEN), "the upstream token never on stderr");
  });

  it("subs agent serve --http: the agent's tools, prefixed, and a call runs upstream", async () => {
    const served = await serve(dir, ["agent", "serve", "triage", "--http", "127.0.0.1:0", "--token-file", "serve.token"], "serve.token");
    try {
      const client = await connect(served);
      const { tools } = await client.listTools();
      assert.deepEqual(tools.map((t) => t.name).sort(), RICH_TOOLS.map((t) => `rich__${t.name}`).sort());
      const echoed = await client.callTool({ name: "rich__echo", arguments: { text: "through serve" } });
      assert.match(JSON.stringify(echoed.content), /through serve/);
      await client.close();
    } finally {
      served.child.kill("SIGINT");
    }
    assert.equal(await served.exited, 0, served.stderr());
  });

  it("refuses what it cannot serve safely, before serving: a host not on loopback, --token-file without --http (exit 2)", async () => {
    for (const argv of [
      ["mcp", "proxy", "rich", "--http", "0.0.0.0:0"],
      ["agent", "serve", "triage", "--http", "192.168.1.5:8931"],
      ["mcp", "proxy", "rich", "--token-file", "t"],
    ]) {
      const r = await runCli(argv, { cwd: dir, env: { MCP_TOKEN } });
      assert.equal(r.code, 2, `${argv.join(" ")}: ${r.stderr}`);
      assert.match(r.stderr, /loopback|--token-file goes with --http/, argv.join(" "));
      assert.equal(r.stdout, "");
    }
  });
});
