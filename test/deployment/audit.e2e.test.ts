// The record (docs/deployment-protocol.md section 3.14; docs/deployment-server.md, "The record") on
// a real `subs deployment serve`, on SQLite and on Postgres: an agent's MCP session (the SDK's
// client, a `use` token) makes calls that end ok, in a tool error, refused (the header value it
// needs forgotten; a tool the session does not serve), and the changes around them (an apply, a
// consent through a real OAuth server, a header value handed over and forgotten, tokens made and
// revoked); GET /v1/audit answers exactly those entries, each with its person and token, to a
// `read` token and to no `use` or `apply` token; no argument, result or value appears in the
// record, its log lines or the store; paging by cursor; `subs deployment audit --json` (the built
// CLI on SQLite, the same run() in this process on Postgres); a short retention prunes it. Then two
// replicas on one Postgres and a kill -9 of one: what each acknowledged is in the one store.
import assert from "node:assert/strict";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { after, before, describe, test } from "node:test";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { runAs } from "../support/cli.ts";
import { callServed, startServedDeployment, STORES, type ServedDeployment } from "../support/deployment-serve.ts";
import { startMcpServer, type RunningMcpServer } from "../support/mcp-server.ts";
import { startAuthServer, type RunningAuthServer } from "../support/oauth-server.ts";
import { startReplicas, type Replicas } from "../support/replicas.ts";
import { waitFor } from "../support/wait.ts";

const ARG = "ARG-SECRET-7f3c9e1d2b";
const RESULT = "RESULT-SECRET-5a8d0c4e6f";
const VALUE = "VALUE-SECRET-1e2d3c4b5a";
const SECRETS = [ARG, RESULT, VALUE];
const ALICE = "alice@example.com";

type Entry = {
  cursor: string;
  at: string;
  kind: string;
  person: string | null;
  token_id: string | null;
  agent: string | null;
  connection: string | null;
  tool: string | null;
  outcome: string | null;
  duration_ms: number | null;
  request_id: string | null;
  detail: Record<string, unknown> | null;
};

/** Every entry, page by page (`limit` a page), with `token`. */
async function readAll(d: { url: string; token: string }, token: string, query = "", limit = 1000): Promise<Entry[]> {
  const all: Entry[] = [];
  let after: string | undefined;
  for (let pages = 0; pages < 100; pages++) {
    const q = new URLSearchParams(query);
    q.set("limit", String(limit));
    if (after !== undefined) q.set("after", after);
    const page = await callServed(d, "GET", `/v1/audit?${q}`, undefined, token);
    assert.equal(page.status, 200, JSON.stringify(page.body));
    all.push(...page.body.entries);
    if (!page.body.has_more) return all;
    after = page.body.next;
  }
  throw new Error("more than 100 pages");
}

const mcpClient = async (url: string, token: string) => {
  const c = new Client({ name: "audit-test", version: "1.0.0" });
  await c.connect(new StreamableHTTPClientTransport(new URL(url), { requestInit: { headers: { authorization: `Bearer ${token}` } } }));
  return c;
};

const TOOLS = [
  { name: "echo", inputSchema: { type: "object" as const }, result: (args: Record<string, unknown>) => ({ content: [{ type: "text" as const, text: `${RESULT} ${JSON.stringify(args)}` }] }) },
  { name: "fail", inputSchema: { type: "object" as const }, result: () => ({ content: [{ type: "text" as const, text: `${RESULT} it failed` }], isError: true }) },
];

