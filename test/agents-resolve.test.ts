// The rules of connectors.md ("Give it to an agent", "Filtering", "Names", "When tools are
// fetched") as resolve.ts applies them: one case per sentence, each asserting the whole outcome
// (names the model sees, filtered, dropped, unavailable, warnings), so a rule that changes fails.
//
// Sentences about what the engine does at run time, not what the model is given, have no case
// here: "When it calls one, the engine runs it.", "Your worker still sees the call:
// `tool.finished` arrives with the result.", "Annotations are hints from the server.", "Use them
// to take fewer tools, not as a security boundary." "It never refreshes the list during a
// session" is fetch.ts's one fetch per connection (test/agents-fetch.test.ts).
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { describeDropped, describeFiltered, describeWarning } from "../src/agents/describe.ts";
import { resolveAgentTools, type ConnectorTool, type FetchOutcome, type ResolvedTools, type ToolAnnotations } from "../src/agents/resolve.ts";
import { parseConfig } from "../src/config/load.ts";
import type { AgentConfig, AgentMcpEntry } from "../src/config/types.ts";

const tool = (name: string, annotations?: ToolAnnotations): ConnectorTool => ({ name, ...(annotations ? { annotations } : {}) });
const tools = (...names: string[]) => names.map((n) => tool(n));
const READ_ONLY: ToolAnnotations = { readOnlyHint: true };

type ConnectionFixture = { prefixTools?: boolean; tools?: ConnectorTool[]; fails?: { code: string; needsLogin?: boolean } };

type Case = {
  sentence: string;
  /** What this case shows, when the sentence alone does not say. */
  note?: string;
  agent: { mcp: Array<string | AgentMcpEntry>; tools?: string[]; agents?: string[] };
  connections: Record<string, ConnectionFixture>;
  expect: {
    /** Every name the model sees, in order. */
    names: string[];
    filtered?: Array<[connection: string, tool: string, step: string]>;
    dropped?: Array<[name: string, connection: string, reason: string, claimants: string[]]>;
    unavailable?: string[];
    warnings?: string[];
  };
};

function resolve(c: Pick<Case, "agent" | "connections">, name = "agent"): ResolvedTools {
  const agent: AgentConfig = {
    name,
    mcp: c.agent.mcp.map((e) => (typeof e === "string" ? { id: e } : e)),
    tools: c.agent.tools ?? [],
    agents: c.agent.agents ?? [],
  };
  const connections = Object.entries(c.connections).map(([id, f]) => ({ id, prefixTools: f.prefixTools ?? true }));
  const outcomes = new Map<string, FetchOutcome>(
    Object.entries(c.connections).map(([id, f]) => [
      id,
      f.fails
        ? { ok: false, error: { code: f.fails.code, message: `${id}: ${f.fails.code}`, needsLogin: f.fails.needsLogin ?? false } }
        : { ok: true, tools: f.tools ?? [] },
    ]),
  );
  return resolveAgentTools({ agent, connections, outcomes });
}

const claimantLabel = (w: ResolvedTools["dropped"][number]["with"][number]) =>
  w.kind === "connector" ? `connector:${w.connection}:${w.tool}` : `${w.kind}:${w.name}`;

const sentry = {
  tools: [
    tool("search_issues", { readOnlyHint: true, idempotentHint: true, destructiveHint: false }),
    tool("get_issue", { readOnlyHint: true }),
    tool("update_issue", { readOnlyHint: false, destructiveHint: false, idempotentHint: true }),
    tool("delete_issue", { readOnlyHint: false, destructiveHint: true, idempotentHint: true }),
    tool("plain"),
  ],
};

