// `npm run demo` walks a new user through login, list and tools, offline. Here a
// "person" ($BROWSER = click-approve.mjs) reads the consent page and clicks a button.
// On a machine where no browser opens, the person answers the consent page on stdin instead.
// Every test runs the demo as a process of its own, and the demo runs the built CLI (bin/subs.cjs)
// for each step. The first test runs the command `npm run demo` runs (package.json's "demo",
// through tsx); the others run scripts/demo.ts bundled once for this file into plain JavaScript
// (test/support/script-bundle.ts) with plain `node`: loading tsx cost about a second of CPU in each
// run, and what they check is the demo's answers, not how it is loaded.
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { existsSync, readFileSync, rmSync } from "node:fs";
import path from "node:path";
import { after, test } from "node:test";
import { ensureBuilt, REPO } from "./support/cli.ts";
import { scriptBundle } from "./support/script-bundle.ts";
import { browserlessPath } from "./support/fake-browser.ts";

const CLICK = path.join(REPO, "test", "support", "click-approve.mjs");

/** What `npm run demo` runs, from package.json: `node` and its arguments (npm runs it in the repository). */
function npmRunDemo(): string[] {
  const script = (JSON.parse(readFileSync(path.join(REPO, "package.json"), "utf8")) as { scripts: Record<string, string> }).scripts.demo;
  const [command, ...args] = script?.split(" ") ?? [];
  assert.equal(command, "node", `package.json's "demo" script runs node: ${script}`);
  return args;
}

type DemoRun = { code: number | null; stdout: string; stderr: string };

/**
 * Runs the demo (piped: no terminal): bundled, or with `asNpmRuns` the command `npm run demo` runs.
 * `input` is written to its stdin, which then ends; `keepStdin` leaves stdin open for `onStderr`
 * to write to.
 */
async function runDemo(
  env: Record<string, string>,
  onStderr?: (text: string, child: ReturnType<typeof spawn>) => void,
  options: { input?: string; keepStdin?: boolean; asNpmRuns?: boolean } = {},
) {
  ensureBuilt();
  const args = options.asNpmRuns ? npmRunDemo() : [await scriptBundle(path.join("scripts", "demo.ts"))];
  return new Promise<DemoRun>((resolve, reject) => {
    const child = spawn(process.execPath, args, {
      cwd: REPO,
      env: { PATH: process.env.PATH ?? "/usr/bin:/bin", HOME: REPO, ...env },
      stdio: ["pipe", "pipe", "pipe"],
    });
    if (!options.keepStdin) child.stdin.end(options.input ?? "");
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
  const r = await runDemo({ BROWSER: `${process.execPath} ${CLICK}` }, undefined, { asNpmRuns: true });
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

/**
 * A machine with no browser: no $BROWSER, no display, nothing xdg-open could run on PATH. One
 * directory for the file's three runs (making it runs a shell for each utility it links): no run
 * writes to it, and no fake browser is put in it.
 */
let browserless: string | undefined;
after(() => browserless && rmSync(browserless, { recursive: true, force: true }));
async function headless(run: (env: Record<string, string>) => Promise<DemoRun>): Promise<DemoRun> {
  browserless ??= browserlessPath().bin;
  return run({ PATH: browserless });
}

const NO_BROWSER = /No browser could be opened \(xdg-open exited with code 3: no browser found\)/;

test("npm run demo with no browser: says so at once, Enter on stdin approves; login, list and tools complete; exit 0", async () => {
  const r = await headless((env) => runDemo(env, undefined, { input: "\n" }));
  assert.equal(r.code, 0, r.stderr);
  assert.match(r.stderr, NO_BROWSER);
  assert.match(r.stderr, /Approve\? \[Enter \/ d \/ paste\] \nApproved from the terminal\.\nConsent received for demo\n/);
  assert.match(r.stdout, /✔ demo: authorized by http:\/\/127\.0\.0\.1:\d+\//);
  assert.match(r.stdout, /^demo\thttp:\/\/127\.0\.0\.1:\d+\/mcp\toauth\tauthorized/m);
  assert.match(r.stdout, /^search_notes\tread-only\t/m);
  assert.match(r.stderr, /\$ subs mcp tools demo[\s\S]*Done/);
  assert.doesNotMatch(r.stderr + r.stdout, /\x1b/);
  // A login that waited out its 300 s timeout instead would be killed at runDemo's 60 s and fail the
  // exit code above: no figure of this machine's speed is needed to see it.
});

test("npm run demo whose $BROWSER fails: says so naming it; d on stdin denies; the demo stops, exit 1", async () => {
  const r = await runDemo({ BROWSER: "false" }, undefined, { input: "d\n" });
  assert.equal(r.code, 1, r.stderr);
  assert.match(r.stderr, /No browser could be opened \(\$BROWSER \(false\) exited with code 1\)/);
  assert.match(r.stderr, /Denied from the terminal/);
  assert.match(r.stderr, /authorization was not granted \(access_denied/);
  assert.doesNotMatch(r.stderr, /\$ subs mcp list/);
});

test("npm run demo with no browser: the redirect pasted on stdin completes the login; a wrong one is refused first", async () => {
  let pasted = false;
  const r = await headless((env) =>
    runDemo(
      env,
      (stderr, child) => {
        if (pasted || !/Approve\? /.test(stderr)) return;
        pasted = true;
        // The person opened the URL subs printed in a browser of their own and clicked Approve.
        const url = /(http:\/\/\S+\/authorize\?\S+)/.exec(stderr)![1]!;
        void approveInOwnBrowser(url).then((redirect) => {
          const wrong = new URL(redirect);
          wrong.pathname = "/elsewhere";
          child.stdin!.end(`${wrong.href}\n${redirect}\n`);
        });
      },
      { keepStdin: true },
    ),
  );
  assert.ok(pasted, r.stderr);
  assert.equal(r.code, 0, r.stderr);
  assert.match(r.stderr, NO_BROWSER);
  assert.match(r.stderr, /That did not work: that is not an address at http:\/\/127\.0\.0\.1:\d+\/callback, where subs waits/);
  assert.match(r.stderr, /Delivered the pasted address to subs\.\nConsent received for demo/);
  assert.match(r.stdout, /^search_notes\tread-only\t/m);
});

test("npm run demo with no browser and stdin already ended: stops at once with what to do, exit 1", async () => {
  const r = await headless((env) => runDemo(env));
  assert.equal(r.code, 1, r.stderr);
  assert.match(r.stderr, NO_BROWSER);
  assert.match(r.stderr, /No browser, and no answer on stdin \(it ended\)\. Run `npm run demo` in a terminal, or set BROWSER/);
  assert.doesNotMatch(r.stderr, /\$ subs mcp list/);
  // Stopping "at once" rather than after the login's 300 s: runDemo kills a run at 60 s (exit code null).
  const dir = demoDir(r.stderr);
  assert.ok(dir);
  assert.equal(existsSync(dir), false);
});

/** A person's own browser on the consent page: Approve; returns where the server redirects. */
async function approveInOwnBrowser(url: string): Promise<string> {
  const page = await fetch(url);
  const html = await page.text();
  const request = /name="request" value="([^"]+)"/.exec(html)?.[1];
  assert.ok(request, html);
  const answer = await fetch(new URL("/consent", url), {
    method: "POST",
    headers: { "content-type": "application/x-www-form-urlencoded" },
    body: new URLSearchParams({ request, decision: "approve" }).toString(),
    redirect: "manual",
  });
  const location = answer.headers.get("location");
  assert.ok(location);
  return new URL(location, url).href;
}
