// One behaviour table for every place credentials can live (src/backend/): the same file, the same
// state (`alpha` authorized, `beta` declared without a credential, behind OAuth), the same
// operations, run against this machine (a real db, real MCP and authorization servers) and against
// a deployment through the protocol client: the reference deployment (test/support/deployment) and
// a real `subs deployment serve` process (test/support/deployment-targets.ts) on each store, SQLite
// and Postgres: every operation reads or writes what the process keeps there (declarations,
// credentials, consents). Every deployment must answer as the others do; where a deployment and
// this machine differ, the table says so.
import assert from "node:assert/strict";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { after, before, describe, it } from "node:test";
import { backendFor, type Backend } from "../src/backend/choose.ts";
import { loadConfig } from "../src/config/load.ts";
import { SubsError } from "../src/errors.ts";
import { hasChanges } from "../src/remote/plan.ts";
import { silentProgress, silentReporter, type Reporter } from "../src/report.ts";
import { consentingBrowser } from "./support/browser.ts";
import { seedCredentials } from "./support/credentials.ts";
import { testContext } from "./support/cli.ts";
import { STORES } from "./support/deployment-serve.ts";
import { targets, type Target, type TargetDeployment } from "./support/deployment-targets.ts";
import { annotatedTool, startMcpServer, type RunningMcpServer } from "./support/mcp-server.ts";
import { startAuthServer, type RunningAuthServer } from "./support/oauth-server.ts";

type Kind = "local" | "deployment";
type Urls = { alpha: string; beta: string };

type Place = {
  name: string;
  kind: Kind;
  /** The file's first lines: where the credentials live. */
  header: () => string;
  /** The API token the place asks for, if any. */
  token: () => string | undefined;
  /** Leaves `alpha` authorized and `beta` declared without a credential, and nothing else. */
  seed: (dir: string, urls: Urls) => Promise<void>;
  /** Something the place holds for `gone`, which the file does not declare. */
  holdUndeclared: (dir: string) => Promise<void>;
};

/** Each case's outcome, per kind of place: every deployment answers alike. */
type Case = {
  name: string;
  /** Lines added to the file for this case. */
  file?: string;
  /** Run before the backend is made (after the seed). */
  prepare?: (place: Place, dir: string) => Promise<void>;
  run: (backend: Backend, reporter: RecordingReporter) => Promise<unknown>;
  expect: Record<Kind, unknown>;
};

type RecordingReporter = Reporter & { warnings: string[] };
const recordingReporter = (): RecordingReporter => {
  const warnings: string[] = [];
  return { ...silentReporter, warn: (message) => void warnings.push(message), progress: () => silentProgress, warnings };
};

let server: RunningMcpServer;
let auth: RunningAuthServer;
let guarded: RunningMcpServer;
const deployments = new Map<Target, TargetDeployment>();

const local: Place = {
  name: "local",
  kind: "local",
  header: () => "",
  token: () => undefined,
  seed: (dir, urls) => seedCredentials(path.join(dir, "substructure.db"), [{ id: "alpha", url: urls.alpha }]),
  holdUndeclared: (dir) => seedCredentials(path.join(dir, "substructure.db"), [{ id: "gone", url: "https://gone.example/mcp" }]),
};

function deploymentPlace(target: Target): Place {
  const d = () => deployments.get(target)!;
  const state = async (connections: Array<{ id: string; url: string }>) => {
    const put = await d().call("PUT", "/v1/state", { connections: connections.map((c) => ({ ...c, prefix_tools: true })), agents: [], prune: true });
    assert.equal(put.status, 200, JSON.stringify(put.body));
  };
  return {
    name: target.name,
    kind: "deployment",
    header: () => `[remote]\nurl = "${d().url}"\n\n`,
    token: () => d().token,
    seed: async (_dir, urls) => {
      await state([]);
      await state(Object.entries(urls).map(([id, url]) => ({ id, url })));
      await d().hold("alpha", { url: urls.alpha, tokens: { access_token: "at", token_type: "Bearer" }, authorizedAt: Date.now(), expiresAt: null });
    },
    holdUndeclared: async () => d().declare("gone", "https://gone.example/mcp"),
  };
}

/** Every row of a listing, wherever it came from. */
const rowsOf = (listing: Awaited<ReturnType<Backend["list"]>>) => (listing.target === "local" ? listing.statuses : listing.entries);