const cases: Case[] = [
  // ## Give it to an agent
  {
    sentence: "An agent names a connection by id.",
    note: "only the connections the agent names contribute tools",
    agent: { mcp: ["sentry"] },
    connections: { sentry: { tools: tools("search") }, github: { tools: tools("search_code") } },
    expect: { names: ["sentry__search"] },
  },
  {
    sentence: "An id on its own takes every tool the connection offers.",
    note: "annotated or not",
    agent: { mcp: ["sentry"] },
    connections: { sentry },
    expect: { names: ["sentry__search_issues", "sentry__get_issue", "sentry__update_issue", "sentry__delete_issue", "sentry__plain"] },
  },
  {
    sentence: "Use the table form to take fewer.",
    agent: { mcp: [{ id: "sentry", tools: { read_only: true } }] },
    connections: { sentry },
    expect: {
      names: ["sentry__search_issues", "sentry__get_issue"],
      filtered: [
        ["sentry", "update_issue", "read_only"],
        ["sentry", "delete_issue", "read_only"],
        ["sentry", "plain", "read_only"],
      ],
    },
  },
  {
    sentence: "The filter belongs to the agent.",
    note: "the same fetched list, seen through this agent's filter (the other agent is the next case)",
    agent: { mcp: [{ id: "sentry", tools: { include: ["get_*"] } }] },
    connections: { sentry },
    expect: {
      names: ["sentry__get_issue"],
      filtered: [
        ["sentry", "search_issues", "include"],
        ["sentry", "update_issue", "include"],
        ["sentry", "delete_issue", "include"],
        ["sentry", "plain", "include"],
      ],
    },
  },
  {
    sentence: "These two agents share one connection and one credential, and see different tools.",
    note: "the same fetched list as the previous case, without a filter",
    agent: { mcp: ["sentry"] },
    connections: { sentry },
    expect: { names: ["sentry__search_issues", "sentry__get_issue", "sentry__update_issue", "sentry__delete_issue", "sentry__plain"] },
  },
  {
    sentence: "The model now sees `sentry__search_issues` beside your own tools.",
    agent: { mcp: [{ id: "sentry", tools: { read_only: true, include: ["search_*"] } }], tools: ["summarize"], agents: ["support"] },
    connections: { sentry },
    expect: {
      names: ["summarize", "support", "sentry__search_issues"],
      filtered: [
        ["sentry", "update_issue", "read_only"],
        ["sentry", "delete_issue", "read_only"],
        ["sentry", "plain", "read_only"],
        ["sentry", "get_issue", "include"],
      ],
    },
  },

  // ## Filtering
  {
    sentence: "A connection can offer a hundred tools.",
    note: "all hundred reach the model when unfiltered (with the warning of the next sentence)",
    agent: { mcp: ["big"] },
    connections: { big: { tools: Array.from({ length: 100 }, (_, n) => tool(`t${n}`)) } },
    expect: { names: Array.from({ length: 100 }, (_, n) => `big__t${n}`), warnings: ["too_many_tools"] },
  },
  {
    sentence: "Above about forty, a model chooses badly.",
    note: "41 names the model can call, counting declared tools and sub-agents: a warning",
    agent: { mcp: ["big"], tools: ["mine"], agents: ["helper"] },
    connections: { big: { tools: Array.from({ length: 39 }, (_, n) => tool(`t${n}`)) } },
    expect: { names: ["mine", "helper", ...Array.from({ length: 39 }, (_, n) => `big__t${n}`)], warnings: ["too_many_tools"] },
  },
  {
    sentence: "Take fewer.",
    note: "forty exactly: no warning",
    agent: { mcp: ["big"] },
    connections: { big: { tools: Array.from({ length: 40 }, (_, n) => tool(`t${n}`)) } },
    expect: { names: Array.from({ length: 40 }, (_, n) => `big__t${n}`) },
  },
  {
    sentence: "The engine applies the capability keys, then `include`, then `exclude`.",
    note: "a tool failing several steps is reported by the first that removed it",
    agent: { mcp: [{ id: "sentry", tools: { read_only: true, include: ["search_*", "plain", "update_*"], exclude: ["*_issues", "plain"] } }] },
    connections: { sentry },
    expect: {
      names: [],
      filtered: [
        ["sentry", "update_issue", "read_only"],
        ["sentry", "delete_issue", "read_only"],
        ["sentry", "plain", "read_only"],
        ["sentry", "get_issue", "include"],
        ["sentry", "search_issues", "exclude"],
      ],
      warnings: ["filter_keeps_nothing"],
    },
  },
  {
    sentence: "Each one can only remove tools.",
    note: "include cannot bring back what read_only removed; read_only = false selects nothing",
    agent: { mcp: [{ id: "sentry", tools: { read_only: true, include: ["delete_*", "get_*"] } }, { id: "other", tools: { read_only: false, non_destructive: false, idempotent: false } }] },
    connections: { sentry, other: { tools: [tool("write", { readOnlyHint: false }), tool("bare")] } },
    expect: {
      names: ["sentry__get_issue", "other__write", "other__bare"],
      filtered: [
        ["sentry", "update_issue", "read_only"],
        ["sentry", "delete_issue", "read_only"],
        ["sentry", "plain", "read_only"],
        ["sentry", "search_issues", "include"],
      ],
    },
  },
  {
    sentence: "The globs match the tool's name on the connection, not the prefixed name the model sees.",
    agent: { mcp: [{ id: "sentry", tools: { include: ["sentry__*", "search_*"], exclude: ["sentry__search_*"] } }] },
    connections: { sentry: { tools: tools("search_issues", "get_issue") } },
    expect: {
      names: ["sentry__search_issues"],
      filtered: [["sentry", "get_issue", "include"]],
      warnings: ["glob_matches_nothing:include:sentry__*", "glob_matches_nothing:exclude:sentry__search_*"],
    },
  },
  {
    sentence: "The capability keys read the connection's MCP annotations.",
    note: "read_only: readOnlyHint true; non_destructive: destructiveHint false; idempotent: idempotentHint true",
    agent: {
      mcp: [
        { id: "ro", tools: { read_only: true } },
        { id: "nd", tools: { non_destructive: true } },
        { id: "idem", tools: { idempotent: true } },
      ],
    },
    connections: {
      ro: { tools: [tool("yes", { readOnlyHint: true }), tool("no", { readOnlyHint: false })] },
      nd: { tools: [tool("yes", { destructiveHint: false }), tool("no", { destructiveHint: true })] },
      idem: { tools: [tool("yes", { idempotentHint: true }), tool("no", { idempotentHint: false })] },
    },
    expect: {
      names: ["ro__yes", "nd__yes", "idem__yes"],
      filtered: [
        ["ro", "no", "read_only"],
        ["nd", "no", "non_destructive"],
        ["idem", "no", "idempotent"],
      ],
    },
  },
  {
    sentence: "A tool with no annotation fails them.",
    note: "no annotations at all, or annotations without the key's hint (MCP's own defaults are not assumed)",
    agent: { mcp: [{ id: "s", tools: { read_only: true } }, { id: "n", tools: { non_destructive: true } }, { id: "i", tools: { idempotent: true } }] },
    connections: {
      s: { tools: [tool("bare"), tool("titled", { title: "Titled" })] },
      n: { tools: [tool("bare"), tool("read_only_only", { readOnlyHint: true })] },
      i: { tools: [tool("bare"), tool("ok", { idempotentHint: true })] },
    },
    expect: {
      names: ["i__ok"],
      filtered: [
        ["s", "bare", "read_only"],
        ["s", "titled", "read_only"],
        ["n", "bare", "non_destructive"],
        ["n", "read_only_only", "non_destructive"],
        ["i", "bare", "idempotent"],
      ],
      warnings: ["filter_keeps_nothing", "filter_keeps_nothing"],
    },
  },

  // ## Names
  {
    sentence: "The engine prefixes a connection's tools with its id, such as `sentry__search`.",
    agent: { mcp: ["sentry", "sentry2"] },
    connections: { sentry: { tools: tools("search") }, sentry2: { tools: tools("search") } },
    expect: { names: ["sentry__search", "sentry2__search"] },
  },
  {
    sentence: "Set `prefix_tools = false` to use their own names.",
    agent: { mcp: ["github", "sentry"] },
    connections: { github: { prefixTools: false, tools: tools("search_code") }, sentry: { tools: tools("search") } },
    expect: { names: ["search_code", "sentry__search"] },
  },
  {
    sentence: "The engine resolves each name against everything else the model can call.",
    note: "final names collide, whatever they were on their connections",
    agent: { mcp: ["a", "b"] },
    connections: { a: { prefixTools: false, tools: tools("b__search", "other") }, b: { tools: tools("search") } },
    expect: {
      names: ["other"],
      dropped: [
        ["b__search", "a", "connector_tool", ["connector:b:search"]],
        ["b__search", "b", "connector_tool", ["connector:a:b__search"]],
      ],
    },
  },
  {
    sentence: "If two names match, it drops one.",
    note: "a connector tool against a declared tool: the connector tool is the one dropped",
    agent: { mcp: ["github"], tools: ["summarize"] },
    connections: { github: { prefixTools: false, tools: tools("summarize", "search_code") } },
    expect: { names: ["summarize", "search_code"], dropped: [["summarize", "github", "declared_tool", ["declared:summarize"]]] },
  },
  {
    sentence: "A tool you declared, or a sub-agent id, keeps its name.",
    agent: { mcp: ["github", "sentry"], tools: ["sentry__search"], agents: ["support"] },
    connections: { github: { prefixTools: false, tools: tools("support", "search_code") }, sentry: { tools: tools("search", "get") } },
    expect: {
      names: ["sentry__search", "support", "search_code", "sentry__get"],
      dropped: [
        ["support", "github", "sub_agent", ["sub_agent:support"]],
        ["sentry__search", "sentry", "declared_tool", ["declared:sentry__search"]],
      ],
    },
  },
  {
    sentence: "If two connectors have the same name, both lose it.",
    note: "three connectors: all three lose it; unique names stay",
    agent: { mcp: ["a", "b", "c"] },
    connections: {
      a: { prefixTools: false, tools: tools("search", "a_only") },
      b: { prefixTools: false, tools: tools("search") },
      c: { prefixTools: false, tools: tools("search", "c_only") },
    },
    expect: {
      names: ["a_only", "c_only"],
      dropped: [
        ["search", "a", "connector_tool", ["connector:b:search", "connector:c:search"]],
        ["search", "b", "connector_tool", ["connector:a:search", "connector:c:search"]],
        ["search", "c", "connector_tool", ["connector:a:search", "connector:b:search"]],
      ],
    },
  },
  {
    sentence: "The engine reports every name it drops.",
    note: "a name claimed by a declared tool and two connectors: both connector tools reported, each naming all the others",
    agent: { mcp: ["a", "b"], tools: ["search"] },
    connections: { a: { prefixTools: false, tools: tools("search") }, b: { prefixTools: false, tools: tools("search") } },
    expect: {
      names: ["search"],
      dropped: [
        ["search", "a", "declared_tool", ["declared:search", "connector:b:search"]],
        ["search", "b", "declared_tool", ["declared:search", "connector:a:search"]],
      ],
    },
  },

  // ## When tools are fetched
  {
    sentence: "The engine fetches a connection's tool list once per session, the first time a config names it.",
    note: "the list resolved is the one fetched: a connection's tools appear once, in the server's order",
    agent: { mcp: ["sentry"] },
    connections: { sentry: { tools: tools("b", "a", "c") } },
    expect: { names: ["sentry__b", "sentry__a", "sentry__c"] },
  },
  {
    sentence: "If the fetch fails, the turn runs without those tools.",
    agent: { mcp: ["sentry", "linear", "github"], tools: ["summarize"] },
    connections: {
      sentry: { tools: tools("search") },
      linear: { fails: { code: "needs_login", needsLogin: true } },
      github: { prefixTools: false, fails: { code: "timeout" } },
    },
    expect: { names: ["summarize", "sentry__search"], unavailable: ["linear:needs_login", "github:timeout"] },
  },
];

