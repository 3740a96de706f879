// The runner (scripts/test.mjs with scripts/test-limits.mjs) bounds each test, not each file, and a
// file that never ends: run here on fixtures that hang, with a short limit, on the Node in use.
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { test } from "node:test";
import { REPO } from "./support/cli.ts";

const LIMIT_MS = 4000;

function runner(files: string[], env: Record<string, string> = {}): Promise<{ code: number | null; out: string }> {
  // This file runs inside a runner already: the child must not think it is a test file's process.
  const { NODE_TEST_CONTEXT: _, ...parentEnv } = process.env;
  const child = spawn(process.execPath, ["scripts/test.mjs", `--test-timeout=${LIMIT_MS}`, ...files], {
    cwd: REPO,
    env: { ...parentEnv, ...env },
    stdio: ["ignore", "pipe", "pipe"],
    // Its own process group, so that a runner that hangs is ended with the test files it started.
    detached: true,
  });
  let out = "";
  child.stdout.on("data", (d) => (out += d));
  child.stderr.on("data", (d) => (out += d));
  const killer = setTimeout(() => process.kill(-child.pid!, "SIGKILL"), 100_000);
  return new Promise((resolve) =>
    child.on("close", (code) => {
      clearTimeout(killer);
      resolve({ code, out });
    }),
  );
}

/** The TAP block of the test named `name`: its `ok`/`not ok` line and the details under it. */
function result(out: string, name: string): string {
  const lines = out.split("\n");
  const at = lines.findIndex((l) => new RegExp(`^\\s*(not )?ok \\d+ - ${name.replace(/[.*+?^${}()|[\]\\]/g, "\\$&")}$`).test(l));
  assert.ok(at >= 0, `no result for "${name}" in:\n${out}`);
  const end = lines.findIndex((l, i) => i > at && /^\s*\.\.\.$/.test(l));
  return lines.slice(at, end).join("\n");
}

test("a test that hangs fails under its own name at the limit; the others, a suite longer than the limit and a test that asks for longer pass; the run fails", { timeout: 150_000 }, async () => {
  // Times far from the limit either way: a loaded machine stretches them, not by seconds.
  const { code, out } = await runner(["test/fixtures/runner/hangs.ts"], { SHORT_MS: String(LIMIT_MS / 4), LONG_MS: String(LIMIT_MS * 2) });
  assert.notEqual(code, 0, out);
  const hung = result(out, "a test waiting for something that never happens");
  assert.match(hung, /^\s*not ok/, hung);
  assert.match(hung, new RegExp(`error: 'test timed out after ${LIMIT_MS}ms'`), hung);
  assert.match(result(out, "a test that says it needs longer than the limit"), /^\s*ok/);
  for (let i = 1; i <= 5; i++) assert.match(result(out, `short test ${i}`), /^\s*ok/);
  assert.match(result(out, "a suite longer than the limit, each of its tests well under it"), /^\s*ok/);
  const hook = result(out, "a suite whose before hook hangs");
  assert.match(hook, /^\s*not ok/, hook);
  assert.match(hook, /failed running before hook/, hook);
  assert.match(out, new RegExp(`test timed out after ${LIMIT_MS}ms[\\s\\S]*a test behind the hung hook|a test behind the hung hook[\\s\\S]*test timed out after ${LIMIT_MS}ms`));
  assert.match(result(out, "the test after them all"), /^\s*ok/);
  assert.match(result(out, "a quick test"), /^\s*ok/);
});

test("a file whose tests all passed but whose process stays alive is ended, failing, with what was left open", { timeout: 150_000 }, async () => {
  const { code, out } = await runner(["test/fixtures/runner/lingers.ts"]);
  assert.match(result(out, "a test that leaves a server listening"), /^\s*ok/);
  assert.notEqual(code, 0, out);
  assert.match(out, /tests have all ended, but its process was still running \d+ s later; ending it\. Still open: .*TCPServerWrap ×1/, out);
});

test("an error thrown from a callback fails the test that started it, and what a test or suite declares is its child", { timeout: 150_000 }, async () => {
  const { code, out } = await runner(["test/fixtures/runner/async-context.ts"]);
  assert.notEqual(code, 0, out);
  const thrown: Array<[test: string, error: string]> = [
    ["a timer's callback throws", "thrown by a timer"],
    ["a promise rejected after an await, unhandled", "rejected after an await"],
    ["a socket's callback throws", "thrown by a connection handler"],
    ["its test whose immediate throws", "thrown by an immediate"],
  ];
  for (const [name, error] of thrown) {
    const failed = result(out, name);
    assert.match(failed, /^\s*not ok/, failed);
    assert.match(failed, new RegExp(`error: '${error}'`), failed);
  }
  assert.match(result(out, "a test beside them passes"), /^ok/);
  assert.match(result(out, "its before hook ran first"), /^ {4}ok/);
  assert.match(result(out, "declared inside, after the await"), /^ {4}ok/);
  assert.match(result(out, "a test that declares another after an await"), /^ok/);
  assert.match(result(out, "no async hook with destroy is enabled, and one with init only"), /^ok/);
  assert.doesNotMatch(out, /generated asynchronous activity after the test ended/);
});
