// `--http` of `subs agent serve` and `subs mcp proxy`, end to end: the built CLI
// (bin/subs.cjs) as a child, exactly as a user starts it, driven by the SDK's own Streamable HTTP
// client with the bearer token it wrote to --token-file. Each client session gets its own upstream
// session and its own snapshot of the agent's tools. Every endpoint served is the built CLI's, as
// is each command's first refusal to start; the other refusals run the same `run()` in this
// process (test/support/serve-client.ts, runServeInProcess): what they check is the refusal, its
// code and an empty stdout, not the process (a child costs a Node start-up and the bundle's load).
import assert from "node:assert/strict";
import { spawn, type ChildProcess } from "node:child_process";
import { chmodSync, mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { after, before, describe, it } from "node:test";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { BIN, ensureBuilt, runCli, type How, type RunResult } from "./support/cli.ts";
import { RICH_TOOLS, startRichServer, type RichServer } from "./support/mcp-rich-server.ts";
import { halfOpen, rawCall, runServeInProcess } from "./support/serve-client.ts";
import { within } from "./support/wait.ts";

const MCP_TOKEN = "serve-http-SECRET-upstream-token";

type Served = { child: ChildProcess; url: URL; token: string; stderr: () => string; exited: Promise<number | null> };

/**
 * Starts `argv` (which ends in --http 127.0.0.1:0 --token-file …) and waits for its endpoint;
 * with `descriptors`, under that many open files at most (`ulimit -n`, macOS's default is 256).
 */
async function serve(dir: string, argv: string[], tokenFile: string, options: { descriptors?: number } = {}): Promise<Served> {
  ensureBuilt();
  const command = options.descriptors === undefined ? [process.execPath, BIN, ...argv] : ["bash", "-c", `ulimit -n ${options.descriptors} && exec "$0" "$@"`, process.execPath, BIN, ...argv];
  const child = spawn(command[0]!, command.slice(1), { cwd: dir, env: { PATH: process.env.PATH, HOME: dir, MCP_TOKEN }, stdio: ["ignore", "pipe", "pipe"] });
  let stderr = "";
  let stdout = "";
  child.stderr!.on("data", (d) => (stderr += d));
  child.stdout!.on("data", (d) => (stdout += d));
  const exited = new Promise<number | null>((resolve) => child.once("exit", (code) => resolve(code)));
  const deadline = Date.now() + 15_000;
  let url: URL | undefined;
  while (!url) {
    const match = /serving MCP on (http:\/\/127\.0\.0\.1:\d+\/mcp)/.exec(stderr);
    if (match) url = new URL(match[1]!);
    else if (child.exitCode !== null || Date.now() > deadline) throw new Error(`no endpoint: exit ${child.exitCode}\n${stderr}`);
    else await new Promise((r) => setTimeout(r, 50));
  }
  assert.equal(stdout, "", "nothing on stdout: the protocol is on HTTP");
  return { child, url, token: readFileSync(path.join(dir, tokenFile), "utf8").trim(), stderr: () => stderr, exited };
}

async function connect(served: Served, token = served.token): Promise<Client> {
  const client = new Client({ name: "serve-http-e2e", version: "1.0.0" });
  await client.connect(new StreamableHTTPClientTransport(served.url, { requestInit: { headers: { authorization: `Bearer ${token}` } } }));
  return client;
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

async function waitFor(condition: () => boolean, what: () => string, timeoutMs = 15_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!condition()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what()}`);
    await sleep(25);
  }
}

/** A raw `initialize`; the answer's status, Retry-After and session id. */
async function initialize(served: Served): Promise<{ status: number; retryAfter: string | null; session: string | null }> {
  const answer = await fetch(served.url, {
    method: "POST",
    headers: { "content-type": "application/json", accept: "application/json, text/event-stream", authorization: `Bearer ${served.token}` },
    body: JSON.stringify({ jsonrpc: "2.0", id: 1, method: "initialize", params: { protocolVersion: "2025-06-18", capabilities: {}, clientInfo: { name: "raw", version: "1" } } }),
  });
  await answer.text();
  return { status: answer.status, retryAfter: answer.headers.get("retry-after"), session: answer.headers.get("mcp-session-id") };
}

describe("--http", () => {
  let dir: string;
  let rich: RichServer;

  before(async () => {
    dir = mkdtempSync(path.join(tmpdir(), "subs-serve-http-"));
    rich = await startRichServer();
    writeFileSync(path.join(dir, "substructure.toml"), `[mcp.rich]\nurl = "${rich.url}"\nauth = { token_env = "MCP_TOKEN" }\n\n[agent.triage]\nmcp = ["rich"]\n`);
  });

  after(async () => {
    await rich.close();
    rmSync(dir, { recursive: true, force: true });
  });

  it("subs mcp proxy --http: two clients, each its own upstream session; the token file is 0600; a wrong token gets 401; SIGTERM ends it (exit 0)", async () => {
    const deletes = () => rich.events.filter((e) => e === "HTTP DELETE").length;
    const deletesBefore = deletes();
    const served = await serve(dir, ["mcp", "proxy", "rich", "--http", "127.0.0.1:0", "--token-file", "proxy.token"], "proxy.token");
    try {
      assert.equal(statSync(path.join(dir, "proxy.token")).mode & 0o777, 0o600);
      assert.ok(!served.stderr().includes(served.token), "with --token-file the token is not printed");
      const [a, b] = [await connect(served), await connect(served)];
      const [listA, listB] = await Promise.all([a.listTools(), b.listTools()]);
      assert.deepEqual(listA.tools.map((t) => t.name), RICH_TOOLS.map((t) => t.name));
      assert.deepEqual(listB.tools.map((t) => t.name), RICH_TOOLS.map((t) => t.name));
      const echoed = await a.callTool({ name: "echo", arguments: { text: "hello" } });
      assert.match(JSON.stringify(echoed.content), /hello/);
      await Promise.all([a.close(), b.close()]);
      const wrong = await fetch(served.url, {
        method: "POST",
        headers: { "content-type": "application/json", accept: "application/json, text/event-stream", authorization: "Bearer not-the-token" },
        body: JSON.stringify({ jsonrpc: "2.0", id: 1, method: "initialize", params: { protocolVersion: "2025-06-18", capabilities: {}, clientInfo: { name: "x", version: "1" } } }),
      });
      assert.equal(wrong.status, 401);
      assert.match(wrong.headers.get("www-authenticate") ?? "", /^Bearer/);
    } finally {
      served.child.kill("SIGTERM");
    }
    assert.equal(await within(served.exited, "the served subs to exit"), 0, served.stderr());
    // Each client session had its own upstream session, and the stop ended both of them.
    assert.equal(deletes(), deletesBefore + 2, "one upstream session per client session, each ended");
    assert.ok(!served.stderr().includes(MCP_TOKEN), "the upstream token never on stderr");
  });

  it("--token-file across restarts: subs mcp proxy keeps the token it wrote, so a client holding it gets in again; a token file others can read is replaced", async () => {
    const argv = ["mcp", "proxy", "rich", "--http", "127.0.0.1:0", "--token-file", "restart.token"];
    const first = await serve(dir, argv, "restart.token");
    first.child.kill("SIGTERM");
    assert.equal(await within(first.exited, "the first subs to exit"), 0, first.stderr());
    assert.match(first.stderr(), /subs: wrote a new token to restart\.token\n/);

    const second = await serve(dir, argv, "restart.token");
    try {
      assert.equal(second.token, first.token, "the same token after a restart");
      assert.match(second.stderr(), /subs: kept the token already in restart\.token: clients that read it there keep working\n/);
      assert.ok(!second.stderr().includes(first.token), "never printed");
      const client = await connect(second, first.token);
      assert.deepEqual((await client.listTools()).tools.map((t) => t.name), RICH_TOOLS.map((t) => t.name));
      await client.close();
    } finally {
      second.child.kill("SIGTERM");
    }
    assert.equal(await within(second.exited, "the second subs to exit"), 0, second.stderr());

    chmodSync(path.join(dir, "restart.token"), 0o644);
    const third = await serve(dir, argv, "restart.token");
    try {
      assert.notEqual(third.token, first.token, "a token others could read is not kept");
      assert.equal(statSync(path.join(dir, "restart.token")).mode & 0o777, 0o600);
      assert.match(third.stderr(), /subs: wrote a new token to restart\.token: the old one was open to group or others \(mode 0644\) and may have leaked\n/);
      await assert.rejects(
        connect(third, first.token),
        { code: 401, message: /^Streamable HTTP error: Error POSTing to endpoint: .*"Unauthorized: send the token subs printed at start/ },
        "the old token no longer gets in",
      );
    } finally {
      third.child.kill("SIGTERM");
    }
    assert.equal(await within(third.exited, "the third subs to exit"), 0, third.stderr());
  });

  it("subs agent serve --http: the agent's tools, prefixed, and a call runs upstream", async () => {
    const served = await serve(dir, ["agent", "serve", "triage", "--http", "127.0.0.1:0", "--token-file", "serve.token"], "serve.token");
    try {
      const client = await connect(served);
      const { tools } = await client.listTools();
      assert.deepEqual(tools.map((t) => t.name).sort(), RICH_TOOLS.map((t) => `rich__${t.name}`).sort());
      const echoed = await client.callTool({ name: "rich__echo", arguments: { text: "through serve" } });
      assert.match(JSON.stringify(echoed.content), /through serve/);
      await client.close();
    } finally {
      served.child.kill("SIGINT");
    }
    assert.equal(await within(served.exited, "the served subs to exit"), 0, served.stderr());
  });

  it("refuses what it cannot serve safely, before serving: a host not on loopback, --token-file or a limit without --http, a limit that is not a count (exit 2)", async () => {
    /**
     * The built CLI, or `run()` in this process, its stdin at an end and its stdout everything it
     * wrote (ctx.stdout and the protocol's); either is stopped after 30 s, as the child is, so a
     * refusal that wrongly serves ends and fails the checks on its code: with --max-calls 0 let
     * through by src/commands/flags.ts, the in-process `mcp proxy rich --http 0` served, was ended
     * and failed here (0 !== 2).
     */
    const refusal = (how: How, argv: string[]): Promise<RunResult> =>
      how === "cli" ? runCli(argv, { cwd: dir, env: { MCP_TOKEN } }) : runServeInProcess(argv, { cwd: dir, env: { MCP_TOKEN }, signal: AbortSignal.timeout(30_000) });
    for (const [n, [argv, why]] of ([
      [["mcp", "proxy", "rich", "--http", "0.0.0.0:0"], /loopback/],
      [["agent", "serve", "triage", "--http", "192.168.1.5:8931"], /loopback/],
      [["mcp", "proxy", "rich", "--token-file", "t"], /--token-file goes with --http/],
      [["agent", "serve", "triage", "--max-sessions", "3"], /--max-sessions goes with --http/],
      [["mcp", "proxy", "rich", "--idle-timeout", "60"], /--idle-timeout goes with --http/],
      [["mcp", "proxy", "rich", "--http", "0", "--max-calls", "0"], /--max-calls must be a whole number from 1/],
      [["agent", "serve", "triage", "--http", "0", "--max-connections", "ten"], /--max-connections must be a whole number from 1/],
      [["agent", "serve", "triage", "--http", "0", "--idle-timeout", "-1"], /--idle-timeout must be a positive number of seconds/],
    ] as const).entries()) {
      // Each command's first (mcp proxy, then agent serve) from the built CLI.
      const r = await refusal(n < 2 ? "cli" : "in-process", [...argv]);
      assert.equal(r.code, 2, `${argv.join(" ")}: ${r.stderr}`);
      assert.match(r.stderr, why, argv.join(" "));
      assert.equal(r.stdout, "");
    }
  });

  // Two rounds of 50, where six ran: a round's calls go past the session's cap of 64 calls in
  // progress (src/serve/http.ts) only if the round before was let go, and a call not cancelled
  // upstream, or a POST left open there, shows in the first round. Tried: with the closed POST's
  // calls not taken off the session's count, round 2 is refused (the upstream gets 64 of 100);
  // with its cancellation not passed on, none is cancelled upstream and all 100 POSTs stay open there.
  const DROPPED = 100;
  for (const [command, tool] of [
    [["mcp", "proxy", "rich"], "hang"],
    [["agent", "serve", "triage"], "rich__hang"],
  ] as const) {
    it(`${command.slice(0, 2).join(" ")} --http: ${DROPPED} calls whose client closed the POST are cancelled upstream (notifications/cancelled), leaving no request open there`, async () => {
      const calls = () => rich.events.filter((e) => e === "call hang").length;
      const cancelled = () => rich.events.filter((e) => e === "hang cancelled").length;
      const [callsBefore, cancelledBefore] = [calls(), cancelled()];
      const served = await serve(dir, [...command, "--http", "127.0.0.1:0", "--token-file", "abandon.token"], "abandon.token");
      try {
        const client = await connect(served);
        const session = (client.transport as StreamableHTTPClientTransport).sessionId!;
        for (let round = 0; round < DROPPED / 50; round++) {
          const dropped = await Promise.all(Array.from({ length: 50 }, (_, n) => rawCall(served, session, 1000 + round * 50 + n, tool)));
          await waitFor(() => calls() - callsBefore === (round + 1) * 50, () => `the upstream to get ${(round + 1) * 50} calls (${calls() - callsBefore})`);
          for (const call of dropped) call.drop();
        }
        await waitFor(() => cancelled() - cancelledBefore === DROPPED && rich.openPosts === 0, () => `${DROPPED} cancelled upstream (${cancelled() - cancelledBefore}) and no POST open there (${rich.openPosts})`);
        assert.equal(rich.events.filter((e) => /^cancelled \d+$/.test(e)).length >= DROPPED, true, "each as notifications/cancelled");
        // The session goes on.
        const echoed = await client.callTool({ name: tool.replace("hang", "echo"), arguments: { text: "still here" } });
        assert.match(JSON.stringify(echoed.content), /still here/);
        await client.close();
      } finally {
        served.child.kill("SIGTERM");
      }
      assert.equal(await within(served.exited, "the served subs to exit"), 0, served.stderr());
    });
  }

  it("subs mcp proxy --http under 256 descriptors: 300 connections left half-open (headers never finished) do not keep out the client with the token", async () => {
    const served = await serve(dir, ["mcp", "proxy", "rich", "--http", "127.0.0.1:0", "--token-file", "crowd.token"], "crowd.token", { descriptors: 256 });
    const held: Array<Awaited<ReturnType<typeof halfOpen>>> = [];
    try {
      for (let n = 0; n < 300; n++) held.push(await halfOpen(served.url));
      const call = (async () => {
        const client = await connect(served);
        const echoed = await client.callTool({ name: "echo", arguments: { text: "through the crowd" } });
        await client.close();
        return JSON.stringify(echoed.content);
      })();
      // The bound's timer cleared once answered: left pending, it kept the file alive past its last test.
      let late: NodeJS.Timeout | undefined;
      const outcome = await Promise.race([call, new Promise<string>((resolve) => (late = setTimeout(() => resolve("no answer within 8 s"), 8000)))]).finally(() => clearTimeout(late));
      assert.match(outcome, /through the crowd/);
      assert.ok(held.filter((h) => !h.closed()).length <= 100, "the server holds at most --max-connections of them");
      assert.equal(served.child.exitCode, null, served.stderr());
    } finally {
      for (const h of held) h.socket.destroy();
      served.child.kill("SIGTERM");
    }
    assert.equal(await within(served.exited, "the served subs to exit"), 0, served.stderr());
  });

  it("subs mcp proxy --http --max-sessions 2 --idle-timeout 1: a third initialize gets 503 with Retry-After; idle sessions end, upstream too, and new ones start", async () => {
    const deletes = () => rich.events.filter((e) => e === "HTTP DELETE").length;
    const deletesBefore = deletes();
    const served = await serve(dir, ["mcp", "proxy", "rich", "--http", "127.0.0.1:0", "--token-file", "limits.token", "--max-sessions", "2", "--idle-timeout", "1"], "limits.token");
    try {
      const [a, b] = [await initialize(served), await initialize(served)];
      assert.deepEqual([a.status, b.status], [200, 200]);
      const third = await initialize(served);
      // An order, not a race against the 1 s idle timeout: while the two are live, a third is
      // refused. An idle session is said ended before its place is freed; a machine slow enough to
      // let one end first may give the third its place.
      if (third.status !== 200 || !/ended a session idle/.test(served.stderr())) {
        assert.equal(third.status, 503);
        assert.equal(third.retryAfter, "1");
      }
      const ended = third.status === 200 ? 3 : 2;
      await waitFor(() => deletes() - deletesBefore === ended, () => `the idle upstream sessions ended (${deletes() - deletesBefore} of ${ended})`);
      assert.match(served.stderr(), /ended a session idle for 1 s/);
      const ping = await fetch(served.url, {
        method: "POST",
        headers: { "content-type": "application/json", accept: "application/json, text/event-stream", authorization: `Bearer ${served.token}`, "mcp-session-id": a.session! },
        body: JSON.stringify({ jsonrpc: "2.0", id: 2, method: "ping" }),
      });
      assert.equal(ping.status, 404, "an ended session's id: the client initializes again");
      assert.equal((await initialize(served)).status, 200);
    } finally {
      served.child.kill("SIGTERM");
    }
    assert.equal(await within(served.exited, "the served subs to exit"), 0, served.stderr());
  });
});
