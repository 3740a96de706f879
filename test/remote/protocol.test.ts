// Requests a deployment refuses (docs/deployment-protocol.md sections 1 and 6), sent as raw HTTP
// over loopback to the reference deployment (test/support/deployment/server.ts) and to a real
// `subs deployment serve`: the rules `subs` itself never exercises, since it never sends such a
// request. The server-side OAuth rules are test/deployment/oauth.e2e.test.ts. Section numbers are
// the document's.
import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { targets, type TargetDeployment } from "../support/deployment-targets.ts";

for (const target of targets()) describe(`${target.name}: requests it refuses`, () => {
  let dep: TargetDeployment;
  before(async () => {
    dep = await target.start();
  });
  after(() => dep.close());

  async function call(method: string, path: string, body?: unknown, headers: Record<string, string> = {}) {
    const res = await fetch(new URL(path, dep.url), {
      method,
      redirect: "manual",
      headers: { authorization: `Bearer ${dep.token}`, ...(body === undefined ? {} : { "content-type": "application/json" }), ...headers },
      ...(body === undefined ? {} : { body: typeof body === "string" ? body : JSON.stringify(body) }),
    });
    const text = await res.text();
    if (res.status !== 204) assert.match(res.headers.get("content-type") ?? "", /application\/json/, `${method} ${path}: answers other than 204 are JSON`);
    return { status: res.status, body: text ? JSON.parse(text) : undefined };
  }
  const statusOf = async (id: string) => (await call("GET", "/v1/mcp")).body.connections.find((c: { id: string }) => c.id === id)?.status;

  it("section 1: a bad id or name is 400 invalid_request on every endpoint that has one, after percent-decoding", async () => {
    for (const [method, path, body] of [
      ["DELETE", "/v1/mcp/Bad"],
      ["POST", "/v1/mcp/a__b/authorizations", {}],
      ["GET", "/v1/mcp/a.b/tools"],
      ["DELETE", "/v1/agents/UP"],
      ["PUT", "/v1/agents/x%5F%5Fy", { mcp: [] }],
      ["PUT", "/v1/mcp/%41", { url: "https://a.example/mcp", prefix_tools: true }],
      ["DELETE", "/v1/mcp/%E0%A4%A"],
    ] as const) {
      const res = await call(method, path, body);
      assert.equal(res.status, 400, `${method} ${path}`);
      assert.equal(res.body.error, "invalid_request", `${method} ${path}`);
    }
    const decoded = await call("PUT", "/v1/mcp/%61", { url: "https://a.example/mcp", prefix_tools: true });
    assert.equal(decoded.status, 201);
    assert.equal(decoded.body.id, "a", "%61 is a");
    // An id in an agent's `mcp` follows the same rule: malformed, not merely undeclared.
    const agent = await call("PUT", "/v1/agents/ag", { mcp: [{ id: "a" }, { id: "Not-An-Id" }] });
    assert.equal(agent.status, 400);
    assert.equal(agent.body.error, "invalid_request");
    assert.equal((await call("DELETE", "/v1/mcp/a")).status, 204);
  });

  it("section 6: a body the parser refuses (too large, unknown charset) is 400 invalid_request", async () => {
    const large = await call("PUT", "/v1/mcp/big", { url: "https://a.example/mcp", prefix_tools: true, pad: "x".repeat(200_000) });
    assert.deepEqual([large.status, large.body.error], [400, "invalid_request"]);
    const charset = await call("PUT", "/v1/mcp/big", "{}", { "content-type": "application/json; charset=utf-7" });
    assert.deepEqual([charset.status, charset.body.error], [400, "invalid_request"]);
    assert.equal(await statusOf("big"), undefined, "nothing was declared");
  });
});
