// Shared set-up for the second-implementation tests: a test authorization server, an
// OAuth-protected MCP server, and test/support/deployment-alt (written from the protocol document
// alone), with subs run against them from a temp dir: the built CLI as a child with the
// redirect-following $BROWSER, or (`how` "in-process") the same `run()` in this process with an
// opener that follows the URL as that $BROWSER does.
import { mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { runAs, type How, type RunResult } from "../support/cli.ts";
import { annotatedTool, startMcpServer, type RunningMcpServer } from "../support/mcp-server.ts";
import { startAuthServer, type RunningAuthServer } from "../support/oauth-server.ts";
import { startDeployment, type DeploymentOptions, type RunningDeployment } from "../support/deployment-alt/server.ts";

export const TOKEN_ENV = "ALT_DEPLOY_TOKEN";

export type Harness = {
  auth: RunningAuthServer;
  mcp: RunningMcpServer;
  /** A second MCP server behind the same authorization server (a url change target). */
  other: RunningMcpServer;
  dep: RunningDeployment;
  dir: string;
  /** Writes substructure.toml: a [remote] section for the deployment, then `body`. */
  write(body: string): void;
  /**
   * Runs subs with the deployment's token in its environment, as the harness's `how` says unless
   * `runHow` says otherwise. In-process, SUBS_TEST_BROWSER=ignore gives an opener that only records
   * the URL, as the $BROWSER script then does.
   */
  run(argv: string[], env?: Record<string, string | undefined>, runHow?: How): Promise<RunResult>;
  /** Every output seen so far (stdout and stderr of every run), for leak checks. */
  outputs: string[];
  /** A request to the deployment's API with its token, outside subs (to read its state). */
  api(method: string, pathname: string, body?: unknown): Promise<{ status: number; body: any }>;
  /** Writes to the deployment so far (PUT, POST, DELETE under /v1). */
  writes(): number;
  /** Every file under the temp dir (the CLI's cwd and HOME), as text. */
  localFiles(): Array<{ file: string; text: string }>;
  close(): Promise<void>;
};

/**
 * `options` may be a function of the first MCP server's url (e.g. a catalog naming it). `how`:
 * every run is the built CLI as a child (`cli`), or `run()` in this process.
 */
export async function startHarness(
  options: DeploymentOptions | ((mcpUrl: string) => DeploymentOptions) = {},
  authOptions: Parameters<typeof startAuthServer>[0] = {},
  how: How = "cli",
): Promise<Harness> {
  const auth = await startAuthServer(authOptions);
  const tools = [
    annotatedTool("search_issues", { readOnlyHint: true }),
    annotatedTool("get_issue", { readOnlyHint: true }),
    annotatedTool("delete_issue", { destructiveHint: true }),
  ];
  const mcp = await startMcpServer({ tools, name: "alt-sentry", oauth: { authServer: auth } });
  const other = await startMcpServer({ tools: [annotatedTool("other_tool")], name: "alt-other", oauth: { authServer: auth } });
  const dep = await startDeployment({ interval: 0.1, ...(typeof options === "function" ? options(mcp.url) : options) });
  const dir = mkdtempSync(path.join(tmpdir(), "subs-alt-"));
  const outputs: string[] = [];
  return {
    auth,
    mcp,
    other,
    dep,
    dir,
    outputs,
    write(body) {
      writeFileSync(path.join(dir, "substructure.toml"), `[remote]\nurl = "${dep.apiUrl}"\ntoken_env = "${TOKEN_ENV}"\n\n${body}`);
    },
    async run(argv, env = {}, runHow = how) {
      const given: Record<string, string | undefined> = { [TOKEN_ENV]: dep.token, NO_COLOR: "1", ...env };
      const result = await runAs(runHow, argv, { cwd: dir, env: given, consents: true });
      outputs.push(result.stdout, result.stderr);
      return result;
    },
    async api(method, pathname, body) {
      const res = await fetch(`${dep.apiUrl}${pathname}`, {
        method,
        headers: { authorization: `Bearer ${dep.token}`, ...(body === undefined ? {} : { "content-type": "application/json" }) },
        ...(body === undefined ? {} : { body: JSON.stringify(body) }),
        redirect: "manual",
      });
      const text = await res.text();
      return { status: res.status, body: text ? JSON.parse(text) : undefined };
    },
    writes: () => dep.requests.filter((r) => r.path.includes("/v1/") && r.method !== "GET").length,
    localFiles() {
      const found: Array<{ file: string; text: string }> = [];
      for (const entry of readdirSync(dir, { recursive: true, withFileTypes: true })) {
        if (!entry.isFile()) continue;
        const file = path.join(entry.parentPath, entry.name);
        found.push({ file, text: readFileSync(file).toString("latin1") });
      }
      return found;
    },
    async close() {
      await Promise.all([dep.close(), mcp.close(), other.close(), auth.close()]);
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

/** Runs `fn` with a fresh harness and always closes it. */
export async function withHarness(
  fn: (h: Harness) => Promise<void>,
  options: Parameters<typeof startHarness>[0] = {},
  authOptions: Parameters<typeof startHarness>[1] = {},
  how: How = "cli",
): Promise<void> {
  const h = await startHarness(options, authOptions, how);
  try {
    await fn(h);
  } finally {
    await h.close();
  }
}
