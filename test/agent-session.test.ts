// The session factory behind `subs agent serve` (src/serve/agent-session.ts), in-process: one
// factory serves many sessions (what the --http transport does), each with its own snapshot of
// the agent's tools and its own upstream connections, closed with it.
import assert from "node:assert/strict";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { after, before, test } from "node:test";
import { loadConfig } from "../src/config/load.ts";
import { silentReporter } from "../src/report.ts";
import { agentSessionFactory } from "../src/serve/agent-session.ts";
import { testContext } from "./support/cli.ts";
import { annotatedTool, startMcpServer, type RunningMcpServer, type TestTool } from "./support/mcp-server.ts";
import { connectSession } from "./support/serve-client.ts";

let dir: string;
let upstream: RunningMcpServer;
const tools: TestTool[] = [annotatedTool("search")];

before(async () => {
  dir = mkdtempSync(path.join(tmpdir(), "subs-agent-session-"));
  upstream = await startMcpServer({ tools });
  writeFileSync(path.join(dir, "substructure.toml"), `[mcp.up]\nurl = "${upstream.url}"\nauth = { token_env = "T" }\n\n[agent.bot]\nmcp = ["up"]\n`);
});

after(async () => {
  await upstream.close();
  rmSync(dir, { recursive: true, force: true });
});

test("one factory, many sessions: each fetches once, keeps its own snapshot, and closes only its own connections", async () => {
  const opened: string[] = [];
  const { ctx } = testContext({ cwd: dir, env: { T: "token-SECRET" }, openBrowser: async (url) => void opened.push(url) });
  const config = loadConfig({ env: ctx.env, cwd: dir });
  const factory = agentSessionFactory(ctx, config, "bot", { reporter: silentReporter, timeoutMs: 5000, requestTimeoutMs: 5000 });
  const lists = () => upstream.requests.filter((m) => m === "tools/list").length;

  const first = await factory().open();
  const a = await connectSession(first);
  assert.deepEqual((await a.listTools()).tools.map((t) => t.name), ["up__search"]);
  tools.push(annotatedTool("added"));
  try {
    const second = await factory().open();
    const b = await connectSession(second);
    assert.deepEqual((await b.listTools()).tools.map((t) => t.name), ["up__search", "up__added"]);
    assert.deepEqual((await a.listTools()).tools.map((t) => t.name), ["up__search"], "the first session keeps its snapshot");
    assert.equal(lists(), 2, "one fetch per session");

    await first.close();
    await first.server.close();
    // The second session's connection is its own: still calls.
    assert.deepEqual((await b.callTool({ name: "up__added", arguments: { k: 1 } })).content, [{ type: "text", text: '{"k":1}' }]);
    await second.close();
    await second.server.close();
  } finally {
    tools.pop();
  }
  assert.deepEqual(opened, [], "no browser");
});

test("[remote] and an unknown agent are refused before any session starts", () => {
  const { ctx } = testContext({ cwd: dir, env: {} });
  const config = loadConfig({ env: ctx.env, cwd: dir });
  assert.throws(() => agentSessionFactory(ctx, config, "bto", { reporter: silentReporter, timeoutMs: 1000, requestTimeoutMs: 1000 }), /no agent `bto`/);
  assert.throws(
    () => agentSessionFactory(ctx, { ...config, remote: { url: "https://deploy.example", tokenEnv: "SUBSTRUCTURE_TOKEN" } }, "bot", { reporter: silentReporter, timeoutMs: 1000, requestTimeoutMs: 1000 }),
    (error: unknown) => error instanceof Error && (error as { kind?: string }).kind === "refused" && /deployment holds the credentials and runs the agent's tool calls/.test(error.message),
  );
});
