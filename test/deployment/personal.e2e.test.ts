// Personal connections (docs/deployment-protocol.md sections 2, 3.13 and 5) on a real `subs
// deployment serve` (FEATURE_STORES; a person's credentials in both stores: test/deployment/
// store.test.ts; two replicas on Postgres: the last test here), against node-oidc-provider with two accounts
// (test/support/oidc-provider.ts) in front of an MCP server that says who each call came as:
// alice and bob consent to one personal connection, each through a token of their own; each
// one's agent session calls as that person, interleaved, none crossed; a person without a
// credential gets no tool of it and is told to log in; a token the server stops accepting is
// refreshed once per person under concurrent calls; removing bob revokes his grant at the
// provider and leaves alice's working.
import assert from "node:assert/strict";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { after, before, describe, test } from "node:test";
import { runInProcess } from "../support/cli.ts";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { LoggingMessageNotificationSchema } from "@modelcontextprotocol/sdk/types.js";
import { callServed, startServedDeployment, FEATURE_STORES, type ServedDeployment } from "../support/deployment-serve.ts";
import { startReplicas, type Replicas } from "../support/replicas.ts";
import { startMcpServer, type RunningMcpServer } from "../support/mcp-server.ts";
import { startOidcProvider, type RunningOidcProvider } from "../support/oidc-provider.ts";
import { waitFor, within } from "../support/wait.ts";

const ALICE = "alice@example.com";
const BOB = "bob@example.com";
const CAROL = "carol@example.com";

