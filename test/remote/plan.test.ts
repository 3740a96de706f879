// Planning `subs apply` against a deployment's state: what counts as a change, and what each
// change does to a credential.
import assert from "node:assert/strict";
import { describe, test } from "node:test";
import { parseConfig } from "../../src/config/load.ts";
import { localOnlyAuthDiagnostics } from "../../src/config/remote-rules.ts";
import { mergeRemoteView } from "../../src/remote/list.ts";
import { removals } from "../../src/commands/apply/run.ts";
import { digestOf, type ToolLock } from "../../src/config/tool-lock.ts";
import { hasChanges, lockBody, planRemote, stateBody } from "../../src/remote/plan.ts";
import { AgentListSchema, ConnectionListSchema, type LockBody, type RemoteConnection } from "../../src/remote/protocol.ts";

const config = (body: string) => parseConfig(`[remote]\nurl = "https://deploy.example.com"\n\n${body}`, { path: "/p/substructure.toml", cwd: "/p" });
const remote = (c: Partial<RemoteConnection> & { id: string; url: string }): RemoteConnection => ({ prefix_tools: true, status: "declared", ...c });

describe("planRemote", () => {
  test("oauth settings compare as values: scope order, null and {} do not count as changes", () => {
    const file = config('[mcp.a]\nurl = "https://a.example/mcp"\noauth = { client_id = "x", scopes = ["read", "write"] }\n\n[mcp.b]\nurl = "https://b.example/mcp"\n');
    const plan = planRemote(file, {
      connections: [
        remote({ id: "a", url: "https://a.example/mcp", oauth: { scopes: ["write", "read"], client_id: "x" }, status: "authorized" }),
        remote({ id: "b", url: "https://b.example/mcp", oauth: null }),
      ],
      agents: [],
    });
    assert.deepEqual(plan.connections.map((s) => [s.id, s.action, s.credential]), [["a", "unchanged", "kept"], ["b", "unchanged", "none"]]);
    const changed = planRemote(file, { connections: [remote({ id: "a", url: "https://a.example/mcp", oauth: { client_id: "y" }, status: "authorized" })], agents: [] });
    assert.deepEqual(changed.connections[0]!.changed, ["oauth"]);
    assert.equal(changed.connections[0]!.credential, "kept");
    assert.deepEqual(changed.connections[0]!.body, { url: "https://a.example/mcp", prefix_tools: true, oauth: { client_id: "x", scopes: ["read", "write"] } });
  });

  test("headers compare as names and values: order, null and {} do not count as changes; a value does", () => {
    const file = config('[mcp.a]\nurl = "https://a.example/mcp"\nheaders = { "X-API-Key" = "${A_KEY}", "X-Client" = "subs" }\n\n[mcp.b]\nurl = "https://b.example/mcp"\n');
    const same = planRemote(file, {
      connections: [
        remote({ id: "a", url: "https://a.example/mcp", headers: { "X-Client": "subs", "X-API-Key": "${A_KEY}" } }),
        remote({ id: "b", url: "https://b.example/mcp", headers: {} }),
      ],
      agents: [],
    });
    assert.deepEqual(same.connections.map((s) => [s.id, s.action]), [["a", "unchanged"], ["b", "unchanged"]]);
    const nulls = ConnectionListSchema.parse({ connections: [{ id: "b", url: "https://b.example/mcp", prefix_tools: true, status: "declared", headers: null, secrets: null }] }).connections;
    assert.equal(planRemote(file, { connections: nulls, agents: [] }).connections[1]!.action, "unchanged");
    const others: Array<Record<string, string> | undefined> = [{ "X-API-Key": "${B_KEY}", "X-Client": "subs" }, { "x-api-key": "${A_KEY}", "X-Client": "subs" }, { "X-API-Key": "${A_KEY}" }, undefined];
    for (const headers of others) {
      // Authorized with A_KEY held: the change keeps it usable.
      const secrets = [{ name: "A_KEY", held: true }];
      const changed = planRemote(file, { connections: [remote({ id: "a", url: "https://a.example/mcp", status: "authorized", secrets, ...(headers ? { headers } : {}) })], agents: [] });
      assert.deepEqual([changed.connections[0]!.action, changed.connections[0]!.changed, changed.connections[0]!.credential], ["change", ["headers"], "kept"], JSON.stringify(headers));
    }
    // Authorized without a value of A_KEY (by a consent, or with another variable's value): the
    // new headers name one it does not hold, so it needs a login after the change.
    for (const secrets of [undefined, [{ name: "B_KEY", held: true }], [{ name: "A_KEY", held: false }]]) {
      const step = planRemote(file, { connections: [remote({ id: "a", url: "https://a.example/mcp", status: "authorized", ...(secrets ? { secrets } : {}) })], agents: [] }).connections[0]!;
      assert.deepEqual([step.action, step.credential, step.credentialReason], ["change", "dropped", "headers_changed"], JSON.stringify(secrets));
    }
    // The body carries the templates when the file has headers, and no `headers` key otherwise (never null or {}).
    const added = planRemote(file, { connections: [], agents: [] });
    assert.deepEqual(added.connections[0]!.body, { url: "https://a.example/mcp", prefix_tools: true, headers: { "X-API-Key": "${A_KEY}", "X-Client": "subs" } });
    assert.deepEqual(added.connections[1]!.body, { url: "https://b.example/mcp", prefix_tools: true });
  });

  test("agents: an empty filter equals none; order of mcp entries matters", () => {
    const file = config('[mcp.a]\nurl = "https://a.example/mcp"\n[mcp.b]\nurl = "https://b.example/mcp"\n\n[agent.x]\nmcp = [{ id = "a", tools = {} }, "b"]\n');
    const connections = [remote({ id: "a", url: "https://a.example/mcp" }), remote({ id: "b", url: "https://b.example/mcp" })];
    const same = planRemote(file, { connections, agents: [{ name: "x", mcp: [{ id: "a" }, { id: "b", tools: null }], tools: [], agents: [] }] });
    assert.equal(same.agents[0]!.action, "unchanged");
    // A deployment may spell absent fields as null; that is no change either.
    const nulls = AgentListSchema.parse({ agents: [{ name: "x", mcp: [{ id: "a", tools: { include: null } }, { id: "b", tools: null }], tools: null }] }).agents;
    assert.equal(planRemote(file, { connections, agents: nulls }).agents[0]!.action, "unchanged");
    const swapped = planRemote(file, { connections, agents: [{ name: "x", mcp: [{ id: "b" }, { id: "a" }], tools: [], agents: [] }] });
    assert.deepEqual([swapped.agents[0]!.action, swapped.agents[0]!.changed], ["change", ["mcp"]]);
  });

  test("a url change on an unauthorized connection drops nothing; on an authorized one it drops the credential", () => {
    const file = config('[mcp.a]\nurl = "https://new.example/mcp"\n[mcp.b]\nurl = "https://new.example/mcp"\n');
    const plan = planRemote(file, {
      connections: [remote({ id: "a", url: "https://old.example/mcp" }), remote({ id: "b", url: "https://old.example/mcp", status: "authorized" })],
      agents: [],
    });
    assert.deepEqual(plan.connections.map((s) => [s.id, s.action, s.credential, s.credentialReason ?? null]), [
      ["a", "change", "none", null],
      ["b", "change", "dropped", "url_changed"],
    ]);
  });
});

