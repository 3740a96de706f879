// CI can pin where its secrets go. SUBS_ALLOWED_REMOTE names the deployment the
// deployment token may go to, SUBS_ALLOWED_TOKEN_HOSTS the hosts static tokens may go to; a file
// that disagrees (a pull request that changed [remote].url or a static connection's url) is
// refused, exit 2, before any request. The deployments (the reference and a real `subs deployment
// serve`) and the MCP servers record every request.
import assert from "node:assert/strict";
import { writeFileSync } from "node:fs";
import path from "node:path";
import { after, afterEach, before, beforeEach, describe, it } from "node:test";
import { runCli, runInProcess } from "../support/cli.ts";
import { targets, type TargetDeployment } from "../support/deployment-targets.ts";
import { annotatedTool, startMcpServer, type RunningMcpServer } from "../support/mcp-server.ts";
import { projectsForThisFile } from "../support/projects.ts";

const STATIC_TOKEN = "static-mcp-token-SECRET";
const project = projectsForThisFile("pins");

for (const target of targets()) describe(`SUBS_ALLOWED_REMOTE: where the deployment token may go (${target.name})`, () => {
  let deployment: TargetDeployment;
  let dir: string;
  /** The /v1 requests the deployment has answered so far. */
  let answered = 0;
  before(async () => {
    deployment = await target.start();
  });
  after(() => deployment.close());
  beforeEach(async () => {
    dir = project(`[remote]\nurl = "${deployment.url}"\n\n[mcp.sentry]\nurl = "https://mcp.sentry.dev/mcp"\n`);
    answered = (await deployment.seen()).length;
  });
  /** The requests since the test began. */
  const sent = async () => (await deployment.seen()).slice(answered);
  const token = () => deployment.token;

  it("subs apply, another deployment allowed: exit 2 naming the variable and the file's line, no request sent", async () => {
    const r = await runCli(["apply"], { cwd: dir, env: { SUBSTRUCTURE_TOKEN: token(), SUBS_ALLOWED_REMOTE: "https://deploy.example.com" } });
    assert.equal(r.code, 2, r.stderr);
    assert.match(r.stderr, /substructure\.toml:2:\d+: \[remote\]\.url is http:\/\/127\.0\.0\.1:\d+, which \$SUBS_ALLOWED_REMOTE does not allow \(https:\/\/deploy\.example\.com\); refusing to send \$SUBSTRUCTURE_TOKEN there/);
    assert.deepEqual(await sent(), []);
    assert.ok(!(r.stdout + r.stderr).includes(token()));
  });

  it("--json: code remote_not_allowed", async () => {
    const r = await runInProcess(["apply", "--json"], { cwd: dir, env: { SUBSTRUCTURE_TOKEN: token(), SUBS_ALLOWED_REMOTE: "https://deploy.example.com" } });
    assert.equal(r.code, 2, r.stderr);
    assert.equal(JSON.parse(r.stdout).error.code, "remote_not_allowed");
    assert.deepEqual(await sent(), []);
  });

  it("the deployment allowed (its url, with or without a trailing slash, among others): apply works", async () => {
    for (const allowed of [deployment.url, `${deployment.url}/`, `https://other.example, ${deployment.url}`]) {
      const r = await runInProcess(["apply"], { cwd: dir, env: { SUBSTRUCTURE_TOKEN: token(), SUBS_ALLOWED_REMOTE: allowed } });
      assert.equal(r.code, 0, `${allowed}: ${r.stderr}`);
    }
    assert.ok((await sent()).length > 0);
    assert.ok(deployment.connections.has("sentry"));
  });

  it("an entry with a path pins it: the same origin outside that path is refused, before any request; so is a path that climbs out of it (.., %2e%2e, %2f)", async () => {
    const env = (allowed: string) => ({ SUBSTRUCTURE_TOKEN: token(), SUBS_ALLOWED_REMOTE: allowed });
    // The file's deployment is at the origin's root: an entry for /v1 (or /team) does not allow it.
    for (const allowed of [`${deployment.url}/v1`, `${deployment.url}/team/`]) {
      const r = await runInProcess(["apply", "--json"], { cwd: dir, env: env(allowed) });
      assert.equal(r.code, 2, `${allowed}: ${r.stderr}`);
      assert.equal(JSON.parse(r.stdout).error.code, "remote_not_allowed");
      assert.match(r.stderr, /\[remote\]\.url is http:\/\/127\.0\.0\.1:\d+, which \$SUBS_ALLOWED_REMOTE does not allow \(http:\/\/127\.0\.0\.1:\d+\/(v1|team)\/\)/);
    }
    for (const url of [`${deployment.url}/team/../admin`, `${deployment.url}/team/%2e%2e/admin`, `${deployment.url}/team/..%2fadmin`, `${deployment.url}/team/%2E%2E%5Cadmin`, `${deployment.url}/teams`, `${deployment.url}/team?x=1`]) {
      writeFileSync(path.join(dir, "substructure.toml"), `[remote]\nurl = "${url}"\n`);
      const r = await runInProcess(["apply"], { cwd: dir, env: env(`${deployment.url}/team`) });
      assert.equal(r.code, 2, `${url}: ${r.stderr}`);
      assert.match(r.stderr, /\$SUBS_ALLOWED_REMOTE does not allow/, url);
    }
    assert.deepEqual(await sent(), []);
  });

  it("every command that talks to the deployment refuses first: mcp login, mcp list, mcp tools, agent tools", async () => {
    writeFileSync(path.join(dir, "substructure.toml"), `[remote]\nurl = "${deployment.url}"\n\n[mcp.sentry]\nurl = "https://mcp.sentry.dev/mcp"\n\n[agent.a]\nmcp = ["sentry"]\n`);
    const env = { SUBSTRUCTURE_TOKEN: token(), SUBS_ALLOWED_REMOTE: "https://deploy.example.com" };
    for (const argv of [["mcp", "login", "sentry"], ["mcp", "list", "--check"], ["mcp", "tools", "sentry"], ["agent", "tools", "a"]]) {
      const r = await runInProcess(argv, { cwd: dir, env, openBrowser: async () => assert.fail("no browser") });
      assert.equal(r.code, 2, `${argv.join(" ")}: ${r.stderr}`);
      assert.match(r.stderr, /\$SUBS_ALLOWED_REMOTE does not allow/);
    }
    assert.deepEqual(await sent(), []);
  });

  it("set but empty allows no deployment; an entry that is not a url is a usage error", async () => {
    const empty = await runInProcess(["apply"], { cwd: dir, env: { SUBSTRUCTURE_TOKEN: token(), SUBS_ALLOWED_REMOTE: "" } });
    assert.equal(empty.code, 2, empty.stderr);
    assert.match(empty.stderr, /does not allow \(nothing: it is empty\)/);
    const bad = await runInProcess(["apply"], { cwd: dir, env: { SUBSTRUCTURE_TOKEN: token(), SUBS_ALLOWED_REMOTE: "deploy.example.com" } });
    assert.equal(bad.code, 2, bad.stderr);
    assert.match(bad.stderr, /SUBS_ALLOWED_REMOTE must list deployment urls/);
    assert.deepEqual(await sent(), []);
  });

  it("where the token is attached: a DeploymentClient for another deployment refuses, whatever built its config", async () => {
    const { DeploymentClient } = await import("../../src/remote/client.ts");
    const { silentReporter } = await import("../../src/report.ts");
    assert.throws(
      () =>
        new DeploymentClient({
          remote: { url: deployment.url, tokenEnv: "SUBSTRUCTURE_TOKEN" },
          ctx: { env: { SUBSTRUCTURE_TOKEN: token(), SUBS_ALLOWED_REMOTE: "https://deploy.example.com" }, fetch: globalThis.fetch, signal: new AbortController().signal },
          reporter: silentReporter,
        }),
      (error: Error & { code?: string }) => error.code === "remote_not_allowed",
    );
  });
});

