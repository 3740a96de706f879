// One behaviour table for every place credentials can live (src/backend/): the same file, the same
// state (`alpha` authorized, `beta` declared without a credential), the same operations, run
// against this machine (a real db, a real MCP server) and against the test deployment
// (test/support/deployment) through the protocol client. A deployment server implementing the
// Backend on its side joins the table as one more place.
import assert from "node:assert/strict";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { after, before, describe, it } from "node:test";
import { backendFor, type Backend } from "../src/backend/choose.ts";
import { loadConfig } from "../src/config/load.ts";
import { SubsError } from "../src/errors.ts";
import { hasChanges } from "../src/remote/plan.ts";
import { silentReporter } from "../src/report.ts";
import { seedCredentials } from "./support/credentials.ts";
import { testContext } from "./support/cli.ts";
import { startDeployment, type RunningDeployment } from "./support/deployment/server.ts";
import { annotatedTool, startMcpServer, type RunningMcpServer } from "./support/mcp-server.ts";

const TOKEN = "deploy-api-token-SECRET";

type Place = {
  name: "local" | "deployment";
  /** The file's first lines: where the credentials live. */
  header: () => string;
  /** Leaves `alpha` authorized and `beta` declared without a credential. */
  seed: (dir: string, urls: { alpha: string; beta: string }) => Promise<void>;
};

let server: RunningMcpServer;
let deployment: RunningDeployment;

const places: Place[] = [
  {
    name: "local",
    header: () => "",
    seed: (dir, urls) => seedCredentials(path.join(dir, "substructure.db"), [{ id: "alpha", url: urls.alpha }]),
  },
  {
    name: "deployment",
    header: () => `[remote]\nurl = "${deployment.url}"\n\n`,
    seed: async (_dir, urls) => {
      deployment.connections.clear();
      deployment.credentials.clear();
      for (const [id, url] of Object.entries(urls)) deployment.connections.set(id, { id, url, prefix_tools: true });
      deployment.credentials.set("alpha", { url: urls.alpha, tokens: { access_token: "at", token_type: "Bearer" }, authorizedAt: Date.now(), expiresAt: null });
    },
  },
];

/** The operations, each with what every place must answer; `refused` where a place cannot do it. */
const cases: Array<{ name: string; run: (backend: Backend) => Promise<unknown>; expect: Record<Place["name"], unknown> }> = [
  {
    name: "list: every declared connection, usable only where a credential is held",
    run: async (b) => {
      const listing = await b.list({});
      const rows = listing.target === "local" ? listing.statuses : listing.entries;
      return rows.map((r) => [r.id, r.status, r.usable]);
    },
    expect: {
      local: [
        ["alpha", "authorized", true],
        ["beta", "needs_login", false],
      ],
      deployment: [
        ["alpha", "authorized", true],
        ["beta", "needs_login", false],
      ],
    },
  },
  {
    name: "login --all: the connections without a usable credential",
    run: async (b) => (await b.loginTargets({ ids: [], all: true })).map((c) => c.id),
    expect: { local: ["beta"], deployment: ["beta"] },
  },
  {
    name: "login of an undeclared id: the same usage error",
    run: (b) => b.loginTargets({ ids: ["alhpa"], all: false }).then(
      () => "resolved",
      (e: SubsError) => [e.kind, e.message],
    ),
    expect: {
      local: ["usage", "`alhpa` is not declared in substructure.toml"],
      deployment: ["usage", "`alhpa` is not declared in substructure.toml"],
    },
  },
  {
    name: "tools: the server's list, with the credential the place holds",
    run: async (b) => (await b.tools(connection(b, "alpha"), { timeoutMs: 5000, requestTimeoutMs: 5000, browser: false })).map((t) => t.name),
    expect: { local: ["search", "rm"], deployment: ["search", "rm"] },
  },
  {
    name: "tool source (agent tools): the same list",
    run: async (b) => {
      const source = b.toolSource({ timeoutMs: 5000 });
      await source.ready?.();
      return (await source.listTools(connection(b, "alpha"), new AbortController().signal)).map((t) => t.name);
    },
    expect: { local: ["search", "rm"], deployment: ["search", "rm"] },
  },
  {
    name: "call: a tool called locally; a deployment refuses (no call endpoint, the credential stays there)",
    run: (b) =>
      b.call({ id: "alpha", tool: "search", args: {}, timeoutMs: 5000, requestTimeoutMs: 5000, browser: false }).then(
        (r) => ["answered", r.isError === true],
        (e: SubsError) => ["refused", e.kind, e.code],
      ),
    expect: { local: ["answered", false], deployment: ["refused", "refused", "remote_unsupported"] },
  },
  {
    name: "apply --dry-run: the place already matches the file",
    run: async (b) => {
      const applied = await b.apply({ dryRun: true, confirm: async () => assert.fail("a dry run asks nothing") });
      return applied.target === "local" ? applied.result.changes.length > 0 : hasChanges(applied.plan);
    },
    expect: { local: false, deployment: false },
  },
  {
    name: "forget: locally at once; a deployment drops it at the next apply",
    run: async (b) => {
      const answer = await b.forget("alpha");
      const listing = await b.list({});
      const rows = listing.target === "local" ? listing.statuses : listing.entries;
      return [answer, rows.find((r) => r.id === "alpha")?.usable];
    },
    expect: { local: ["done", false], deployment: ["deferred", true] },
  },
];

function connection(backend: Backend, id: string) {
  const found = current.config.connections.find((c) => c.id === id);
  assert.ok(found, `${id} is declared (${backend.place.kind})`);
  return found;
}

let current: { config: ReturnType<typeof loadConfig> };

before(async () => {
  server = await startMcpServer({ tools: [annotatedTool("search", { readOnlyHint: true }), annotatedTool("rm")] });
  deployment = await startDeployment({ token: TOKEN });
});

after(async () => {
  await Promise.all([server.close(), deployment.close()]);
});

for (const place of places) {
  describe(`the backend, ${place.name}`, () => {
    for (const c of cases) {
      it(c.name, async () => {
        const dir = mkdtempSync(path.join(tmpdir(), `subs-backend-${place.name}-`));
        try {
          // Two urls of one server: a credential is bound to its url, so each id has its own.
          const urls = { alpha: `${server.url}?for=alpha`, beta: `${server.url}?for=beta` };
          writeFileSync(path.join(dir, "substructure.toml"), `${place.header()}[mcp.alpha]\nurl = "${urls.alpha}"\n\n[mcp.beta]\nurl = "${urls.beta}"\n`);
          await place.seed(dir, urls);
          const { ctx } = testContext({ cwd: dir, env: { SUBSTRUCTURE_TOKEN: TOKEN } });
          const config = loadConfig({ env: ctx.env, cwd: dir });
          current = { config };
          const backend = await backendFor({ ctx, config, reporter: silentReporter });
          assert.equal(backend.place.kind, place.name);
          try {
            assert.deepEqual(await c.run(backend), c.expect[place.name]);
          } finally {
            backend.close();
          }
        } finally {
          rmSync(dir, { recursive: true, force: true });
        }
      });
    }
  });
}