describe("mergeRemoteView", () => {
  test("a connection whose headers name variables: `secrets` as the deployment gives them, names only", () => {
    const file = config('[mcp.exa]\nurl = "https://mcp.exa.ai/mcp"\nheaders = { "X-API-Key" = "${EXA_API_KEY}", "X-Org" = "${ORG}" }\n');
    const { connections } = ConnectionListSchema.parse({
      connections: [
        {
          id: "exa",
          url: "https://mcp.exa.ai/mcp",
          prefix_tools: true,
          status: "declared",
          headers: { "X-API-Key": "${EXA_API_KEY}", "X-Org": "${ORG}" },
          secrets: [{ name: "EXA_API_KEY", held: true, set_at: "2026-01-02T03:04:05Z", set_by: "ci" }, { name: "ORG", held: false }],
        },
      ],
    });
    const [entry] = mergeRemoteView(file, connections);
    assert.deepEqual([entry!.status, entry!.usable, entry!.drift], ["needs_login", false, null]);
    assert.deepEqual(entry!.secrets.map((s) => [s.name, s.held]), [["EXA_API_KEY", true], ["ORG", false]]);
  });

  test("two ids on one url are two entries with their own status", () => {
    const file = config('[mcp.one]\nurl = "https://s.example/mcp"\n[mcp.two]\nurl = "https://s.example/mcp"\n');
    const view = mergeRemoteView(file, [remote({ id: "one", url: "https://s.example/mcp", status: "authorized" }), remote({ id: "two", url: "https://s.example/mcp" })]);
    assert.deepEqual(view.map((e) => [e.id, e.status, e.usable, e.drift]), [["one", "authorized", true, null], ["two", "needs_login", false, null]]);
  });

  test("a connection the deployment refuses is `refused`, not usable, with the catalog the listing carried; a url change still reads as one", () => {
    const file = config('[mcp.kept]\nurl = "https://out.example/mcp"\n[mcp.moved]\nurl = "https://in.example/mcp"\n[mcp.fine]\nurl = "https://in.example/mcp"\n');
    const refusal = { error: "url_not_in_catalog", message: "kept: https://out.example/mcp is not in this deployment's catalog" };
    const { connections, catalog } = ConnectionListSchema.parse({
      connections: [
        // Whatever its status says, a refused connection is not usable.
        { id: "kept", url: "https://out.example/mcp", prefix_tools: true, status: "authorized", refused: refusal },
        { id: "moved", url: "https://out.example/mcp", prefix_tools: true, status: "declared", refused: refusal },
        { id: "fine", url: "https://in.example/mcp", prefix_tools: true, status: "authorized" },
        { id: "gone", url: "https://out.example/mcp", prefix_tools: true, status: "declared", refused: { error: "some_future_reason", message: null } },
      ],
      catalog: ["https://in.example/mcp"],
    });
    const view = mergeRemoteView(file, connections, catalog ?? undefined);
    assert.deepEqual(
      view.map((e) => [e.id, e.status, e.usable, e.refused]),
      [
        ["kept", "refused", false, { ...refusal, catalog: ["https://in.example/mcp"] }],
        ["moved", "url_changed", false, { ...refusal, catalog: ["https://in.example/mcp"] }],
        ["fine", "authorized", true, null],
        ["gone", "not_in_file", false, { error: "some_future_reason", message: null, catalog: null }],
      ],
    );
  });
});

