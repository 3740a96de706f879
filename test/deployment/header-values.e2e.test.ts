// A connection's header templates on a deployment (docs/deployment-protocol.md sections 2, 3.2,
// 3.12 and 5): the rules of the declaration and of the values handed over, held by the same test
// against the reference and a real `subs deployment serve` (SQLite: the values' sealing and
// re-sealing on both stores is test/deployment/store.test.ts); then, on the
// real server only, what only it has: the operator's environment never fills a template, the value
// is sealed at rest, a `read` token can neither hand one over nor learn one, and an agent's MCP
// endpoint calls an API-key server with the value it holds. One deployment per target serves all.
import assert from "node:assert/strict";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { after, before, describe, test } from "node:test";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { runCli } from "../support/cli.ts";
import { callServed, startServedDeployment, FEATURE_STORES, type ServedDeployment } from "../support/deployment-serve.ts";
import { targets, type TargetDeployment } from "../support/deployment-targets.ts";
import { annotatedTool, startMcpServer, type RunningMcpServer } from "../support/mcp-server.ts";

const KEY = "exa-key-VALUE-5f0c2d9a1b";
const OPERATOR_SECRET = "operator-only-VALUE-77e1";
const HEADERS = { "X-API-Key": "${EXA_API_KEY}", "X-Client": "subs-test" };

/** An API-key server: without the right X-API-Key, 401; every X-API-Key and X-Leak it was sent is kept. */
async function apiKeyServer() {
  const seen: Array<{ key: string | undefined; client: string | undefined; leak: string | undefined; authorization: string | undefined }> = [];
  const header = (value: string | string[] | undefined) => (typeof value === "string" ? value : undefined);
  const server = await startMcpServer({
    tools: [annotatedTool("web_search", { readOnlyHint: true })],
    gate: (req, res) => {
      seen.push({ key: header(req.headers["x-api-key"]), client: header(req.headers["x-client"]), leak: header(req.headers["x-leak"]), authorization: header(req.headers.authorization) });
      if (req.headers["x-api-key"] === KEY) return false;
      res.writeHead(401, { "content-type": "text/plain" }).end("missing or wrong X-API-Key");
      return true;
    },
  });
  return { server, seen };
}