for (const store of STORES) describe(`the record of subs deployment serve (${store})`, () => {
  let authServer: RunningAuthServer;
  let tracker: RunningMcpServer;
  let keyed: RunningMcpServer;
  let d: ServedDeployment;
  const dir = mkdtempSync(path.join(tmpdir(), "subs-audit-e2e-"));
  /** Tokens made over the API (so their making is in the record), by name. */
  const tokens: Record<string, { id: string; token: string }> = {};
  let admin: { id: string; name: string };
  /** What the first test made, in order: [kind, person, what], for the later tests. */
  let made: Entry[] = [];

  before(async () => {
    authServer = await startAuthServer();
    tracker = await startMcpServer({ tools: TOOLS, oauth: { authServer } });
    keyed = await startMcpServer({ tools: [{ name: "lookup", inputSchema: { type: "object" } }] });
    d = await startServedDeployment({ store });
    const listed = await callServed(d, "GET", "/v1/tokens");
    const found = listed.body.tokens.find((t: { role: string }) => t.role === "admin");
    admin = { id: found.id, name: found.name };
  });
  /** A deployment stopped to start another on its store: closed (its directory removed) last. */
  let stopped: ServedDeployment | undefined;
  after(async () => {
    await d?.close();
    await stopped?.close();
    await tracker?.close();
    await keyed?.close();
    await authServer?.close();
    rmSync(dir, { recursive: true, force: true });
  });

  const as = (name: string) => tokens[name]!.token;
  const make = async (name: string, role: string, person?: string) => {
    const made = await callServed(d, "POST", "/v1/tokens", { name, role, ...(person ? { person } : {}) });
    assert.equal(made.status, 201, JSON.stringify(made.body));
    tokens[name] = { id: made.body.id, token: made.body.token };
  };

  test("every call and change is in the record, exactly, with its person and token; read and admin read it, use and apply may not; no argument, result or value anywhere", async () => {
    // alice's token belongs to her person, the others each to a person named as the token.
    await make("alice", "use", ALICE);
    await make("auditor", "read");
    await make("ci", "apply");
    const applied = await callServed(d, "PUT", "/v1/state", {
      connections: [
        { id: "tracker", url: tracker.url, prefix_tools: true },
        { id: "keyed", url: keyed.url, prefix_tools: true, headers: { "X-Api-Key": "${KEY}" } },
      ],
      agents: [{ name: "triage", mcp: [{ id: "tracker" }, { id: "keyed" }], tools: [], agents: [] }],
      prune: true,
    }, as("ci"));
    assert.equal(applied.status, 200, JSON.stringify(applied.body));
    // alice consents to tracker, through the authorization server and the deployment's redirect.
    const started = await callServed(d, "POST", "/v1/mcp/tracker/authorizations", {}, as("alice"));
    assert.equal(started.status, 201, JSON.stringify(started.body));
    await (await fetch(started.body.authorization_url)).text();
    const poll = new URL(started.body.poll_url, d.url).pathname;
    await waitFor(async () => (await callServed(d, "GET", poll, undefined, as("alice"))).body.status === "authorized", "the consent to end authorized");
    assert.equal((await callServed(d, "PUT", "/v1/mcp/keyed/secrets/KEY", { value: VALUE }, as("alice"))).status, 204);

    const client = await mcpClient(`${d.url}/v1/agents/triage/mcp`, as("alice"));
    try {
      const names = (await client.listTools()).tools.map((t) => t.name).sort();
      assert.deepEqual(names, ["keyed__lookup", "tracker__echo", "tracker__fail"]);
      const ok = (await client.callTool({ name: "tracker__echo", arguments: { q: ARG } })) as { content: Array<{ text: string }> };
      assert.match(ok.content[0]!.text, new RegExp(RESULT));
      assert.equal(((await client.callTool({ name: "tracker__fail", arguments: { q: ARG } })) as { isError?: boolean }).isError, true);
      // The value the connection needs, forgotten mid-session: its tool is refused (needs_login).
      assert.equal((await callServed(d, "DELETE", "/v1/mcp/keyed/secrets/KEY")).status, 204);
      const refused = (await client.callTool({ name: "keyed__lookup", arguments: { q: ARG } })) as { isError?: boolean; content: Array<{ text: string }> };
      assert.equal(refused.isError, true);
      assert.match(refused.content[0]!.text, /subs mcp login keyed/);
      // A name the session does not serve: a protocol error, refused in the record without the name.
      await assert.rejects(client.callTool({ name: `nope-${ARG}`, arguments: {} }), /Unknown tool/);
    } finally {
      await client.close();
    }
    const revoked = await callServed(d, "DELETE", `/v1/tokens/${tokens.ci!.id}`);
    assert.equal(revoked.status, 204);
    // Their person is kept with no token until removed.
    assert.equal((await callServed(d, "DELETE", "/v1/people/ci")).status, 200);

    // Every change's entry was written before its answer; the calls' within a batch.
    const expected = [
      ["token.create", admin.name, { token_id: tokens.alice!.id, name: "alice", role: "use", person: ALICE }],
      ["token.create", admin.name, { token_id: tokens.auditor!.id, name: "auditor", role: "read", person: "auditor" }],
      ["token.create", admin.name, { token_id: tokens.ci!.id, name: "ci", role: "apply", person: "ci" }],
      ["apply", "ci"],
      ["consent.start", ALICE, "tracker"],
      ["consent.finish", ALICE, "tracker", "authorized"],
      ["secret.set", ALICE, "keyed"],
      ["tool.call", ALICE, "tracker", "ok", "tracker__echo"],
      ["tool.call", ALICE, "tracker", "tool_error", "tracker__fail"],
      ["secret.delete", admin.name, "keyed"],
      ["tool.call", ALICE, "keyed", "refused", "keyed__lookup"],
      ["tool.call", ALICE, null, "refused", null],
      ["token.revoke", admin.name, { token_id: tokens.ci!.id, name: "ci", role: "apply", person: "ci" }],
      ["person.remove", admin.name, { removed: "ci", tokens: [], grants: [] }],
    ] as const;
    const entries = await waitFor(async () => {
      const all = await readAll(d, as("auditor"));
      return all.length >= expected.length && all;
    }, "every entry to be in the record");
    const tokenOf = (person: string) => (person === admin.name ? admin.id : person === ALICE ? tokens.alice!.id : tokens[person]!.id);
    assert.deepEqual(
      entries.map((e) => [e.kind, e.person, e.token_id]),
      expected.map(([kind, person]) => [kind, person, tokenOf(person)]),
      "exactly these entries, in order, each with its person and token (a consent's end with the token that started it: the browser carries none)",
    );
    for (const [n, want] of expected.entries()) {
      const e = entries[n]!;
      if (want[0] === "tool.call") {
        assert.deepEqual([e.agent, e.connection, e.outcome, e.tool], ["triage", want[2], want[3], want[4]], `call ${n}`);
        assert.ok(typeof e.duration_ms === "number" && e.duration_ms >= 0);
        // The request it came with, as the request log names it.
        assert.ok(d.logs.some((l) => l.msg === "request" && l.request_id === e.request_id && l.path === "/v1/agents/triage/mcp"), `call ${n}'s request_id in the request log`);
      } else if (typeof want[2] === "object") {
        assert.deepEqual(e.detail, { ...want[2], ...(want[0] === "token.create" ? { expires_at: null } : {}) });
      } else if (want[2] !== undefined) {
        assert.equal(e.connection, want[2]);
      }
    }
    const changes = (entries[3]!.detail as { changes: Array<{ kind: string; id: string; action: string }> }).changes;
    assert.deepEqual(changes.map((c) => `${c.kind}:${c.id}:${c.action}`).sort(), ["agent:triage:add", "connection:keyed:add", "connection:tracker:add"], "the apply's changes");
    assert.equal(entries[5]!.outcome, "authorized");
    made = entries;

    // Who may read it.
    assert.equal((await callServed(d, "GET", "/v1/audit", undefined, d.token)).status, 200, "admin");
    const byUse = await callServed(d, "GET", "/v1/audit", undefined, as("alice"));
    assert.equal(byUse.status, 403);
    assert.match(byUse.body.message, /reading the record of calls and changes needs a token with the role read or admin; this one's role is use/);
    const apply = await d.tokenFor("apply");
    assert.equal((await callServed(d, "GET", "/v1/audit", undefined, apply)).status, 403);
    assert.equal((await callServed(d, "GET", "/v1/audit?limit=5000", undefined, as("auditor"))).status, 400);

    // Never an argument, a result or a value: not in the record, its log lines, any log line, the store.
    const audited = await waitFor(() => {
      const lines = d.logs.filter((l) => l.msg === "audit");
      return lines.length >= entries.length && lines;
    }, "a log line for every entry");
    assert.deepEqual(audited.map((l) => l.kind), entries.map((e) => e.kind), "one log line per entry, in order");
    const everything = [JSON.stringify(entries), JSON.stringify(d.logs), d.stderr(), await d.storeContents()].join("\n");
    for (const secret of SECRETS) assert.ok(!everything.includes(secret), `${secret.slice(0, 12)}… appears nowhere`);
  });

  test("filters and pages: by person, kind, connection and time; pages of 4 by the cursor hold every entry once", async () => {
    assert.ok(made.length > 0, "the first test made the record");
    const auditor = as("auditor");
    assert.deepEqual((await readAll(d, auditor, `person=${encodeURIComponent(ALICE)}`)).map((e) => e.cursor), made.filter((e) => e.person === ALICE).map((e) => e.cursor));
    assert.equal(made.filter((e) => e.person === ALICE).length, 7);
    assert.deepEqual((await readAll(d, auditor, "kind=tool.call&connection=tracker")).map((e) => e.outcome), ["ok", "tool_error"]);
    // Since the first call (inclusive) until the value's deletion that followed the second (exclusive).
    assert.deepEqual((await readAll(d, auditor, `since=${encodeURIComponent(made[7]!.at)}&until=${encodeURIComponent(made[9]!.at)}&kind=tool.call`)).map((e) => e.tool), ["tracker__echo", "tracker__fail"]);
    const paged = await readAll(d, auditor, "", 4);
    assert.deepEqual(paged.map((e) => e.cursor), made.map((e) => e.cursor));
  });

  test("subs deployment audit --json reads it page by page, with a read token", async () => {
    const how = store === "sqlite" ? "cli" : "in-process";
    const env = { SUBSTRUCTURE_TOKEN: as("auditor") };
    const first = await runAs(how, ["deployment", "audit", "--url", d.url, "--kind", "tool.call", "--limit", "3", "--json"], { cwd: dir, env });
    assert.equal(first.code, 0, first.stderr);
    const page = JSON.parse(first.stdout);
    assert.deepEqual(page.entries, made.filter((e) => e.kind === "tool.call").slice(0, 3));
    assert.equal(page.has_more, true);
    const rest = await runAs(how, ["deployment", "audit", "--url", d.url, "--kind", "tool.call", "--after", page.next, "--json"], { cwd: dir, env });
    assert.equal(rest.code, 0, rest.stderr);
    assert.deepEqual(JSON.parse(rest.stdout), { entries: made.filter((e) => e.kind === "tool.call").slice(3), next: made.filter((e) => e.kind === "tool.call").at(-1)!.cursor, has_more: false });
    if (how === "cli") {
      // The table: names shown as they are here, one tab-separated line per entry when piped.
      const table = await runAs(how, ["deployment", "audit", "--url", d.url, "--person", ALICE, "--kind", "tool.call"], { cwd: dir, env });
      assert.equal(table.code, 0, table.stderr);
      assert.deepEqual(table.stdout.trim().split("\n").map((l) => l.split("\t").slice(1, 7)), [
        ["tool.call", ALICE, "triage", "tracker", "tracker__echo", "ok"],
        ["tool.call", ALICE, "triage", "tracker", "tracker__fail", "tool_error"],
        ["tool.call", ALICE, "triage", "keyed", "keyed__lookup", "refused"],
        ["tool.call", ALICE, "triage", "-", "-", "refused"],
      ]);
      const refused = await runAs(how, ["deployment", "audit", "--url", d.url], { cwd: dir, env: { SUBSTRUCTURE_TOKEN: as("alice") } });
      assert.equal(refused.code, 1);
      assert.match(refused.stderr, /403|forbidden|read or admin/);
    }
  });

  if (store === "sqlite") {
    test("a short retention prunes the record: what is older at start, then each entry as it ages", async () => {
      stopped = d;
      await stopped.stop();
      // The same store again, keeping an entry three seconds (pruned every 1.5 s): long enough for
      // a loaded machine to read an entry back before it goes.
      d = await startServedDeployment({ store, dir: stopped.dir, env: { SUBS_DEPLOYMENT_AUDIT_RETENTION: "3s" } });
      const auditor = as("auditor");
      await waitFor(async () => (await readAll(d, auditor)).length === 0, "the pruning to delete every older entry");
      assert.equal(d.logs.filter((l) => l.msg === "pruned the record").reduce((n, l) => n + Number(l.deleted), 0), made.length);
      assert.equal((await callServed(d, "DELETE", `/v1/tokens/${tokens.alice!.id}`)).status, 204);
      assert.deepEqual((await readAll(d, auditor)).map((e) => e.kind), ["token.revoke"]);
      await waitFor(async () => (await readAll(d, auditor)).length === 0, "the entry to be pruned once three seconds old");
    });
  }
});

describe("the record of two replicas on one Postgres, and a kill -9 of one", () => {
  let set: Replicas;
  let mcp: RunningMcpServer;
  before(async () => {
    mcp = await startMcpServer({ tools: TOOLS });
    set = await startReplicas(2, { store: "postgres" });
  });
  after(async () => {
    await set?.close();
    await mcp?.close();
  });

  test("what each replica acknowledged is in the one store once: changes before their answer, calls within the batch interval; the killed one's too", async () => {
    const [a, b] = set.replicas as [ServedDeployment, ServedDeployment];
    const on = (r: ServedDeployment) => ({ url: r.direct, token: set.front.token });
    // Changes on each replica; the declaration needs no credential (no OAuth on this server).
    assert.equal((await callServed(on(a), "PUT", "/v1/mcp/up", { url: mcp.url, prefix_tools: true })).status, 201);
    // A credential as if a consent had finished (this server checks none), written to the store directly: no entry.
    set.front.credentials.set("up", { url: mcp.url, tokens: { access_token: "test-access", token_type: "bearer" }, authorizedAt: Date.now(), expiresAt: null });
    await set.front.settled();
    assert.equal((await callServed(on(b), "PUT", "/v1/agents/duo", { mcp: [{ id: "up" }] })).status, 201);
    const user = await callServed(on(a), "POST", "/v1/tokens", { name: "bob", role: "use" });
    assert.equal(user.status, 201);
    // Calls on each replica, in a session of its own.
    const calls = async (r: ServedDeployment, n: number) => {
      const client = await mcpClient(`${r.direct}/v1/agents/duo/mcp`, user.body.token);
      try {
        for (let i = 0; i < n; i++) await client.callTool({ name: "up__echo", arguments: { q: ARG } });
      } finally {
        await client.close();
      }
    };
    await calls(a, 3);
    await calls(b, 4);
    // The killed replica's calls were answered; the promise is their entries within the batch
    // interval (200 ms) and one write: waited five times that before the kill. (Were their batch
    // late on a loaded machine, the change below would still carry them: a change's write takes
    // every entry queued before it.)
    await new Promise((resolve) => setTimeout(resolve, 1000));
    // A change acknowledged just before the kill: its entry was written before its answer.
    const late = await callServed(on(b), "POST", "/v1/tokens", { name: "late", role: "read" });
    assert.equal(late.status, 201);
    await set.kill(1);
    const entries = await readAll(on(a), set.front.token);
    const kinds = entries.map((e) => `${e.kind}${e.kind === "tool.call" ? `:${e.outcome}` : ""}:${e.person}`);
    const admin = entries[0]!.person!;
    assert.deepEqual(kinds.filter((k) => !k.startsWith("tool.call")), [`connection.declare:${admin}`, `agent.declare:${admin}`, `token.create:${admin}`, `token.create:${admin}`]);
    assert.equal(kinds.filter((k) => k === "tool.call:ok:bob").length, 7, "3 calls on one replica and 4 on the other, once each");
    assert.equal(new Set(entries.map((e) => e.cursor)).size, entries.length);
    assert.equal((entries.at(-1)!.detail as { name: string }).name, "late");
    for (const secret of SECRETS) assert.ok(!JSON.stringify(entries).includes(secret));
  });
});
