// deployment-alt against the document's own checklist (docs/deployment-protocol.md section 10),
// for the clauses `subs` never exercises: raw HTTP to the server, with the real authorization
// and MCP servers behind it. Keeps the second implementation honest about the document.
import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { followAuthorization } from "../support/browser.ts";
import { annotatedTool, startMcpServer, type RunningMcpServer } from "../support/mcp-server.ts";
import { startAuthServer, type RunningAuthServer } from "../support/oauth-server.ts";
import { startDeployment, type RunningDeployment } from "../support/deployment-alt/server.ts";

let auth: RunningAuthServer;
let mcp: RunningMcpServer;
let dep: RunningDeployment;
/** Every answer body read in this file, for the leak check at the end. */
const answers: string[] = [];

before(async () => {
  auth = await startAuthServer();
  mcp = await startMcpServer({ tools: [annotatedTool("a"), annotatedTool("b")], oauth: { authServer: auth } });
  dep = await startDeployment({ interval: 0.1, catalog: undefined });
});
after(async () => {
  await Promise.all([dep.close(), mcp.close(), auth.close()]);
});

async function call(method: string, path: string, body?: unknown, token: string | null = dep.token) {
  const res = await fetch(new URL(path, dep.url), {
    method,
    redirect: "manual",
    headers: {
      ...(token ? { authorization: `Bearer ${token}` } : {}),
      ...(body === undefined ? {} : { "content-type": "application/json" }),
    },
    ...(body === undefined ? {} : { body: typeof body === "string" ? body : JSON.stringify(body) }),
  });
  const text = await res.text();
  answers.push(text);
  if (res.status !== 204) assert.match(res.headers.get("content-type") ?? "", /application\/json/, `${method} ${path}: answers other than 204 are JSON`);
  return { status: res.status, body: text ? JSON.parse(text) : undefined };
}

const poll = async (pollUrl: string) => (await call("GET", pollUrl)).body;
async function consent(id: string) {
  const started = await call("POST", `/v1/mcp/${id}/authorizations`, {});
  assert.equal(started.status, 201, JSON.stringify(started.body));
  assert.equal(await followAuthorization(started.body.authorization_url), 200);
  assert.deepEqual(await poll(started.body.poll_url), { status: "authorized" });
}