describe("connectors.md rules, one case per sentence", () => {
  for (const c of cases) {
    it(c.note ? `${c.sentence} (${c.note})` : c.sentence, () => {
      const r = resolve(c);
      assert.deepEqual(
        r.tools.map((t) => t.name),
        c.expect.names,
        "names the model sees",
      );
      assert.equal(new Set(r.tools.map((t) => t.name)).size, r.tools.length, "each name once");
      assert.deepEqual(
        r.filtered.map((f) => [f.connection, f.tool, f.step]),
        c.expect.filtered ?? [],
        "filtered",
      );
      assert.deepEqual(
        r.dropped.map((d) => [d.name, d.connection, d.reason, d.with.map(claimantLabel)]),
        c.expect.dropped ?? [],
        "dropped",
      );
      assert.deepEqual(
        r.unavailable.map((u) => `${u.connection}:${u.code}`),
        c.expect.unavailable ?? [],
        "unavailable",
      );
      assert.deepEqual(
        r.warnings.map((w) => (w.code === "glob_matches_nothing" ? `${w.code}:${w.key}:${w.pattern}` : w.code)),
        c.expect.warnings ?? [],
        "warnings",
      );
    });
  }
});

describe("resolve details", () => {
  it("A worker declares the same thing in the config it returns: the seed's TOML and its worker object resolve alike", () => {
    const config = parseConfig(
      `[mcp.sentry]\nurl = "https://mcp.sentry.dev/mcp"\n\n[agent.triage]\nmcp = [{ id = "sentry", tools = { read_only = true } }]\n`,
      { path: "/x/substructure.toml", cwd: "/x" },
    );
    const fromToml = resolve({ agent: { mcp: config.agents[0]!.mcp }, connections: { sentry } });
    const fromWorker = resolve({ agent: { mcp: [{ id: "sentry", tools: { read_only: true } }] }, connections: { sentry } });
    assert.deepEqual(fromToml, fromWorker);
    assert.deepEqual(
      fromToml.tools.map((t) => t.name),
      ["sentry__search_issues", "sentry__get_issue"],
    );
  });

  it("These two agents share one connection and one credential, and see different tools: one fetched list, two agents", () => {
    const outcomes = new Map<string, FetchOutcome>([["sentry", { ok: true, tools: sentry.tools }]]);
    const connections = [{ id: "sentry", prefixTools: true }];
    const support = resolveAgentTools({ agent: { name: "support", mcp: [{ id: "sentry" }], tools: [], agents: [] }, connections, outcomes });
    const triage = resolveAgentTools({ agent: { name: "triage", mcp: [{ id: "sentry", tools: { read_only: true } }], tools: [], agents: [] }, connections, outcomes });
    assert.equal(support.tools.length, 5);
    assert.deepEqual(
      triage.tools.map((t) => t.name),
      ["sentry__search_issues", "sentry__get_issue"],
    );
  });

  it("a kept connector tool carries its connection, original name and definition", () => {
    const definition = tool("search", { readOnlyHint: true });
    const r = resolve({ agent: { mcp: ["sentry"] }, connections: { sentry: { tools: [definition] } } });
    assert.deepEqual(r.tools, [{ name: "sentry__search", kind: "connector", connection: "sentry", tool: definition }]);
  });

  it("a filtered capability key records the annotation and its value (null when absent)", () => {
    const r = resolve({
      agent: { mcp: [{ id: "s", tools: { non_destructive: true } }] },
      connections: { s: { tools: [tool("rm", { destructiveHint: true }), tool("bare")] } },
    });
    assert.deepEqual(r.filtered, [
      { connection: "s", tool: "rm", step: "non_destructive", annotation: "destructiveHint", value: true },
      { connection: "s", tool: "bare", step: "non_destructive", annotation: "destructiveHint", value: null },
    ]);
    assert.equal(describeFiltered(r.filtered[1]!), "non_destructive: no destructiveHint annotation (a tool without one fails the key)");
  });

  it("a null annotation (as the deployment's JSON may carry it) fails the key like an absent one", () => {
    const r = resolve({
      agent: { mcp: [{ id: "s", tools: { read_only: true } }] },
      connections: { s: { tools: [{ name: "nulls", annotations: null }, { name: "hint_null", annotations: { readOnlyHint: null } }, tool("ok", READ_ONLY)] } },
    });
    assert.deepEqual(
      r.tools.map((t) => t.name),
      ["s__ok"],
    );
    assert.deepEqual(
      r.filtered.map((f) => [f.tool, "value" in f ? f.value : "?"]),
      [
        ["nulls", null],
        ["hint_null", null],
      ],
    );
  });

  it("exclude names the glob that removed the tool; include lists the globs it missed", () => {
    const r = resolve({
      agent: { mcp: [{ id: "s", tools: { include: ["a*", "b*"], exclude: ["x", "*z"] } }] },
      connections: { s: { tools: tools("az", "c", "b") } },
    });
    assert.deepEqual(r.filtered, [
      { connection: "s", tool: "c", step: "include", patterns: ["a*", "b*"] },
      { connection: "s", tool: "az", step: "exclude", pattern: "*z" },
    ]);
    assert.deepEqual(
      r.warnings.map((w) => w.code === "glob_matches_nothing" && w.pattern),
      ["x"],
    );
  });

  it("an empty include list keeps nothing, and says so", () => {
    const r = resolve({ agent: { mcp: [{ id: "s", tools: { include: [] } }] }, connections: { s: { tools: tools("a") } } });
    assert.deepEqual(r.tools, []);
    assert.deepEqual(
      r.warnings.map((w) => w.code),
      ["filter_keeps_nothing"],
    );
  });

  it("a declared tool and a sub-agent with one name are both kept once, with a warning", () => {
    const r = resolve({ agent: { mcp: [], tools: ["x", "y"], agents: ["x"] }, connections: {} });
    assert.deepEqual(
      r.tools.map((t) => [t.name, t.kind]),
      [
        ["x", "declared"],
        ["y", "declared"],
      ],
    );
    assert.deepEqual(r.warnings, [{ code: "name_declared_twice", name: "x", as: ["declared", "sub_agent"] }]);
  });

  it("messages say what was dropped, what it lost to, and what to do about too many tools", () => {
    const r = resolve({
      agent: { mcp: ["a", "b"], agents: ["search"] },
      connections: { a: { prefixTools: false, tools: tools("search", "find") }, b: { prefixTools: false, tools: tools("find") } },
    });
    assert.deepEqual(
      r.dropped.map(describeDropped),
      [
        "a's `search` would be `search`; the sub-agent `search` keeps its name",
        "a's `find` would be `find`; b's `find` has the same name, and both lose it",
        "b's `find` would be `find`; a's `find` has the same name, and both lose it",
      ],
    );
    const many = resolve({ agent: { mcp: ["big"] }, connections: { big: { tools: Array.from({ length: 41 }, (_, n) => tool(`t${n}`)) } } }, "triage");
    const message = describeWarning(many.warnings[0]!, "triage");
    assert.match(message, /41 tools/);
    assert.match(message, /filter/);
    assert.match(message, /sub-agent/);
  });

  it("globs are picomatch globs: braces and character classes work, and case matters", () => {
    const r = resolve({
      agent: { mcp: [{ id: "s", tools: { include: ["{get,list}_*", "Delete_[ab]"] } }] },
      connections: { s: { tools: tools("get_x", "list_y", "put_z", "Delete_a", "delete_b") } },
    });
    assert.deepEqual(
      r.tools.map((t) => t.name),
      ["s__get_x", "s__list_y", "s__Delete_a"],
    );
  });
});
