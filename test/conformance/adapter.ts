// The client the MCP conformance harness runs (`conformance client --command "<this> " ...`; see
// docs/conformance.md). The harness appends the scenario's MCP server URL as the last argument and
// names the scenario in $MCP_CONFORMANCE_SCENARIO (scenario data, e.g. pre-registered client
// credentials, in $MCP_CONFORMANCE_CONTEXT). We do what a user would: write a substructure.toml
// declaring that server, `subs mcp login` it with a browser that follows the authorization
// server's redirects, then `subs mcp tools` and `subs mcp call` through the real bin/subs.cjs.
// The plain scenarios (initialize, tools_call, sse-retry) are servers that ask for no credential:
// the file declares just the url, and `subs mcp login` finds that it needs none, as for a user.
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { z } from "zod";
import { browserCommand } from "../support/browser.ts";
import { runCli, type RunResult } from "../support/cli.ts";

/** The connection id the adapter declares; any valid id would do. */
const ID = "conformance";
/**
 * The Client ID Metadata Document URL the harness's basic-cimd scenario expects as client_id
 * (conformance src/scenarios/client/auth/basic-cimd.ts). Declared in every scenario but
 * pre-registration, as the harness's reference client does: a server that does not advertise
 * client_id_metadata_document_supported must then get dynamic registration instead.
 */
const CIMD_URL = "https://conformance-test.local/client-metadata.json";
const CLIENT_SECRET_ENV = "CONFORMANCE_CLIENT_SECRET";
/**
 * The whole adapter ends inside the harness's per-scenario timeout (90 s, scripts/conformance.mjs):
 * on timeout the harness kills only the shell it started us with, so a late adapter would be left
 * running. Each subs step gets what remains of the budget, at most STEP_TIMEOUT_MS.
 */
const BUDGET_MS = 80_000;
const STEP_TIMEOUT_MS = 30_000;

/**
 * What a plain scenario's server expects beyond "list the tools, call each" (conformance
 * src/scenarios/client/{initialize,tools_call,sse-retry}.ts): `initialize` offers no tool at all
 * (it judges the handshake); `tools_call` judges add_numbers called with two numbers, so it gets
 * them, and its answer is checked too.
 */
type ToolPlan = { args?: Record<string, unknown>; expect?: RegExp };
const PLAIN_SCENARIOS: Record<string, { noTools?: true; tools?: Record<string, ToolPlan> }> = {
  initialize: { noTools: true },
  tools_call: { tools: { add_numbers: { args: { a: 2, b: 3 }, expect: /The sum of 2 and 3 is 5/ } } },
  "sse-retry": { tools: { test_reconnection: { expect: /Reconnection test completed successfully/ } } },
};

const PreRegistrationContext = z.object({ client_id: z.string().min(1), client_secret: z.string().min(1) });

export type AdapterStep = { argv: string[]; code: number; stdout: string; stderr: string };
export type AdapterReport = { scenario: string; serverUrl: string; exitCode: number; steps: AdapterStep[] };

function tomlString(value: string): string {
  return JSON.stringify(value); // a JSON string is a valid TOML basic string for these values
}

/** The substructure.toml a user would write for this scenario's server. */
export function configFor(serverUrl: string, scenario: string, contextJson: string | undefined): { toml: string; env: Record<string, string> } {
  const env: Record<string, string> = {};
  if (!scenario.startsWith("auth/")) return { toml: `[mcp.${ID}]\nurl = ${tomlString(serverUrl)}\n`, env };
  let oauth = `{ client_metadata_url = ${tomlString(CIMD_URL)} }`;
  if (scenario === "auth/pre-registration") {
    const context = PreRegistrationContext.parse(JSON.parse(contextJson ?? "null"));
    oauth = `{ client_id = ${tomlString(context.client_id)}, client_secret_env = ${tomlString(CLIENT_SECRET_ENV)} }`;
    env[CLIENT_SECRET_ENV] = context.client_secret;
  }
  const toml = `[mcp.${ID}]\nurl = ${tomlString(serverUrl)}\noauth = ${oauth}\n`;
  return { toml, env };
}

