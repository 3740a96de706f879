// MCP servers that ask for no credential ("Authorization is OPTIONAL for MCP implementations"):
// `subs mcp login` finds that out instead of failing on metadata the server has no reason to
// publish, stores the finding, and every command then uses the server without a credential, until
// its url changes or the server starts to ask for one.
// The built CLI (bin/subs.cjs) runs `mcp login --json`, one `mcp list --check`, and the first two
// tests of a connection never logged in (`mcp tools`, `mcp list`, `mcp call`, `agent tools`), as a
// person does; the rest run the same `run()` in this process, where what is checked is the output,
// the exit code and what is stored, not the process.
import assert from "node:assert/strict";
import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { after, before, describe, it } from "node:test";
import { openStore } from "../src/store/store.ts";
import { seedCredentials } from "./support/credentials.ts";
import { runCli, runInProcess } from "./support/cli.ts";
import { annotatedTool, startMcpServer, type RunningMcpServer } from "./support/mcp-server.ts";
import { refusedUrl } from "./support/ports.ts";
import { startAuthServer } from "./support/oauth-server.ts";

describe("a server that asks for no credential", () => {
  let server: RunningMcpServer;
  let asksNow = false;
  let cwd: string;
  const file = (url: string) => `[mcp.docs]\nurl = "${url}"\n\n[agent.reader]\nmcp = ["docs"]\n`;

  before(async () => {
    server = await startMcpServer({
      tools: [annotatedTool("search", { readOnlyHint: true })],
      // Flipped by a test: the server starts to ask for a credential (no metadata: it is only a 401).
      // At /mcp/ (another url for the file) it always asks.
      gate: (req, res) => {
        if (!(asksNow && req.url?.startsWith("/mcp")) && !req.url?.startsWith("/mcp/")) return false;
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
      // --check says the same, and its row does not say `open` beside it.
      const check = await runCli(["mcp", "list", "--check"], { cwd });
      assert.equal(check.code, 4, check.stderr);
      assert.match(check.stdout, /^docs\t\S+\toauth\tneeds login · subs mcp login docs\treachable · needs login\treader\n$/);
      assert.match(check.stderr, /docs: the server now asks for authorization\n  run `subs mcp login docs`\n/);
      // A 401 without any metadata is not "open": it is a 2025-03-26 server, whose default
      // endpoints sit at its origin; this one has none, so registration there fails.
      const login = await runInProcess(["mcp", "login", "docs", "--no-browser"], { cwd });
      assert.equal(login.code, 1, login.stderr);
      assert.match(login.stderr, new RegExp(`dynamic client registration at ${new URL(server.url).origin}/ failed \\(HTTP 404\\)`));
      assert.doesNotMatch(login.stderr, /Open this URL/);
    } finally {
      asksNow = false;
    }
  });

  it("the finding is bound to the url: another url is tried afresh (here it asks: needs login); a deleted section keeps it until subs apply", async () => {
    const moved = server.url.replace("/mcp", "/mcp/");
    writeFileSync(path.join(cwd, "substructure.toml"), file(moved));
    const list = await runInProcess(["mcp", "list", "--json"], { cwd });
    assert.equal(JSON.parse(list.stdout)[0].status, "needs_login");
    const tools = await runInProcess(["mcp", "tools", "docs"], { cwd });
    assert.equal(tools.code, 4, tools.stderr);
    assert.match(tools.stderr, /docs: not logged in\nhint: run `subs mcp login docs`/);
    writeFileSync(path.join(cwd, "substructure.toml"), file(server.url));
    assert.equal(JSON.parse((await runInProcess(["mcp", "list", "--json"], { cwd })).stdout)[0].status, "open");

    writeFileSync(path.join(cwd, "substructure.toml"), "");
    assert.equal((await runInProcess(["mcp", "list"], { cwd })).code, 0);
    const findings = async () => {
      const opened = (await openStore({ dbPath: path.join(cwd, "substructure.db"), create: false }))!;
      try {
        return opened.store.listOpenConnections().map((row) => row.id);
      } finally {
        opened.store.close();
      }
    };
    assert.deepEqual(await findings(), ["docs"], "looking never deletes");
    writeFileSync(path.join(cwd, "substructure.toml"), file(server.url));
    assert.equal(JSON.parse((await runInProcess(["mcp", "list", "--json"], { cwd })).stdout)[0].status, "open", "back as it was");
    writeFileSync(path.join(cwd, "substructure.toml"), "");
    assert.equal((await runInProcess(["apply"], { cwd })).code, 0);
    assert.deepEqual(await findings(), [], "apply takes it along");
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

// A connection with no stored credential and no `auth` is tried without one by `mcp tools`,
// `mcp call`, `agent tools` and `--check`; an MCP answer means it is usable (shown as open), a 401
// means needs login (docs/oauth.md, "Using a credential"). No `subs mcp login` runs in these
// environments.
describe("a connection never logged in is tried without a credential", () => {
  let open: RunningMcpServer;
  let closed: RunningMcpServer;
  /** Requests the closed server answered 401, with their Authorization header (or ""). */
  const refused: string[] = [];
  let downUrl: string;
  const file = (url: string) => `[mcp.docs]\nurl = "${url}"\n\n[agent.reader]\nmcp = ["docs"]\n`;
  const fresh = (url: string) => {
    const dir = mkdtempSync(path.join(tmpdir(), "subs-never-logged-in-"));
    writeFileSync(path.join(dir, "substructure.toml"), file(url));
    return dir;
  };
  const stored = async (dir: string) => {
    const opened = await openStore({ dbPath: path.join(dir, "substructure.db"), create: false });
    if (!opened) return undefined;
    try {
      return { open: opened.store.listOpenConnections(), credentials: opened.store.listCredentials() };
    } finally {
      opened.store.close();
    }
  };

  before(async () => {
    open = await startMcpServer({ tools: [annotatedTool("search", { readOnlyHint: true })] });
    closed = await startMcpServer({
      tools: [annotatedTool("search")],
      gate: (req, res) => {
        refused.push(req.headers.authorization ?? "");
        res.writeHead(401, { "www-authenticate": "Bearer" }).end();
        return true;
      },
    });
    downUrl = await refusedUrl();
  });
  after(() => Promise.all([open.close(), closed.close()]));

  it("mcp tools: the server answers, its tools are listed, and the finding is recorded (mcp list says open)", async () => {
    const dir = fresh(open.url);
    const before = open.requests.length;
    const tools = await runCli(["mcp", "tools", "docs", "--json"], { cwd: dir });
    assert.equal(tools.code, 0, tools.stderr);
    assert.deepEqual(JSON.parse(tools.stdout), { id: "docs", tools: [{ name: "search", description: "search (test tool)", inputSchema: { type: "object", properties: {} }, annotations: { readOnlyHint: true } }] });
    assert.match(tools.stderr, /docs: the server asks for no credential; calls to it carry none/);
    assert.ok(open.requests.slice(before).includes("initialize"));
    assert.deepEqual((await stored(dir))?.open.map((r) => [r.id, r.url]), [["docs", open.url]]);
    const list = await runCli(["mcp", "list", "--json"], { cwd: dir });
    assert.equal(list.code, 0, list.stderr);
    const [entry] = JSON.parse(list.stdout);
    assert.deepEqual([entry.auth, entry.status, entry.usable], ["none", "open", true]);
    // The second time it is a known open server: nothing to record, nothing said.
    const again = await runCli(["mcp", "tools", "docs"], { cwd: dir });
    assert.equal(again.code, 0, again.stderr);
    assert.doesNotMatch(again.stderr, /asks for no credential/);
  });

  it("mcp call and agent tools work the same way, each in an environment never logged in", async () => {
    const callDir = fresh(open.url);
    const call = await runCli(["mcp", "call", "docs", "search", "--args", '{"q":"x"}'], { cwd: callDir });
    assert.equal(call.code, 0, call.stderr);
    assert.equal(call.stdout, '{"q":"x"}\n');
    assert.equal((await stored(callDir))?.open[0]?.url, open.url);

    const agentDir = fresh(open.url);
    const agent = await runCli(["agent", "tools", "reader", "--json"], { cwd: agentDir });
    assert.equal(agent.code, 0, agent.stderr);
    const out = JSON.parse(agent.stdout);
    assert.deepEqual(out.tools.map((t: { name: string }) => t.name), ["docs__search"]);
    assert.deepEqual(out.unavailable, []);
    assert.equal(JSON.parse((await runCli(["mcp", "list", "--json"], { cwd: agentDir })).stdout)[0].status, "open");
    assert.equal(open.authorizations.length, 0, "no request carried an Authorization header");
  });

  it("mcp list --check lists the tools, and its own row already says open", async () => {
    const dir = fresh(open.url);
    const json = await runInProcess(["mcp", "list", "--check", "--json"], { cwd: dir });
    assert.equal(json.code, 0, json.stderr);
    const [entry] = JSON.parse(json.stdout);
    assert.deepEqual([entry.auth, entry.status, entry.usable], ["none", "open", true]);
    assert.deepEqual(entry.check, { reachable: true, authorized: true, tools: 1, error: null });
    const human = await runInProcess(["mcp", "list", "--check"], { cwd: fresh(open.url) });
    assert.equal(human.code, 0, human.stderr);
    assert.match(human.stdout, /^docs\t\S+\tnone\topen \(the server asks for no credential\)\t1 tool\treader\n$/);
    assert.equal(JSON.parse((await runInProcess(["mcp", "list", "--json"], { cwd: dir })).stdout)[0].status, "open");
  });

  it("a server that answers 401: needs login (exit 4) in every command, tried without a credential, nothing stored", async () => {
    const dir = fresh(closed.url);
    const before = refused.length;
    const tools = await runInProcess(["mcp", "tools", "docs", "--json"], { cwd: dir });
    assert.equal(tools.code, 4, tools.stderr);
    assert.deepEqual(JSON.parse(tools.stdout).error, { code: "needs_login", message: "docs: not logged in", hint: "run `subs mcp login docs`" });
    assert.ok(refused.length > before, "the server was asked");
    const call = await runInProcess(["mcp", "call", "docs", "search"], { cwd: dir });
    assert.equal(call.code, 4, call.stderr);
    assert.match(call.stderr, /docs: not logged in\nhint: run `subs mcp login docs`/);
    const agent = await runInProcess(["agent", "tools", "reader", "--json"], { cwd: dir });
    assert.equal(agent.code, 4, agent.stderr);
    assert.deepEqual(JSON.parse(agent.stdout).unavailable, [{ connection: "docs", code: "needs_login", message: "docs: not logged in", hint: "run `subs mcp login docs`" }]);
    const check = await runInProcess(["mcp", "list", "--check"], { cwd: dir });
    assert.equal(check.code, 4, check.stderr);
    assert.match(check.stdout, /^docs\t\S+\toauth\tneeds login · subs mcp login docs\treachable · needs login\treader\n$/);
    assert.match(check.stderr, /^docs: not logged in\n  run `subs mcp login docs`\n/m);
    assert.deepEqual(refused.slice(before).filter((h) => h !== ""), [], "no request carried a credential");
    const left = await stored(dir);
    assert.deepEqual([left?.open ?? [], left?.credentials ?? []], [[], []]);
  });

  it("a server that lets initialize through and then answers 401 is not recorded open: needs login (exit 4)", async () => {
    const as = await startAuthServer();
    const halfOpen = await startMcpServer({
      tools: [annotatedTool("search", { readOnlyHint: true })],
      oauth: { authServer: as, openMethods: ["initialize", "notifications/initialized"] },
    });
    try {
      const dir = fresh(halfOpen.url);
      const agent = await runInProcess(["agent", "tools", "reader", "--json"], { cwd: dir });
      assert.equal(agent.code, 4, agent.stderr);
      assert.equal(JSON.parse(agent.stdout).unavailable[0]?.code, "needs_login");
      const call = await runInProcess(["mcp", "call", "docs", "search"], { cwd: dir });
      assert.equal(call.code, 4, call.stderr);
      assert.match(call.stderr, /docs: not logged in\nhint: run `subs mcp login docs`/);
      assert.doesNotMatch(agent.stderr + call.stderr, /asks for no credential/);
      const left = await stored(dir);
      assert.deepEqual(left?.open ?? [], [], "not recorded as a server that asks for no credential");
      const list = await runInProcess(["mcp", "list", "--json"], { cwd: dir });
      assert.notEqual(JSON.parse(list.stdout)[0].status, "open");
    } finally {
      await Promise.all([halfOpen.close(), as.close()]);
    }
  });

  it("a server that cannot be reached: exit 1, cannot reach, with what to check", async () => {
    const dir = fresh(downUrl);
    const tools = await runInProcess(["mcp", "tools", "docs", "--json"], { cwd: dir });
    assert.equal(tools.code, 1, tools.stderr);
    const { error } = JSON.parse(tools.stdout);
    assert.match(error.message, /^docs: cannot reach http:\/\/127\.0\.0\.1:\d+/);
    assert.equal(error.hint, "check the url in the file and that the server is up");
    const check = await runInProcess(["mcp", "list", "--check"], { cwd: dir });
    assert.equal(check.code, 1, check.stderr);
    assert.match(check.stdout, /\tunreachable\t/);
    assert.match(check.stderr, /docs: cannot reach http:\/\/127\.0\.0\.1:\d+ .*\n  check the url in the file and that the server is up\n/);
    assert.equal(await stored(dir), undefined, "no db was created");
  });

  it("a credential issued for another url: nothing is sent (url changed, exit 4)", async () => {
    const dir = fresh(open.url);
    await seedCredentials(path.join(dir, "substructure.db"), [{ id: "docs", url: `${open.url}/old` }]);
    const before = open.requests.length;
    const tools = await runInProcess(["mcp", "tools", "docs", "--json"], { cwd: dir });
    assert.equal(tools.code, 4, tools.stderr);
    assert.equal(JSON.parse(tools.stdout).error.code, "url_changed");
    assert.equal(open.requests.length, before);
    assert.equal((await stored(dir))?.open.length, 0);
  });
});
