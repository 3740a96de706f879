// Claude Code, Codex and Gemini CLI (pinned in tools/clients) after `subs agent connect` with
// [remote]: each entry names the deployment's agent endpoint and a header that reads the API token
// from a variable; each client must expand that variable itself, connect to a real
// `subs deployment serve`, and see exactly the agent's tools (Claude and Gemini get a call answered
// with the deployment's credential).
// Claude Code's `subs agent connect` runs the built CLI (bin/subs.cjs) as a person does; Codex's and
// Gemini CLI's run the same `run()` in this process, where what is checked is the file written and
// what the client then does with it, not the process.
import assert from "node:assert/strict";
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { after, before, describe, it } from "node:test";
import { runCli, runInProcess } from "./support/cli.ts";
import { claudeSession, ensureClaude } from "./support/claude-code.ts";
import { cleanEnv } from "./support/clients.ts";
import { codexServers, ensureCodex } from "./support/codex.ts";
import { BASE_SETTINGS, ensureGemini, geminiList, geminiRun } from "./support/gemini-cli.ts";
import { authorizeServed, callServed, startServedDeployment, type ServedDeployment } from "./support/deployment-serve.ts";
import { annotatedTool, startMcpServer, type RunningMcpServer } from "./support/mcp-server.ts";
import { startAuthServer, type RunningAuthServer } from "./support/oauth-server.ts";

