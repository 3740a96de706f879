// `subs mcp login`, `subs mcp list` and `subs mcp tools` with [remote], end to end, against a real
// `subs deployment serve`, which runs the OAuth flow itself against a test authorization server and
// keeps the tokens. The first test (login, list and tools), --no-browser (no $BROWSER started) and
// Ctrl-C (a signal to the process) run the built CLI (bin/subs.cjs) as a person does, a
// redirect-following $BROWSER playing the person who consents; the rest run the same `run()` in
// this process with an opener that follows the URL as that $BROWSER does (consentingBrowser) and
// logs it as that $BROWSER does, where what is checked is the deployment's state and what is
// printed, not the process (a tenth of the CPU: a child costs a Node start-up and the bundle's load
// per run, and its $BROWSER another). The deployment itself stays a real process.
import assert from "node:assert/strict";
import { appendFileSync, existsSync, mkdtempSync, readFileSync, readdirSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { after, before, describe, test } from "node:test";
import { consentingBrowser } from "../support/browser.ts";
import { runAs, runCli, runInProcess, signalOnce, type How } from "../support/cli.ts";
import type { RunningDeployment } from "../support/deployment/server.ts";
import { callServed, startServedDeployment, FEATURE_STORES, type ServedDeployment } from "../support/deployment-serve.ts";
import { annotatedTool, startMcpServer, type RunningMcpServer } from "../support/mcp-server.ts";
import { startAuthServer, type RunningAuthServer } from "../support/oauth-server.ts";

const TOKEN = "deploy-api-token-SECRET";
type Timing = { pollInterval: number; authorizationTtl?: number };
/**
 * The same tests against a real `subs deployment serve` process (FEATURE_STORES: the consents and
 * credentials these make are held on both stores by test/deployment/store.test.ts, and on Postgres
 * end to end by oauth.e2e, replicas.e2e and chaos.e2e). The
 * reference deployment is not among them: it ran the same CLI paths a third time. The CLI's login
 * is also held to a second implementation of the protocol (test/remote-alt/login.e2e.test.ts) and
 * to the reference where a test makes it misbehave (test/hardening/).
 */
const DEPLOYMENTS: Record<string, (timing: Timing) => Promise<RunningDeployment>> = {
  ...Object.fromEntries(FEATURE_STORES.map((store) => [`subs deployment serve, ${store}`, (timing: Timing) => startServedDeployment({ store, ...timing })])),
};
/**
 * The deployment whose first tests run the built CLI. The store is the deployment's: the CLI's
 * requests, its $BROWSER and what it prints are the same on either, so on the other they are
 * `run()` in-process.
 */
const CLI_ON = "subs deployment serve, sqlite";
// A renamed deployment would leave no test on the built CLI.
assert.ok(CLI_ON in DEPLOYMENTS, `no deployment named ${CLI_ON}`);
const tokenOf = (d: RunningDeployment) => (d as { token?: string }).token ?? TOKEN;

let authServer: RunningAuthServer;
let mcp: RunningMcpServer;
let deployment: RunningDeployment;
const dirs: string[] = [];

before(async () => {
  authServer = await startAuthServer();
  mcp = await startMcpServer({
    tools: [annotatedTool("search_issues", { readOnlyHint: true }), annotatedTool("delete_issue", { destructiveHint: true })],
    oauth: { authServer },
  });
});
after(async () => {
  await mcp.close();
  await authServer.close();
  dirs.forEach((d) => rmSync(d, { recursive: true, force: true }));
});

/**
 * `cli`: every run of this project is the built CLI as a child, its $BROWSER the redirect-following
 * script logging each URL to `log`; else `run()` in-process, its opener consentingBrowser() after
 * logging the URL to `log` as that script does (so "no browser was started" reads the same file).
 */
function project(body: string, how: How = "in-process") {
  const dir = mkdtempSync(path.join(tmpdir(), "subs-remote-login-"));
  dirs.push(dir);
  writeFileSync(path.join(dir, "substructure.toml"), `[remote]\nurl = "${deployment.url}"\n\n${body}`);
  const log = path.join(dir, "browser.log");
  const consent = consentingBrowser();
  const openBrowser = async (url: string) => {
    appendFileSync(log, `${url}\n`);
    await consent(url);
  };
  const run = (args: string[], env: Record<string, string> = {}) => {
    const all = { SUBSTRUCTURE_TOKEN: tokenOf(deployment), SUBS_TEST_BROWSER_LOG: log, ...env };
    return how === "cli" ? runAs(how, args, { cwd: dir, env: all, consents: true }) : runInProcess(args, { cwd: dir, env: all, openBrowser });
  };
  return { dir, run, log };
}

/** Every file under dir, as text (the db, if one was made, included). */
function everythingWritten(dir: string): string {
  return readdirSync(dir, { recursive: true })
    .map(String)
    .map((f) => readFileSync(path.join(dir, f)).toString("latin1"))
    .join("\n");
}

for (const [kind, start] of Object.entries(DEPLOYMENTS)) describe(`against ${kind}`, () => {
  before(async () => {
    deployment = await start({ pollInterval: 0.05 });
  });
  after(() => deployment.close());
  const how: How = kind === CLI_ON ? "cli" : "in-process";

  describe("subs mcp login with [remote]", () => {
    test("declares, opens the deployment's URL, polls to authorized; no token on this side", async () => {
      const p = project(`[mcp.tracker]\nurl = "${mcp.url}"\n\n[mcp.tracker2]\nurl = "${mcp.url}"\n`, how);
      const result = await p.run(["mcp", "login", "tracker", "--timeout", "20"]);
      assert.equal(result.code, 0, result.stderr);
      assert.match(result.stdout, /✔ tracker: authorized on http:\/\/127\.0\.0\.1/);
      assert.match(result.stderr, /Opening the browser to authorize tracker at /);
      // The browser was given a one-time loopback link (no `state` in its argv) that sent
      // it to the authorization server, with the deployment's own redirect URI.
      const link = readFileSync(p.log, "utf8").trim();
      assert.match(link, /^http:\/\/127\.0\.0\.1:\d+\/open\/[\w-]+$/);
      const visited = new URL(/visit:\n {2}(\S+)/.exec(result.stderr)![1]!);
      assert.equal(visited.origin, authServer.url);
      assert.equal(visited.searchParams.get("redirect_uri"), `${deployment.url}/oauth/callback`);
      assert.equal(visited.searchParams.get("code_challenge_method"), "S256");
      assert.equal(visited.searchParams.get("resource"), mcp.url);

      assert.equal(deployment.credentials.get("tracker")?.url, mcp.url);
      assert.equal(deployment.credentials.has("tracker2"), false, "a credential belongs to its id alone");
      const secrets = authServer.issuedTokens();
      assert.ok(secrets.length >= 2);
      assert.equal(existsSync(path.join(p.dir, "substructure.db")), false, "nothing is stored locally");

      const list = await p.run(["mcp", "list", "--json"]);
      assert.equal(list.code, 0, list.stderr);
      const byId = Object.fromEntries(JSON.parse(list.stdout).map((c: { id: string }) => [c.id, c]));
      assert.deepEqual([byId.tracker.status, byId.tracker.usable, byId.tracker.drift], ["authorized", true, null]);
      assert.ok(byId.tracker.authorized_at);
      assert.deepEqual([byId.tracker2.status, byId.tracker2.drift], ["not_applied", "not_applied"]);

      const tools = await p.run(["mcp", "tools", "tracker", "--json"]);
      assert.equal(tools.code, 0, tools.stderr);
      assert.deepEqual(JSON.parse(tools.stdout).tools.map((t: { name: string }) => t.name), ["search_issues", "delete_issue"]);
      const table = await p.run(["mcp", "tools", "tracker"]);
      assert.match(table.stdout, /search_issues\tread-only/);

      const output = [result, list, tools, table].map((r) => r.stdout + r.stderr).join("\n") + everythingWritten(p.dir);
      for (const secret of [...secrets, tokenOf(deployment)]) assert.ok(!output.includes(secret), "a token reached this machine's output or files");
    });

    test("a teammate's use token consents to a connection already applied; one not declared, or declared otherwise, is refused with whom to ask, and nothing is changed", async () => {
      const served = deployment as ServedDeployment;
      const use = await served.tokenFor("use");
      const p = project(`[mcp.teamed]\nurl = "${mcp.url}"\n\n[mcp.undeclared]\nurl = "${mcp.url}"\n`);
      const applied = await p.run(["apply", "--yes"]);
      assert.equal(applied.code, 0, applied.stderr);
      await callServed(served, "DELETE", "/v1/mcp/undeclared");
      const asUse = (args: string[]) => p.run(args, { SUBSTRUCTURE_TOKEN: use });

      const consented = await asUse(["mcp", "login", "teamed", "--timeout", "20"]);
      assert.equal(consented.code, 0, consented.stderr);
      assert.match(consented.stdout, /✔ teamed: authorized on /);
      assert.equal(deployment.credentials.get("teamed")?.url, mcp.url);
      // Who consented: the use token's name, in the protocol's Connection and in `subs mcp list`.
      const useName = (await callServed(served, "GET", "/v1/tokens")).body.tokens.find((t: { role: string; name: string }) => t.role === "use").name;
      assert.equal((await callServed(served, "GET", "/v1/mcp")).body.connections.find((c: { id: string }) => c.id === "teamed").authorized_by, useName);
      const listed = await asUse(["mcp", "list", "--json"]);
      assert.equal(listed.code, 0, listed.stderr);
      assert.deepEqual(JSON.parse(listed.stdout).filter((c: { id: string }) => c.id === "teamed").map((c: { authorized_by: string }) => c.authorized_by), [useName]);
      assert.match((await asUse(["mcp", "list"])).stdout, new RegExp(`teamed\t.*\tauthorized by ${useName.replace(/[.]/g, "\\.")}`));

      const before = (await callServed(served, "GET", "/v1/mcp")).body;
      const refused = await asUse(["mcp", "login", "undeclared", "--timeout", "20"]);
      assert.equal(refused.code, 1, refused.stderr);
      assert.match(refused.stderr, /error: undeclared: not declared on the deployment, and this token's role may not declare it/);
      assert.match(refused.stderr, /ask someone with an apply token to run `subs apply`, then run `subs mcp login undeclared` again/);
      writeFileSync(path.join(p.dir, "substructure.toml"), `[remote]\nurl = "${deployment.url}"\n\n[mcp.teamed]\nurl = "${mcp.url}?v=2"\n`);
      const moved = await asUse(["mcp", "login", "teamed", "--timeout", "20"]);
      assert.equal(moved.code, 1, moved.stderr);
      assert.match(moved.stderr, /error: teamed: declared on the deployment with another url than the file's, and this token's role may not declare it/);
      assert.deepEqual((await callServed(served, "GET", "/v1/mcp")).body, before, "a use token changed the declarations");
      assert.equal(deployment.credentials.get("teamed")?.url, mcp.url, "the credential is kept");
    });

    test("--all logs in only the connections the deployment does not hold authorized", async () => {
      const p = project(`[mcp.all1]\nurl = "${mcp.url}"\n\n[mcp.all2]\nurl = "${mcp.url}"\n`);
      assert.equal((await p.run(["mcp", "login", "all1", "--timeout", "20"])).code, 0);
      const result = await p.run(["mcp", "login", "--all", "--json", "--timeout", "20"]);
      assert.equal(result.code, 0, result.stderr);
      assert.deepEqual(JSON.parse(result.stdout).map((r: { id: string; result: string }) => [r.id, r.result]), [["all2", "authorized"]]);
      const again = await p.run(["mcp", "login", "--all", "--json"]);
      assert.equal(again.code, 0, again.stderr);
      assert.deepEqual(JSON.parse(again.stdout), []);
      assert.match(again.stderr, /already authorized on the deployment/);
    });

    test("several ids with --json: a failure part-way does not stop the others; --json tells which were done and which failed", async () => {
      const p = project(`[mcp.first]\nurl = "${mcp.url}"\n\n[mcp.unreachable]\nurl = "http://127.0.0.1:9/mcp"\n\n[mcp.third]\nurl = "${mcp.url}"\n`);
      const result = await p.run(["mcp", "login", "first", "unreachable", "third", "--json", "--timeout", "20"]);
      assert.equal(result.code, 1, result.stderr);
      const { error } = JSON.parse(result.stdout);
      assert.deepEqual(error.failed.map((f: { id: string }) => f.id), ["unreachable"]);
      assert.deepEqual(
        error.done.map((d: { id: string; result: string; target: string }) => [d.id, d.result, d.target]),
        [["first", "authorized", "remote"], ["third", "authorized", "remote"]],
      );
      assert.deepEqual(error.not_attempted, []);
      assert.equal(deployment.credentials.has("third"), true, "the login after the failure is still tried");
    });

    test("--no-browser prints the URL on stderr and opens nothing", async () => {
      const p = project(`[mcp.nobrowser]\nurl = "${mcp.url}"\n`, how);
      const result = await p.run(["mcp", "login", "nobrowser", "--no-browser", "--timeout", "1"]);
      assert.equal(result.code, 1);
      // The words of a local login under --no-browser.
      assert.match(result.stderr, new RegExp(`Open this URL in a browser to authorize nobrowser:\\n  ${authServer.url}/authorize\\?`));
      assert.match(result.stderr, /no consent within 1s \(--timeout\)/);
      // In-process, the opener writes the log the $BROWSER script writes: with src/remote/login.ts
      // made to open the URL under --no-browser (once the wait was over), this failed here on both
      // stores, the built CLI's and the in-process run's.
      assert.equal(existsSync(p.log), false, "no browser was started");
      assert.equal(result.stdout, "");
      // The same code as a local login's --timeout (docs/exit-codes.md). What --json prints is
      // run()'s, read in-process on either store.
      const json = await runInProcess(["mcp", "login", "nobrowser", "--no-browser", "--timeout", "1", "--json"], { cwd: p.dir, env: { SUBSTRUCTURE_TOKEN: tokenOf(deployment) } });
      assert.equal(json.code, 1);
      assert.equal(JSON.parse(json.stdout).error.code, "timeout");
    });

    test("Ctrl-C while waiting for consent exits 130 and stores nothing", async () => {
      const p = project(`[mcp.interrupted]\nurl = "${mcp.url}"\n`);
      const result = await runCli(["mcp", "login", "interrupted", "--no-browser"], {
        cwd: p.dir,
        env: { SUBSTRUCTURE_TOKEN: tokenOf(deployment) },
        onSpawn: signalOnce("Waiting for consent").onSpawn,
      });
      assert.equal(result.code, 130, result.stderr);
      assert.match(result.stderr, /Interrupted/);
      assert.equal(deployment.credentials.has("interrupted"), false);
      assert.equal(existsSync(path.join(p.dir, "substructure.db")), false);
    });

    test("a refused consent ends with failed and exit 1", async () => {
      const p = project(`[mcp.denied]\nurl = "${mcp.url}"\n`);
      authServer.set({ consent: "deny" });
      try {
        const result = await p.run(["mcp", "login", "denied", "--json", "--timeout", "20"]);
        assert.equal(result.code, 1, result.stderr);
        assert.match(result.stderr, /authorization failed on the deployment \(access_denied/);
        assert.equal(JSON.parse(result.stdout).error.code, "access_denied");
      } finally {
        authServer.set({ consent: "allow" });
      }
      assert.equal(deployment.credentials.has("denied"), false);
    });

    test("an authorization nobody consents to expires on the deployment", async () => {
      const short = await start({ pollInterval: 0.05, authorizationTtl: 0.3 });
      try {
        const dir = mkdtempSync(path.join(tmpdir(), "subs-remote-login-"));
        dirs.push(dir);
        writeFileSync(path.join(dir, "substructure.toml"), `[remote]\nurl = "${short.url}"\n\n[mcp.slow]\nurl = "${mcp.url}"\n`);
        const result = await runInProcess(["mcp", "login", "slow", "--no-browser"], { cwd: dir, env: { SUBSTRUCTURE_TOKEN: tokenOf(short) } });
        assert.equal(result.code, 1, result.stderr);
        assert.match(result.stderr, /no consent within 0s \(the deployment's authorization expired\)|authorization expired on the deployment/);
        assert.equal(short.connections.has("slow"), true, "login declared the connection");
      } finally {
        await short.close();
      }
    });

    test("`auth` is refused before any request", async () => {
      const before = deployment.requests.length;
      const p = project(`[mcp.github]\nurl = "${mcp.url}"\nauth = { token_env = "GITHUB_TOKEN" }\n`);
      const result = await p.run(["mcp", "login", "github"]);
      assert.equal(result.code, 2);
      assert.match(result.stderr, /\[mcp\.github\] has `auth`/);
      assert.match(result.stderr, /remove `auth` and authorize on the deployment instead/);
      assert.equal(deployment.requests.length, before);
    });

    test("mcp tools of a declared but unauthorized connection says to log in (exit 4)", async () => {
      const p = project(`[mcp.fresh]\nurl = "${mcp.url}"\n`);
      assert.equal((await p.run(["apply"])).code, 0);
      const result = await p.run(["mcp", "tools", "fresh"]);
      assert.equal(result.code, 4, result.stderr);
      assert.match(result.stderr, /run `subs mcp login fresh`/);
    });
  });

  describe("credentials made by remote login, after the file changes", () => {
    test("a changed url drops the credential and a removed section deletes it; both are revoked", async () => {
      const p = project(`[mcp.moves]\nurl = "${mcp.url}"\n\n[mcp.goes]\nurl = "${mcp.url}"\n`);
      const login = await p.run(["mcp", "login", "moves", "goes", "--timeout", "20"]);
      assert.equal(login.code, 0, login.stderr);
      assert.ok(deployment.credentials.has("moves") && deployment.credentials.has("goes"));
      const revokedBefore = authServer.counters.revocations;

      writeFileSync(path.join(p.dir, "substructure.toml"), `[remote]\nurl = "${deployment.url}"\n\n[mcp.moves]\nurl = "${mcp.url}?v=2"\n`);
      const apply = await p.run(["apply"]);
      assert.equal(apply.code, 0, apply.stderr);
      assert.match(apply.stdout, /~ moves .*credential dropped: url changed/);
      assert.match(apply.stdout, /- goes .*credential dropped: declaration removed/);
      assert.equal(deployment.credentials.has("moves"), false);
      assert.equal(deployment.credentials.has("goes"), false);
      assert.equal(deployment.connections.has("goes"), false);
      assert.ok(authServer.counters.revocations >= revokedBefore + 2, "the deployment revoked both at the authorization server");

      const list = JSON.parse((await p.run(["mcp", "list", "--json"])).stdout);
      assert.deepEqual(list.map((c: { id: string; status: string }) => [c.id, c.status]).filter(([id]: [string]) => id === "moves"), [["moves", "needs_login"]]);
      const tools = await p.run(["mcp", "tools", "moves"]);
      assert.equal(tools.code, 4, tools.stderr);
    });

    test("an apply that changes a url or removes a section ends the consents pending for them", async () => {
      const p = project(`[mcp.pending_moves]\nurl = "${mcp.url}"\n\n[mcp.pending_goes]\nurl = "${mcp.url}"\n`);
      assert.equal((await p.run(["apply"])).code, 0);
      const api = async (method: string, pathname: string) => {
        const res = await fetch(new URL(pathname, `${deployment.url}/`), { method, headers: { authorization: `Bearer ${tokenOf(deployment)}`, "content-type": "application/json" }, ...(method === "POST" ? { body: "{}" } : {}) });
        return (await res.json()) as Record<string, string>;
      };
      // Started, never consented to.
      const polls = await Promise.all(["pending_moves", "pending_goes"].map(async (id) => (await api("POST", `/v1/mcp/${id}/authorizations`)).poll_url!));
      for (const poll of polls) assert.equal((await api("GET", poll)).status, "pending");

      writeFileSync(path.join(p.dir, "substructure.toml"), `[remote]\nurl = "${deployment.url}"\n\n[mcp.pending_moves]\nurl = "${mcp.url}?v=2"\n`);
      const apply = await p.run(["apply"]);
      assert.equal(apply.code, 0, apply.stderr);
      for (const poll of polls) assert.deepEqual([(await api("GET", poll)).status, (await api("GET", poll)).error], ["failed", "connection_changed"]);
    });
  });

  describe("subs mcp list with [remote]", () => {
    test("shows drift both ways and a changed url", async () => {
      const p = project(`[mcp.kept]\nurl = "${mcp.url}"\n\n[mcp.moving]\nurl = "${mcp.url}"\n\n[mcp.gone]\nurl = "${mcp.url}"\n`);
      assert.equal((await p.run(["apply"])).code, 0);
      writeFileSync(
        path.join(p.dir, "substructure.toml"),
        `[remote]\nurl = "${deployment.url}"\n\n[mcp.kept]\nurl = "${mcp.url}"\nprefix_tools = false\n\n[mcp.moving]\nurl = "https://elsewhere.example/mcp"\n\n[mcp.newer]\nurl = "${mcp.url}"\n\n[agent.a]\nmcp = ["kept"]\n`,
      );
      const list = await p.run(["mcp", "list", "--json"]);
      assert.equal(list.code, 0, list.stderr);
      const rows = JSON.parse(list.stdout).filter((c: { id: string }) => ["kept", "moving", "gone", "newer"].includes(c.id));
      const view = Object.fromEntries(rows.map((c: { id: string; status: string; drift: string | null; differs: string[]; agents: string[] }) => [c.id, [c.status, c.drift, c.differs, c.agents]]));
      assert.deepEqual(view, {
        kept: ["needs_login", "differs", ["prefix_tools"], ["a"]],
        moving: ["url_changed", "differs", ["url"], []],
        newer: ["not_applied", "not_applied", [], []],
        gone: ["not_in_file", "not_in_file", [], []],
      });
      const text = await p.run(["mcp", "list"]);
      assert.match(text.stdout, /gone\t.*not in the file/);
      assert.match(text.stderr, /run `subs apply`/);
    });
  });

  describe("one voice", () => {
    /** The steps a login printed on stderr, with what differs by nature (where, URLs, timings) left out. */
    const steps = (stderr: string) =>
      stderr
        .replace(/ (at|through) http:\/\/127\.0\.0\.1:\d+\/?/g, " <where>")
        .replace(/http:\/\/127\.0\.0\.1:\d+\S*/g, "<url>")
        .split("\n")
        .filter((line) => line !== "");

    test("local and remote `subs mcp login` say the same steps in the same words, and end with the same mark", async () => {
      const remote = project(`[mcp.tracker]\nurl = "${mcp.url}"\n`);
      const remoteRun = await remote.run(["mcp", "login", "tracker", "--timeout", "20"]);
      assert.equal(remoteRun.code, 0, remoteRun.stderr);
      const localDir = mkdtempSync(path.join(tmpdir(), "subs-local-login-"));
      dirs.push(localDir);
      writeFileSync(path.join(localDir, "substructure.toml"), `[mcp.tracker]\nurl = "${mcp.url}"\n`);
      writeFileSync(path.join(localDir, ".gitignore"), "*.db*\n");
      const localRun = await runInProcess(["mcp", "login", "tracker", "--timeout", "20"], { cwd: localDir, openBrowser: consentingBrowser() });
      assert.equal(localRun.code, 0, localRun.stderr);
      const expected = [
        "Contacting tracker <where>",
        "tracker authorizes <where>",
        "Opening the browser to authorize tracker <where> …",
        "If it does not open, visit:",
        "  <url>",
        "Waiting for consent for tracker (Ctrl-C to cancel, times out in 20s)",
        "Consent received for tracker",
      ];
      assert.deepEqual(steps(localRun.stderr), expected);
      assert.deepEqual(steps(remoteRun.stderr), expected);
      assert.match(localRun.stdout, /^✔ tracker: authorized by \S+\n/);
      assert.match(remoteRun.stdout, /^✔ tracker: authorized on \S+\n/);
    });

    test("--no-browser: the same line to open the URL", async () => {
      const remote = project(`[mcp.tracker]\nurl = "${mcp.url}"\n`);
      const r = await remote.run(["mcp", "login", "tracker", "--no-browser", "--timeout", "1"]);
      assert.equal(r.code, 1);
      assert.match(r.stderr, /^Open this URL in a browser to authorize tracker:\n {2}http/m);
      assert.match(r.stderr, /^No consent for tracker$/m);
    });
  });
});
