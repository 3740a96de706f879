// The deployment client in-process, against the test deployment: what other commands (e.g.
// `subs agent tools` with [remote]) rely on when they call it directly.
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import { SubsError } from "../../src/errors.ts";
import { silentReporter } from "../../src/report.ts";
import { DeploymentClient } from "../../src/remote/client.ts";
import { startDeployment, type RunningDeployment } from "../support/deployment/server.ts";
import { within } from "../support/wait.ts";

const TOKEN = "deploy-api-token";
let deployment: RunningDeployment;
before(async () => {
  deployment = await startDeployment({ token: TOKEN });
});
after(() => deployment.close());

const client = (env: Record<string, string> = { SUBSTRUCTURE_TOKEN: TOKEN }) =>
  new DeploymentClient({
    remote: { url: deployment.url, tokenEnv: "SUBSTRUCTURE_TOKEN" },
    ctx: { env, fetch: globalThis.fetch, signal: new AbortController().signal },
    reporter: silentReporter,
    retry: { attempts: 3, baseDelayMs: 1, maxDelayMs: 1 },
  });

describe("DeploymentClient", () => {
  test("listTools: undeclared is not_applied, unauthorized is needs_login", async () => {
    const c = client();
    await assert.rejects(c.listTools("nowhere"), (e: SubsError) => e.code === "not_applied" && e.kind === "failed");
    await c.putConnection("declared", { url: "https://a.example/mcp", prefix_tools: true });
    await assert.rejects(c.listTools("declared"), (e: SubsError) => e.code === "needs_login" && e.kind === "needs_login");
  });

  test("a caller's signal stops a slow request and its retries", async () => {
    // Held until the test ends: only the caller's signal can end the request.
    let release!: () => void;
    deployment.fault({ path: "/v1/mcp/slow/tools", kind: "delay", until: new Promise<void>((r) => (release = r)), times: 1 });
    const c = client();
    await c.putConnection("slow", { url: "https://a.example/mcp", prefix_tools: true });
    try {
      await within(
        assert.rejects(c.listTools("slow", { signal: AbortSignal.timeout(100) }), (e: SubsError) => e.code === "timed_out"),
        "the caller's signal to stop the held request",
      );
    } finally {
      release();
      deployment.clearFaults();
    }
  });

  test("SUBS_HTTP_TIMEOUT is each attempt's deadline, as for authorization servers", async () => {
    // Each attempt held until the test ends: only the per-attempt deadline can end them.
    let release!: () => void;
    deployment.fault({ method: "GET", path: "/v1/agents", kind: "delay", until: new Promise<void>((r) => (release = r)), times: 3 });
    const before = deployment.requests.length;
    try {
      await within(
        assert.rejects(client({ SUBSTRUCTURE_TOKEN: TOKEN, SUBS_HTTP_TIMEOUT: "0.2" }).listAgents(), (e: SubsError) => e.code === "deployment_unreachable" && /no answer within 0\.2s; 3 attempts/.test(e.message)),
        "three attempts, each ended at SUBS_HTTP_TIMEOUT",
      );
      assert.deepEqual(deployment.requests.slice(before), Array(3).fill("GET /v1/agents"));
    } finally {
      release();
      deployment.clearFaults();
    }
  });

  test("retries a 503 until it succeeds; a 400 is not retried", async () => {
    deployment.fault({ method: "GET", path: "/v1/agents", kind: "status", status: 503, times: 2 });
    const before = deployment.requests.filter((r) => r === "GET /v1/agents").length;
    assert.deepEqual(await client().listAgents(), []);
    assert.equal(deployment.requests.filter((r) => r === "GET /v1/agents").length - before, 3);
    const writes = deployment.requests.length;
    await assert.rejects(client().putConnection("bad", { url: "ftp://x", prefix_tools: true }), (e: SubsError) => e.code === "invalid_request");
    assert.equal(deployment.requests.length - writes, 1);
  });

  test("without the variable nothing is sent; the message names it", () => {
    assert.throws(() => client({}), /\$SUBSTRUCTURE_TOKEN is not set/);
  });
});
