// A bound on one tool listing, all its pages (src/mcp/connect.ts, listAllTools): a hostile MCP
// server on loopback whose `nextCursor` never runs out, or whose pages are large, is asked for at
// most 100 pages and at most one answer's limit (16 MiB) of them in all, then the listing fails
// whole with an error naming the server and the limit. Through the built CLI (`subs mcp tools`,
// `subs agent tools`) and a real `subs deployment serve` (GET /v1/mcp/{id}/tools with a `read`
// token, and the agent endpoint with a `use` token). What is asserted is how many pages the
// server was asked for, never memory or time.
import assert from "node:assert/strict";
import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { after, before, describe, test } from "node:test";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { runCli, runInProcess } from "../support/cli.ts";
import { callServed, startServedDeployment, type ServedDeployment } from "../support/deployment-serve.ts";
import { projectsForThisFile } from "../support/projects.ts";

const MIB = 1024 * 1024;
const TOKEN = "listing-cap-static-token";
/**
 * Pages of 1 MiB the `big` route sends before its list ends: more than the 16 or 17 the bound lets
 * through, so a listing without it (the old code listed them all) is told apart; 20, where 40 ran,
 * halves the megabytes the raised limit's run makes, sends and parses. With the byte bound taken
 * out of listAllTools (src/mcp/connect.ts), the 20-page test failed (exit 0, all 20 listed).
 */
const BIG_PAGES = 20;

type Hostile = { url: string; pagesAsked: (route: string) => number; close: () => Promise<void> };

const result = (id: unknown, value: unknown) => JSON.stringify({ jsonrpc: "2.0", id, result: value });
const tool = (name: string, description = "") => ({ name, description, inputSchema: { type: "object" } });

/**
 * A Streamable HTTP server as small as the SDK's client accepts (JSON answers, no session), whose
 * `tools/list` pages are as the path says:
 * - `/forever`: one small tool a page, and always a `nextCursor`;
 * - `/hundred`: one small tool a page, 100 pages, the last without `nextCursor`;
 * - `/big`: one tool with a 1 MiB description a page, BIG_PAGES pages;
 * - `/small`: two tools, one page.
 */
