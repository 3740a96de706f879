#!/usr/bin/env node
// A team member's MCP client as its own process: the SDK's Client over Streamable HTTP to an
// agent's endpoint on a deployment, with a `use` token (SUBS_TEST_USE_TOKEN). Calls the given
// tools in turn COUNT times, a new MCP session every SESSION_CALLS calls (the one before ended
// with a DELETE, as a client that is done with a session should: the deployment counts a token's
// sessions until they end), no retries: prints one JSON line {calls, answered, failures} and exits
// 1 when any call was not answered with its own arguments echoed back (the test MCP servers' tools
// echo them).
//   node agent-caller.mjs <endpoint> <count> <tool,tool,...> [pause-ms]
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";

const [endpoint, countText, toolList, pauseText = "50"] = process.argv.slice(2);
const count = Number(countText);
const tools = toolList.split(",");
const pause = Number(pauseText);
const SESSION_CALLS = 10;
const headers = { authorization: `Bearer ${process.env.SUBS_TEST_USE_TOKEN}` };
const tag = `${process.pid}`;

const failures = [];
let answered = 0;
let client;
let transport;
const end = async () => {
  await transport?.terminateSession().catch(() => {});
  await client?.close();
};
for (let n = 0; n < count; n++) {
  try {
    if (n % SESSION_CALLS === 0) {
      await end();
      client = new Client({ name: "agent-caller", version: "1.0.0" });
      transport = new StreamableHTTPClientTransport(new URL(endpoint), { requestInit: { headers } });
      await client.connect(transport);
    }
    const args = { caller: tag, n };
    const result = await client.callTool({ name: tools[n % tools.length], arguments: args }, undefined, { timeout: 30_000 });
    const text = result.content?.[0]?.text;
    if (result.isError || text !== JSON.stringify(args)) failures.push({ n, result });
    else answered++;
  } catch (error) {
    failures.push({ n, error: String(error?.message ?? error) });
  }
  if (pause) await new Promise((r) => setTimeout(r, pause));
}
await end();
process.stdout.write(`${JSON.stringify({ calls: count, answered, failures: failures.slice(0, 5) })}\n`);
process.exit(failures.length ? 1 : 0);
