// The default opener (src/context.ts): finds open()'s function however the package was
// loaded, and reports an opener that could not start or failed, naming it.
import assert from "node:assert/strict";
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { createRequire } from "node:module";
import { tmpdir } from "node:os";
import path from "node:path";
import { test } from "node:test";
import { defaultOpenBrowser, openFunction } from "../src/context.ts";
import { within } from "./support/wait.ts";

const URL_WITH_SHELL_CHARACTERS = "http://127.0.0.1:9/authorize?state=a b&x=$(touch pwned);echo `id`";

test("openFunction: the function from ESM import, from require(esm), and from esbuild's wrapping of it", async () => {
  const imported = await import("open");
  const required = createRequire(import.meta.url)("open");
  const fn = imported.default;
  assert.equal(typeof fn, "function");
  assert.equal(openFunction(imported), fn);
  // Node's require() of the ES module gives its namespace (under tsx, a second instance of it).
  const fromRequire = openFunction(required);
  assert.equal(fromRequire, required.default);
  assert.equal(fromRequire.name, "open");
  // esbuild's __toESM(require("open")): the namespace once more under `default` (the bundle's case).
  assert.equal(openFunction({ ...required, default: required }), fromRequire);
  assert.equal(openFunction(fn), fn);
  assert.throws(() => openFunction({ default: {} }), /the `open` package loaded without its open\(\) function/);
  assert.throws(() => openFunction(undefined), /`open` package/);
});

test("$BROWSER that does not exist: rejects naming it", async () => {
  await assert.rejects(defaultOpenBrowser({ BROWSER: "subs-no-such-browser --new-window" }, "http://127.0.0.1:9/"), {
    message: "$BROWSER (subs-no-such-browser) could not be started: ENOENT",
  });
});

test("$BROWSER that exits non-zero at once: rejects naming it and its code", async () => {
  await assert.rejects(defaultOpenBrowser({ BROWSER: "false" }, "http://127.0.0.1:9/"), { message: "$BROWSER (false) exited with code 1" });
});

/**
 * A $BROWSER that runs until the test releases it: "not waited for" is then an order (the opener
 * resolved while the browser still ran), not a duration a loaded machine can stretch.
 */
function heldBrowser() {
  const dir = mkdtempSync(path.join(tmpdir(), "subs-held-browser-"));
  const script = path.join(dir, "browser.cjs");
  const released = path.join(dir, "released");
  const ended = path.join(dir, "ended");
  // Polls for the release (at most 10 minutes, so a failed test leaves nothing behind for long),
  // then says it ended and, released, takes its directory away.
  writeFileSync(
    script,
    `const fs = require("node:fs");
const until = Date.now() + 600000;
const poll = setInterval(() => {
  const released = fs.existsSync(${JSON.stringify(released)});
  if (!released && Date.now() < until) return;
  clearInterval(poll);
  fs.writeFileSync(${JSON.stringify(ended)}, "");
  if (released) fs.rmSync(${JSON.stringify(dir)}, { recursive: true, force: true });
}, 20);
`,
  );
  return {
    BROWSER: `${process.execPath} ${script}`,
    ended: () => existsSync(ended),
    release: () => writeFileSync(released, ""),
  };
}

test("$BROWSER still running after the wait counts as opened; one that exits 0 too", async () => {
  const browser = heldBrowser();
  try {
    await within(defaultOpenBrowser({ BROWSER: browser.BROWSER }, "http://127.0.0.1:9/", { settleMs: 300 }), "the opener to resolve while the browser runs");
    assert.equal(browser.ended(), false, "resolved after the bounded wait, not when the browser ends");
  } finally {
    browser.release();
  }
  await defaultOpenBrowser({ BROWSER: "true" }, "http://127.0.0.1:9/");
});

test("a running $BROWSER is not waited for once the caller's signal aborts (Ctrl-C)", async () => {
  const browser = heldBrowser();
  const controller = new AbortController();
  setTimeout(() => controller.abort(), 100);
  try {
    // A settle of 10 minutes: only the signal can end the wait within the test's.
    await within(defaultOpenBrowser({ BROWSER: browser.BROWSER }, "http://127.0.0.1:9/", { settleMs: 600_000, signal: controller.signal }), "the opener to stop waiting once the signal aborted");
    assert.equal(browser.ended(), false);
  } finally {
    browser.release();
  }
});

test("$BROWSER gets its own arguments and the URL as one argument, never through a shell", async () => {
  const dir = mkdtempSync(path.join(tmpdir(), "subs-opener-"));
  try {
    const script = path.join(dir, "argv.mjs");
    const out = path.join(dir, "argv.json");
    writeFileSync(script, `import { writeFileSync } from "node:fs";\nwriteFileSync(${JSON.stringify(out)}, JSON.stringify(process.argv.slice(2)));\n`);
    await defaultOpenBrowser({ BROWSER: `${process.execPath} ${script} --new-window`, PATH: process.env.PATH }, URL_WITH_SHELL_CHARACTERS);
    assert.deepEqual(JSON.parse(readFileSync(out, "utf8")), ["--new-window", URL_WITH_SHELL_CHARACTERS]);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});
