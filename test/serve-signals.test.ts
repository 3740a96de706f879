// What the long-lived signals of a served session keep: nothing per request, nothing per session.
// On Node 20 every AbortSignal.any() adds the signal it makes to each source's set of dependants
// and never takes it out, even once that signal is collected (src/http/deadline.ts): a source that
// outlives its requests (the upstream transport's signal, for a whole session; the process's, for
// every session of `--http` and the deployment) grew by one per request or session for as long as
// it lived. Read here from the set itself (Node keeps it under the symbol kDependantSignals), with
// the abort listeners beside it, after the requests are over: counts, not heap or time.
import assert from "node:assert/strict";
import { getEventListeners } from "node:events";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { after, before, describe, it } from "node:test";
import { loadConfig } from "../src/config/load.ts";
import { followersOf } from "../src/http/deadline.ts";
import { silentReporter } from "../src/report.ts";
import { agentSessionFactory } from "../src/serve/agent-session.ts";
import { proxySessionFactory } from "../src/serve/proxy-session.ts";
import { openUpstream } from "../src/serve/upstream.ts";
import { testContext } from "./support/cli.ts";
import { annotatedTool, startMcpServer, type RunningMcpServer } from "./support/mcp-server.ts";
import { waitFor, within } from "./support/wait.ts";
import { connectSession } from "./support/serve-client.ts";
import { dependantsOf } from "./support/signals.ts";

/** The dependants a signal keeps (AbortSignal.any), its abort listeners, and the signals of anySignal() that follow it. */
function kept(signal: AbortSignal): { dependants: number; listeners: number; followers: number } {
  return { dependants: dependantsOf(signal), listeners: getEventListeners(signal, "abort").length, followers: followersOf(signal) };
}

describe("the signals a served session outlives or shares", () => {
  let dir: string;
  // Answers as JSON; the other as an event stream (a tool with `work`), whose request is over when its body ends.
  let json: RunningMcpServer;
  let streamed: RunningMcpServer;
  before(async () => {
    dir = mkdtempSync(path.join(tmpdir(), "subs-serve-signals-"));
    json = await startMcpServer({ tools: [annotatedTool("search")] });
    streamed = await startMcpServer({ tools: [annotatedTool("search"), { ...annotatedTool("slow"), work: { steps: 1, everyMs: 1, reports: false } }] });
  });
  after(async () => {
    await json.close();
    await streamed.close();
    rmSync(dir, { recursive: true, force: true });
  });

  for (const answer of ["JSON", "an event stream"] as const) {
    it(`200 calls on one upstream session leave nothing on the transport's signal or the session's (answers as ${answer})`, async () => {
      const server = answer === "JSON" ? json : streamed;
      writeFileSync(path.join(dir, "substructure.toml"), `[mcp.up]\nurl = "${server.url}"\nauth = { token_env = "T" }\n`);
      const { ctx } = testContext({ cwd: dir, env: { T: "token-SECRET" } });
      const config = loadConfig({ env: ctx.env, cwd: dir });
      const session = new AbortController();
      const upstream = await openUpstream({ ctx, config, connection: config.connections[0]!, reporter: silentReporter, sessionSignal: session.signal, requestTimeoutMs: 5000 });
      try {
        // The signal the SDK's transport hands every request of the session (its own controller's).
        const transport = (upstream.client.transport as unknown as { _abortController?: AbortController })._abortController?.signal;
        assert.ok(transport, "the transport's signal");
        const call = async (n: number) => {
          const result = await upstream.run((client) => client.callTool({ name: "search", arguments: { n } }));
          assert.deepEqual(result.content, [{ type: "text", text: JSON.stringify({ n }) }]);
        };
        for (let n = 0; n < 5; n++) await call(n);
        const warm = kept(transport);
        for (let n = 5; n < 205; n++) await call(n);
        assert.deepEqual(kept(transport), warm, "the transport's signal after 200 more calls");
        assert.equal(warm.dependants, 0, "dependants of the transport's signal");
        assert.deepEqual(kept(session.signal), { dependants: 0, listeners: 0, followers: 0 }, "the session's signal, once the upstream is open");
      } finally {
        await upstream.close();
      }
    });
  }

  it("a call whose streamed answer is still being read is ended when the session's transport closes: its request is over when its body is, not when fetch resolves", async () => {
    // Each tools/call's HTTP answer: whether it was written to its end when its connection closed.
    const ends: Array<{ finished: boolean }> = [];
    const long = await startMcpServer({
      tools: [{ ...annotatedTool("long"), work: { steps: 600, everyMs: 50, reports: true } }],
      gate: (_req, res, body) => {
        if ((body as { method?: string } | undefined)?.method === "tools/call") res.on("close", () => void ends.push({ finished: res.writableFinished }));
        return false;
      },
    });
    try {
      writeFileSync(path.join(dir, "substructure.toml"), `[mcp.up]\nurl = "${long.url}"\nauth = { token_env = "T" }\n`);
      const { ctx } = testContext({ cwd: dir, env: { T: "token-SECRET" } });
      const config = loadConfig({ env: ctx.env, cwd: dir });
      const upstream = await openUpstream({ ctx, config, connection: config.connections[0]!, reporter: silentReporter, sessionSignal: new AbortController().signal, requestTimeoutMs: 60_000 });
      let progressed = () => {};
      const streaming = new Promise<void>((resolve) => (progressed = resolve));
      const call = upstream.run((client) => client.callTool({ name: "long", arguments: {} }, undefined, { onprogress: () => progressed(), timeout: 60_000 }));
      call.catch(() => {});
      // A progress notification came on the answer's event stream: fetch has resolved, its body is being read.
      await within(streaming, "the first progress notification of the call");
      await upstream.close();
      await assert.rejects(call);
      await waitFor(() => ends.length === 1, "the call's HTTP answer to close at the server");
      assert.deepEqual(ends, [{ finished: false }], "closed mid-answer (30 s of work left), not at its end");
    } finally {
      await long.close();
    }
  });

  it("20 sessions of `subs agent serve` and 20 of `subs mcp proxy`, each with a call, leave nothing on the process's signal once closed", async () => {
    writeFileSync(path.join(dir, "substructure.toml"), `[mcp.up]\nurl = "${streamed.url}"\nauth = { token_env = "T" }\n\n[agent.bot]\nmcp = ["up"]\n`);
    const { ctx } = testContext({ cwd: dir, env: { T: "token-SECRET" } });
    const config = loadConfig({ env: ctx.env, cwd: dir });
    const before = kept(ctx.signal);
    const agent = agentSessionFactory(ctx, config, "bot", { reporter: silentReporter, timeoutMs: 5000, requestTimeoutMs: 5000 });
    const proxy = proxySessionFactory(ctx, config, config.connections[0]!, { reporter: silentReporter });
    for (const [factory, tool] of [
      [agent, "up__slow"],
      [proxy, "slow"],
    ] as const) {
      for (let n = 0; n < 20; n++) {
        const session = await factory().open();
        const client = await connectSession(session);
        assert.deepEqual((await client.callTool({ name: tool, arguments: { n } })).content, [{ type: "text", text: JSON.stringify({ n }) }]);
        await client.close();
        await session.close();
        await session.server.close();
      }
    }
    assert.deepEqual(kept(ctx.signal), before, "the process's signal after 40 sessions");
  });
});
