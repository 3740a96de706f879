// Claude Code (pinned in tools/clients, installed by the test when missing) after `subs agent
// connect` / `subs mcp connect`: its own session start (`claude -p`'s init line) shows the server
// connected with exactly the tools subs lists, a token_env connection's included, started from a
// directory without a substructure.toml; a tool call made by Claude's own agent loop reaches the
// server that requires the token; `--remove` leaves ~/.claude.json as it was, byte for byte.
// And `subs mcp proxy --http --token-file` with the header helper docs/serve.md shows, across a
// restart of subs.
import assert from "node:assert/strict";
import { readFileSync, writeFileSync } from "node:fs";
import path from "node:path";
import { after, before, describe, it } from "node:test";
import { runCli } from "./support/cli.ts";
import { claudeSession, ensureClaude } from "./support/claude-code.ts";
import { cleanEnv, serveHttp, startSupportProject, TICKETS_TOKEN, writeHeaderHelper, type HttpServed, type SupportProject } from "./support/clients.ts";

describe("Claude Code after subs agent connect", () => {
  let p: SupportProject;
  let claudeJson: string;

  before(async () => {
    ensureClaude();
    p = await startSupportProject();
    claudeJson = path.join(p.home, ".claude.json");
    // The first session in a fresh HOME writes Claude's own keys (ids, plugin usage): after it,
    // ~/.claude.json changes only when something edits its servers.
    await claudeSession({ home: p.home, cwd: p.elsewhere });
  });

  after(async () => {
    await p?.close();
  });

  /** `subs ARGV` in the directory Claude runs in, with the user's HOME, --config naming the file. */
  const subs = (argv: string[]) => runCli([...argv, "--config", p.config], { cwd: p.elsewhere, env: cleanEnv(p.home) });

  // One session for both entries, the agent's and a connection's, side by side as a person would
  // have them (each session costs a Claude start and a start of subs for each entry): what it shows
  // of each entry is what a session of its own showed. No session after --remove: Claude reads its
  // servers from ~/.claude.json, and --remove leaves it byte for byte as it was before connect.
  it("subs agent connect support and subs mcp connect tickets --to claude: both connected, the agent with exactly its tools (the token_env connection's too) and the connection with its own tool names under Claude's prefix, from another directory; a call reaches the server that needs the token; --remove restores ~/.claude.json byte for byte", async () => {
    const before = readFileSync(claudeJson);
    const connected = await subs(["agent", "connect", "support", "--to", "claude"]);
    assert.equal(connected.code, 0, connected.stderr);
    const agentOnly = readFileSync(claudeJson, "utf8");
    const tickets = await subs(["mcp", "connect", "tickets", "--to", "claude"]);
    assert.equal(tickets.code, 0, tickets.stderr);
    const written = readFileSync(claudeJson, "utf8");
    assert.ok(!written.includes(TICKETS_TOKEN), "no token in the client's file");

    const session = await claudeSession({ home: p.home, cwd: p.elsewhere, env: p.env, call: { tool: "mcp__support__tickets__lookup", input: { q: "crash" } } });
    const byName = <T extends { name: string }>(l: T[]) => [...l].sort((a, b) => a.name.localeCompare(b.name));
    assert.deepEqual(byName(session.servers), [
      { name: "support", status: "connected" },
      { name: "tickets", status: "connected" },
    ], session.stderr);
    assert.deepEqual(session.tools.filter((t) => t.startsWith("mcp__support__")), p.agentTools.map((t) => `mcp__support__${t}`));
    assert.deepEqual(session.tools.filter((t) => !t.startsWith("mcp__support__")), p.ticketsTools.map((t) => `mcp__tickets__${t}`));
    assert.ok(p.agentTools.includes("tickets__lookup") && p.agentTools.includes("docs__search"), p.agentTools.join(" "));
    assert.deepEqual(session.offered, session.tools, "the model is offered every one of them");
    assert.deepEqual(session.results, [{ text: "lookup answered crash", isError: false }]);
    assert.ok(p.ticketsAuthorizations.includes(`Bearer ${TICKETS_TOKEN}`));

    const again = await subs(["agent", "connect", "support", "--to", "claude"]);
    assert.equal(again.code, 0, again.stderr);
    assert.equal(readFileSync(claudeJson, "utf8"), written, "connect again: the same entry, updated in place");

    const removedTickets = await subs(["mcp", "connect", "tickets", "--to", "claude", "--remove"]);
    assert.equal(removedTickets.code, 0, removedTickets.stderr);
    assert.equal(readFileSync(claudeJson, "utf8"), agentOnly, "--remove of one entry leaves the other as it was");
    const removed = await subs(["agent", "connect", "support", "--to", "claude", "--remove"]);
    assert.equal(removed.code, 0, removed.stderr);
    assert.ok(readFileSync(claudeJson).equals(before), "--remove: ~/.claude.json as it was before connect");
  });

  // Claude is started once, after the restart (a session costs a Claude start): one before it (which
  // ran here) checked the same entry and the same helper against a subs that had just written the
  // file. What the restart can break is what the session after it meets, and the token the helper
  // reads is checked to be the one the first start wrote. A first start's own token reaching a real
  // client is checked in third-party-client.test.ts (the Inspector, for mcp proxy and agent serve --http).
  it("subs mcp proxy --http --token-file with a headersHelper reading the file: registered once, after a restart of subs connected and called", async () => {
    const tokenFile = path.join(p.root, "tickets.token");
    const first = await serveHttp(p, ["mcp", "proxy", "tickets"], tokenFile);
    let second: HttpServed | undefined;
    const before = readFileSync(claudeJson, "utf8");
    try {
      const helper = writeHeaderHelper(p.root, "tickets-header", tokenFile);
      const entry = { type: "http", url: first.url, headersHelper: helper };
      writeFileSync(claudeJson, JSON.stringify({ ...(JSON.parse(before) as object), mcpServers: { "tickets-http": entry } }, null, 2));
      const token = readFileSync(tokenFile, "utf8");
      await first.stop();

      second = await serveHttp(p, ["mcp", "proxy", "tickets"], tokenFile, first.port);
      assert.equal(readFileSync(tokenFile, "utf8"), token, "the token kept across the restart");
      const two = await claudeSession({ home: p.home, cwd: p.elsewhere, call: { tool: "mcp__tickets-http__lookup", input: { q: "after" } } });
      const ours = (servers: Array<{ name: string; status: string }>) => servers.filter((s) => s.name === "tickets-http");
      assert.deepEqual(ours(two.servers), [{ name: "tickets-http", status: "connected" }], two.stderr);
      assert.deepEqual(two.tools.filter((t) => t.startsWith("mcp__tickets-http__")), p.ticketsTools.map((t) => `mcp__tickets-http__${t}`));
      assert.deepEqual(two.results, [{ text: "lookup answered after", isError: false }]);
    } finally {
      writeFileSync(claudeJson, before);
      await first.stop();
      await second?.stop();
    }
  });
});
