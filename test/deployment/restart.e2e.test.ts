// A restart of `subs deployment serve` keeps what it holds, on each of its stores: declarations,
// agents, the credential a real consent produced, and API tokens. The store (the files of its data
// directory, or every row of its Postgres database) holds none of those secrets in clear.
import assert from "node:assert/strict";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { after, test } from "node:test";
import { browserCommand } from "../support/browser.ts";
import { runCli } from "../support/cli.ts";
import { startServedDeployment, STORES } from "../support/deployment-serve.ts";
import { annotatedTool, startMcpServer } from "../support/mcp-server.ts";
import { startAuthServer } from "../support/oauth-server.ts";

const dirs: string[] = [];
after(() => dirs.forEach((d) => rmSync(d, { recursive: true, force: true })));

for (const store of STORES) test(`declarations, agents, credentials and tokens survive a restart; the store greps clean of every secret (${store})`, async () => {
  const authServer = await startAuthServer();
  const mcp = await startMcpServer({ tools: [annotatedTool("search_issues", { readOnlyHint: true })], oauth: { authServer } });
  const dataDir = mkdtempSync(path.join(tmpdir(), "subs-restart-"));
  const project = mkdtempSync(path.join(tmpdir(), "subs-restart-project-"));
  dirs.push(dataDir, project);
  let first = await startServedDeployment({ dir: dataDir, store });
  const applyToken = await first.tokenFor("apply");
  const run = (url: string, args: string[]) => {
    writeFileSync(path.join(project, "substructure.toml"), `[remote]\nurl = "${url}"\n\n[mcp.tracker]\nurl = "${mcp.url}"\n\n[agent.triage]\nmcp = ["tracker"]\n`);
    return runCli(args, { cwd: project, env: { SUBSTRUCTURE_TOKEN: applyToken, BROWSER: browserCommand() } });
  };
  try {
    assert.equal((await run(first.url, ["apply"])).code, 0);
    const login = await run(first.url, ["mcp", "login", "tracker", "--timeout", "20"]);
    assert.equal(login.code, 0, login.stderr);
    await first.close();

    const second = await startServedDeployment({ dir: dataDir });
    first = second;
    const list = await run(second.url, ["mcp", "list", "--json"]);
    assert.equal(list.code, 0, list.stderr);
    assert.equal(JSON.parse(list.stdout)[0].status, "authorized", "the credential is still held after the restart");
    const again = await run(second.url, ["apply", "--json"]);
    assert.equal(again.code, 0, again.stderr);
    assert.equal(JSON.parse(again.stdout).changed, false, "declarations and agents are intact: nothing to apply, and the old apply token still works");
    const tools = await run(second.url, ["mcp", "tools", "tracker", "--json"]);
    assert.equal(tools.code, 0, tools.stderr);
    assert.deepEqual(JSON.parse(tools.stdout).tools.map((t: { name: string }) => t.name), ["search_issues"], "the credential decrypts and is used");

    const secrets = [...authServer.issuedTokens(), applyToken, second.token];
    assert.ok(secrets.length >= 4);
    const held = await second.storeContents();
    assert.ok(held.includes(mcp.url), "the dump holds the store's rows");
    for (const secret of secrets) assert.ok(!held.includes(secret), "a token or credential is in clear in the store");
  } finally {
    await first.close();
    await mcp.close();
    await authServer.close();
  }
});
