// For trying `subs mcp login` by hand: starts the test authorization server and a protected MCP
// server on loopback and prints a substructure.toml for them. Stop with Ctrl-C. (`npm run demo` does
// the same with a consent page and walks through login, list and tools.)
//   node --import tsx test/support/serve-oauth.ts > /tmp/try/substructure.toml
import { annotatedTool, startMcpServer } from "./mcp-server.ts";
import { startAuthServer } from "./oauth-server.ts";

const as = await startAuthServer({ scopesSupported: ["files:read", "files:write", "offline_access"] });
const mcp = await startMcpServer({
  tools: [annotatedTool("search", { readOnlyHint: true }), { ...annotatedTool("write", { destructiveHint: true }), reply: () => "written" }],
  oauth: { authServer: as, requiredScopes: ["files:read"], toolScopes: { write: ["files:write"] } },
});
process.stdout.write(`# authorization server ${as.issuer}\n[mcp.demo]\nurl = "${mcp.url}"\n`);
process.stderr.write(`serving; Ctrl-C to stop (refreshes: see counters on exit)\n`);
process.once("SIGINT", async () => {
  process.stderr.write(`${JSON.stringify(as.counters)}\n`);
  await Promise.all([as.close(), mcp.close()]);
  process.exit(0);
});
