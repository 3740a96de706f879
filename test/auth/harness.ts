// Shared set-up for login tests: a temp environment with a substructure.toml, a test
// authorization server and a protected MCP server, all on loopback, torn down after each test.
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import Database from "better-sqlite3";
import { runInProcess, type RunResult } from "../support/cli.ts";
import { consentingBrowser } from "../support/browser.ts";
import { annotatedTool, startMcpServer, type McpServerOptions, type ProtectOptions, type RunningMcpServer, type TestTool } from "../support/mcp-server.ts";
import { startAuthServer, type AuthServerOptions, type RunningAuthServer } from "../support/oauth-server.ts";

export type Env = {
  dir: string;
  as: RunningAuthServer;
  mcp: RunningMcpServer;
  /** The MCP server's protection; change it while the server runs (e.g. another authServer). */
  protect: ProtectOptions;
  /** Runs subs in-process with a consenting browser (override with `openBrowser`). */
  /** `terminal`: stderr is a terminal (a person is there to consent, e.g. to a step-up). */
  subs: (argv: string[], extra?: { env?: Record<string, string>; openBrowser?: (url: string) => Promise<void>; terminal?: boolean }) => Promise<RunResult>;
  write: (toml: string) => void;
  db: () => Database.Database;
  /** Every stdout/stderr seen so far, to assert no token leaked. */
  outputs: string[];
  close: () => Promise<void>;
};

export const TOOLS: TestTool[] = [
  annotatedTool("search", { readOnlyHint: true }),
  { ...annotatedTool("echo"), reply: (args) => `echo:${JSON.stringify(args)}` },
];

export async function environment(
  options: { as?: AuthServerOptions; protect?: Partial<ProtectOptions>; toml?: (mcpUrl: string) => string; gate?: McpServerOptions["gate"] } = {},
): Promise<Env> {
  const dir = mkdtempSync(path.join(tmpdir(), "subs-login-"));
  const as = await startAuthServer(options.as ?? {});
  const protect: ProtectOptions = { authServer: as, ...options.protect };
  const mcp = await startMcpServer({ tools: TOOLS, oauth: protect, ...(options.gate ? { gate: options.gate } : {}) });
  const outputs: string[] = [];
  const write = (toml: string) => writeFileSync(path.join(dir, "substructure.toml"), toml);
  write(options.toml ? options.toml(mcp.url) : `[mcp.demo]\nurl = "${mcp.url}"\n`);
  const opened: Database.Database[] = [];
  return {
    dir,
    as,
    mcp,
    protect,
    outputs,
    write,
    subs: async (argv, extra = {}) => {
      const result = await runInProcess(argv, { cwd: dir, env: { ...extra.env }, openBrowser: extra.openBrowser ?? consentingBrowser(), ...(extra.terminal ? { stderrIsTTY: true } : {}) });
      outputs.push(result.stdout, result.stderr);
      return result;
    },
    db: () => {
      const db = new Database(path.join(dir, "substructure.db"));
      opened.push(db);
      return db;
    },
    close: async () => {
      for (const db of opened) db.close();
      await Promise.all([as.close(), mcp.close()]);
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

export type Row = { id: string; url: string; issuer: string; resource: string | null; access_token: string; refresh_token: string | null; expires_at: number | null; scopes: string };

export function credential(env: Env, id: string): Row | undefined {
  return env.db().prepare("SELECT * FROM subs_credentials WHERE id = ?").get(id) as Row | undefined;
}

/** Asserts that no token the authorization server issued appears in any output seen. */
export function leakedTokens(env: Env): string[] {
  const all = env.outputs.join("\n");
  return env.as.issuedTokens().filter((token) => all.includes(token));
}
