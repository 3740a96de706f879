import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { describe, it } from "node:test";
import { configFor, toolNames } from "./adapter.ts";
import { ExpectedFailures, judge, type Check, type ScenarioRun } from "./results.ts";

const check = (status: Check["status"], id = "x"): Check => ({ id, name: id, description: `${id} said ${status}`, status });
const adapter = (exitCode: number) => ({ scenario: "s", exitCode, steps: [{ argv: ["mcp", "login", "conformance"], code: exitCode, stderr: "boom\n" }] });
const run = (scenario: string, checks: Check[] | undefined, exitCode: number | undefined, allowClientError = false): ScenarioRun => ({
  scenario,
  checks,
  adapter: exitCode === undefined ? undefined : adapter(exitCode),
  allowClientError,
});

describe("judging a conformance run", () => {
  it("passes only scenarios with no FAILURE or WARNING check and a client that exited 0", () => {
    const result = judge(
      [
        run("ok", [check("SUCCESS"), check("INFO")], 0),
        run("warned", [check("SUCCESS"), check("WARNING", "scope")], 0),
        run("client-failed", [check("SUCCESS")], 1),
        run("gave-up-as-asked", [check("SUCCESS")], 1, true),
        run("no-checks", undefined, 0),
        run("no-report", [check("SUCCESS")], undefined),
      ],
      { client: {} },
    );
    assert.deepEqual(
      result.verdicts.map((v) => [v.scenario, v.verdict]),
      [
        ["ok", "passed"],
        ["warned", "failed"],
        ["client-failed", "failed"],
        ["gave-up-as-asked", "passed"],
        ["no-checks", "failed"],
        ["no-report", "failed"],
      ],
    );
    assert.deepEqual(result.verdicts[1]!.problems, ["WARNING [scope] scope said WARNING"]);
    assert.match(result.verdicts[2]!.problems[0]!, /client exited 1: `subs mcp login conformance` exited 1: boom/);
    assert.equal(result.summary, "conformance: 2 passed, 4 failed, 0 expected failures");
    assert.equal(result.ok, false);
  });

  it("accepts listed failures, and fails a listed scenario that passes so the list stays honest", () => {
    const expected = { client: { "ext/a": "not implemented", "ext/b": "not implemented", "ext/c": "not run" } };
    const honest = judge([run("core", [check("SUCCESS")], 0), run("ext/a", [check("FAILURE")], 1)], expected);
    assert.equal(honest.ok, true);
    assert.equal(honest.summary, "conformance: 1 passed, 0 failed, 1 expected failures");
    assert.deepEqual(honest.notRun, ["ext/b", "ext/c"]);

    const stale = judge([run("ext/a", [check("FAILURE")], 1), run("ext/b", [check("SUCCESS")], 0)], expected);
    assert.equal(stale.ok, false);
    assert.equal(stale.verdicts[1]!.verdict, "unexpectedly passed");
    assert.match(stale.summary, /1 unexpectedly passed/);
  });
});

describe("the expected-failures file", () => {
  it("may list only extension scenarios, each with a reason", () => {
    const file = JSON.parse(readFileSync(new URL("../../tools/conformance/expected-failures.json", import.meta.url), "utf8"));
    assert.doesNotThrow(() => ExpectedFailures.parse(file));
    assert.throws(() => ExpectedFailures.parse({ client: { "auth/metadata-default": "not yet" } }), /only extension scenarios/);
    // An extension scenario, but no reason given.
    assert.throws(
      () => ExpectedFailures.parse({ client: { "auth/client-credentials-jwt": "" } }),
      (e: { issues?: Array<{ code: string; path: PropertyKey[] }> }) => e.issues?.length === 1 && e.issues[0]!.code === "too_small" && e.issues[0]!.path.join("/") === "client/auth/client-credentials-jwt",
    );
  });
});

describe("the conformance adapter", () => {
  it("declares the pre-registered client from the scenario context, its secret only by env var", () => {
    const context = JSON.stringify({ name: "auth/pre-registration", client_id: "pre-registered-client", client_secret: "s3cret" });
    const { toml, env } = configFor("http://localhost:1234/mcp", "auth/pre-registration", context);
    assert.match(toml, /^\[mcp\.conformance\]\nurl = "http:\/\/localhost:1234\/mcp"\n/);
    assert.match(toml, /oauth = \{ client_id = "pre-registered-client", client_secret_env = "CONFORMANCE_CLIENT_SECRET" \}/);
    assert.doesNotMatch(toml, /s3cret/);
    assert.deepEqual(env, { CONFORMANCE_CLIENT_SECRET: "s3cret" });
    assert.throws(() => configFor("http://localhost:1234/mcp", "auth/pre-registration", undefined));
  });

  it("offers the harness's Client ID Metadata Document URL everywhere else", () => {
    const { toml, env } = configFor("http://localhost:1234/mcp", "auth/metadata-default", undefined);
    assert.match(toml, /oauth = \{ client_metadata_url = "https:\/\/conformance-test\.local\/client-metadata\.json" \}/);
    assert.deepEqual(env, {});
  });

  it("declares only the url for the plain scenarios, whose servers ask for no credential", () => {
    for (const scenario of ["initialize", "tools_call", "sse-retry"]) {
      const { toml, env } = configFor("http://localhost:1234", scenario, undefined);
      assert.equal(toml, '[mcp.conformance]\nurl = "http://localhost:1234"\n');
      assert.deepEqual(env, {});
    }
  });

  it("reads tool names from `subs mcp tools --json`", () => {
    assert.deepEqual(toolNames('[{"name":"test-tool","annotations":{}}]'), ["test-tool"]);
    assert.deepEqual(toolNames('{"id":"c","tools":[{"name":"a"},{"name":"b"}]}'), ["a", "b"]);
    assert.throws(
      () => toolNames('{"nope":1}'),
      (e: { issues?: Array<{ code: string }> }) => e.issues?.length === 1 && e.issues[0]!.code === "invalid_union",
    );
  });
});
