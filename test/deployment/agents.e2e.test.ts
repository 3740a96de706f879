// Agents served by a real `subs deployment serve` process at <public-url>/v1/agents/<name>/mcp:
// a real MCP server behind a real OAuth server, authorized through the deployment's consent; an
// SDK client and the MCP Inspector's CLI (a client this project did not write) list and call the
// agent's tools with a `use` token; the tools are exactly `subs agent tools` with [remote]; each
// session keeps its snapshot; every call carries the deployment's credential, which no client
// sees; a connection whose credential is gone answers a tool error naming `subs mcp login <id>`.
import assert from "node:assert/strict";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { after, before, describe, test } from "node:test";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { runAs, type How } from "../support/cli.ts";
import { waitFor } from "../support/wait.ts";
import { authorizeServed, callServed, startServedDeployment, FEATURE_STORES, type ServedDeployment } from "../support/deployment-serve.ts";
import { ensureInspector, inspect } from "../support/inspector.ts";
import { annotatedTool, startMcpServer, type RunningMcpServer } from "../support/mcp-server.ts";
import { startAuthServer, type RunningAuthServer } from "../support/oauth-server.ts";

type Listed = { tools: Array<{ name: string }> };
/** The deployment's refusal of a request without a valid API token (docs/deployment-protocol.md section 1). */
const UNAUTHORIZED = { status: 401, body: { error: "unauthorized", message: "missing or invalid API token" }, challenge: 'Bearer realm="subs-deployment"' };
type Called = { content: Array<{ type: string; text: string }>; isError?: boolean };