describe("SUBS_ALLOWED_TOKEN_HOSTS: where static tokens may go", () => {
  let server: RunningMcpServer;
  let dir: string;
  before(async () => {
    server = await startMcpServer({ tools: [annotatedTool("search")] });
    dir = project(`[mcp.gh]\nurl = "${server.url}"\nauth = { token_env = "GH_TOKEN" }\n\n[agent.a]\nmcp = ["gh"]\n`);
  });
  after(() => server.close());
  beforeEach(() => {
    server.requests.length = 0;
    server.authorizations.length = 0;
  });

  it("a host not listed: mcp tools, mcp call, mcp list --check and agent tools refuse (exit 2) before any request", async () => {
    const env = { GH_TOKEN: STATIC_TOKEN, SUBS_ALLOWED_TOKEN_HOSTS: "api.githubcopilot.com,mcp.example.com" };
    for (const argv of [["mcp", "tools", "gh"], ["mcp", "call", "gh", "search"], ["mcp", "list", "--check"], ["agent", "tools", "a"]]) {
      const r = await runInProcess(argv, { cwd: dir, env });
      assert.equal(r.code, 2, `${argv.join(" ")}: ${r.stderr}`);
      assert.match(r.stderr, /substructure\.toml:2:\d+: \[mcp\.gh\] would send \$GH_TOKEN to 127\.0\.0\.1:\d+, which \$SUBS_ALLOWED_TOKEN_HOSTS does not list \(api\.githubcopilot\.com, mcp\.example\.com\); refusing/);
      assert.doesNotMatch(r.stdout + r.stderr, /SECRET/);
    }
    assert.deepEqual(server.requests, []);
    assert.deepEqual(server.authorizations, []);
  });

  it("the real CLI: the same refusal, --json code token_host_not_allowed", async () => {
    const r = await runCli(["mcp", "tools", "gh", "--json"], { cwd: dir, env: { GH_TOKEN: STATIC_TOKEN, SUBS_ALLOWED_TOKEN_HOSTS: "api.githubcopilot.com" } });
    assert.equal(r.code, 2, r.stderr);
    assert.equal(JSON.parse(r.stdout).error.code, "token_host_not_allowed");
    assert.deepEqual(server.requests, []);
  });

  it("the host listed (with or without its port, or as a url): the token goes there", async () => {
    const port = new URL(server.url).port;
    for (const allowed of ["127.0.0.1", `api.githubcopilot.com 127.0.0.1:${port}`, `http://127.0.0.1:${port}`]) {
      const r = await runInProcess(["mcp", "tools", "gh", "--json"], { cwd: dir, env: { GH_TOKEN: STATIC_TOKEN, SUBS_ALLOWED_TOKEN_HOSTS: allowed } });
      assert.equal(r.code, 0, `${allowed}: ${r.stderr}`);
    }
    assert.ok(server.authorizations.every((a) => a === `Bearer ${STATIC_TOKEN}`) && server.authorizations.length > 0);
    const otherPort = await runInProcess(["mcp", "tools", "gh"], { cwd: dir, env: { GH_TOKEN: STATIC_TOKEN, SUBS_ALLOWED_TOKEN_HOSTS: "127.0.0.1:1" } });
    assert.equal(otherPort.code, 2, otherPort.stderr);
  });

  it("OAuth connections are not pinned by it, and unset variables change nothing", async () => {
    const oauthDir = project(`[mcp.open]\nurl = "${server.url}"\n`);
    const r = await runInProcess(["mcp", "tools", "open", "--json"], { cwd: oauthDir, env: { SUBS_ALLOWED_TOKEN_HOSTS: "api.githubcopilot.com" } });
    assert.equal(r.code, 0, r.stderr);
    const free = await runInProcess(["mcp", "tools", "gh", "--json"], { cwd: dir, env: { GH_TOKEN: STATIC_TOKEN } });
    assert.equal(free.code, 0, free.stderr);
  });

  it("where the token is attached: openConnection refuses a connection whose host is not listed", async () => {
    const { openConnection } = await import("../../src/mcp/open.ts");
    const { loadConfig } = await import("../../src/config/load.ts");
    const config = loadConfig({ env: {}, cwd: dir });
    await assert.rejects(
      openConnection({ ctx: { env: { GH_TOKEN: STATIC_TOKEN, SUBS_ALLOWED_TOKEN_HOSTS: "" }, fetch: globalThis.fetch, now: Date.now }, config, connection: config.connections[0]! }),
      (error: Error & { code?: string }) => error.code === "token_host_not_allowed",
    );
    assert.deepEqual(server.requests, []);
  });
});
