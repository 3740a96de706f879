// The offline demo's world (issue 8): an OAuth-protected MCP server and its authorization server on
// loopback, built from the test servers (test/support/), and a substructure.toml naming them in a
// fresh directory. Used by `npm run demo` (scripts/demo.ts) and `npm run screenshots`.
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { annotatedTool, startMcpServer, type TestTool } from "../test/support/mcp-server.ts";
import { startAuthServer, type AuthServerOptions } from "../test/support/oauth-server.ts";

export type DemoWorld = {
  dir: string;
  configPath: string;
  mcpUrl: string;
  issuer: string;
  close(): Promise<void>;
};

const tools: TestTool[] = [
  { ...annotatedTool("search_notes", { readOnlyHint: true }), description: "Search the demo notes by word", reply: (args) => `3 notes match ${JSON.stringify(args.query ?? "")}` },
  { ...annotatedTool("get_note", { readOnlyHint: true, idempotentHint: true }), description: "Read one note by id" },
  { ...annotatedTool("delete_note", { destructiveHint: true }), description: "Delete a note", reply: () => "deleted" },
];

/** Starts both servers and writes the demo's substructure.toml; `close` stops them and removes the directory. */
export async function startDemoWorld(options: { consent?: AuthServerOptions["consent"] } = {}): Promise<DemoWorld> {
  const auth = await startAuthServer({ consent: options.consent ?? "page", scopesSupported: ["notes:read", "offline_access"] });
  const mcp = await startMcpServer({ name: "demo-notes", tools, oauth: { authServer: auth, requiredScopes: ["notes:read"], scopesSupported: ["notes:read"] } });
  const dir = mkdtempSync(path.join(tmpdir(), "subs-demo-"));
  const configPath = path.join(dir, "substructure.toml");
  writeFileSync(
    configPath,
    `# Written by \`npm run demo\`: both servers run on this machine (127.0.0.1) while the demo runs.
#:schema ${path.resolve(import.meta.dirname, "..", "substructure.schema.json")}

[mcp.demo]                # an MCP server protected by OAuth (authorization server: ${auth.issuer})
url = "${mcp.url}"

[agent.notes]             # an agent that may only read
mcp = [{ id = "demo", tools = { read_only = true } }]
`,
  );
  return {
    dir,
    configPath,
    mcpUrl: mcp.url,
    issuer: auth.issuer,
    close: async () => {
      await Promise.all([mcp.close(), auth.close()]);
      rmSync(dir, { recursive: true, force: true });
    },
  };
}