for (const store of FEATURE_STORES) describe(`agents served by subs deployment serve (${store})`, () => {
  const dir = mkdtempSync(path.join(tmpdir(), "subs-deploy-agents-"));
  let authServer: RunningAuthServer;
  let mcp: RunningMcpServer;
  let d: ServedDeployment;
  const tokens: Record<string, string> = {};
  // `subs agent tools` runs the built CLI against the SQLite store, against Postgres the same run()
  // in this process; `deployment token create/revoke` in this process on both (tokens.e2e and
  // limits.e2e run them as children): what is compared is their output and the store they change.
  const how: How = store === "sqlite" ? "cli" : "in-process";
  const endpoint = (name: string) => `${d.url}/v1/agents/${name}/mcp`;
  const client = async (name: string, token = tokens.use!) => {
    const c = new Client({ name: "agents-test", version: "1.0.0" });
    await c.connect(new StreamableHTTPClientTransport(new URL(endpoint(name)), { requestInit: { headers: { authorization: `Bearer ${token}` } } }));
    return c;
  };

  before(async () => {
    authServer = await startAuthServer();
    mcp = await startMcpServer({
      tools: [annotatedTool("search_issues", { readOnlyHint: true }), annotatedTool("delete_issue", { destructiveHint: true }), annotatedTool("list_projects", { readOnlyHint: true })],
      oauth: { authServer },
    });
    d = await startServedDeployment({ store });
    for (const role of ["use", "read", "apply"] as const) tokens[role] = await d.tokenFor(role);
    assert.deepEqual(await authorizeServed(d, "tracker", { url: mcp.url, prefix_tools: true }), { status: "authorized" });
    const put = await callServed(d, "PUT", "/v1/agents/triage", { mcp: [{ id: "tracker", tools: { read_only: true, exclude: ["list_*"] } }] });
    assert.equal(put.status, 201);
  });
  after(async () => {
    await d.close();
    await mcp.close();
    await authServer.close();
    rmSync(dir, { recursive: true, force: true });
  });

  test("an SDK client with a use token lists exactly `subs agent tools` and calls with the deployment's credential, which it never sees", async () => {
    writeFileSync(path.join(dir, "substructure.toml"), `[remote]\nurl = "${d.url}"\n\n[mcp.tracker]\nurl = "${mcp.url}"\n\n[agent.triage]\nmcp = [{ id = "tracker", tools = { read_only = true, exclude = ["list_*"] } }]\n`);
    const shown = await runAs(how, ["agent", "tools", "triage", "--json"], { cwd: dir, env: { SUBSTRUCTURE_TOKEN: d.token } });
    assert.equal(shown.code, 0, shown.stderr);
    const expected = (JSON.parse(shown.stdout) as Listed).tools.map((t) => t.name);
    assert.deepEqual(expected, ["tracker__search_issues"]);

    const c = await client("triage");
    try {
      assert.deepEqual((await c.listTools()).tools.map((t) => t.name), expected);
      const seen = mcp.authorizations.length;
      const result = (await c.callTool({ name: "tracker__search_issues", arguments: { q: "crash" } })) as Called;
      assert.equal(result.isError, undefined, JSON.stringify(result));
      assert.deepEqual(result.content, [{ type: "text", text: '{"q":"crash"}' }]);
      const sent = mcp.authorizations.slice(seen);
      const issued = new Set(authServer.issuedTokens().map((t) => `Bearer ${t}`));
      assert.ok(sent.length > 0 && sent.every((h) => issued.has(h)), "every upstream request carried an access token the authorization server issued to the deployment");
      const refused = await c.callTool({ name: "tracker__delete_issue", arguments: {} }).catch((e: Error) => e);
      assert.ok(refused instanceof Error && /Unknown tool/.test(refused.message), "a filtered-out tool is not callable");
    } finally {
      await c.close();
    }
    const logged = JSON.stringify(d.logs);
    for (const secret of [...authServer.issuedTokens(), tokens.use!]) assert.ok(!logged.includes(secret), "no token in the deployment's log");
  });

  test("one snapshot per session: a changed declaration reaches new sessions only", async () => {
    const old = await client("triage");
    try {
      assert.deepEqual((await old.listTools()).tools.map((t) => t.name), ["tracker__search_issues"]);
      assert.equal((await callServed(d, "PUT", "/v1/agents/triage", { mcp: [{ id: "tracker", tools: { read_only: true } }] })).status, 200);
      assert.deepEqual((await old.listTools()).tools.map((t) => t.name), ["tracker__search_issues"]);
      const fresh = await client("triage");
      assert.deepEqual((await fresh.listTools()).tools.map((t) => t.name), ["tracker__search_issues", "tracker__list_projects"]);
      await fresh.close();
    } finally {
      await old.close();
      await callServed(d, "PUT", "/v1/agents/triage", { mcp: [{ id: "tracker", tools: { read_only: true, exclude: ["list_*"] } }] });
    }
  });

  test("no token: 401; a read or an apply token: 403; an unknown agent: 404", async () => {
    const initialize = { jsonrpc: "2.0", id: 1, method: "initialize", params: { protocolVersion: "2025-06-18", capabilities: {}, clientInfo: { name: "t", version: "1" } } };
    const post = (token: string | undefined, name = "triage") =>
      fetch(endpoint(name), {
        method: "POST",
        headers: { "content-type": "application/json", accept: "application/json, text/event-stream", ...(token ? { authorization: `Bearer ${token}` } : {}) },
        body: JSON.stringify(initialize),
      }).then(async (r) => ({ status: r.status, body: await r.text(), challenge: r.headers.get("www-authenticate") }));
    const refusal = async (token: string | undefined, name?: string) => {
      const { status, body, challenge } = await post(token, name);
      return { status, body: JSON.parse(body), ...(challenge ? { challenge } : {}) };
    };
    assert.deepEqual(await refusal(undefined), UNAUTHORIZED);
    assert.deepEqual(await refusal("subsd_not-a-token"), UNAUTHORIZED);
    for (const role of ["read", "apply"]) {
      assert.deepEqual(await refusal(tokens[role]), { status: 403, body: { error: "forbidden", message: `using agents' MCP endpoints needs a token with the role use or admin; this one's role is ${role}` } });
    }
    assert.deepEqual(await refusal(tokens.use, "nobody"), { status: 404, body: { error: "not_found", message: "no agent nobody" } });
    assert.equal((await post(d.token)).status, 200, "an admin token may use agents too");
  });

  test("a session belongs to the token that started it: another use token gets 404 as for an unknown id; a revoked token gets 401", async () => {
    const made = await runAs("in-process", ["deployment", "token", "create", "--name", "session-owner-a", "--role", "use", "--store", d.storeArg], { cwd: dir, env: { HOME: dir } });
    assert.equal(made.code, 0, made.stderr);
    const tokenA = made.stdout.trim();
    const tokenB = await d.tokenFor("use");
    const transport = new StreamableHTTPClientTransport(new URL(endpoint("triage")), { requestInit: { headers: { authorization: `Bearer ${tokenA}` } } });
    const a = new Client({ name: "agents-test", version: "1.0.0" });
    await a.connect(transport);
    try {
      const id = transport.sessionId!;
      assert.ok(id, "the session has an id");
      const send = (token: string, sessionId: string, method: "POST" | "GET" | "DELETE", body?: unknown) =>
        fetch(endpoint("triage"), {
          method,
          headers: { "content-type": "application/json", accept: "application/json, text/event-stream", "mcp-protocol-version": "2025-06-18", "mcp-session-id": sessionId, authorization: `Bearer ${token}` },
          ...(body === undefined ? {} : { body: JSON.stringify(body) }),
        }).then(async (r) => ({ status: r.status, body: await r.text(), challenge: r.headers.get("www-authenticate") }));
      const list = { jsonrpc: "2.0", id: 7, method: "tools/list" };
      const call = { jsonrpc: "2.0", id: 8, method: "tools/call", params: { name: "tracker__search_issues", arguments: { q: "theft" } } };
      const unknown = await send(tokenB, "00000000-0000-4000-8000-000000000000", "POST", list);
      assert.equal(unknown.status, 404);
      for (const [method, body] of [["POST", list], ["POST", call], ["GET", undefined], ["DELETE", undefined]] as const) {
        assert.deepEqual(await send(tokenB, id, method, body), unknown, `B's ${method} ${body?.method ?? ""} on A's session is answered as for an unknown id`);
      }
      assert.deepEqual((await a.listTools()).tools.map((t) => t.name), ["tracker__search_issues"], "A's session goes on (B's DELETE did not end it)");

      const revoked = await runAs("in-process", ["deployment", "token", "revoke", "session-owner-a", "--store", d.storeArg], { cwd: dir, env: { HOME: dir } });
      assert.equal(revoked.code, 0, revoked.stderr);
      const after = await send(tokenA, id, "POST", list);
      assert.deepEqual({ ...after, body: JSON.parse(after.body) }, UNAUTHORIZED, "a revoked token's next request on its session is refused as unauthenticated");
      const logged = d.logs.length;
      await assert.rejects(
        a.callTool({ name: "tracker__search_issues", arguments: {} }),
        (e: Error & { code?: number }) => e.code === 401 && e.message.endsWith(`Error POSTing to endpoint: ${JSON.stringify(UNAUTHORIZED.body)}`),
        "the SDK client's next call fails with the deployment's 401",
      );
      // The call's POST (the session's GET stream, ended by the revocation, is logged when it ends).
      // Its line is written once the answer is sent, and read from the deployment's stderr after
      // the client has the answer: waited for.
      const posts = () => d.logs.slice(logged).filter((l) => l.msg === "request" && l.path === "/v1/agents/triage/mcp" && l.method === "POST");
      const tried = await waitFor(() => posts().length > 0 && posts(), "the deployment to log the call's POST");
      assert.ok(tried.every((l) => l.status === 401 && l.token === undefined), `the call reached the deployment and was refused there: ${JSON.stringify(tried)}`);
    } finally {
      await a.close().catch(() => {});
    }
  });

  // One store: the Inspector is a client, and what it drives here (an agent's endpoint, a use
  // token's session, the 401 and 403) is the same code on either store, which the SDK client's
  // tests above hold on each. It runs on Postgres in replicas.e2e, against three replicas; here on
  // SQLite. Each of its runs is a Node 22 process (about a second of CPU).
  if (store === "sqlite") {
    test("the MCP Inspector's CLI lists and calls with a use token, and is refused without a token and with a read token", async () => {
      ensureInspector();
      const http = ["--transport", "http", "--server-url", endpoint("triage"), "--stored-auth-only"];
      const bearer = (t: string) => ["--header", `Authorization: Bearer ${t}`];
      const listed = await inspect([...http, ...bearer(tokens.use!), "--method", "tools/list"], { cwd: dir, timeoutMs: 60_000 });
      assert.equal(listed.code, 0, listed.stderr);
      assert.deepEqual((listed.result as Listed).tools.map((t) => t.name), ["tracker__search_issues"]);
      const called = await inspect([...http, ...bearer(tokens.use!), "--method", "tools/call", "--tool-name", "tracker__search_issues", "--tool-args-json", '{"via":"inspector"}'], { cwd: dir, timeoutMs: 60_000 });
      assert.equal(called.code, 0, called.stderr);
      assert.deepEqual((called.result as Called).content, [{ type: "text", text: '{"via":"inspector"}' }]);
      // The Inspector says the deployment's refusal (code 3 is its auth error), with its body.
      const forbidden = { error: "forbidden", message: "using agents' MCP endpoints needs a token with the role use or admin; this one's role is read" };
      for (const [headers, error] of [
        [[], { code: "auth_required", message: `Error POSTing to endpoint: ${JSON.stringify(UNAUTHORIZED.body)}` }],
        [bearer(tokens.read!), { code: "auth_required", message: `Error POSTing to endpoint: ${JSON.stringify(forbidden)}`, status: 403 }],
      ] as const) {
        const refused = await inspect([...http, ...headers, "--method", "tools/list"], { cwd: dir, timeoutMs: 60_000 });
        assert.deepEqual([refused.code, refused.error], [3, error], `refused (${headers.join(" ") || "no header"}): ${refused.stderr}`);
        assert.equal(refused.result, undefined);
      }
    });
  }

  test("a credential the authorization server no longer honours: the call is a tool error naming `subs mcp login tracker`", async () => {
    const c = await client("triage");
    try {
      await c.listTools();
      authServer.revokeAllRefreshTokens();
      authServer.forgetAccessTokens();
      const result = (await c.callTool({ name: "tracker__search_issues", arguments: {} })) as Called;
      assert.equal(result.isError, true, JSON.stringify(result));
      assert.match(result.content[0]!.text, /subs mcp login tracker/);
      assert.equal((await callServed(d, "GET", "/v1/mcp")).body.connections[0].status, "declared", "the dead credential was deleted");
    } finally {
      await c.close();
    }
  });

  test("a credential replaced by another process while a session is open: the session's next call sends the new one", async () => {
    assert.deepEqual(await authorizeServed(d, "tracker", { url: mcp.url, prefix_tools: true }), { status: "authorized" });
    const c = await client("triage");
    try {
      const first = (await c.callTool({ name: "tracker__search_issues", arguments: {} })) as Called;
      assert.equal(first.isError, undefined, JSON.stringify(first));
      // Written through the test's own connection to the store, as a second process would:
      // a token the MCP server refuses, with no refresh token, so the call can only fail if it is sent.
      d.credentials.set("tracker", { url: mcp.url, tokens: { access_token: "replaced-by-another-process", token_type: "bearer" }, authorizedAt: Date.now(), expiresAt: null });
      await d.settled();
      const second = (await c.callTool({ name: "tracker__search_issues", arguments: {} })) as Called;
      assert.equal(second.isError, true, JSON.stringify(second));
      // "refused": the MCP server was sent the new token and answered 401 (the old one it would have taken).
      assert.match(second.content[0]!.text, /refused the credential .*subs mcp login tracker/);
    } finally {
      await c.close();
    }
  });
});