for (const store of FEATURE_STORES) describe(`personal connections through subs deployment serve (${store})`, () => {
  let provider: RunningOidcProvider;
  let mcp: RunningMcpServer;
  let d: ServedDeployment;
  const tokens: Record<string, string> = {};

  before(async () => {
    provider = await startOidcProvider({ accounts: [ALICE, BOB, CAROL] });
    mcp = await startMcpServer({ tools: [{ name: "whoami", inputSchema: { type: "object" }, reply: (_args, auth) => `you are ${String(auth?.extra?.sub)}` }], oauth: provider.protect() });
    d = await startServedDeployment({ store });
    for (const person of [ALICE, BOB, CAROL]) {
      const made = await callServed(d, "POST", "/v1/tokens", { name: `${person} laptop`, role: "use", person });
      assert.equal(made.status, 201, JSON.stringify(made.body));
      tokens[person] = made.body.token;
    }
    const put = await callServed(d, "PUT", "/v1/mcp/who", { url: mcp.url, prefix_tools: false, credential: "personal" });
    assert.equal(put.status, 201, JSON.stringify(put.body));
    assert.equal(put.body.credential, "personal");
    assert.equal((await callServed(d, "PUT", "/v1/agents/who", { mcp: [{ id: "who" }] })).status, 201);
  });
  after(async () => {
    await d?.close();
    await mcp?.close();
    await provider?.close();
  });

  const statusFor = async (person: string) => (await callServed(d, "GET", "/v1/mcp", undefined, tokens[person])).body.connections.find((c: { id: string }) => c.id === "who");

  /** A consent started with `person`'s token and given at the provider as that account. */
  const consent = async (person: string) => {
    const started = await callServed(d, "POST", "/v1/mcp/who/authorizations", {}, tokens[person]);
    assert.equal(started.status, 201, JSON.stringify(started.body));
    const page = await provider.consentAs(person, started.body.authorization_url);
    assert.equal(page.status, 200, page.text);
    const poll = new URL(started.body.poll_url, d.url).pathname;
    return waitFor(async () => {
      const body = (await callServed(d, "GET", poll, undefined, tokens[person])).body;
      return body.status !== "pending" && body;
    }, `${person}'s consent to end`);
  };

  /** An agent session started with `person`'s token; what it was told, by MCP log messages. */
  const session = async (person: string) => {
    const client = new Client({ name: "personal-test", version: "1.0.0" });
    const told: string[] = [];
    client.setNotificationHandler(LoggingMessageNotificationSchema, (n) => void told.push(String(n.params.data)));
    await client.connect(new StreamableHTTPClientTransport(new URL(`${d.url}/v1/agents/who/mcp`), { requestInit: { headers: { authorization: `Bearer ${tokens[person]}` } } }));
    const whoami = async () => {
      const result = (await within(client.callTool({ name: "whoami", arguments: {} }), "a whoami call")) as { content: Array<{ text: string }>; isError?: boolean };
      assert.ok(!result.isError, JSON.stringify(result));
      return result.content[0]!.text;
    };
    return { client, told, whoami };
  };

  test("each person consents for themselves: the status each caller sees is their own; the other's consent supersedes nothing", async () => {
    assert.equal((await statusFor(ALICE)).status, "declared");
    assert.deepEqual(await consent(ALICE), { status: "authorized" });
    const alice = await statusFor(ALICE);
    assert.deepEqual([alice.status, alice.credential, alice.authorized_by], ["authorized", "personal", `${ALICE} laptop`]);
    assert.equal((await statusFor(BOB)).status, "declared", "alice's credential is not bob's");
    assert.deepEqual(await consent(BOB), { status: "authorized" });
    assert.equal((await statusFor(BOB)).status, "authorized");
    assert.equal((await statusFor(ALICE)).status, "authorized", "bob's consent left alice's credential in place");
    assert.equal((await statusFor(CAROL)).status, "declared");
    assert.deepEqual(provider.events.issued.map((g) => g.account), [ALICE, BOB]);
  });

  test("subs mcp list with [remote] shows each person their own: authorized by you, or needs your login; --json says personal", async () => {
    const project = mkdtempSync(path.join(tmpdir(), "subs-personal-"));
    try {
      writeFileSync(
        path.join(project, "substructure.toml"),
        `[remote]\nurl = "${d.url}"\ntoken_env = "TEAM_TOKEN"\n\n[mcp.who]\nurl = "${mcp.url}"\nprefix_tools = false\ncredential = "personal"\n\n[agent.who]\nmcp = ["who"]\n`,
      );
      const list = (person: string, json = false) => runInProcess(["mcp", "list", ...(json ? ["--json"] : [])], { cwd: project, env: { TEAM_TOKEN: tokens[person] } });
      const alice = await list(ALICE);
      assert.equal(alice.code, 0, alice.stderr);
      assert.match(alice.stdout, /^who\s.*authorized by you \(expires in [^)]+\)\t/m);
      const carol = await list(CAROL);
      assert.match(carol.stdout, /^who\s.*needs your login · subs mcp login who/m);
      const [entry] = JSON.parse((await list(ALICE, true)).stdout);
      assert.deepEqual([entry.id, entry.status, entry.credential, entry.drift], ["who", "authorized", "personal", null]);
      const [carols] = JSON.parse((await list(CAROL, true)).stdout);
      assert.deepEqual([carols.status, carols.credential], ["needs_login", "personal"]);
    } finally {
      rmSync(project, { recursive: true, force: true });
    }
  });

  test("each person's session calls as that person: 100 calls each, interleaved, none crossed", async () => {
    const a = await session(ALICE);
    const b = await session(BOB);
    try {
      // Ten waves of ten calls each at once, alternating (a session takes 64 calls in progress at most).
      const answers: string[][] = [];
      for (let wave = 0; wave < 10; wave++) {
        answers.push(...(await Promise.all(Array.from({ length: 20 }, (_, n) => (n % 2 === 0 ? a.whoami().then((t) => [ALICE, t]) : b.whoami().then((t) => [BOB, t]))))));
      }
      const crossed = answers.filter(([person, text]) => text !== `you are ${person}`);
      assert.deepEqual(crossed, []);
      assert.equal(answers.length, 200);
    } finally {
      await a.client.close();
      await b.client.close();
    }
  });

  test("a person without a credential gets none of its tools, and the session says to log in", async () => {
    const c = await session(CAROL);
    try {
      const { tools } = await c.client.listTools();
      assert.deepEqual(tools, []);
      // Said in the deployment's log, for the agent (an MCP log message sent before the client
      // opens its GET stream has nowhere to go over Streamable HTTP).
      await waitFor(
        () => d.logs.some((l) => l.agent === "who" && /no credential of yours/.test(String(l.msg)) && /run `subs mcp login who`/.test(String(l.msg))),
        () => `a log line naming the login (told the client: ${JSON.stringify(c.told)})`,
      );
      const call = await c.client.callTool({ name: "whoami", arguments: {} }).catch((error: Error) => error);
      // A protocol error (MCP "Tools: Error Handling"), whose words name the login.
      assert.match(String((call as Error).message), /Unknown tool: whoami \(not served in this session: who: the deployment holds no credential of yours for it.*run `subs mcp login who`/);
    } finally {
      await c.client.close();
    }
  });

  test("a token the server stops accepting is refreshed once per person, under concurrent calls; no rotated refresh token is presented twice", async () => {
    const a = await session(ALICE);
    const b = await session(BOB);
    try {
      // Listed (and so connected) before the tokens are refused: what follows is calls only.
      await a.client.listTools();
      await b.client.listTools();
      provider.refuseSeenTokens();
      const before = provider.events.refreshed;
      const answers = await Promise.all(Array.from({ length: 10 }, (_, n) => (n % 2 === 0 ? a.whoami().then((t) => [ALICE, t]) : b.whoami().then((t) => [BOB, t]))));
      assert.deepEqual(answers.filter(([person, text]) => text !== `you are ${person}`), []);
      assert.equal(provider.events.refreshed - before, 2, "one refresh for alice, one for bob");
      assert.equal(provider.events.reused, 0);
    } finally {
      await a.client.close();
      await b.client.close();
    }
  });

  test("removing bob revokes his tokens and his grant at the provider, and says so; alice's credential works on", async () => {
    const bobGrant = provider.events.issued.find((g) => g.account === BOB)!.grantId;
    const aliceGrant = provider.events.issued.find((g) => g.account === ALICE)!.grantId;
    const removed = await callServed(d, "DELETE", `/v1/people/${encodeURIComponent(BOB)}`);
    assert.equal(removed.status, 200, JSON.stringify(removed.body));
    assert.deepEqual(removed.body.grants, [{ connection: "who", issuer: provider.issuer, revocation: "revoked" }]);
    assert.ok(provider.events.revokedGrants.includes(bobGrant), "the provider revoked bob's grant");
    assert.ok(!provider.events.revokedGrants.includes(aliceGrant), "and not alice's");
    assert.equal((await callServed(d, "GET", "/v1/mcp", undefined, tokens[BOB])).status, 401);
    const a = await session(ALICE);
    try {
      assert.equal(await a.whoami(), `you are ${ALICE}`);
    } finally {
      await a.client.close();
    }
  });

  test("a change from personal to shared drops every person's credential and revokes each grant", async () => {
    const aliceGrant = provider.events.issued.find((g) => g.account === ALICE)!.grantId;
    assert.equal((await callServed(d, "DELETE", "/v1/agents/who")).status, 204);
    const put = await callServed(d, "PUT", "/v1/mcp/who", { url: mcp.url, prefix_tools: false });
    assert.equal(put.status, 200, JSON.stringify(put.body));
    assert.equal(put.body.credential, undefined);
    assert.equal((await statusFor(ALICE)).status, "declared");
    await waitFor(() => provider.events.revokedGrants.includes(aliceGrant), "alice's grant to be revoked");
  });
});

