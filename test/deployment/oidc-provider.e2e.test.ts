// The deployment's server-side OAuth against a third-party authorization server: node-oidc-provider
// (test/support/oidc-provider.ts), a certified OpenID Provider with dynamic registration, PKCE,
// resource indicators, JWT access tokens for the MCP server's audience, refresh tokens rotated on
// every use and revocation, in front of an MCP server that checks its tokens and says who each
// call came as. A real `subs deployment serve` (FEATURE_STORES: the store changes none of it): a
// consent given as one account, an agent's session calling as that account, a token the server
// stops accepting refreshed once (the rotated refresh token never presented twice), and a deleted
// connection's grant revoked at the provider (RFC 7009).
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { callServed, startServedDeployment, FEATURE_STORES, type ServedDeployment } from "../support/deployment-serve.ts";
import { startMcpServer, type RunningMcpServer } from "../support/mcp-server.ts";
import { startOidcProvider, type RunningOidcProvider } from "../support/oidc-provider.ts";
import { waitFor, within } from "../support/wait.ts";

for (const store of FEATURE_STORES) describe(`a consent at node-oidc-provider, through subs deployment serve (${store})`, () => {
  let provider: RunningOidcProvider;
  let mcp: RunningMcpServer;
  let d: ServedDeployment;

  before(async () => {
    provider = await startOidcProvider({ accounts: ["alice@example.com", "bob@example.com"] });
    mcp = await startMcpServer({ tools: [{ name: "whoami", inputSchema: { type: "object" }, reply: (_args, auth) => `you are ${String(auth?.extra?.sub)}` }], oauth: provider.protect() });
    d = await startServedDeployment({ store });
  });
  after(async () => {
    await d?.close();
    await mcp?.close();
    await provider?.close();
  });

  const whoami = async (token: string) => {
    const client = new Client({ name: "oidc-test", version: "1.0.0" });
    await client.connect(new StreamableHTTPClientTransport(new URL(`${d.url}/v1/agents/who/mcp`), { requestInit: { headers: { authorization: `Bearer ${token}` } } }));
    try {
      const result = (await within(client.callTool({ name: "whoami", arguments: {} }), "the whoami call")) as { content: Array<{ text: string }>; isError?: boolean };
      assert.ok(!result.isError, JSON.stringify(result));
      return result.content[0]!.text;
    } finally {
      await client.close();
    }
  };

  test("a consent as alice: registered, PKCE, resource and iss checked; the agent calls as alice; a token the server stops accepting is refreshed once and the call goes through; deleting the connection revokes the grant", async () => {
    assert.equal((await callServed(d, "PUT", "/v1/mcp/oidc", { url: mcp.url, prefix_tools: false })).status, 201);
    const started = await callServed(d, "POST", "/v1/mcp/oidc/authorizations", {});
    assert.equal(started.status, 201, JSON.stringify(started.body));
    const page = await provider.consentAs("alice@example.com", started.body.authorization_url);
    assert.equal(page.status, 200, page.text);
    const poll = new URL(started.body.poll_url, d.url).pathname;
    const outcome = await waitFor(async () => {
      const body = (await callServed(d, "GET", poll)).body;
      return body.status !== "pending" && body;
    }, "the consent to end");
    assert.deepEqual(outcome, { status: "authorized" });
    assert.deepEqual(provider.events.issued.map((g) => g.account), ["alice@example.com"]);

    assert.equal((await callServed(d, "PUT", "/v1/agents/who", { mcp: [{ id: "oidc" }] })).status, 201);
    const use = await d.tokenFor("use");
    assert.equal(await whoami(use), "you are alice@example.com");

    // The server stops accepting every token it has seen: the deployment refreshes (section 3.6),
    // once, and sends the call again with the new token.
    provider.refuseSeenTokens();
    const before = provider.events.refreshed;
    assert.equal(await whoami(use), "you are alice@example.com");
    assert.equal(provider.events.refreshed - before, 1, "one refresh");
    assert.equal(provider.events.reused, 0, "no rotated refresh token was presented again");

    assert.equal((await callServed(d, "DELETE", "/v1/agents/who")).status, 204);
    assert.equal((await callServed(d, "DELETE", "/v1/mcp/oidc")).status, 204);
    const grant = provider.events.issued[0]!.grantId;
    await waitFor(() => provider.events.revokedGrants.includes(grant), "the provider to revoke alice's grant");
  });
});