async function hostileServer(): Promise<Hostile> {
  const asked = new Map<string, number>();
  const handle = (req: IncomingMessage, res: ServerResponse, body: string) => {
    const route = (req.url ?? "/").slice(1);
    if (req.method !== "POST") return void res.writeHead(405, { allow: "POST" }).end();
    const { id, method, params } = JSON.parse(body) as { id?: unknown; method: string; params?: { cursor?: string; protocolVersion?: string } };
    if (id === undefined) return void res.writeHead(202).end();
    const json = (text: string) => void res.writeHead(200, { "content-type": "application/json" }).end(text);
    if (method === "initialize") return json(result(id, { protocolVersion: params?.protocolVersion, capabilities: { tools: {} }, serverInfo: { name: "hostile", version: "1.0.0" } }));
    if (method === "ping") return json(result(id, {}));
    if (method !== "tools/list") return json(JSON.stringify({ jsonrpc: "2.0", id, error: { code: -32601, message: "no such method" } }));
    asked.set(route, (asked.get(route) ?? 0) + 1);
    const page = Number(params?.cursor ?? 0);
    const next = (last: number) => (page + 1 < last ? { nextCursor: String(page + 1) } : {});
    if (route === "forever") return json(result(id, { tools: [tool(`t${page}`)], nextCursor: String(page + 1) }));
    if (route === "hundred") return json(result(id, { tools: [tool(`t${page}`)], ...next(100) }));
    if (route === "big") return json(result(id, { tools: [tool(`b${page}`, "x".repeat(MIB))], ...next(BIG_PAGES) }));
    return json(result(id, { tools: [tool("search"), tool("fetch")] }));
  };
  const server: Server = createServer((req, res) => {
    let body = "";
    req.setEncoding("utf8").on("data", (d: string) => (body += d));
    req.on("end", () => handle(req, res, body));
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    pagesAsked: (route) => asked.get(route) ?? 0,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

const project = projectsForThisFile("listing-cap");

describe("one tool listing is bounded in pages and in bytes", () => {
  let hostile: Hostile;
  let dir: string;

  before(async () => {
    hostile = await hostileServer();
    const section = (id: string) => `[mcp.${id}]\nurl = "${hostile.url}/${id}"\nauth = { token_env = "MCP_TOKEN" }\n`;
    dir = project([...["forever", "hundred", "big", "small"].map(section), `[agent.hostile]\nmcp = ["small", "forever"]\n`].join("\n"));
  });
  after(() => hostile.close());

  /** The built CLI, and how many pages `route` was asked for during the run. */
  const cli = async (argv: string[], route: string) => {
    const before = hostile.pagesAsked(route);
    const r = await runCli(argv, { cwd: dir, env: { MCP_TOKEN: TOKEN }, timeoutMs: 120_000 });
    return { ...r, asked: hostile.pagesAsked(route) - before };
  };

  test("subs mcp tools: a server whose nextCursor never runs out is asked for 100 pages, then the listing fails naming the server and the limit (exit 1, tool_list_too_large); 100 pages that end are listed whole", { timeout: 180_000 }, async () => {
    const r = await cli(["mcp", "tools", "forever", "--json"], "forever");
    assert.equal(r.code, 1, r.stderr);
    assert.equal(r.asked, 100);
    const { error } = JSON.parse(r.stdout) as { error: { code: string; message: string; hint: string } };
    assert.equal(error.code, "tool_list_too_large");
    assert.match(error.message, /^forever: the tool list of http:\/\/127\.0\.0\.1:\d+ went on past 100 pages; subs stopped asking for more and lists none of its tools$/);
    assert.match(r.stderr, /forever: .* went on past 100 pages/);
    // The control (100 pages that end are listed whole): the same listing, run() in this process.
    const beforeWhole = hostile.pagesAsked("hundred");
    const whole = await runInProcess(["mcp", "tools", "hundred", "--json"], { cwd: dir, env: { HOME: dir, MCP_TOKEN: TOKEN } });
    assert.equal(whole.code, 0, whole.stderr);
    assert.equal(hostile.pagesAsked("hundred") - beforeWhole, 100);
    assert.equal((JSON.parse(whole.stdout) as { tools: unknown[] }).tools.length, 100);
  });

  test(`subs mcp tools: pages of 1 MiB stop being asked for once they add up to over 16 MiB (not all ${BIG_PAGES}); the error names the limit and SUBS_MCP_MAX_ANSWER_MB, which raises it`, { timeout: 180_000 }, async () => {
    const r = await cli(["mcp", "tools", "big", "--json"], "big");
    assert.equal(r.code, 1, r.stderr.slice(-2000));
    assert.ok(r.asked >= 16 && r.asked <= 17, `asked for ${r.asked} pages`);
    const { error } = JSON.parse(r.stdout) as { error: { code: string; message: string; hint: string } };
    assert.equal(error.code, "tool_list_too_large");
    assert.match(error.message, /^big: http:\/\/127\.0\.0\.1:\d+ sent tool list pages adding up to over 16 MiB; subs stopped asking for more and lists none of its tools$/);
    assert.match(error.hint, /raise SUBS_MCP_MAX_ANSWER_MB \(MiB; now 16\)/);
    const before = hostile.pagesAsked("big");
    const raised = await runCli(["mcp", "tools", "big", "--json"], { cwd: dir, env: { MCP_TOKEN: TOKEN, SUBS_MCP_MAX_ANSWER_MB: "64" }, timeoutMs: 120_000 });
    assert.equal(raised.code, 0, raised.stderr.slice(-2000));
    assert.equal(hostile.pagesAsked("big") - before, BIG_PAGES);
    assert.equal((JSON.parse(raised.stdout) as { tools: unknown[] }).tools.length, BIG_PAGES);
  });

  test("subs agent tools: the endless connection is left out and reported, the other's tools listed (exit 1)", { timeout: 180_000 }, async () => {
    const r = await cli(["agent", "tools", "hostile", "--json"], "forever");
    assert.equal(r.code, 1, r.stderr);
    assert.equal(r.asked, 100);
    const shown = JSON.parse(r.stdout) as { tools: Array<{ name: string }> };
    assert.deepEqual(shown.tools.map((t) => t.name).sort(), ["small__fetch", "small__search"]);
    assert.match(r.stdout + r.stderr, /forever: .* went on past 100 pages/);
  });
});

describe("subs deployment serve: one tool listing is bounded for every token", () => {
  let hostile: Hostile;
  let d: ServedDeployment;
  let read: string;
  let use: string;

  before(async () => {
    hostile = await hostileServer();
    d = await startServedDeployment();
    read = await d.tokenFor("read");
    use = await d.tokenFor("use");
    for (const id of ["forever", "big", "small"]) {
      const url = `${hostile.url}/${id}`;
      assert.equal((await callServed(d, "PUT", `/v1/mcp/${id}`, { url, prefix_tools: true })).status, 201);
      d.credentials.set(id, { url, tokens: { access_token: `at-${id}`, token_type: "Bearer" }, authorizedAt: Date.now(), expiresAt: null });
    }
    await d.settled();
    assert.equal((await callServed(d, "PUT", "/v1/agents/hostile", { mcp: [{ id: "small" }, { id: "forever" }] })).status, 201);
  });
  after(async () => {
    await d?.close();
    await hostile?.close();
  });

  test("GET /v1/mcp/{id}/tools with a read token: an endless list is asked for 100 pages, large pages up to 16 MiB in all; each answers 502 naming the limit", { timeout: 180_000 }, async () => {
    const small = await callServed(d, "GET", "/v1/mcp/small/tools", undefined, read);
    assert.equal(small.status, 200, JSON.stringify(small.body));
    const forever = await callServed(d, "GET", "/v1/mcp/forever/tools", undefined, read);
    assert.equal(forever.status, 502, JSON.stringify(forever.body));
    assert.equal(hostile.pagesAsked("forever"), 100);
    assert.match(forever.body.message, /went on past 100 pages/);
    const big = await callServed(d, "GET", "/v1/mcp/big/tools", undefined, read);
    assert.equal(big.status, 502, JSON.stringify(big.body).slice(0, 2000));
    assert.ok(hostile.pagesAsked("big") >= 16 && hostile.pagesAsked("big") <= 17, `asked for ${hostile.pagesAsked("big")} pages`);
    assert.match(big.body.message, /tool list pages adding up to over 16 MiB/);
  });

  test("the agent endpoint with a use token: a session serves the other connection's tools, the endless one asked for 100 pages and left out", { timeout: 180_000 }, async () => {
    const before = hostile.pagesAsked("forever");
    const client = new Client({ name: "listing-cap-test", version: "1.0.0" });
    await client.connect(new StreamableHTTPClientTransport(new URL(`${d.url}/v1/agents/hostile/mcp`), { requestInit: { headers: { authorization: `Bearer ${use}` } } }));
    try {
      const { tools } = await client.listTools();
      assert.deepEqual(tools.map((t) => t.name).sort(), ["small__fetch", "small__search"]);
      assert.equal(hostile.pagesAsked("forever") - before, 100);
    } finally {
      await client.close();
    }
  });
});
