// A spinner only on a terminal, never when piped or in CI.
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import path from "node:path";
import { PassThrough } from "node:stream";
import { test } from "node:test";
import { loadSpinner, startProgress } from "../src/output/progress.ts";
import { scriptBundle } from "./support/script-bundle.ts";

function capture(isTTY: boolean) {
  const stream = Object.assign(new PassThrough(), { isTTY, columns: 80, cursorTo() {}, clearLine() {}, moveCursor() {} });
  let text = "";
  stream.on("data", (d) => (text += d));
  return { stream, text: () => text };
}

test("piped or in CI: plain lines, no control characters", async () => {
  for (const [isTTY, env] of [[false, {}], [true, { CI: "true" }]] as const) {
    const out = capture(isTTY);
    let t = 0;
    const progress = startProgress({ stderr: out.stream, stderrIsTTY: isTTY, stderrColor: false, env, now: () => (t += 1000) }, "Waiting for consent");
    progress.update("still waiting");
    progress.succeed("Authorized");
    await new Promise((r) => setImmediate(r));
    assert.equal(out.text(), "Waiting for consent\nAuthorized\n");
  }
});

test("on a terminal: an animated line with the elapsed time, ending in the final text", async () => {
  const env = Object.fromEntries(Object.entries(process.env).filter(([k]) => k !== "CI" && k !== "TERM"));
  const child = spawnSync(process.execPath, [await scriptBundle(path.join("test", "support", "progress-on-terminal.ts"))], {
    env: { ...env, TERM: "xterm-256color" },
    encoding: "utf8",
  });
  assert.equal(child.status, 0, child.stderr);
  const text: string = JSON.parse(child.stdout);
  assert.match(text, /Waiting for consent \d+s/);
  assert.match(text, /Authorized \(\d+s\)/);
  assert.match(text, /\x1b\[/, "a terminal gets cursor control");
});

test("TERM=dumb or CI on a terminal: plain lines, as the spinner library would also decide", async () => {
  for (const env of [{ TERM: "dumb" }, { CI: "" }]) {
    const out = capture(true);
    const progress = startProgress({ stderr: out.stream, stderrIsTTY: true, stderrColor: false, env, now: () => 0 }, "Waiting for consent");
    progress.succeed("Authorized");
    await new Promise((r) => setImmediate(r));
    assert.equal(out.text(), "Waiting for consent\nAuthorized\n");
  }
});

test("a wait inside another (step-up consent while fetching tools) shares one spinner line", async () => {
  const { stderrReporter } = await import("../src/output/reporter.ts");
  await loadSpinner();
  const out = capture(true);
  const ctx = { stderr: out.stream, stderrIsTTY: true, stderrColor: false, env: {}, now: () => 0 } as unknown as Parameters<typeof stderrReporter>[0];
  const reporter = stderrReporter(ctx);
  const fetching = reporter.progress("Fetching tools");
  const consent = reporter.progress("Waiting for consent");
  await new Promise((r) => setTimeout(r, 120));
  consent.succeed("Consent received");
  fetching.succeed("3 tools");
  await new Promise((r) => setImmediate(r));
  const text = out.text();
  assert.match(text, /Waiting for consent/);
  assert.match(text, /Consent received\n/);
  assert.equal(text.match(/✔/g)?.length, 1, "only the outer spinner ends with a mark");
  assert.ok(text.indexOf("Consent received") < text.lastIndexOf("3 tools"));
});