const cases: Case[] = [
  {
    name: "list: every declared connection, usable only where a credential is held",
    run: async (b) => rowsOf(await b.list({})).map((r) => [r.id, r.status, r.usable]),
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
    name: "list --check: each connection probed where its credential is; a deployment asks nothing of a server it holds none for",
    run: async (b) => {
      const listing = await b.list({ check: { timeoutMs: 10_000 } });
      return [...(listing.checks ?? new Map())].map(([id, c]) => [id, c.reachable, c.authorized, c.tools, c.problem?.code ?? null]).sort();
    },
    expect: {
      local: [
        ["alpha", true, true, 2, null],
        ["beta", true, false, null, "needs_login"],
      ],
      deployment: [
        ["alpha", true, true, 2, null],
        ["beta", null, false, null, "needs_login"],
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
    run: (b) =>
      b.loginTargets({ ids: ["alhpa"], all: false }).then(
        () => "resolved",
        (e: SubsError) => [e.kind, e.message],
      ),
    expect: {
      local: ["usage", "`alhpa` is not declared in substructure.toml"],
      deployment: ["usage", "`alhpa` is not declared in substructure.toml"],
    },
  },
  {
    name: "authorize: a consent through the place's own flow (its loopback, or the deployment's redirect URI), after which the connection is usable",
    run: async (b) => {
      const authorized = await b.authorize(connection("beta"), { browser: true, timeoutMs: 30_000 });
      const beta = rowsOf(await b.list({})).find((r) => r.id === "beta");
      return [authorized.result, authorized.id, beta?.status, beta?.usable];
    },
    expect: { local: ["authorized", "beta", "authorized", true], deployment: ["authorized", "beta", "authorized", true] },
  },
  {
    name: "tools: the server's list, with the credential the place holds",
    run: async (b) => (await b.tools(connection("alpha"), { timeoutMs: 5000, requestTimeoutMs: 5000, browser: false })).map((t) => t.name),
    expect: { local: ["search", "rm"], deployment: ["search", "rm"] },
  },
  {
    name: "tools of a connection without a credential: needs a login, and no browser is opened",
    run: (b) =>
      b.tools(connection("beta"), { timeoutMs: 5000, requestTimeoutMs: 5000, browser: false }).then(
        () => "resolved",
        (e: SubsError) => [e.kind, e.code],
      ),
    expect: { local: ["needs_login", "needs_login"], deployment: ["needs_login", "needs_login"] },
  },
  {
    name: "tool source (agent tools): the same list",
    run: async (b) => {
      const source = b.toolSource({ timeoutMs: 5000 });
      await source.ready?.();
      return (await source.listTools(connection("alpha"), new AbortController().signal)).map((t) => t.name);
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
    name: "the lock where agents are served, without a lock file: locally the file's (none to compare); a deployment's matches",
    run: async (b) => {
      const step = await b.servedLock(undefined);
      return step === undefined ? "the file's" : step.action;
    },
    expect: { local: "the file's", deployment: "unchanged" },
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
    name: "apply: what the file no longer declares goes, once; a second apply has nothing to do",
    prepare: (place, dir) => place.holdUndeclared(dir),
    run: async (b) => {
      const applyOnce = async () => {
        const applied = await b.apply({ dryRun: false, confirm: async () => {} });
        return applied.target === "local" ? applied.result.changes.map((c) => c.id) : applied.plan.connections.filter((c) => c.action !== "unchanged").map((c) => c.id);
      };
      const first = await applyOnce();
      const second = await applyOnce();
      const listing = await b.list({});
      const held = listing.target === "local" ? listing.undeclared.map((c) => c.id) : listing.entries.map((e) => e.id);
      return [first, second, held.includes("gone")];
    },
    expect: { local: [["gone"], [], false], deployment: [["gone"], [], false] },
  },
  {
    name: "forget: locally at once; a deployment drops it at the next apply",
    run: async (b) => {
      const answer = await b.forget("alpha");
      return [answer, rowsOf(await b.list({})).find((r) => r.id === "alpha")?.usable];
    },
    expect: { local: ["done", false], deployment: ["deferred", true] },
  },
  {
    name: "warnings for a command that only looks: a deployment names the `auth` it would refuse",
    file: `[mcp.gamma]\nurl = "https://gamma.example/mcp"\nauth = { token_env = "GAMMA_TOKEN" }\n`,
    run: async (b, reporter) => {
      b.warnRefusals(["gamma"]);
      return reporter.warnings.some((w) => /\[mcp\.gamma\] has `auth`/.test(w));
    },
    expect: { local: false, deployment: true },
  },
];

let current: { config: ReturnType<typeof loadConfig> };

function connection(id: string) {
  const found = current.config.connections.find((c) => c.id === id);
  assert.ok(found, `${id} is declared`);
  return found;
}

const deploymentTargets = targets(STORES);
before(async () => {
  server = await startMcpServer({ tools: [annotatedTool("search", { readOnlyHint: true }), annotatedTool("rm")] });
  auth = await startAuthServer();
  guarded = await startMcpServer({ tools: [annotatedTool("guarded")], oauth: { authServer: auth } });
});

after(async () => {
  await Promise.all([server.close(), guarded.close(), auth.close()]);
});

for (const place of [local, ...deploymentTargets.map(deploymentPlace)]) {
  describe(`the backend, ${place.name}`, () => {
    const target = deploymentTargets.find((t) => t.name === place.name);
    if (target) {
      before(async () => deployments.set(target, await target.start({ pollInterval: 0.05 })));
      after(() => deployments.get(target)?.close());
    }
    for (const c of cases) {
      it(c.name, async () => {
        const dir = mkdtempSync(path.join(tmpdir(), "subs-backend-"));
        try {
          // alpha: a server that takes the credential the place holds; beta: one behind OAuth.
          const urls = { alpha: `${server.url}?for=alpha`, beta: guarded.url };
          writeFileSync(path.join(dir, "substructure.toml"), `${place.header()}[mcp.alpha]\nurl = "${urls.alpha}"\n\n[mcp.beta]\nurl = "${urls.beta}"\n${c.file ? `\n${c.file}` : ""}`);
          await place.seed(dir, urls);
          await c.prepare?.(place, dir);
          const token = place.token();
          const { ctx } = testContext({ cwd: dir, env: token ? { SUBSTRUCTURE_TOKEN: token } : {}, openBrowser: consentingBrowser() });
          const config = loadConfig({ env: ctx.env, cwd: dir });
          current = { config };
          const reporter = recordingReporter();
          const backend = await backendFor({ ctx, config, reporter });
          assert.equal(backend.place.kind, place.kind);
          try {
            assert.deepEqual(await c.run(backend, reporter), c.expect[place.kind]);
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