describe("MCP clients after subs agent connect, with [remote]", () => {
  const root = mkdtempSync(path.join(tmpdir(), "subs-claude-remote-"));
  const home = path.join(root, "home");
  const project = path.join(root, "project");
  let authServer: RunningAuthServer;
  let mcp: RunningMcpServer;
  let d: ServedDeployment;
  let useToken: string;
  /**
   * Runs `session`, and returns with its result the status of each request to the agent's endpoint
   * that the deployment logged meanwhile without a token it knows: what a client without the
   * variable was answered. (A request is logged when it ends, so one of an earlier session, with
   * its token, may be logged meanwhile too: those are not counted.) Only the check of the API token
   * answers such a request 401 (docs/deployment-protocol.md section 1).
   */
  const withoutToken = async <T>(session: () => Promise<T>): Promise<{ result: T; statuses: unknown[] }> => {
    const from = d.logs.length;
    const result = await session();
    const statuses = d.logs.slice(from).filter((l) => l.msg === "request" && l.path === "/v1/agents/triage/mcp" && l.token === undefined).map((l) => l.status);
    return { result, statuses };
  };

  before(async () => {
    ensureClaude();
    ensureCodex();
    ensureGemini();
    mkdirSync(home);
    mkdirSync(project);
    authServer = await startAuthServer();
    mcp = await startMcpServer({ tools: [annotatedTool("search_issues", { readOnlyHint: true }), annotatedTool("delete_issue", { destructiveHint: true })], oauth: { authServer } });
    d = await startServedDeployment();
    useToken = await d.tokenFor("use");
    assert.deepEqual(await authorizeServed(d, "tracker", { url: mcp.url, prefix_tools: true }), { status: "authorized" });
    const put = await callServed(d, "PUT", "/v1/agents/triage", { mcp: [{ id: "tracker", tools: { read_only: true } }] });
    assert.equal(put.status, 201);
    writeFileSync(
      path.join(project, "substructure.toml"),
      `[remote]\nurl = "${d.url}"\ntoken_env = "DEPLOY_TOKEN"\n\n[mcp.tracker]\nurl = "${mcp.url}"\n\n[agent.triage]\nmcp = [{ id = "tracker", tools = { read_only = true } }]\n`,
    );
    // No Claude session before connect (client-claude-code.test.ts has one, for its byte-for-byte
    // check of ~/.claude.json after --remove): nothing here compares the file with what Claude
    // wrote, and its first session, the one with the call, writes its own keys beside the entry.
  });
  after(async () => {
    await d.close();
    await mcp.close();
    await authServer.close();
    rmSync(root, { recursive: true, force: true });
  });

  it("Claude Code: connected to the deployment with the token from $DEPLOY_TOKEN, exactly the agent's tools, a call answered; the file holds the variable, never the token", async () => {
    const connected = await runCli(["agent", "connect", "triage", "--to", "claude"], { cwd: project, env: cleanEnv(home, { DEPLOY_TOKEN: useToken }) });
    assert.equal(connected.code, 0, connected.stderr);
    const written = readFileSync(path.join(home, ".claude.json"), "utf8");
    assert.ok(written.includes(`${d.url}/v1/agents/triage/mcp`) && written.includes("${DEPLOY_TOKEN}"), written);
    assert.ok(!written.includes(useToken), "no API token in ~/.claude.json");

    const session = await claudeSession({ home, cwd: project, env: { DEPLOY_TOKEN: useToken }, call: { tool: "mcp__triage__tracker__search_issues", input: { q: "crash" } } });
    assert.deepEqual(session.servers, [{ name: "triage", status: "connected" }], session.stderr);
    assert.deepEqual(session.tools, ["mcp__triage__tracker__search_issues"]);
    assert.deepEqual(session.results, [{ text: '{"q":"crash"}', isError: false }]);

    // Without the variable Claude cannot authenticate: the deployment refuses it.
    const refused = await withoutToken(() => claudeSession({ home, cwd: project }));
    assert.deepEqual(refused.result.servers, [{ name: "triage", status: "failed" }], "no token, no connection");
    assert.ok(refused.statuses.length > 0 && refused.statuses.every((s) => s === 401), `Claude reached the deployment and was refused as unauthenticated: ${JSON.stringify(refused.statuses)}`);
  });
  it("Codex: its app-server connects to the deployment with the token from $DEPLOY_TOKEN and lists exactly the agent's tools; none without it", async () => {
    const codexHome = path.join(root, "codex-home");
    mkdirSync(path.join(codexHome, ".codex"), { recursive: true });
    const connected = await runInProcess(["agent", "connect", "triage", "--to", "codex"], { cwd: project, env: cleanEnv(codexHome, { DEPLOY_TOKEN: useToken }) });
    assert.equal(connected.code, 0, connected.stderr);
    const written = readFileSync(path.join(codexHome, ".codex", "config.toml"), "utf8");
    assert.ok(written.includes(`${d.url}/v1/agents/triage/mcp`) && written.includes("DEPLOY_TOKEN") && !written.includes(useToken), written);
    const triage = (await codexServers({ home: codexHome, cwd: project, env: { DEPLOY_TOKEN: useToken } })).find((s) => s.name === "triage");
    assert.deepEqual(triage?.tools, ["tracker__search_issues"], JSON.stringify(triage));
    // Codex checks the variable itself: it does not start the server, and says why.
    const without = await withoutToken(async () => (await codexServers({ home: codexHome, cwd: project })).find((s) => s.name === "triage"));
    assert.deepEqual(
      without.result,
      { name: "triage", runtimeStatus: null, tools: [], toolsError: "MCP startup failed: Environment variable DEPLOY_TOKEN for MCP server 'triage' is not set" },
      "no token, no tools",
    );
    assert.deepEqual(without.statuses, [], "nothing sent to the deployment without the token");
  });

  it("Gemini CLI: connected to the deployment with the token from $DEPLOY_TOKEN, offered exactly the agent's tools, a call answered", async () => {
    const geminiHome = path.join(root, "gemini-home");
    mkdirSync(path.join(geminiHome, ".gemini"), { recursive: true });
    writeFileSync(path.join(geminiHome, ".gemini", "settings.json"), `${JSON.stringify(BASE_SETTINGS, null, 2)}\n`);
    const connected = await runInProcess(["agent", "connect", "triage", "--to", "gemini"], { cwd: project, env: cleanEnv(geminiHome, { DEPLOY_TOKEN: useToken }) });
    assert.equal(connected.code, 0, connected.stderr);
    const env = { DEPLOY_TOKEN: useToken };
    // Connected: the model is offered the deployment's tools and the call is answered (no `gemini
    // mcp list` first: each gemini run costs about three seconds of CPU, and this one says as much).
    const run = await geminiRun({ home: geminiHome, cwd: project, env, call: { tool: "mcp_triage_tracker__search_issues", args: { q: "crash" } } });
    assert.deepEqual(run.offered, ["mcp_triage_tracker__search_issues"], run.stderr);
    assert.deepEqual(run.results, [{ tool: "mcp_triage_tracker__search_issues", status: "success", output: '{"q":"crash"}' }], run.stderr);
    const listed = await withoutToken(async () => (await geminiList({ home: geminiHome, cwd: project })).filter((s) => s.name === "triage"));
    assert.deepEqual(listed.result, [{ name: "triage", status: "Disconnected" }], "no token, no connection");
    assert.ok(listed.statuses.length > 0 && listed.statuses.every((s) => s === 401), `Gemini reached the deployment and was refused as unauthenticated: ${JSON.stringify(listed.statuses)}`);
  });
});