/** Tool names from `subs mcp tools <id> --json`: an array of tools, or an object holding one. */
export function toolNames(stdout: string): string[] {
  const Tool = z.object({ name: z.string() });
  const parsed: unknown = JSON.parse(stdout);
  const list = z.union([z.array(Tool), z.object({ tools: z.array(Tool) }).transform((o) => o.tools)]).parse(parsed);
  return list.map((t) => t.name);
}

export async function runAdapter(serverUrl: string, scenario: string, contextJson: string | undefined): Promise<AdapterReport> {
  const deadline = Date.now() + BUDGET_MS;
  const dir = mkdtempSync(path.join(tmpdir(), "subs-conformance-"));
  const steps: AdapterStep[] = [];
  const report = (exitCode: number): AdapterReport => ({ scenario, serverUrl, exitCode, steps });
  try {
    const { toml, env } = configFor(serverUrl, scenario, contextJson);
    const config = path.join(dir, "substructure.toml");
    writeFileSync(config, toml);
    // The tests' consenting browser: follows the authorization server's redirect (the harness's
    // authorization endpoint consents at once) to subs's loopback callback.
    const childEnv = { ...env, BROWSER: browserCommand(), NO_COLOR: "1" };
    const step = async (argv: string[]): Promise<RunResult> => {
      const result = await runCli([...argv, "--config", config], { cwd: dir, env: childEnv, timeoutMs: Math.max(1, Math.min(STEP_TIMEOUT_MS, deadline - Date.now())) });
      steps.push({ argv, ...result });
      process.stdout.write(`$ subs ${argv.join(" ")}\n${result.stdout}`);
      process.stderr.write(`$ subs ${argv.join(" ")} (exit ${result.code})\n${result.stderr}`);
      return result;
    };

    const login = await step(["mcp", "login", ID, "--timeout", "25"]);
    if (login.code !== 0) return report(login.code);
    const tools = await step(["mcp", "tools", ID, "--json"]);
    if (tools.code !== 0) return report(tools.code);
    const names = toolNames(tools.stdout);
    const plan = PLAIN_SCENARIOS[scenario];
    if (names.length === 0 && !plan?.noTools) {
      process.stderr.write("adapter: the server listed no tools to call\n");
      return report(1);
    }
    for (const name of names) {
      const tool = plan?.tools?.[name];
      const call = await step(["mcp", "call", ID, name, ...(tool?.args ? ["--args", JSON.stringify(tool.args)] : [])]);
      if (call.code !== 0) return report(call.code);
      if (tool?.expect && !tool.expect.test(call.stdout)) {
        process.stderr.write(`adapter: ${name} answered ${JSON.stringify(call.stdout.slice(0, 200))}, not ${tool.expect}\n`);
        return report(1);
      }
    }
    const missing = Object.keys(plan?.tools ?? {}).filter((name) => !names.includes(name));
    if (missing.length > 0) {
      process.stderr.write(`adapter: the server did not list ${missing.join(", ")}\n`);
      return report(1);
    }
    return report(0);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

const isMain = process.argv[1] && path.resolve(process.argv[1]) === fileURLToPath(import.meta.url);
if (isMain) {
  const serverUrl = process.argv.at(-1);
  const scenario = process.env.MCP_CONFORMANCE_SCENARIO;
  if (!serverUrl || process.argv.length < 3 || !scenario) {
    process.stderr.write("usage: MCP_CONFORMANCE_SCENARIO=<scenario> node --import tsx test/conformance/adapter.ts <server-url>\n");
    process.exit(2);
  }
  let result: AdapterReport;
  try {
    result = await runAdapter(serverUrl, scenario, process.env.MCP_CONFORMANCE_CONTEXT);
  } catch (error) {
    process.stderr.write(`adapter: ${error instanceof Error ? error.message : String(error)}\n`);
    result = { scenario, serverUrl, exitCode: 1, steps: [] };
  }
  // scripts/conformance.mjs reads these: the harness's suite mode records checks but not the
  // client's exit status, and a client that fails after the checks it triggered must still fail.
  const reportDir = process.env.SUBS_CONFORMANCE_REPORTS;
  if (reportDir) writeFileSync(path.join(reportDir, `${scenario.replaceAll("/", "__")}.json`), JSON.stringify(result, null, 2));
  process.exitCode = result.exitCode;
}
