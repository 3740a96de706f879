// `subs apply` with [remote] asks before a plan that removes, on a terminal only, against the
// reference deployment and a real `subs deployment serve`. A pseudo-terminal is out of reach here:
// the context's terminalStdin gives a stream the test writes the answer into, as the real one gives
// the terminal's stdin.
import assert from "node:assert/strict";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { PassThrough } from "node:stream";
import { after, before, beforeEach, describe, test } from "node:test";
import { runInProcess } from "../support/cli.ts";
import { targets, type TargetDeployment } from "../support/deployment-targets.ts";

const dirs: string[] = [];
after(() => dirs.forEach((d) => rmSync(d, { recursive: true, force: true })));

const FULL = `[mcp.sentry]\nurl = "https://mcp.sentry.dev/mcp"\n\n[mcp.linear]\nurl = "https://mcp.linear.app/mcp"\n\n[agent.triage]\nmcp = ["sentry", "linear"]\n`;
const SMALLER = `[mcp.sentry]\nurl = "https://mcp.sentry.dev/mcp"\n`;

for (const target of targets()) describe(`subs apply with [remote] asks before removing, on a terminal (${target.name})`, () => {
  let deployment: TargetDeployment;
  let dir: string;
  /** The requests the deployment had answered when the test began. */
  let answered = 0;
  const write = (body: string) => writeFileSync(path.join(dir, "substructure.toml"), `[remote]\nurl = "${deployment.url}"\n\n${body}`);

  /** A terminal whose person types `answer` (undefined: says nothing yet); `asked` counts the reads of stdin. */
  function terminal(answer: string | undefined, options: { end?: boolean } = {}) {
    const stdin = new PassThrough();
    const state = { asked: 0 };
    return {
      state,
      options: {
        cwd: dir,
        env: { SUBSTRUCTURE_TOKEN: deployment.token },
        stderrIsTTY: true,
        terminalStdin: async () => {
          state.asked++;
          // Typed once the question is out, as a person would.
          setImmediate(() => {
            if (answer !== undefined) stdin.write(answer);
            if (options.end) stdin.end();
          });
          return stdin;
        },
      },
    };
  }

  before(async () => {
    deployment = await target.start();
  });
  after(() => deployment.close());
  // The deployment as the full file makes it (an apply prunes whatever a test left), linear's
  // credential held; then the file shrinks.
  beforeEach(async () => {
    dir = mkdtempSync(path.join(tmpdir(), "subs-confirm-"));
    dirs.push(dir);
    write(FULL);
    assert.equal((await runInProcess(["apply", "--yes"], { cwd: dir, env: { SUBSTRUCTURE_TOKEN: deployment.token } })).code, 0);
    const url = deployment.connections.get("linear")!.url;
    await deployment.hold("linear", { url, tokens: { access_token: "at-linear", token_type: "bearer" }, authorizedAt: Date.now(), expiresAt: null });
    write(SMALLER);
    answered = (await deployment.seen()).length;
  });

  /** What the test's runs asked the deployment to change. */
  const writes = async () => (await deployment.seen()).slice(answered).filter((r) => !r.startsWith("GET"));

  test("a no: the question lists what goes, exit 1 with code declined, nothing written", async () => {
    const t = terminal("n\n");
    const r = await runInProcess(["apply"], t.options);
    assert.equal(r.code, 1, r.stderr);
    assert.equal(t.state.asked, 1);
    assert.match(r.stderr, new RegExp(`This removes from ${deployment.url.replace(/[./]/g, "\\$&")}/?:\\n  - connection linear and its credential\\n  - agent triage\\nApply\\? \\[y/N\\] `));
    assert.match(r.stderr, /error: not applied: nothing was changed on /);
    assert.match(r.stderr, /hint: `subs apply --yes` applies without asking/);
    assert.deepEqual(await writes(), []);
    assert.equal(deployment.connections.has("linear"), true);
    assert.equal(deployment.credentials.has("linear"), true);
  });

  test("Enter alone, or the end of input, is the default: no", async () => {
    for (const t of [terminal("\n"), terminal(undefined, { end: true })]) {
      const r = await runInProcess(["apply"], t.options);
      assert.equal(r.code, 1, r.stderr);
      assert.match(r.stderr, /not applied/);
    }
    assert.deepEqual(await writes(), []);
  });

  test("--json and a no: the error object says declined", async () => {
    const r = await runInProcess(["apply", "--json"], terminal("no\n").options);
    assert.equal(r.code, 1);
    assert.equal(JSON.parse(r.stdout).error.code, "declined");
    assert.deepEqual(await writes(), []);
  });

  test("a yes applies the plan", async () => {
    const t = terminal("y\n");
    const r = await runInProcess(["apply"], t.options);
    assert.equal(r.code, 0, r.stderr);
    assert.match(r.stderr, /Apply\? \[y\/N\] /);
    assert.equal(deployment.connections.has("linear"), false);
    assert.equal(deployment.credentials.has("linear"), false);
    assert.equal(deployment.agents.has("triage"), false);
  });

  test("--yes: no question, the plan applied", async () => {
    const t = terminal(undefined);
    const r = await runInProcess(["apply", "--yes"], t.options);
    assert.equal(r.code, 0, r.stderr);
    assert.equal(t.state.asked, 0);
    assert.doesNotMatch(r.stderr, /Apply\?/);
    assert.equal(deployment.connections.has("linear"), false);
  });

  test("a changed url drops a credential: asked too", async () => {
    write(FULL.replace("https://mcp.linear.app/mcp", "https://mcp.linear.example/mcp"));
    const r = await runInProcess(["apply"], terminal("n\n").options);
    assert.equal(r.code, 1, r.stderr);
    assert.match(r.stderr, /  - the credential of linear \(url changed\)\nApply\?/);
    assert.deepEqual(await writes(), []);
  });

  test("a plan that only adds, and --dry-run, never ask", async () => {
    write(`${FULL}\n[mcp.docs]\nurl = "https://docs.example/mcp"\n`);
    const adds = terminal(undefined);
    assert.equal((await runInProcess(["apply"], adds.options)).code, 0);
    assert.equal(adds.state.asked, 0);
    write(SMALLER);
    const dry = terminal(undefined);
    assert.equal((await runInProcess(["apply", "--dry-run"], dry.options)).code, 0);
    assert.equal(dry.state.asked, 0);
  });

  test("stderr not a terminal (a log, CI): applied as before, nothing asked", async () => {
    const t = terminal(undefined);
    const r = await runInProcess(["apply"], { ...t.options, stderrIsTTY: false });
    assert.equal(r.code, 0, r.stderr);
    assert.equal(t.state.asked, 0);
    assert.equal(deployment.connections.has("linear"), false);
  });
});
