// For trying `subs mcp login` by hand: starts the test authorization server and a protected MCP
// server on loopback and prints a substructure.toml for them. Stop with Ctrl-C. (`npm run demo` does
// the same with a consent page and walks through login, list and tools.)
//   node --import tsx test/support/serve-oauth.ts [--strict] > /tmp/try/substructure.toml
// --strict behaves as the strictest real servers do: redirect_uri compared exactly,
// error redirects without `state`, and a consent page a person answers. `kill -USR1 <pid>`
// restarts the authorization server's memory: every client and token is forgotten.
import { annotatedTool, startMcpServer } from "./mcp-server.ts";
import { startAuthServer } from "./oauth-server.ts";

const strict = process.argv.includes("--strict");
const as = await startAuthServer({
  scopesSupported: ["files:read", "files:write", "offline_access"],
  ...(strict ? { exactRedirectUris: true, stateOnErrors: false, consent: "page" as const } : {}),
});
const mcp = await startMcpServer({
  tools: [annotatedTool("search", { readOnlyHint: true }), { ...annotatedTool("write", { destructiveHint: true }), reply: () => "written" }],
  oauth: { authServer: as, requiredScopes: ["files:read"], toolScopes: { write: ["files:write"] } },
});
process.stdout.write(`# authorization server ${as.issuer}\n[mcp.demo]\nurl = "${mcp.url}"\n`);
process.stderr.write(`serving${strict ? " (strict)" : ""} as pid ${process.pid}; kill -USR1 ${process.pid} forgets every client; Ctrl-C to stop\n`);
process.on("SIGUSR1", () => {
  as.restart();
  process.stderr.write(`forgot every client and token (registrations so far: ${as.counters.registrations})\n`);
});
process.once("SIGINT", async () => {
  process.stderr.write(`${JSON.stringify(as.counters)}\n`);
  await Promise.all([as.close(), mcp.close()]);
  process.exit(0);
});
