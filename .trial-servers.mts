import { startAuthServer } from "/work/main/test/support/oauth-server.ts";
import { annotatedTool, startMcpServer } from "/work/main/test/support/mcp-server.ts";
const authServer = await startAuthServer();
const mcp = await startMcpServer({ tools: [annotatedTool("search_issues", { readOnlyHint: true }), annotatedTool("delete_issue", { destructiveHint: true })], oauth: { authServer } });
console.log(`MCP ${mcp.url}`);
console.log(`AUTH ${authServer.url}`);
setInterval(() => {}, 1 << 30);
