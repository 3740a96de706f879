// A name that does not resolve is not retried: it fails at once, naming the host.
// Names under `.invalid` never resolve (RFC 6761 §6.4), and the resolver says so without the network.
import assert from "node:assert/strict";
import { test } from "node:test";
import { SubsError } from "../../src/errors.ts";
import { DeploymentClient } from "../../src/remote/client.ts";
import { ensureBuilt, runCli, runInProcess } from "../support/cli.ts";
import { refusedUrl } from "../support/ports.ts";
import { projectsForThisFile } from "../support/projects.ts";

const project = projectsForThisFile("dns");

test("the deployment client: one attempt for a name that does not resolve, no retry warning", async () => {
  let attempts = 0;
  const warnings: string[] = [];
  const client = new DeploymentClient({
    remote: { url: "https://deploy.subs-test.invalid/", tokenEnv: "SUBSTRUCTURE_TOKEN" },
    ctx: {
      env: { SUBSTRUCTURE_TOKEN: "t" },
      fetch: (input, init) => {
        attempts++;
        return globalThis.fetch(input, init);
      },
      signal: new AbortController().signal,
    },
    reporter: { info: () => {}, warn: (m) => warnings.push(m), progress: () => ({ update: () => {}, succeed: () => {}, fail: () => {} }) },
    // Room for three retries: the count of requests shows there was none.
    retry: { attempts: 4, baseDelayMs: 1, maxDelayMs: 1 },
  });
  await assert.rejects(client.listAgents(), (e: SubsError) => {
    assert.equal(e.code, "deployment_unreachable");
    assert.match(e.message, /^cannot resolve deploy\.subs-test\.invalid\b/);
    assert.match(e.message, /ENOTFOUND|EAI_AGAIN/);
    return true;
  });
  assert.equal(attempts, 1);
  assert.deepEqual(warnings, []);
});

test("a deployment connection refused is still retried (only DNS failures are not)", async () => {
  let attempts = 0;
  const client = new DeploymentClient({
    remote: { url: await refusedUrl("/"), tokenEnv: "SUBSTRUCTURE_TOKEN" },
    ctx: {
      env: { SUBSTRUCTURE_TOKEN: "t" },
      fetch: (input, init) => {
        attempts++;
        return globalThis.fetch(input, init);
      },
      signal: new AbortController().signal,
    },
    reporter: { info: () => {}, warn: () => {}, progress: () => ({ update: () => {}, succeed: () => {}, fail: () => {} }) },
    retry: { attempts: 3, baseDelayMs: 1, maxDelayMs: 1 },
  });
  await assert.rejects(client.listAgents(), (e: SubsError) => e.code === "deployment_unreachable" && /3 attempts/.test(e.message));
  assert.equal(attempts, 3);
});

test("subs apply with [remote] on an unresolvable host: exit 1 at once, `cannot resolve <host>`, no retry", async () => {
  const dir = project(`[remote]\nurl = "https://deploy.subs-test.invalid"\n\n[mcp.docs]\nurl = "https://docs.example/mcp"\n`);
  ensureBuilt();
  const r = await runCli(["apply"], { cwd: dir, env: { SUBSTRUCTURE_TOKEN: "t" } });
  assert.equal(r.code, 1, r.stderr);
  assert.match(r.stderr, /error: cannot resolve deploy\.subs-test\.invalid/);
  // A retry says so on stderr; a wait for something else would meet runCli's deadline, which kills the run.
  assert.doesNotMatch(r.stderr, /retrying/);
});

test("an MCP server on an unresolvable host: `cannot resolve <host>`", async () => {
  const dir = project(`[mcp.docs]\nurl = "https://mcp.subs-test.invalid/mcp"\n`);
  const r = await runInProcess(["mcp", "login", "docs", "--no-browser"], { cwd: dir });
  assert.equal(r.code, 1, r.stderr);
  assert.match(r.stderr, /error: docs: cannot resolve mcp\.subs-test\.invalid \((ENOTFOUND|EAI_AGAIN)\)/);
});
