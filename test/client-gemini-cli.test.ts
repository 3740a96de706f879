// Gemini CLI (pinned in tools/clients, installed by the test when missing) after `subs agent
// connect`: `gemini mcp list` shows the server connected, and the model's request (`gemini -p`
// against a fake Gemini API) declares exactly the tools subs lists, a token_env connection's
// included (Gemini strips every variable named like a secret from a server's environment unless
// the entry maps it), started from a directory without a substructure.toml; a tool call made by
// Gemini's own agent loop reaches the server that requires the token; `--remove` leaves the
// settings file as it was, byte for byte. And `subs mcp proxy --http --token-file` with the header
// read from a variable, across a restart of subs.
import assert from "node:assert/strict";
import { mkdirSync, readFileSync, writeFileSync } from "node:fs";
import path from "node:path";
import { after, before, describe, it } from "node:test";
import { runCli } from "./support/cli.ts";
import { cleanEnv, serveHttp, startSupportProject, TICKETS_TOKEN, type HttpServed, type SupportProject } from "./support/clients.ts";
import { BASE_SETTINGS, ensureGemini, geminiList, geminiRun } from "./support/gemini-cli.ts";

/** A workspace settings file as a person keeps it (JSONC: Gemini strips comments), 4-space indented. */
const PROJECT_SETTINGS = `{
    // the project's own settings
    "ui": { "theme": "Dracula" },
    "mcpServers": {
        "other": { "command": "/bin/false", "args": ["x"] }
    },
    "mcp": { "excluded": ["other"] }
}
`;

describe("Gemini CLI after subs agent connect", () => {
  let p: SupportProject;
  let userSettings: string;
  let projectSettings: string;

  before(async () => {
    ensureGemini();
    p = await startSupportProject();
    userSettings = path.join(p.home, ".gemini", "settings.json");
    mkdirSync(path.dirname(userSettings));
    writeFileSync(userSettings, `${JSON.stringify(BASE_SETTINGS, null, 2)}\n`);
    projectSettings = path.join(p.elsewhere, ".gemini", "settings.json");
    mkdirSync(path.dirname(projectSettings));
    writeFileSync(projectSettings, PROJECT_SETTINGS);
  });

  after(async () => {
    await p?.close();
  });

  const subs = (argv: string[]) => runCli([...argv, "--config", p.config], { cwd: p.elsewhere, env: cleanEnv(p.home) });
  const listed = async (env: Record<string, string>) => (await geminiList({ home: p.home, cwd: p.elsewhere, env })).filter((s) => s.name !== "other");

  it("subs agent connect support --to gemini: connected, the model offered exactly the agent's tools (the token_env connection's too), from another directory; a call reaches the server that needs the token; --remove restores the settings byte for byte", async () => {
    const before = readFileSync(projectSettings);
    const connected = await subs(["agent", "connect", "support", "--to", "gemini"]);
    assert.equal(connected.code, 0, connected.stderr);
    const written = readFileSync(projectSettings, "utf8");
    assert.ok(!written.includes(TICKETS_TOKEN), "no token in the client's file");

    assert.deepEqual(await listed(p.env), [{ name: "support", status: "Connected" }]);
    const run = await geminiRun({ home: p.home, cwd: p.elsewhere, env: p.env, call: { tool: "mcp_support_tickets__lookup", args: { q: "crash" } } });
    assert.deepEqual(run.offered, p.agentTools.map((t) => `mcp_support_${t}`), run.stderr);
    assert.ok(p.agentTools.includes("tickets__lookup") && p.agentTools.includes("docs__search"), p.agentTools.join(" "));
    assert.deepEqual(run.results, [{ tool: "mcp_support_tickets__lookup", status: "success", output: "lookup answered crash" }], run.stderr);

    const again = await subs(["agent", "connect", "support", "--to", "gemini"]);
    assert.equal(again.code, 0, again.stderr);
    assert.equal(readFileSync(projectSettings, "utf8"), written, "connect again: the same entry, updated in place");

    const removed = await subs(["agent", "connect", "support", "--to", "gemini", "--remove"]);
    assert.equal(removed.code, 0, removed.stderr);
    assert.ok(readFileSync(projectSettings).equals(before), "--remove: the settings as they were before connect");
    assert.deepEqual(await listed(p.env), []);
  });

  it("subs mcp connect tickets --to gemini: subs mcp proxy gets the token_env variable through Gemini's filter and connects; --remove restores the settings", async () => {
    const before = readFileSync(projectSettings);
    const connected = await subs(["mcp", "connect", "tickets", "--to", "gemini"]);
    assert.equal(connected.code, 0, connected.stderr);
    assert.deepEqual(await listed(p.env), [{ name: "tickets", status: "Connected" }]);
    const removed = await subs(["mcp", "connect", "tickets", "--to", "gemini", "--remove"]);
    assert.equal(removed.code, 0, removed.stderr);
    assert.ok(readFileSync(projectSettings).equals(before));
  });

  it("subs mcp proxy --http --token-file with the header from a variable set once from the file: connected before a restart of subs, and called after it", async () => {
    const tokenFile = path.join(p.root, "gemini-tickets.token");
    const first = await serveHttp(p, ["mcp", "proxy", "tickets"], tokenFile);
    let second: HttpServed | undefined;
    const settings = readFileSync(userSettings, "utf8");
    try {
      const env = { SUBS_TICKETS_TOKEN: readFileSync(tokenFile, "utf8").trim() };
      const entry = { httpUrl: first.url, headers: { Authorization: "Bearer $SUBS_TICKETS_TOKEN" } };
      writeFileSync(userSettings, JSON.stringify({ ...BASE_SETTINGS, mcpServers: { tickets: entry } }, null, 2));
      const tickets = async () => (await listed(env)).filter((s) => s.name === "tickets");
      assert.deepEqual(await tickets(), [{ name: "tickets", status: "Connected" }]);
      await first.stop();

      second = await serveHttp(p, ["mcp", "proxy", "tickets"], tokenFile, first.port);
      assert.deepEqual(await tickets(), [{ name: "tickets", status: "Connected" }], "after the restart, with the same variable");
      const run = await geminiRun({ home: p.home, cwd: p.elsewhere, env, call: { tool: "mcp_tickets_lookup", args: { q: "after" } } });
      assert.deepEqual(run.offered, p.ticketsTools.map((t) => `mcp_tickets_${t}`), run.stderr);
      assert.deepEqual(run.results, [{ tool: "mcp_tickets_lookup", status: "success", output: "lookup answered after" }], run.stderr);
    } finally {
      writeFileSync(userSettings, settings);
      await first.stop();
      await second?.stop();
    }
  });
});