describe("localOnlyAuthDiagnostics", () => {
  test("names each connection at its key, and only the ids asked about", () => {
    const file = config('[mcp.a]\nurl = "https://a.example/mcp"\nauth = { token_env = "A" }\n\n[mcp.b]\nurl = "https://b.example/mcp"\noauth = { client_id = "c", client_secret_env = "S" }\n\n[mcp.c]\nurl = "https://c.example/mcp"\n');
    assert.deepEqual(localOnlyAuthDiagnostics(file).map((d) => [d.line, d.col, d.message.split(",")[0]]), [
      [6, 1, "[mcp.a] has `auth`"],
      [10, 28, "[mcp.b] has `oauth.client_secret_env`"],
    ]);
    assert.deepEqual(localOnlyAuthDiagnostics(file, ["c"]), []);
    assert.equal(localOnlyAuthDiagnostics(file, ["b"]).length, 1);
  });

  test("`headers` is not refused: the deployment sends them, filled from the values handed to it", () => {
    const file = config('[mcp.exa]\nurl = "https://mcp.exa.ai/mcp"\nheaders = { "X-API-Key" = "${EXA_API_KEY}" }\n');
    assert.deepEqual(localOnlyAuthDiagnostics(file), []);
  });
});

describe("the lock step", () => {
  const face = (name: string, description: string) => ({ name, description, inputSchema: { type: "object" } });
  const lockOf = (...faces: Array<ReturnType<typeof face>>): ToolLock => ({
    path: "/p/substructure.lock",
    connections: new Map([["a", new Map(faces.map((f) => [f.name, { ...f, digest: digestOf(f) }]))]]),
  });
  const file = config('[mcp.a]\nurl = "https://a.example/mcp"\n\n[agent.x]\nmcp = ["a"]\n');
  const state = (lock: LockBody | null | undefined) => ({ connections: [remote({ id: "a", url: "https://a.example/mcp" })], agents: [{ name: "x", mcp: [{ id: "a" }], tools: [], agents: [] }], ...(lock !== undefined ? { lock } : {}) });
  const lock = lockOf(face("search", "Search."), face("get", "Get."));

  test("the same entries in another order are unchanged; a changed field is a change; none held is an add; no lock file removes the held one, asked like a removal", () => {
    const body = lockBody(lock);
    assert.deepEqual(body.tools.map((t) => t.name), ["get", "search"], "sent in one order");
    assert.equal(planRemote(file, state({ tools: [...body.tools].reverse() }), lock).lock.action, "unchanged");
    assert.equal(hasChanges(planRemote(file, state({ tools: [...body.tools].reverse() }), lock)), false);
    assert.equal(planRemote(file, state(lockBody(lockOf(face("search", "Search and send."), face("get", "Get.")))), lock).lock.action, "change");
    assert.equal(planRemote(file, state(null), lock).lock.action, "add");
    const removed = planRemote(file, state(body));
    assert.deepEqual([removed.lock.action, removed.lock.body], ["remove", null]);
    assert.match(removals(removed).join("\n"), /its substructure\.lock \(no lock file here\)/);
    assert.equal(planRemote(file, state(null)).lock.action, "unchanged");
  });

  test("a deployment that does not hold locks is sent none: the step is unchanged and not enforced", () => {
    const plan = planRemote(file, state(undefined), lock);
    assert.deepEqual([plan.lock.action, plan.lock.enforced, plan.lock.tools], ["unchanged", false, 2]);
    assert.equal("lock" in stateBody(file, undefined, plan.lock), false);
    assert.deepEqual(stateBody(file, undefined, planRemote(file, state(null), lock).lock).lock, lockBody(lock));
    assert.equal(stateBody(file, undefined, planRemote(file, state(lockBody(lock))).lock).lock, null);
  });
});