for (const target of targets(FEATURE_STORES)) {
  describe(`header values on ${target.name}`, () => {
    let d: TargetDeployment;
    let mcp: RunningMcpServer;
    let seen: Awaited<ReturnType<typeof apiKeyServer>>["seen"];

    before(async () => {
      ({ server: mcp, seen } = await apiKeyServer());
      // The operator's environment holds a variable of the headers' name: it must never be used.
      d = await target.start({ env: { OPERATOR_SECRET, EXA_API_KEY: OPERATOR_SECRET } });
    });
    after(async () => {
      await d.close();
      await mcp.close();
      rmSync(dir, { recursive: true, force: true });
    });
    const dir = mkdtempSync(path.join(tmpdir(), "subs-header-values-"));

    test("a declaration's headers are checked: a literal credential, Authorization, a transport header and a bad template are refused", async () => {
      for (const headers of [{ "X-API-Key": "literal-key-VALUE" }, { Authorization: "${TOKEN}" }, { "Mcp-Session-Id": "x" }, { "X-API-Key": "${NOT CLOSED" }, { "X-Many": Array.from({ length: 17 }, (_, n) => `\${V${n}}`).join(",") }]) {
        const put = await d.call("PUT", "/v1/mcp/bad", { url: mcp.url, prefix_tools: true, headers });
        assert.equal(put.status, 400, JSON.stringify(headers));
        assert.equal(put.body.error, "invalid_request");
        assert.doesNotMatch(JSON.stringify(put.body), /literal-key-VALUE/);
      }
      assert.equal((await d.call("GET", "/v1/mcp")).body.connections.length, 0);
    });

    test("declared with templates: echoed, each variable listed not held, `declared`; its tools are not_authorized and nothing reaches the server", async () => {
      const put = await d.call("PUT", "/v1/mcp/exa", { url: mcp.url, prefix_tools: false, headers: HEADERS });
      assert.equal(put.status, 201, JSON.stringify(put.body));
      assert.deepEqual(put.body.headers, HEADERS);
      assert.deepEqual(put.body.secrets, [{ name: "EXA_API_KEY", held: false }]);
      assert.equal(put.body.status, "declared");
      const before = seen.length;
      const tools = await d.call("GET", "/v1/mcp/exa/tools");
      assert.equal(tools.status, 409);
      assert.equal(tools.body.error, "not_authorized");
      assert.match(tools.body.message, /EXA_API_KEY/);
      assert.match(tools.body.message, /subs mcp login exa/);
      assert.equal(seen.length, before, "no request went to the server");
    });

    test("a value for a variable the headers do not name, an empty one and one with a line break are refused; nothing is held", async () => {
      const other = await d.call("PUT", "/v1/mcp/exa/secrets/OTHER_KEY", { value: KEY });
      assert.equal(other.status, 400);
      assert.equal(other.body.error, "unknown_variable");
      assert.match(other.body.message, /EXA_API_KEY/);
      for (const value of ["", `${KEY}\r\nX-Injected: 1`]) {
        const bad = await d.call("PUT", "/v1/mcp/exa/secrets/EXA_API_KEY", { value });
        assert.equal(bad.status, 400, JSON.stringify(value));
        assert.equal(bad.body.error, "invalid_request");
      }
      assert.equal((await d.call("PUT", "/v1/mcp/nope/secrets/EXA_API_KEY", { value: KEY })).status, 404);
      const listed = (await d.call("GET", "/v1/mcp")).body.connections[0];
      assert.deepEqual(listed.secrets, [{ name: "EXA_API_KEY", held: false }]);
    });

    test("handed over: `authorized`, never in an answer; the tools are listed with the value and the literal header, and no Authorization", async () => {
      const put = await d.call("PUT", "/v1/mcp/exa/secrets/EXA_API_KEY", { value: KEY });
      assert.equal(put.status, 204, JSON.stringify(put.body));
      const listed = await d.call("GET", "/v1/mcp");
      const exa = listed.body.connections.find((c: { id: string }) => c.id === "exa");
      assert.equal(exa.status, "authorized");
      assert.equal(exa.secrets.length, 1);
      assert.equal(exa.secrets[0].held, true);
      assert.ok(exa.authorized_at, "authorized_at");
      assert.doesNotMatch(JSON.stringify(listed.body), new RegExp(KEY));

      const tools = await d.call("GET", "/v1/mcp/exa/tools");
      assert.equal(tools.status, 200, JSON.stringify(tools.body));
      assert.deepEqual(
        tools.body.tools.map((t: { name: string }) => t.name),
        ["web_search"],
      );
      const last = seen.at(-1)!;
      assert.equal(last.key, KEY);
      assert.equal(last.client, "subs-test");
      assert.equal(last.authorization, undefined, "no credential is held: no Authorization is sent");
    });

    test("headers that stop naming a variable drop its value, and a url change drops every value (section 5)", async () => {
      const renamed = await d.call("PUT", "/v1/mcp/exa", { url: mcp.url, prefix_tools: false, headers: { "X-API-Key": "${EXA_KEY_2}" } });
      assert.equal(renamed.status, 200);
      assert.deepEqual(renamed.body.secrets, [{ name: "EXA_KEY_2", held: false }]);
      const back = await d.call("PUT", "/v1/mcp/exa", { url: mcp.url, prefix_tools: false, headers: HEADERS });
      assert.deepEqual(back.body.secrets, [{ name: "EXA_API_KEY", held: false }], "the value went with the variable");
      assert.equal(back.body.status, "declared");

      assert.equal((await d.call("PUT", "/v1/mcp/exa/secrets/EXA_API_KEY", { value: KEY })).status, 204);
      const moved = await d.call("PUT", "/v1/mcp/exa", { url: `${mcp.url}?moved`, prefix_tools: false, headers: HEADERS });
      assert.equal(moved.status, 200);
      assert.deepEqual(moved.body.secrets, [{ name: "EXA_API_KEY", held: false }]);
      const returned = await d.call("PUT", "/v1/mcp/exa", { url: mcp.url, prefix_tools: false, headers: HEADERS });
      assert.equal(returned.body.status, "declared", "a value is never sent to another url, nor kept for a return");
    });

    test("DELETE …/secrets/{name} forgets the value: 204, then 404, and the connection is `declared`", async () => {
      assert.equal((await d.call("PUT", "/v1/mcp/exa/secrets/EXA_API_KEY", { value: KEY })).status, 204);
      assert.equal((await d.call("DELETE", "/v1/mcp/exa/secrets/EXA_API_KEY")).status, 204);
      assert.equal((await d.call("DELETE", "/v1/mcp/exa/secrets/EXA_API_KEY")).status, 404);
      assert.equal((await d.call("GET", "/v1/mcp")).body.connections.find((c: { id: string }) => c.id === "exa").status, "declared");
    });

    // What only the real server has: its environment, its roles, its store and log, and the agents' endpoint.
    if (target.kind !== "reference") describe("subs deployment serve", () => {
      test("a template is never filled from the operator's environment, even with a variable of the same name", async () => {
        const put = await callServed(d.served!, "PUT", "/v1/mcp/leaky", { url: mcp.url, prefix_tools: false, headers: { "X-API-Key": "${EXA_API_KEY}", "X-Leak": "${OPERATOR_SECRET}" } });
        assert.equal(put.status, 201, JSON.stringify(put.body));
        const tools = await callServed(d.served!, "GET", "/v1/mcp/leaky/tools");
        assert.equal(tools.status, 409);
        assert.match(tools.body.message, /EXA_API_KEY, OPERATOR_SECRET/);
        assert.ok(!seen.some((s) => s.leak !== undefined || s.key === OPERATOR_SECRET), "the operator's value never left");
        assert.equal((await callServed(d.served!, "DELETE", "/v1/mcp/leaky")).status, 204);
      });

      test("a read token can neither hand a value over nor learn it; a use token can; the store holds it sealed", async () => {
        // Declared above, and holding no value since the DELETE.
        assert.equal((await callServed(d.served!, "PUT", "/v1/mcp/exa", { url: mcp.url, prefix_tools: false, headers: HEADERS })).status, 200);
        const read = await d.served!.tokenFor("read");
        const refused = await callServed(d.served!, "PUT", "/v1/mcp/exa/secrets/EXA_API_KEY", { value: KEY }, read);
        assert.equal(refused.status, 403);
        assert.equal(refused.body.error, "forbidden");
        const use = await d.served!.tokenFor("use");
        assert.equal((await callServed(d.served!, "PUT", "/v1/mcp/exa/secrets/EXA_API_KEY", { value: KEY }, use)).status, 204);
        const listed = await callServed(d.served!, "GET", "/v1/mcp", undefined, read);
        assert.equal(listed.body.connections[0].status, "authorized");
        assert.match(listed.body.connections[0].secrets[0].set_by, /use/);
        for (const pathname of ["/v1/mcp", "/v1/mcp/exa/tools", "/v1/agents"]) {
          assert.doesNotMatch(JSON.stringify((await callServed(d.served!, "GET", pathname, undefined, read)).body), new RegExp(KEY), pathname);
        }
        assert.doesNotMatch(await d.served!.storeContents(), new RegExp(KEY), "sealed at rest");
        assert.doesNotMatch(JSON.stringify(d.served!.logs) + d.served!.stderr(), new RegExp(KEY), "never logged");
      });

      test("an agent's MCP endpoint calls with the value it holds; without it the call is a tool error naming the login", async () => {
        assert.equal((await callServed(d.served!, "PUT", "/v1/agents/researcher", { mcp: [{ id: "exa" }] })).status, 201);
        const use = await d.served!.tokenFor("use");
        const client = new Client({ name: "header-values-test", version: "1.0.0" });
        await client.connect(new StreamableHTTPClientTransport(new URL(`${d.url}/v1/agents/researcher/mcp`), { requestInit: { headers: { authorization: `Bearer ${use}` } } }));
        try {
          assert.deepEqual(
            (await client.listTools()).tools.map((t) => t.name),
            ["web_search"],
          );
          const before = seen.length;
          const result = (await client.callTool({ name: "web_search", arguments: { q: "mcp" } })) as { isError?: boolean; content: unknown };
          assert.notEqual(result.isError, true, JSON.stringify(result));
          assert.ok(seen.slice(before).some((s) => s.key === KEY && s.authorization === undefined), "the call carried the value and no stand-in");
          assert.doesNotMatch(JSON.stringify(result), new RegExp(KEY));

          assert.equal((await callServed(d.served!, "DELETE", "/v1/mcp/exa/secrets/EXA_API_KEY")).status, 204);
          const after = (await client.callTool({ name: "web_search", arguments: { q: "mcp" } })) as { isError?: boolean; content: Array<{ text: string }> };
          assert.equal(after.isError, true);
          assert.match(after.content.map((c) => c.text).join("\n"), /subs mcp login exa/);
        } finally {
          await client.close();
        }
      });

      test("`subs apply` and `subs mcp login --from-env` through the built CLI: the deployment then holds the value and `mcp list` says authorized", async () => {
        writeFileSync(
          path.join(dir, "substructure.toml"),
          `[remote]\nurl = "${d.url}"\n\n[mcp.search]\nurl = "${mcp.url}"\nheaders = { "X-API-Key" = "\${EXA_API_KEY}" }\n\n[agent.finder]\nmcp = ["search"]\n`,
        );
        const env = { SUBSTRUCTURE_TOKEN: d.token, EXA_API_KEY: KEY };
        const applied = await runCli(["apply", "--yes"], { cwd: dir, env });
        assert.equal(applied.code, 0, applied.stderr);
        const login = await runCli(["mcp", "login", "search", "--from-env"], { cwd: dir, env });
        assert.equal(login.code, 0, login.stderr);
        const list = await runCli(["mcp", "list", "--json"], { cwd: dir, env });
        assert.equal(list.code, 0, list.stderr);
        const search = (JSON.parse(list.stdout) as Array<{ id: string; status: string }>).find((c) => c.id === "search");
        assert.equal(search?.status, "authorized", list.stdout);
        const tools = await runCli(["mcp", "tools", "search", "--json"], { cwd: dir, env });
        assert.equal(tools.code, 0, tools.stderr);
        assert.match(tools.stdout, /web_search/);
        for (const r of [applied, login, list, tools]) assert.doesNotMatch(r.stdout + r.stderr, new RegExp(KEY));
      });
    });
  });
}