describe("personal connections across two replicas on one Postgres: one refresh per person, whichever replica each call reaches", () => {
  let provider: RunningOidcProvider;
  let mcp: RunningMcpServer;
  let set: Replicas;
  const tokens: Record<string, string> = {};

  before(async () => {
    provider = await startOidcProvider({ accounts: [ALICE, BOB] });
    mcp = await startMcpServer({ tools: [{ name: "whoami", inputSchema: { type: "object" }, reply: (_args, auth) => `you are ${String(auth?.extra?.sub)}` }], oauth: provider.protect() });
    set = await startReplicas(2, { store: "postgres" });
    const front = { url: set.balancer.url, token: set.front.token };
    for (const person of [ALICE, BOB]) tokens[person] = (await callServed(front, "POST", "/v1/tokens", { name: `${person} laptop`, role: "use", person })).body.token;
    assert.equal((await callServed(front, "PUT", "/v1/mcp/who", { url: mcp.url, prefix_tools: false, credential: "personal" })).status, 201);
    assert.equal((await callServed(front, "PUT", "/v1/agents/who", { mcp: [{ id: "who" }] })).status, 201);
    for (const person of [ALICE, BOB]) {
      // Started through the balancer: the redirect and the polls may reach either replica.
      const started = await callServed(front, "POST", "/v1/mcp/who/authorizations", {}, tokens[person]);
      assert.equal((await provider.consentAs(person, started.body.authorization_url)).status, 200);
      const poll = new URL(started.body.poll_url, front.url).pathname;
      const outcome = await waitFor(async () => {
        const body = (await callServed(front, "GET", poll, undefined, tokens[person])).body;
        return body.status !== "pending" && body;
      }, `${person}'s consent to end`);
      assert.deepEqual(outcome, { status: "authorized" });
    }
  });
  after(async () => {
    await set?.close();
    await mcp?.close();
    await provider?.close();
  });

  test("alice and bob each call on both replicas at once after their tokens are refused: two refreshes in all, no rotated token presented twice, none crossed", async () => {
    const sessions: Array<{ person: string; client: Client }> = [];
    for (const replica of set.replicas) {
      for (const person of [ALICE, BOB]) {
        const client = new Client({ name: "personal-replicas", version: "1.0.0" });
        await client.connect(new StreamableHTTPClientTransport(new URL(`${replica.direct}/v1/agents/who/mcp`), { requestInit: { headers: { authorization: `Bearer ${tokens[person]}` } } }));
        assert.deepEqual((await client.listTools()).tools.map((t) => t.name), ["whoami"]);
        sessions.push({ person, client });
      }
    }
    try {
      provider.refuseSeenTokens();
      const before = provider.events.refreshed;
      const answers = await Promise.all(
        Array.from({ length: 24 }, async (_, n) => {
          const { person, client } = sessions[n % sessions.length]!;
          const result = (await within(client.callTool({ name: "whoami", arguments: {} }), "a whoami call")) as { content: Array<{ text: string }>; isError?: boolean };
          return [person, result.isError ? `error: ${result.content[0]?.text}` : result.content[0]!.text];
        }),
      );
      assert.deepEqual(answers.filter(([person, text]) => text !== `you are ${person}`), []);
      assert.equal(provider.events.refreshed - before, 2, "one refresh per person across both replicas");
      assert.equal(provider.events.reused, 0);
    } finally {
      await Promise.all(sessions.map((s) => s.client.close()));
    }
  });
});