describe("deployment-alt: section 10 checklist", () => {
  it("401 unauthorized before anything else, as JSON", async () => {
    for (const [method, path] of [["GET", "/v1/mcp"], ["PUT", "/v1/mcp/BAD"], ["GET", "/v1/nowhere"], ["DELETE", "/v1/agents/x"]] as const) {
      for (const token of [null, "wrong"]) {
        const res = await call(method, path, undefined, token);
        assert.equal(res.status, 401, `${method} ${path}`);
        assert.equal(res.body.error, "unauthorized");
        assert.equal(typeof res.body.message, "string");
      }
    }
  });

  it("PUT /v1/mcp/{id}: 201 then 200, url byte for byte, oauth echoed, refusals", async () => {
    const url = `${mcp.url}?x=1#frag`.replace("/mcp", "/mcp/../mcp");
    const created = await call("PUT", "/v1/mcp/c1", { url, prefix_tools: false, oauth: { scopes: ["z", "a"] } });
    assert.equal(created.status, 201);
    assert.equal(created.body.url, url);
    assert.deepEqual(created.body.oauth, { scopes: ["z", "a"] });
    assert.equal(created.body.status, "declared");
    const again = await call("PUT", "/v1/mcp/c1", { url, prefix_tools: false, oauth: { scopes: ["z", "a"] } });
    assert.equal(again.status, 200);
    assert.deepEqual(again.body, created.body);

    const refusals: Array<[unknown, number, string]> = [
      [{ url: mcp.url, prefix_tools: true, auth: { token_env: "X" } }, 400, "local_only_field"],
      [{ url: mcp.url, prefix_tools: true, oauth: { client_secret_env: "X" } }, 400, "local_only_field"],
      [{ url: mcp.url, prefix_tools: true, oauth: { client_secret: "s" } }, 400, "local_only_field"],
      [{ url: mcp.url, prefix_tools: true, extra: 1 }, 400, "invalid_request"],
      [{ url: mcp.url, prefix_tools: true, oauth: { other: 1 } }, 400, "invalid_request"],
      [{ url: mcp.url }, 400, "invalid_request"],
      [{ url: "http://example.com/mcp", prefix_tools: true }, 400, "invalid_request"],
      [{ url: "ftp://127.0.0.1/mcp", prefix_tools: true }, 400, "invalid_request"],
      ["{not json", 400, "invalid_request"],
    ];
    for (const [body, status, error] of refusals) {
      const res = await call("PUT", "/v1/mcp/c1", body);
      assert.equal(res.status, status, JSON.stringify(body));
      assert.equal(res.body.error, error, JSON.stringify(body));
    }
    for (const id of ["Upper", "a__b", "a.b", "%20"]) assert.equal((await call("PUT", `/v1/mcp/${id}`, { url: mcp.url, prefix_tools: true })).body.error, "invalid_request", id);
    assert.equal((await call("GET", "/v1/mcp")).body.connections.find((c: any) => c.id === "c1").url, url, "refusals changed nothing");
    assert.equal((await call("DELETE", "/v1/mcp/c1")).status, 204);
    assert.equal((await call("DELETE", "/v1/mcp/c1")).status, 404);
  });

  it("a catalog deployment answers 403 url_not_in_catalog with every allowed URL", async () => {
    const catalogued = await startDeployment({ catalog: ["https://a.example/mcp", "https://b.example/mcp"] });
    try {
      const res = await fetch(`${catalogued.url}/v1/mcp/x`, {
        method: "PUT",
        headers: { authorization: `Bearer ${catalogued.token}`, "content-type": "application/json" },
        body: JSON.stringify({ url: "https://a.example/mcp/", prefix_tools: true }),
      });
      assert.equal(res.status, 403);
      const body = (await res.json()) as any;
      assert.equal(body.error, "url_not_in_catalog");
      assert.deepEqual(body.catalog, ["https://a.example/mcp", "https://b.example/mcp"]);
    } finally {
      await catalogued.close();
    }
  });

  it("consent: authorized; a changed prefix_tools keeps the credential; a changed url drops it", async () => {
    assert.equal((await call("PUT", "/v1/mcp/k", { url: mcp.url, prefix_tools: true })).status, 201);
    assert.equal((await call("GET", "/v1/mcp/k/tools")).body.error, "not_authorized");
    await consent("k");
    const tools = await call("GET", "/v1/mcp/k/tools");
    assert.equal(tools.status, 200);
    assert.deepEqual(tools.body.tools.map((t: any) => t.name), ["a", "b"]);

    const kept = await call("PUT", "/v1/mcp/k", { url: mcp.url, prefix_tools: false, oauth: { scopes: ["x"] } });
    assert.equal(kept.body.status, "authorized");
    assert.ok(kept.body.authorized_at);
    const dropped = await call("PUT", "/v1/mcp/k", { url: mcp.url.replace("127.0.0.1", "localhost"), prefix_tools: false });
    assert.equal(dropped.body.status, "declared");
    assert.equal(dropped.body.authorized_at ?? null, null);
    assert.equal((await call("GET", "/v1/mcp/k/tools")).status, 409);
    assert.equal((await call("DELETE", "/v1/mcp/k")).status, 204);
  });

  it("two ids with the same url hold independent credentials", async () => {
    await call("PUT", "/v1/mcp/one", { url: mcp.url, prefix_tools: true });
    await call("PUT", "/v1/mcp/two", { url: mcp.url, prefix_tools: true });
    await consent("one");
    assert.equal((await call("GET", "/v1/mcp/two/tools")).status, 409);
    await consent("two");
    assert.equal((await call("DELETE", "/v1/mcp/one")).status, 204);
    assert.equal((await call("GET", "/v1/mcp/two/tools")).status, 200);
    await call("DELETE", "/v1/mcp/two");
  });

  it("a newer authorization supersedes; a url change or a delete ends a pending one", async () => {
    await call("PUT", "/v1/mcp/p", { url: mcp.url, prefix_tools: true });
    const first = (await call("POST", "/v1/mcp/p/authorizations", {})).body;
    assert.equal(new URL(first.poll_url, dep.url).origin, dep.url, "poll_url is on the deployment's origin");
    assert.equal(typeof first.interval, "number");
    assert.equal(typeof first.expires_in, "number");
    assert.deepEqual(await poll(first.poll_url), { status: "pending" });
    const second = (await call("POST", "/v1/mcp/p/authorizations", {})).body;
    assert.equal((await poll(first.poll_url)).error, "superseded");
    // The superseded flow's code is refused at the callback; the newer one still completes.
    assert.notEqual(await followAuthorization(first.authorization_url), 200);
    assert.equal((await poll(second.poll_url)).status, "pending");

    await call("PUT", "/v1/mcp/p", { url: `${mcp.url}/`, prefix_tools: true });
    assert.deepEqual(await poll(second.poll_url), { status: "failed", error: "connection_changed", message: "the connection's url changed" });
    const third = (await call("POST", "/v1/mcp/p/authorizations", {})).body;
    assert.equal((await call("DELETE", "/v1/mcp/p")).status, 204);
    assert.equal((await poll(third.poll_url)).error, "connection_changed");
    assert.equal((await call("POST", "/v1/mcp/p/authorizations", {})).status, 404);
    assert.equal((await call("GET", "/v1/authorizations/nope")).status, 404);
  });

  it("an unreachable MCP server is 502 upstream_error on POST …/authorizations", async () => {
    await call("PUT", "/v1/mcp/down", { url: "http://127.0.0.1:9/mcp", prefix_tools: true });
    const res = await call("POST", "/v1/mcp/down/authorizations", {});
    assert.equal(res.status, 502);
    assert.equal(res.body.error, "upstream_error");
    await call("DELETE", "/v1/mcp/down");
  });

  it("a refused consent is failed with the authorization server's error passed through", async () => {
    await call("PUT", "/v1/mcp/deny", { url: mcp.url, prefix_tools: true });
    auth.set({ consent: "deny" });
    try {
      const started = (await call("POST", "/v1/mcp/deny/authorizations", {})).body;
      await followAuthorization(started.authorization_url);
      const outcome = await poll(started.poll_url);
      assert.equal(outcome.status, "failed");
      assert.equal(outcome.error, "access_denied");
    } finally {
      auth.set({ consent: "allow" });
      await call("DELETE", "/v1/mcp/deny");
    }
  });

  it("agents: 201/200, arrays in order, filters as given, 409s, 404", async () => {
    await call("PUT", "/v1/mcp/s", { url: mcp.url, prefix_tools: true });
    await call("PUT", "/v1/mcp/l", { url: "https://mcp.example.com/l", prefix_tools: true });
    const body = { mcp: [{ id: "l" }, { id: "s", tools: { exclude: ["z*", "a*"], read_only: true } }], tools: ["t2", "t1"], agents: ["zz", "aa"] };
    const created = await call("PUT", "/v1/agents/g", body);
    assert.equal(created.status, 201);
    assert.deepEqual(created.body, { name: "g", ...body });
    assert.equal((await call("PUT", "/v1/agents/g", body)).status, 200);
    assert.deepEqual((await call("PUT", "/v1/agents/h", { mcp: [{ id: "s" }] })).body, { name: "h", mcp: [{ id: "s" }], tools: [], agents: [] });

    const unknown = await call("PUT", "/v1/agents/x", { mcp: [{ id: "s" }, { id: "nope" }, { id: "gone" }] });
    assert.equal(unknown.status, 409);
    assert.equal(unknown.body.error, "unknown_connection");
    assert.match(unknown.body.message, /nope.*gone/);
    assert.equal((await call("PUT", "/v1/agents/x", { mcp: [{ id: "s", tools: { writes: true } }] })).body.error, "invalid_request");
    assert.equal((await call("PUT", "/v1/agents/x", { mcp: [], extra: [] })).body.error, "invalid_request");
    assert.equal((await call("PUT", "/v1/agents/x", {})).body.error, "invalid_request");

    const inUse = await call("DELETE", "/v1/mcp/s");
    assert.equal(inUse.status, 409);
    assert.equal(inUse.body.error, "connection_in_use");
    assert.match(inUse.body.message, /g, h/);
    assert.ok((await call("GET", "/v1/mcp")).body.connections.some((c: any) => c.id === "s"), "nothing changed");

    assert.equal((await call("DELETE", "/v1/agents/g")).status, 204);
    assert.equal((await call("DELETE", "/v1/agents/g")).status, 404);
    assert.deepEqual((await call("GET", "/v1/agents")).body.agents.map((a: any) => a.name), ["h"]);
  });

  it("no answer ever carried a token, refresh token, client secret or code", () => {
    // Runs last: every answer above was read through `call`.
    const secrets = [...auth.issuedTokens(), ...dep.secretsSeen().filter((s) => s !== dep.token)];
    assert.ok(secrets.length >= 6 && answers.length > 50, "the earlier tests issued tokens and read answers");
    const everything = answers.join("\n");
    for (const secret of secrets) assert.ok(!everything.includes(secret), "a secret appeared in an answer");
  });
});
