// Issue 8: `npm run demo` walks a new user through login, list and tools, offline. Here a
// "person" ($BROWSER = click-approve.mjs) reads the consent page and clicks a button.
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { existsSync } from "node:fs";
import path from "node:path";
import { test } from "node:test";
import { ensureBuilt, REPO } from "./support/cli.ts";

const CLICK = path.join(REPO, "test", "support", "click-approve.mjs");

function runDemo(env: Record<string, string>, onStderr?: (text: string, child: ReturnType<typeof spawn>) => void) {
  ensureBuilt();
  return new Promise<{ code: number | null; stdout: string; stderr: string }>((resolve, reject) => {
    const child = spawn(process.execPath, ["--import", "tsx", path.join("scripts", "demo.ts")], {
      cwd: REPO,
      env: { PATH: process.env.PATH ?? "/usr/bin:/bin", HOME: REPO, ...env },
      stdio: ["ignore", "pipe", "pipe"],
    });
    let stdout = "";
    let stderr = "";
    child.stdout.on("data", (d) => (stdout += d));
    child.stderr.on("data", (d) => {
      stderr += d;
      onStderr?.(stderr, child);
    });
    const timer = setTimeout(() => child.kill("SIGKILL"), 60_000);
    child.on("error", reject);
    child.on("close", (code) => {
      clearTimeout(timer);
      resolve({ code, stdout, stderr });
    });
  });
}

const demoDir = (stderr: string) => stderr.match(/The demo's file is (\S+)substructure\.toml/)?.[1];

test("npm run demo: a person approves on the consent page; login, list and tools complete; exit 0", async () => {
  const r = await runDemo({ BROWSER: `${process.execPath} ${CLICK}` });
  assert.equal(r.code, 0, r.stderr);
  assert.match(r.stdout, /✔ demo: authorized by http:\/\/127\.0\.0\.1:\d+\//);
  assert.match(r.stdout, /^demo\thttp:\/\/127\.0\.0\.1:\d+\/mcp\toauth\tauthorized/m, "subs mcp list shows the connection authorized");
  assert.match(r.stdout, /^search_notes\tread-only\t/m, "subs mcp tools demo lists the server's tools");
  assert.match(r.stderr, /\$ subs mcp login demo[\s\S]*\$ subs mcp list[\s\S]*\$ subs mcp tools demo[\s\S]*Done/);
  // Piped (as here): no spinner, no colour, no cursor control anywhere.
  assert.doesNotMatch(r.stderr + r.stdout, /\x1b/);
  assert.match(r.stderr, /Waiting for consent for demo .*\nConsent received for demo\n/, "waits print plain lines");
  const dir = demoDir(r.stderr);
  assert.ok(dir, "the demo names its file");
  assert.equal(existsSync(dir), false, "the demo removes its directory when it ends");
});

test("npm run demo: Deny on the consent page stops the demo with the next command to run, exit 1", async () => {
  const r = await runDemo({ BROWSER: `${process.execPath} ${CLICK}`, CLICK: "deny" });
  assert.equal(r.code, 1, r.stderr);
  assert.match(r.stderr, /authorization was not granted \(access_denied/);
  assert.match(r.stderr, /Run `npm run demo` to start again/);
  assert.doesNotMatch(r.stderr, /\$ subs mcp list/);
});

test("npm run demo: Ctrl-C while waiting for consent stops subs and the servers, exit 130", async () => {
  let sent = false;
  const r = await runDemo({ BROWSER: "true" }, (stderr, child) => {
    if (!sent && /Waiting for consent/.test(stderr)) {
      sent = true;
      child.kill("SIGINT");
    }
  });
  assert.ok(sent, r.stderr);
  assert.equal(r.code, 130, r.stderr);
  assert.match(r.stderr, /Interrupted/);
  const dir = demoDir(r.stderr);
  assert.ok(dir);
  assert.equal(existsSync(dir), false);
});
