// Gemini CLI (pinned in tools/clients, installed by the test when missing) after `subs agent
// connect`: Gemini connects to the server, and the model's request (`gemini -p` against a fake
// Gemini API) declares exactly the tools subs lists, a token_env connection's
// included (Gemini strips every variable named like a secret from a server's environment unless
// the entry maps it), started from a directory without a substructure.toml; a tool call made by
// Gemini's own agent loop reaches the server that requires the token; `--remove` leaves the
// settings file as it was, byte for byte. And `subs mcp proxy --http --token-file` with the header
// read from a variable, across a restart of subs.
import assert from "node:assert/strict";
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
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

  // One `gemini -p` for both entries (each gemini run costs about three seconds of CPU): the agent's
  // entry and a connection's, side by side as a person would have them. No `gemini mcp list` (one
  // ran here): the model is offered each entry's tools only once Gemini has connected to it, so the
  // run says as much, and Gemini gives `mcp list` the same environment and settings.
  it("subs agent connect support and subs mcp connect tickets --to gemini: both connected (subs mcp proxy gets the token_env variable through Gemini's filter), the model offered exactly the agent's tools (the token_env connection's too), from another directory; a call reaches the server that needs the token; --remove restores the settings byte for byte", async () => {
    const before = readFileSync(projectSettings);
    const connected = await subs(["agent", "connect", "support", "--to", "gemini"]);
    assert.equal(connected.code, 0, connected.stderr);
    const agentOnly = readFileSync(projectSettings, "utf8");
    const tickets = await subs(["mcp", "connect", "tickets", "--to", "gemini"]);
    assert.equal(tickets.code, 0, tickets.stderr);
    const written = readFileSync(projectSettings, "utf8");
    assert.ok(!written.includes(TICKETS_TOKEN), "no token in the client's file");

    const run = await geminiRun({ home: p.home, cwd: p.elsewhere, env: p.env, call: { tool: "mcp_support_tickets__lookup", args: { q: "crash" } } });
    assert.deepEqual(run.offered.filter((t) => t.startsWith("mcp_support_")), p.agentTools.map((t) => `mcp_support_${t}`), run.stderr);
    assert.deepEqual(run.offered.filter((t) => !t.startsWith("mcp_support_")), p.ticketsTools.map((t) => `mcp_tickets_${t}`), run.stderr);
    assert.ok(p.agentTools.includes("tickets__lookup") && p.agentTools.includes("docs__search"), p.agentTools.join(" "));
    assert.deepEqual(run.results, [{ tool: "mcp_support_tickets__lookup", status: "success", output: "lookup answered crash" }], run.stderr);

    const again = await subs(["agent", "connect", "support", "--to", "gemini"]);
    assert.equal(again.code, 0, again.stderr);
    assert.equal(readFileSync(projectSettings, "utf8"), written, "connect again: the same entry, updated in place");

    // No `gemini mcp list` after --remove: Gemini lists what its settings hold, and they are byte for byte what they were.
    const removedTickets = await subs(["mcp", "connect", "tickets", "--to", "gemini", "--remove"]);
    assert.equal(removedTickets.code, 0, removedTickets.stderr);
    assert.equal(readFileSync(projectSettings, "utf8"), agentOnly, "--remove of one entry leaves the other as it was");
    const removed = await subs(["agent", "connect", "support", "--to", "gemini", "--remove"]);
    assert.equal(removed.code, 0, removed.stderr);
    assert.ok(readFileSync(projectSettings).equals(before), "--remove: the settings as they were before connect");
  });

  // Gemini is started once, after the restart: each gemini run costs about three seconds of CPU,
  // and one before the restart (a `gemini mcp list`, which ran here) checked the same entry, the
  // same header from the same variable, against a subs that had just written the file. What the
  // restart can break is what the run after it meets: a subs that made a new token would refuse
  // the variable set from the first one's file. A first start's own token reaching a real client
  // is checked in third-party-client.test.ts (the Inspector, for mcp proxy and agent serve --http).
  it("subs mcp proxy --http --token-file with the header from a variable set once from the file: after a restart of subs, connected and called", async () => {
    const tokenFile = path.join(p.root, "gemini-tickets.token");
    const first = await serveHttp(p, ["mcp", "proxy", "tickets"], tokenFile);
    let second: HttpServed | undefined;
    const settings = readFileSync(userSettings, "utf8");
    try {
      const env = { SUBS_TICKETS_TOKEN: readFileSync(tokenFile, "utf8").trim() };
      const entry = { httpUrl: first.url, headers: { Authorization: "Bearer $SUBS_TICKETS_TOKEN" } };
      writeFileSync(userSettings, JSON.stringify({ ...BASE_SETTINGS, mcpServers: { tickets: entry } }, null, 2));
      await first.stop();

      second = await serveHttp(p, ["mcp", "proxy", "tickets"], tokenFile, first.port);
      // Connected after the restart, with the same variable: the model is offered its tools.
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

// Why `subs agent connect` refuses a [remote].url holding "$" (src/connect/connect.ts): Gemini CLI
// expands `$NAME` in the url of an entry and sends the variable's value in the request's path.
describe("Gemini CLI expands variables in an entry's url", () => {
  it("an httpUrl holding $PROBE_VAR reaches the server with that variable's value in its path; subs agent connect refuses to write such a url", async () => {
    ensureGemini();
    const root = mkdtempSync(path.join(tmpdir(), "subs-gemini-expand-"));
    const home = path.join(root, "home");
    const project = path.join(root, "project");
    mkdirSync(path.join(home, ".gemini"), { recursive: true });
    mkdirSync(path.join(project, ".gemini"), { recursive: true });
    writeFileSync(path.join(home, ".gemini", "settings.json"), `${JSON.stringify(BASE_SETTINGS, null, 2)}\n`);
    const paths: string[] = [];
    const server = createServer((req, res) => {
      paths.push(req.url ?? "");
      res.writeHead(404).end();
    });
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
    const origin = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
    try {
      const env = { PROBE_VAR: "value-of-probe-var" };
      writeFileSync(
        path.join(project, "substructure.toml"),
        `[remote]\nurl = "${origin}/$PROBE_VAR"\n\n[mcp.a]\nurl = "https://mcp.example.com/mcp"\n\n[agent.probe]\nmcp = ["a"]\n`,
      );
      const refused = await runCli(["agent", "connect", "probe", "--to", "gemini"], { cwd: project, env: cleanEnv(home, env) });
      assert.equal(refused.code, 2, refused.stderr);
      assert.match(refused.stderr, /\[remote\]\.url holds "\$"/);
      // What subs wrote for such a file before: the endpoint under [remote].url, as it is.
      writeFileSync(path.join(project, ".gemini", "settings.json"), JSON.stringify({ mcpServers: { probe: { httpUrl: `${origin}/$PROBE_VAR/v1/agents/probe/mcp`, headers: { Authorization: "Bearer $DEPLOY_TOKEN" } } } }));
      await geminiList({ home, cwd: project, env });
      assert.ok(paths.length > 0, "Gemini CLI tried the server");
      assert.ok(paths.every((p) => p.startsWith("/value-of-probe-var/v1/agents/probe/mcp")), JSON.stringify(paths));
    } finally {
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
      rmSync(root, { recursive: true, force: true });
    }
  });
});
