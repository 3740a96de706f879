// Codex CLI (pinned in tools/clients, installed by the test when missing) after `subs agent
// connect`: its app-server (`mcpServerStatus/list`) shows the server with exactly the tools subs
// lists, a token_env connection's included (Codex passes a server only a dozen variables of its
// own, plus those the entry names), both outside a thread, where Codex starts servers in ~/.codex,
// and in a thread started in a directory without a substructure.toml; a tool call made by `codex
// exec`'s agent loop reaches the server that requires the token; `--remove` leaves config.toml as
// it was, byte for byte. And `subs mcp proxy --http --token-file`, read by a header helper and by
// a variable, across a restart of subs.
import assert from "node:assert/strict";
import { mkdirSync, readFileSync, writeFileSync } from "node:fs";
import path from "node:path";
import { after, before, describe, it } from "node:test";
import { runCli } from "./support/cli.ts";
import { cleanEnv, serveHttp, startSupportProject, TICKETS_TOKEN, writeHeaderHelper, type HttpServed, type SupportProject } from "./support/clients.ts";
import { codexExec, codexServers, ensureCodex } from "./support/codex.ts";

/** A user's config.toml as a person keeps it: comments, odd spacing, another server, a profile after it. */
const USER_CONFIG = `# my Codex settings
model = "o3"   # trailing comment

[mcp_servers.other]
command = "/bin/false"
args = [ "x",   "y" ]   # odd spacing
enabled = false

[profiles.fast]
model = "gpt-5-mini"`;

describe("Codex CLI after subs agent connect", () => {
  let p: SupportProject;
  let configToml: string;

  before(async () => {
    ensureCodex();
    p = await startSupportProject();
    configToml = path.join(p.home, ".codex", "config.toml");
    mkdirSync(path.dirname(configToml));
    writeFileSync(configToml, USER_CONFIG, { mode: 0o600 });
  });

  after(async () => {
    await p?.close();
  });

  const subs = (argv: string[]) => runCli([...argv, "--config", p.config], { cwd: p.elsewhere, env: cleanEnv(p.home) });
  const support = (servers: Awaited<ReturnType<typeof codexServers>>) => servers.find((s) => s.name === "support");

  it("subs agent connect support --to codex: the app-server lists exactly the agent's tools (the token_env connection's too), outside a thread (in ~/.codex) and in one elsewhere; codex exec calls one; --remove restores config.toml byte for byte", async () => {
    const before = readFileSync(configToml);
    const connected = await subs(["agent", "connect", "support", "--to", "codex"]);
    assert.equal(connected.code, 0, connected.stderr);
    const written = readFileSync(configToml, "utf8");
    assert.ok(!written.includes(TICKETS_TOKEN), "no token in the client's file");

    const outside = support(await codexServers({ home: p.home, cwd: p.elsewhere, env: p.env }));
    assert.deepEqual(outside?.tools, p.agentTools, JSON.stringify(outside));
    assert.ok(p.agentTools.includes("tickets__lookup") && p.agentTools.includes("docs__search"), p.agentTools.join(" "));
    const inThread = support(await codexServers({ home: p.home, cwd: p.elsewhere, env: p.env, threadCwd: p.elsewhere }));
    assert.deepEqual(inThread, { name: "support", runtimeStatus: "connected", tools: p.agentTools, toolsError: null });

    const run = await codexExec({ home: p.home, cwd: p.elsewhere, env: p.env, server: "support", tool: "tickets__lookup", args: { q: "crash" } });
    assert.deepEqual(run.offered, p.agentTools.map((t) => `mcp__support/${t}`), run.stderr);
    assert.deepEqual(run.calls, [{ server: "support", tool: "tickets__lookup", status: "completed", text: "lookup answered crash" }], run.stderr);

    const again = await subs(["agent", "connect", "support", "--to", "codex"]);
    assert.equal(again.code, 0, again.stderr);
    assert.equal(readFileSync(configToml, "utf8"), written, "connect again: the same entry, updated in place");

    const removed = await subs(["agent", "connect", "support", "--to", "codex", "--remove"]);
    assert.equal(removed.code, 0, removed.stderr);
    assert.ok(readFileSync(configToml).equals(before), "--remove: config.toml as it was before connect");
    assert.equal(support(await codexServers({ home: p.home, cwd: p.elsewhere, env: p.env })), undefined);
  });

  it("subs mcp connect tickets --to codex: subs mcp proxy, started in ~/.codex, gets the token_env variable and serves the connection's own tools; --remove restores config.toml", async () => {
    const before = readFileSync(configToml);
    const connected = await subs(["mcp", "connect", "tickets", "--to", "codex"]);
    assert.equal(connected.code, 0, connected.stderr);
    const tickets = (await codexServers({ home: p.home, cwd: p.elsewhere, env: p.env })).find((s) => s.name === "tickets");
    assert.deepEqual(tickets, { name: "tickets", runtimeStatus: null, tools: p.ticketsTools, toolsError: null });
    const removed = await subs(["mcp", "connect", "tickets", "--to", "codex", "--remove"]);
    assert.equal(removed.code, 0, removed.stderr);
    assert.ok(readFileSync(configToml).equals(before));
  });

  it("subs mcp proxy --http --token-file, read by http_headers_helper and by bearer_token_env_var: both entries connected with the same tools before and after a restart of subs", async () => {
    const tokenFile = path.join(p.root, "codex-tickets.token");
    const first = await serveHttp(p, ["mcp", "proxy", "tickets"], tokenFile);
    let second: HttpServed | undefined;
    try {
      const helper = writeHeaderHelper(p.root, "codex-tickets-header", tokenFile);
      // A variable set once from the file, as a shell profile would: it must stay valid.
      const env = { SUBS_TICKETS_TOKEN: readFileSync(tokenFile, "utf8").trim() };
      const entries = `\n\n[mcp_servers.helper]\nurl = "${first.url}"\nhttp_headers_helper = "${helper}"\n\n[mcp_servers.variable]\nurl = "${first.url}"\nbearer_token_env_var = "SUBS_TICKETS_TOKEN"\n`;
      writeFileSync(configToml, USER_CONFIG + entries);
      const expected = ["helper", "variable"].map((name) => ({ name, runtimeStatus: "connected", tools: p.ticketsTools, toolsError: null }));
      const listed = async () => (await codexServers({ home: p.home, cwd: p.elsewhere, env, threadCwd: p.elsewhere })).filter((s) => s.name !== "other");
      assert.deepEqual(await listed(), expected);
      await first.stop();

      second = await serveHttp(p, ["mcp", "proxy", "tickets"], tokenFile, first.port);
      assert.deepEqual(await listed(), expected, "after the restart, with the same entries and the same variable");
      const run = await codexExec({ home: p.home, cwd: p.elsewhere, env, server: "variable", tool: "lookup", args: { q: "after" } });
      assert.deepEqual(run.calls, [{ server: "variable", tool: "lookup", status: "completed", text: "lookup answered after" }], run.stderr);
    } finally {
      writeFileSync(configToml, USER_CONFIG);
      await first.stop();
      await second?.stop();
    }
  });
});
