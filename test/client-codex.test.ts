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

  // One app-server outside a thread for both entries, the agent's and a connection's (each start
  // costs a Codex start and a start of subs for each entry): what it shows of each entry is what
  // one of its own showed. The connection's entry goes before the thread and `codex exec`, which
  // check the agent's. No listing after --remove: Codex reads its servers from config.toml, and
  // --remove leaves it byte for byte as it was before connect.
  it("subs agent connect support and subs mcp connect tickets --to codex: outside a thread (in ~/.codex) the app-server lists exactly the agent's tools (the token_env connection's too) and the connection's own tools (subs mcp proxy gets the token_env variable); in a thread elsewhere the agent's; codex exec calls one; --remove restores config.toml byte for byte", async () => {
    const before = readFileSync(configToml);
    const connected = await subs(["agent", "connect", "support", "--to", "codex"]);
    assert.equal(connected.code, 0, connected.stderr);
    const agentOnly = readFileSync(configToml, "utf8");
    const ticketsConnected = await subs(["mcp", "connect", "tickets", "--to", "codex"]);
    assert.equal(ticketsConnected.code, 0, ticketsConnected.stderr);
    const written = readFileSync(configToml, "utf8");
    assert.ok(!written.includes(TICKETS_TOKEN), "no token in the client's file");

    const outside = await codexServers({ home: p.home, cwd: p.elsewhere, env: p.env });
    assert.deepEqual(support(outside)?.tools, p.agentTools, JSON.stringify(outside));
    assert.ok(p.agentTools.includes("tickets__lookup") && p.agentTools.includes("docs__search"), p.agentTools.join(" "));
    assert.deepEqual(outside.find((s) => s.name === "tickets"), { name: "tickets", runtimeStatus: null, tools: p.ticketsTools, toolsError: null });
    const removedTickets = await subs(["mcp", "connect", "tickets", "--to", "codex", "--remove"]);
    assert.equal(removedTickets.code, 0, removedTickets.stderr);
    assert.equal(readFileSync(configToml, "utf8"), agentOnly, "--remove of one entry leaves the other as it was");

    const inThread = support(await codexServers({ home: p.home, cwd: p.elsewhere, env: p.env, threadCwd: p.elsewhere }));
    assert.deepEqual(inThread, { name: "support", runtimeStatus: "connected", tools: p.agentTools, toolsError: null });

    const run = await codexExec({ home: p.home, cwd: p.elsewhere, env: p.env, server: "support", tool: "tickets__lookup", args: { q: "crash" } });
    assert.deepEqual(run.offered, p.agentTools.map((t) => `mcp__support/${t}`), run.stderr);
    assert.deepEqual(run.calls, [{ server: "support", tool: "tickets__lookup", status: "completed", text: "lookup answered crash" }], run.stderr);

    const again = await subs(["agent", "connect", "support", "--to", "codex"]);
    assert.equal(again.code, 0, again.stderr);
    assert.equal(readFileSync(configToml, "utf8"), agentOnly, "connect again: the same entry, updated in place");

    const removed = await subs(["agent", "connect", "support", "--to", "codex", "--remove"]);
    assert.equal(removed.code, 0, removed.stderr);
    assert.ok(readFileSync(configToml).equals(before), "--remove: config.toml as it was before connect");
  });

  // Codex is started after the restart only (an app-server listing both entries, then codex exec):
  // a listing before it (which ran here) checked the same entries, the same helper and variable,
  // against a subs that had just written the file. What the restart can break is what the runs
  // after it meet: a subs that made a new token would refuse the variable set from the first one's
  // file. A first start's own token reaching a real client is checked in third-party-client.test.ts.
  it("subs mcp proxy --http --token-file, read by http_headers_helper and by bearer_token_env_var: both entries connected with the same tools after a restart of subs", async () => {
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
      await first.stop();

      second = await serveHttp(p, ["mcp", "proxy", "tickets"], tokenFile, first.port);
      const listed = (await codexServers({ home: p.home, cwd: p.elsewhere, env, threadCwd: p.elsewhere })).filter((s) => s.name !== "other");
      assert.deepEqual(listed, expected, "after the restart, with the same entries and the same variable");
      const run = await codexExec({ home: p.home, cwd: p.elsewhere, env, server: "variable", tool: "lookup", args: { q: "after" } });
      assert.deepEqual(run.calls, [{ server: "variable", tool: "lookup", status: "completed", text: "lookup answered after" }], run.stderr);
    } finally {
      writeFileSync(configToml, USER_CONFIG);
      await first.stop();
      await second?.stop();
    }
  });
});
