// `subs agent tools` and `subs agent list` end to end: the real CLI (bin/subs.cjs) against real
// MCP servers on loopback: annotated and unannotated tools, two connectors sharing a tool name,
// a declared tool and a sub-agent id colliding with connector tools, prefix_tools = false, one
// server down, one that never answers, and one that needs a credential.
// The human `agent tools` (tab-separated on a pipe), its Ctrl-C and the human `agent list` run the
// built CLI (bin/subs.cjs) as a person does; the rest run the same `run()` in this process, where
// what is checked is what is printed and asked of the servers, not the process.
import assert from "node:assert/strict";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { after, before, describe, it } from "node:test";
import type { AgentToolsJson } from "../src/commands/agent/tools/run.ts";
import type { AgentJson } from "../src/commands/agent/list/run.ts";
import { runAs, type ChildOptions, type How } from "./support/cli.ts";
import { annotatedTool, startMcpServer, type RunningMcpServer } from "./support/mcp-server.ts";
import { refusedUrl } from "./support/ports.ts";

const READ = { readOnlyHint: true };
// A static credential for every test server (they accept any): the connections then need no
// stored OAuth login, and the secret can be checked never to reach the output.
const MCP_TOKEN = "mcp-static-SECRET-value";

describe("subs agent tools (end to end)", () => {
  let dir: string;
  let alpha: RunningMcpServer;
  let beta: RunningMcpServer;
  let sentry: RunningMcpServer;
  let big: RunningMcpServer;
  let slow: RunningMcpServer;
  let downUrl: string;
  let slowAsked: () => void = () => {};

  before(async () => {
    dir = mkdtempSync(path.join(tmpdir(), "subs-agent-tools-"));
    alpha = await startMcpServer({ name: "alpha", tools: ["search", "summarize", "support", "alpha_only"].map((n) => annotatedTool(n)) });
    beta = await startMcpServer({ name: "beta", tools: ["search", "beta_only"].map((n) => annotatedTool(n)) });
    sentry = await startMcpServer({
      name: "sentry",
      tools: [
        annotatedTool("search_issues", { readOnlyHint: true, idempotentHint: true }),
        annotatedTool("get_issue", READ),
        annotatedTool("get_secret", READ),
        annotatedTool("list_projects", READ),
        annotatedTool("update_issue", { readOnlyHint: false, destructiveHint: false, idempotentHint: true }),
        annotatedTool("delete_issue", { destructiveHint: true }),
        annotatedTool("plain"),
      ],
    });
    big = await startMcpServer({ name: "big", tools: Array.from({ length: 41 }, (_, n) => annotatedTool(`tool_${n}`)) });
    // Never answers (and holds no timer, so nothing outlives the test once the server closes).
    slow = await startMcpServer({
      name: "slow",
      gate: () => {
        slowAsked();
        return new Promise<boolean>(() => {});
      },
      tools: [annotatedTool("late")],
    });
    downUrl = await refusedUrl();
    writeFileSync(
      path.join(dir, "substructure.toml"),
      `
[mcp.alpha]
url = "${alpha.url}"
auth = { token_env = "MCP_TOKEN" }
prefix_tools = false

[mcp.beta]
url = "${beta.url}"
auth = { token_env = "MCP_TOKEN" }
prefix_tools = false

[mcp.sentry]
url = "${sentry.url}"
auth = { token_env = "MCP_TOKEN" }

[mcp.down]
url = "${downUrl}"
auth = { token_env = "MCP_TOKEN" }

[mcp.big]
url = "${big.url}"
auth = { token_env = "MCP_TOKEN" }

[mcp.slow]
url = "${slow.url}"
auth = { token_env = "MCP_TOKEN" }

[mcp.locked]
url = "${sentry.url}"
auth = { token_env = "LOCKED_TOKEN" }

[agent.support]
mcp = ["sentry"]

[agent.triage]
mcp = ["alpha", "beta", { id = "sentry", tools = { read_only = true, include = ["search_*", "get_*"], exclude = ["*_secret"] } }, "down"]
tools = ["summarize"]
agents = ["support"]

[agent.careful]
mcp = [{ id = "sentry", tools = { non_destructive = true } }, { id = "beta", tools = { idempotent = true } }]

[agent.many]
mcp = ["big"]

[agent.waiting]
mcp = ["slow", "beta"]

[agent.locked]
mcp = ["locked"]
`,
    );
  });

  after(async () => {
    await Promise.all([alpha, beta, sentry, big, slow].map((s) => s.close()));
    rmSync(dir, { recursive: true, force: true });
  });

  /**
   * subs in the project: `run()` in-process unless `how` is "cli" (the built CLI, which `onSpawn`
   * may signal); HOME is the project either way, as runCli gives the child.
   */
  const run = (argv: string[], options: { how?: How; env?: Record<string, string>; onSpawn?: ChildOptions["onSpawn"] } = {}) => {
    const env = { HOME: dir, MCP_TOKEN, ...options.env };
    return runAs(options.how ?? "in-process", argv, { cwd: dir, env, ...(options.onSpawn ? { onSpawn: options.onSpawn } : {}) }).then((r) => {
      assert.ok(!r.stdout.includes(MCP_TOKEN) && !r.stderr.includes(MCP_TOKEN), "the token reached the output");
      return r;
    });
  };

  const listCalls = (server: RunningMcpServer) => server.requests.filter((m) => m === "tools/list").length;

  it("triage --json: filtered, named, collisions dropped, the down server reported; exit 1", async () => {
    const before = { alpha: listCalls(alpha), beta: listCalls(beta), sentry: listCalls(sentry) };
    const r = await run(["agent", "tools", "triage", "--json"]);
    assert.equal(r.code, 1, r.stderr);
    const out = JSON.parse(r.stdout) as AgentToolsJson;
    assert.equal(out.agent, "triage");
    assert.equal(out.target, "local");
    assert.deepEqual(
      out.tools.map((t) => [t.name, t.kind, t.connection, t.tool]),
      [
        ["summarize", "declared", null, null],
        ["support", "sub_agent", null, null],
        ["alpha_only", "connector", "alpha", "alpha_only"],
        ["beta_only", "connector", "beta", "beta_only"],
        ["sentry__search_issues", "connector", "sentry", "search_issues"],
        ["sentry__get_issue", "connector", "sentry", "get_issue"],
      ],
    );
    assert.equal(out.count, 6);
    const getIssue = out.tools.find((t) => t.name === "sentry__get_issue")!;
    assert.deepEqual(getIssue.annotations, READ);
    assert.equal(getIssue.description, "get_issue (test tool)");
    assert.deepEqual(getIssue.input_schema, { type: "object", properties: {} });

    assert.deepEqual(
      out.dropped.map((d) => [d.name, d.connection, d.reason, d.with]),
      [
        ["search", "alpha", "connector_tool", [{ kind: "connector", name: null, connection: "beta", tool: "search" }]],
        ["summarize", "alpha", "declared_tool", [{ kind: "declared", name: "summarize", connection: null, tool: null }]],
        ["support", "alpha", "sub_agent", [{ kind: "sub_agent", name: "support", connection: null, tool: null }]],
        ["search", "beta", "connector_tool", [{ kind: "connector", name: null, connection: "alpha", tool: "search" }]],
      ],
    );
    assert.equal(out.dropped[1]!.message, "alpha's `summarize` would be `summarize`; the declared tool `summarize` keeps its name");

    assert.deepEqual(
      out.filtered.map((f) => [f.tool, f.step, f.annotation, f.value, f.pattern]),
      [
        ["update_issue", "read_only", "readOnlyHint", false, null],
        ["delete_issue", "read_only", "readOnlyHint", null, null],
        ["plain", "read_only", "readOnlyHint", null, null],
        ["list_projects", "include", null, null, null],
        ["get_secret", "exclude", null, null, "*_secret"],
      ],
    );
    assert.deepEqual(out.filtered.find((f) => f.step === "include")?.patterns, ["search_*", "get_*"]);

    assert.equal(out.unavailable.length, 1);
    assert.equal(out.unavailable[0]!.connection, "down");
    assert.equal(out.unavailable[0]!.code, "unreachable");
    assert.equal(out.unavailable[0]!.hint, "check the url in the file and that the server is up");
    assert.match(out.unavailable[0]!.message, /^down: cannot reach/);
    assert.deepEqual(out.warnings, []);

    // Fetched once each, during this one run.
    assert.deepEqual({ alpha: listCalls(alpha) - before.alpha, beta: listCalls(beta) - before.beta, sentry: listCalls(sentry) - before.sentry }, { alpha: 1, beta: 1, sentry: 1 });
  });

  it("triage, human: names on stdout (tab-separated when piped), dropped and unavailable on stderr", async () => {
    const r = await run(["agent", "tools", "triage", "-v"], { how: "cli" });
    assert.equal(r.code, 1);
    assert.deepEqual(r.stdout.trimEnd().split("\n"), [
      "summarize\t(declared)\t-",
      "support\t(sub-agent)\t-",
      "alpha_only\talpha\talpha_only",
      "beta_only\tbeta\tbeta_only",
      "sentry__search_issues\tsentry\tsearch_issues",
      "sentry__get_issue\tsentry\tget_issue",
    ]);
    assert.match(r.stderr, /unavailable: down: cannot reach .*; the model runs without down's tools/);
    assert.match(r.stderr, /dropped: alpha's `search` would be `search`; beta's `search` has the same name, and both lose it/);
    assert.match(r.stderr, /dropped: alpha's `summarize` would be `summarize`; the declared tool `summarize` keeps its name/);
    assert.match(r.stderr, /dropped: alpha's `support` would be `support`; the sub-agent `support` keeps its name/);
    assert.match(r.stderr, /filtered: sentry's `plain`: read_only: no readOnlyHint annotation/);
    assert.match(r.stderr, /filtered: sentry's `get_secret`: exclude: matches `\*_secret`/);
    assert.match(r.stderr, /Agent `triage`: its model sees 6 tools \(4 from 3 connections, 1 declared, 1 sub-agent\)/);
  });

  it("the filter belongs to the agent: support sees every sentry tool, prefixed; exit 0", async () => {
    const r = await run(["agent", "tools", "support", "--json"]);
    assert.equal(r.code, 0, r.stderr);
    const out = JSON.parse(r.stdout) as AgentToolsJson;
    assert.deepEqual(
      out.tools.map((t) => t.name),
      ["search_issues", "get_issue", "get_secret", "list_projects", "update_issue", "delete_issue", "plain"].map((n) => `sentry__${n}`),
    );
    assert.deepEqual([out.filtered, out.dropped, out.unavailable, out.warnings], [[], [], [], []]);
  });

  it("non_destructive and idempotent read destructiveHint and idempotentHint; unannotated tools fail them", async () => {
    const r = await run(["agent", "tools", "careful", "--json"]);
    assert.equal(r.code, 0, r.stderr);
    const out = JSON.parse(r.stdout) as AgentToolsJson;
    assert.deepEqual(
      out.tools.map((t) => t.name),
      ["sentry__update_issue"],
    );
    assert.deepEqual(
      out.filtered.map((f) => [f.connection, f.tool, f.step, f.value]),
      [
        ["sentry", "search_issues", "non_destructive", null],
        ["sentry", "get_issue", "non_destructive", null],
        ["sentry", "get_secret", "non_destructive", null],
        ["sentry", "list_projects", "non_destructive", null],
        ["sentry", "delete_issue", "non_destructive", true],
        ["sentry", "plain", "non_destructive", null],
        ["beta", "search", "idempotent", null],
        ["beta", "beta_only", "idempotent", null],
      ],
    );
    assert.deepEqual(
      out.warnings.map((w) => [w.code, w.connection]),
      [["filter_keeps_nothing", "beta"]],
    );
  });

  it("more than 40 tools: a warning on stderr suggesting a filter or a sub-agent; exit 0", async () => {
    const r = await run(["agent", "tools", "many"]);
    assert.equal(r.code, 0, r.stderr);
    assert.equal(r.stdout.trimEnd().split("\n").length, 41);
    assert.match(r.stderr, /warning: agent `many` gives its model 41 tools .*above about 40 a model chooses badly.*filter.*sub-agent/s);
    const json = JSON.parse((await run(["agent", "tools", "many", "--json"])).stdout) as AgentToolsJson;
    assert.deepEqual(json.warnings.map((w) => [w.code, w.count, w.limit]), [["too_many_tools", 41, 40]]);
  });

  it("a server that does not answer within --timeout is left out; the others are listed", async () => {
    const r = await run(["agent", "tools", "waiting", "--json", "--timeout", "2"]);
    assert.equal(r.code, 1, r.stderr);
    const out = JSON.parse(r.stdout) as AgentToolsJson;
    assert.deepEqual(
      out.tools.map((t) => t.name),
      ["search", "beta_only"],
    );
    assert.deepEqual(out.unavailable, [
      { connection: "slow", code: "timeout", message: "slow: no tool list within 2s", hint: "check the server, or wait longer with --timeout SECONDS" },
    ]);
  });

  it("Ctrl-C while a server keeps the command waiting: interrupted, exit 130, nothing on stdout", async () => {
    const asked = new Promise<void>((resolve) => (slowAsked = resolve));
    const r = await run(["agent", "tools", "waiting", "--json", "--timeout", "60"], {
      how: "cli",
      onSpawn: (child) => void asked.then(() => child.kill("SIGINT")),
    });
    slowAsked = () => {};
    assert.equal(r.code, 130, r.stderr);
    assert.match(r.stderr, /Interrupted\./);
    assert.equal(r.stdout, "");
  });

  it("a connection whose only problem is a missing credential: reported with its hint, exit 4", async () => {
    const r = await run(["agent", "tools", "locked", "--json"]);
    assert.equal(r.code, 4, r.stderr);
    const out = JSON.parse(r.stdout) as AgentToolsJson;
    assert.deepEqual(out.tools, []);
    assert.equal(out.unavailable[0]?.code, "token_env_unset");
    assert.match(out.unavailable[0]!.hint!, /LOCKED_TOKEN/);
    // The same server with the variable set answers.
    const ok = await run(["agent", "tools", "locked", "--json"], { env: { LOCKED_TOKEN: "t0k3n-value" } });
    assert.equal(ok.code, 0, ok.stderr);
    assert.equal((JSON.parse(ok.stdout) as AgentToolsJson).count, 7);
    assert.ok(!ok.stdout.includes("t0k3n-value") && !ok.stderr.includes("t0k3n-value"));
  });

  it("an unknown agent is a usage error with a suggestion (exit 2)", async () => {
    const r = await run(["agent", "tools", "triag"]);
    assert.equal(r.code, 2);
    assert.equal(r.stdout, "");
    assert.match(r.stderr, /no agent `triag` in substructure.toml/);
    assert.match(r.stderr, /did you mean `triage`\?/);
  });

  it("a bad --timeout is a usage error (exit 2)", async () => {
    const r = await run(["agent", "tools", "triage", "--timeout", "soon"]);
    assert.equal(r.code, 2);
    assert.match(r.stderr, /--timeout must be a positive number of seconds/);
  });

  it("subs agent list --json: every agent with its connections, filters, tools and sub-agents, without touching the network", async () => {
    const before = listCalls(sentry);
    const r = await run(["agent", "list", "--json"]);
    assert.equal(r.code, 0, r.stderr);
    const out = JSON.parse(r.stdout) as AgentJson[];
    assert.deepEqual(
      out.map((a) => a.name),
      ["support", "triage", "careful", "many", "waiting", "locked"],
    );
    assert.deepEqual(out[1], {
      name: "triage",
      mcp: [
        { id: "alpha", prefix_tools: false, tools: null },
        { id: "beta", prefix_tools: false, tools: null },
        { id: "sentry", prefix_tools: true, tools: { include: ["search_*", "get_*"], exclude: ["*_secret"], read_only: true, non_destructive: false, idempotent: false } },
        { id: "down", prefix_tools: true, tools: null },
      ],
      tools: ["summarize"],
      agents: ["support"],
    });
    assert.equal(listCalls(sentry), before);
  });

  it("subs agent list: one line per agent", async () => {
    const r = await run(["agent", "list"], { how: "cli" });
    assert.equal(r.code, 0, r.stderr);
    const lines = r.stdout.trimEnd().split("\n");
    assert.equal(lines.length, 6);
    assert.equal(lines[1], "triage\talpha, beta, sentry (read_only, include search_* get_*, exclude *_secret), down\tsummarize\tsupport");
    assert.equal(lines[0], "support\tsentry\t-\t-");
  });
});
