// A real MCP client under substructure.lock: Gemini CLI (pinned in tools/clients, installed by the
// test when missing), after `subs agent connect`, offers its model exactly the tools the lock
// allows. The lock is written while the agent's filter keeps one tool fewer; with the filter gone,
// that tool is new to the lock, so `subs agent serve` withholds it and Gemini never sees it. The
// built CLI throughout (Gemini starts bin/subs.cjs).
import assert from "node:assert/strict";
import { mkdirSync, readFileSync, writeFileSync } from "node:fs";
import path from "node:path";
import { after, before, describe, it } from "node:test";
import { runCli } from "./support/cli.ts";
import { cleanEnv, startSupportProject, type SupportProject } from "./support/clients.ts";
import { BASE_SETTINGS, ensureGemini, geminiRun } from "./support/gemini-cli.ts";

describe("Gemini CLI under substructure.lock", () => {
  let p: SupportProject;

  before(async () => {
    ensureGemini();
    p = await startSupportProject();
    const userSettings = path.join(p.home, ".gemini", "settings.json");
    mkdirSync(path.dirname(userSettings));
    writeFileSync(userSettings, `${JSON.stringify(BASE_SETTINGS, null, 2)}\n`);
  });

  after(async () => {
    await p?.close();
  });

  const subs = (argv: string[]) => runCli([...argv, "--config", p.config], { cwd: p.elsewhere, env: cleanEnv(p.home, p.env) });

  it("a tool that is not in the lock is absent from what the model is offered; the locked ones are there and can be called", async () => {
    const file = readFileSync(p.config, "utf8");
    const narrowed = file.replace('mcp = ["docs", "tickets", "notes"]', 'mcp = [{ id = "docs", tools = { include = ["search"] } }, "tickets", "notes"]');
    assert.notEqual(narrowed, file);
    writeFileSync(p.config, narrowed);
    const locked = await subs(["lock", "--yes"]);
    writeFileSync(p.config, file);
    assert.equal(locked.code, 0, locked.stderr);

    const connected = await subs(["agent", "connect", "support", "--to", "gemini"]);
    assert.equal(connected.code, 0, connected.stderr);
    const run = await geminiRun({ home: p.home, cwd: p.elsewhere, env: p.env, call: { tool: "mcp_support_docs__search", args: { q: "lock" } } });
    const expected = p.agentTools.filter((t) => t !== "docs__read_page").map((t) => `mcp_support_${t}`);
    assert.ok(p.agentTools.includes("docs__read_page"), p.agentTools.join(" "));
    assert.deepEqual(run.offered.filter((t) => t.startsWith("mcp_support_")), expected, run.stderr);
    assert.deepEqual(run.results, [{ tool: "mcp_support_docs__search", status: "success", output: "search answered lock" }], run.stderr);
  });
});
