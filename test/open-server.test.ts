// MCP servers that ask for no credential ("Authorization is OPTIONAL for MCP implementations"):
// `subs mcp login` finds that out instead of failing on metadata the server has no reason to
// publish, stores the finding, and every command then uses the server without a credential, until
// its url changes or the server starts to ask for one.
import assert from "node:assert/strict";
import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { after, before, describe, it } from "node:test";
import { openStore } from "../src/store/store.ts";
import { seedCredentials } from "./support/credentials.ts";
import { runCli, runInProcess } from "./support/cli.ts";
import { annotatedTool, startMcpServer, type RunningMcpServer } from "./support/mcp-server.ts";

describe("a server that asks for no credential", () => {
  let server: RunningMcpServer;
  let asksNow = false;
  let cwd: string;
  const file = (url: string) => `[mcp.docs]\nurl = "${url}"\n\n[agent.reader]\nmcp = ["docs"]\n`;

  before(async () => {
    server = await startMcpServer({
      tools: [annotatedTool("search", { readOnlyHint: true })],
      // Flipped by a test: the server starts to ask for a credential (no metadata: it is only a 401).
      gate: (req, res) => {
        if (!asksNow || !req.url?.startsWith("/mcp")) return false;
        res.writeHead(401, { "www-authenticate": "Bearer" }).end();
        return true;
      },
    });
    cwd = mkdtempSync(path.join(tmpdir(), "subs-open-server-"));
    writeFileSync(path.join(cwd, "substructure.toml"), file(server.url));
  });
  after(() => server.close());

  it("mcp login says so (exit 0, no browser), and mcp list shows it open and usable", async () => {
    const login = await runCli(["mcp", "login", "docs", "--json"], { cwd, env: { BROWSER: "false" } });
    assert.equal(login.code, 0, login.stderr);
    assert.deepEqual(JSON.parse(login.stdout), [
      { id: "docs", result: "open", issuer: null, scopes: [], expires_at: null, refreshable: false, tools: 1, token_env: null, token_env_set: null },
    ]);
    assert.doesNotMatch(login.stderr, /Opening the browser|authorize/i);
    const human = await runInProcess(["mcp", "login", "docs"], { cwd });
    assert.equal(human.code, 0, human.stderr);
    assert.equal(human.stdout, "✔ docs: the server asks for no credential; calls to it carry none\n  1 tool offered\n");

    const list = await runInProcess(["mcp", "list", "--json"], { cwd });
    const [entry] = JSON.parse(list.stdout);
    assert.equal(entry.auth, "none");
    assert.equal(entry.status, "open");
    assert.equal(entry.usable, true);
    assert.equal(entry.issuer, null);
    const table = await runInProcess(["mcp", "list"], { cwd });
    assert.match(table.stdout, /^docs\t\S+\tnone\topen \(the server asks for no credential\)\treader\n$/);
    const all = await runInProcess(["mcp", "login", "--all"], { cwd });
    assert.match(all.stderr, /nothing to do/);
  });

  it("tools, call, agent tools and list --check use it without a credential", async () => {
    const before = server.authorizations.length;
    const tools = await runInProcess(["mcp", "tools", "docs", "--json"], { cwd });
    assert.equal(tools.code, 0, tools.stderr);
    assert.deepEqual(JSON.parse(tools.stdout).tools.map((t: { name: string }) => t.name), ["search"]);
    const call = await runInProcess(["mcp", "call", "docs", "search", "--args", '{"q":"x"}'], { cwd });
    assert.equal(call.code, 0, call.stderr);
    assert.equal(call.stdout, '{"q":"x"}\n');
    const agent = await runInProcess(["agent", "tools", "reader", "--json"], { cwd });
    assert.equal(agent.code, 0, agent.stderr);
    assert.deepEqual(JSON.parse(agent.stdout).tools.map((t: { name: string }) => t.name), ["docs__search"]);
    const check = await runInProcess(["mcp", "list", "--check", "--json"], { cwd });
    assert.equal(check.code, 0, check.stderr);
    assert.deepEqual(JSON.parse(check.stdout)[0].check, { reachable: true, authorized: true, tools: 1, error: null });
    assert.equal(server.authorizations.length, before, "a request carried an Authorization header");
  });

  it("when the server starts to ask for a credential, commands say to log in (exit 4)", async () => {
    asksNow = true;
    try {
      const tools = await runInProcess(["mcp", "tools", "docs"], { cwd });
      assert.equal(tools.code, 4, tools.stderr);
      assert.match(tools.stderr, /docs: the server now asks for authorization\nhint: run `subs mcp login docs`/);
      // A 401 without any metadata is not "open": it is a 2025-03-26 server, whose default
      // endpoints sit at its origin (issue 13); this one has none, so registration there fails.
      const login = await runInProcess(["mcp", "login", "docs", "--no-browser"], { cwd });
      assert.equal(login.code, 1, login.stderr);
      assert.match(login.stderr, new RegExp(`dynamic client registration at ${new URL(server.url).origin}/ failed \\(HTTP 404\\)`));
      assert.doesNotMatch(login.stderr, /Open this URL/);
    } finally {
      asksNow = false;
    }
  });

  it("the finding is bound to the url: another url needs login; a deleted section takes it along", async () => {
    const moved = server.url.replace("/mcp", "/mcp/");
    writeFileSync(path.join(cwd, "substructure.toml"), file(moved));
    const list = await runInProcess(["mcp", "list", "--json"], { cwd });
    assert.equal(JSON.parse(list.stdout)[0].status, "needs_login");
    const tools = await runInProcess(["mcp", "tools", "docs"], { cwd });
    assert.equal(tools.code, 4, tools.stderr);
    writeFileSync(path.join(cwd, "substructure.toml"), file(server.url));
    assert.equal(JSON.parse((await runInProcess(["mcp", "list", "--json"], { cwd })).stdout)[0].status, "open");

    writeFileSync(path.join(cwd, "substructure.toml"), "");
    assert.equal((await runInProcess(["mcp", "list"], { cwd })).code, 0);
    const opened = (await openStore({ dbPath: path.join(cwd, "substructure.db"), create: false }))!;
    try {
      assert.deepEqual(opened.store.listOpenConnections(), []);
    } finally {
      opened.store.close();
    }
    writeFileSync(path.join(cwd, "substructure.toml"), file(server.url));
  });

  it("a stored credential for a server that now needs none is replaced by the finding", async () => {
    const dir = mkdtempSync(path.join(tmpdir(), "subs-open-server-"));
    writeFileSync(path.join(dir, "substructure.toml"), file(server.url));
    // The issuer has no revocation endpoint to call (nothing listens there): revocation is best effort.
    await seedCredentials(path.join(dir, "substructure.db"), [{ id: "docs", url: server.url, issuer: "http://127.0.0.1:9" }]);
    const login = await runInProcess(["mcp", "login", "docs", "--json"], { cwd: dir });
    assert.equal(login.code, 0, login.stderr);
    assert.equal(JSON.parse(login.stdout)[0].result, "open");
    const opened = (await openStore({ dbPath: path.join(dir, "substructure.db"), create: false }))!;
    try {
      assert.equal(opened.store.getCredential("docs"), undefined);
      assert.equal(opened.store.getOpenConnection("docs")?.url, server.url);
    } finally {
      opened.store.close();
    }
  });
});
