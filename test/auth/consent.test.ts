// A denial is reported as the person's refusal with or without
// `state`; a login shows progress from its first request; paste mode tells the person what was
// wrong with what they pasted and keeps waiting for the matching redirect.
import assert from "node:assert/strict";
import { createServer, type AddressInfo, type Socket } from "node:net";
import { PassThrough } from "node:stream";
import { test } from "node:test";
import { run } from "../../src/run.ts";
import { testContext } from "../support/cli.ts";
import { credential, environment } from "./harness.ts";
import { refusedUrl } from "../support/ports.ts";

/** Waits until `find` matches what `read` returns, for at most `ms`. */
async function waitFor<T>(read: () => string, find: (text: string) => T | undefined, ms = 10_000): Promise<T> {
  const until = Date.now() + ms;
  for (;;) {
    const found = find(read());
    if (found !== undefined) return found;
    if (Date.now() > until) throw new Error(`not seen in time:\n${read()}`);
    await new Promise((r) => setTimeout(r, 10));
  }
}

const authorizeUrl = (text: string) => /(http:\/\/\S+\/authorize\?\S+)/.exec(text)?.[1];

test("denial: access_denied without state is the person's refusal (exit 1, code access_denied); nothing is exchanged or stored", async () => {
  const env = await environment({ as: { consent: "deny", state: "absent" } });
  try {
    const login = await env.subs(["mcp", "login", "demo", "--json"]);
    assert.equal(login.code, 1, login.stderr);
    assert.match(login.stderr, /authorization was not granted \(access_denied/);
    assert.doesNotMatch(login.stderr, /carries no `state`/);
    assert.equal(JSON.parse(login.stdout).error.code, "access_denied");
    assert.equal(env.as.counters.codeExchanges, 0);
    assert.equal(credential(env, "demo"), undefined);
  } finally {
    await env.close();
  }
});

test("denial: with the matching state it is the same refusal; a code without state is never redeemed (ignored, the wait goes on)", async () => {
  const denied = await environment({ as: { consent: "deny" } });
  try {
    const login = await denied.subs(["mcp", "login", "demo", "--json"]);
    assert.equal(login.code, 1);
    assert.equal(JSON.parse(login.stdout).error.code, "access_denied");
  } finally {
    await denied.close();
  }
  const stateless = await environment({ as: { state: "absent" } });
  try {
    const login = await stateless.subs(["mcp", "login", "demo", "--json", "--timeout", "2"]);
    assert.equal(login.code, 1);
    assert.match(login.stderr, /not for this login .*; ignored/);
    assert.equal(JSON.parse(login.stdout).error.code, "timeout");
    assert.equal(stateless.as.counters.codeExchanges, 0, "a code without state is never redeemed");
    assert.equal(credential(stateless, "demo"), undefined);
  } finally {
    await stateless.close();
  }
});

test("progress: the login says what it is doing from its first request, before the consent wait", async () => {
  const env = await environment();
  try {
    const login = await env.subs(["mcp", "login", "demo"]);
    assert.equal(login.code, 0, login.stderr);
    const finding = login.stderr.indexOf("Contacting demo at ");
    const found = login.stderr.indexOf(`demo authorizes at ${env.as.issuer}`);
    const opening = login.stderr.indexOf("Opening the browser");
    assert.ok(finding >= 0 && found > finding && opening > found, login.stderr);
  } finally {
    await env.close();
  }
});

test("progress: a server that cannot be reached fails the discovery step visibly, naming the id", async () => {
  const env = await environment();
  try {
    env.write(`[mcp.demo]\nurl = "${await refusedUrl()}"\n`);
    const login = await env.subs(["mcp", "login", "demo"]);
    assert.equal(login.code, 1);
    assert.match(login.stderr, /Contacting demo at http/);
    assert.match(login.stderr, /Could not start the login of demo/);
    assert.match(login.stderr, /error: demo: cannot reach http:\/\/127\.0\.0\.1:\d+ \(ECONNREFUSED\)/);
    assert.match(login.stderr, /hint: check the url in the file and that the server is up/);
    assert.doesNotMatch(login.stderr, /--debug/, "the hint fits the failure");
  } finally {
    await env.close();
  }
});

test("progress: a server that accepts the connection and never answers is 'no answer within N s', not 'cannot reach'", async () => {
  const env = await environment();
  const sockets: Socket[] = [];
  const silent = createServer((socket) => void sockets.push(socket));
  await new Promise<void>((resolve) => silent.listen(0, "127.0.0.1", resolve));
  const port = (silent.address() as AddressInfo).port;
  try {
    env.write(`[mcp.quiet]\nurl = "http://127.0.0.1:${port}/mcp"\n`);
    const login = await env.subs(["mcp", "login", "quiet", "--json"], { env: { SUBS_HTTP_TIMEOUT: "1" } });
    assert.equal(login.code, 1);
    assert.match(login.stderr, new RegExp(`quiet: http://127\\.0\\.0\\.1:${port} accepted the connection but gave no answer within 1s`));
    assert.doesNotMatch(login.stderr, /cannot reach/);
    assert.equal(JSON.parse(login.stdout).error.code, "timeout");
  } finally {
    for (const s of sockets) s.destroy();
    silent.close();
    await env.close();
  }
});

test("login --all: a failure names its id in human output; a denial's hint says to log in again and approve", async () => {
  const env = await environment({ as: { consent: "deny" } });
  try {
    env.write(`[mcp.first]\nurl = "${env.mcp.url}"\n\n[mcp.gone]\nurl = "http://127.0.0.1:9/mcp"\n`);
    const all = await env.subs(["mcp", "login", "--all"]);
    assert.equal(all.code, 1);
    assert.match(all.stderr, /✖ first: authorization was not granted \(access_denied/);
    assert.match(all.stderr, /hint: run `subs mcp login first` again and approve the request/);
    // The first failure does not stop the next login: both are tried, both said.
    assert.match(all.stderr, /✖ gone: cannot reach http:\/\/127\.0\.0\.1:9/);
    assert.match(all.stderr, /error: 2 of 2 logins failed \(first, gone\)/);
    env.write(`[mcp.gone]\nurl = "http://127.0.0.1:9/mcp"\n\n[mcp.first]\nurl = "${env.mcp.url}"\n`);
    const unreachable = await env.subs(["mcp", "login", "--all"]);
    assert.equal(unreachable.code, 1);
    assert.match(unreachable.stderr, /✖ gone: cannot reach http:\/\/127\.0\.0\.1:9/);
    assert.match(unreachable.stderr, /✖ first: authorization was not granted/);
  } finally {
    await env.close();
  }
});

test("paste mode: junk and a redirect from another login are said to be wrong and the wait goes on; the matching redirect ends it", async () => {
  const env = await environment();
  try {
    const stdin = new PassThrough();
    const t = testContext({ cwd: env.dir, env: {}, terminalStdin: async () => stdin });
    const running = run(["mcp", "login", "demo", "--no-browser", "--timeout", "20"], t.ctx);
    const url = await waitFor(t.stderr, authorizeUrl);
    // The "browser" is on another machine: it is redirected but cannot reach the loopback.
    const location = (await fetch(url, { redirect: "manual" })).headers.get("location")!;
    const redirect = new URL(location);
    const code = redirect.searchParams.get("code")!;

    stdin.write("hello there\n");
    await waitFor(t.stderr, (s) => (/that is not the address the browser was redirected to/.test(s) ? true : undefined));
    const other = new URL(redirect);
    other.searchParams.set("state", "state-of-another-login");
    stdin.write(`${other.href}\n`);
    await waitFor(t.stderr, (s) => (/that address is not from this login/.test(s) ? true : undefined));
    assert.equal(env.as.counters.codeExchanges, 0, "nothing pasted so far was redeemed");

    stdin.write(`${location}\n`);
    assert.equal(await running, 0, t.stderr());
    assert.ok(credential(env, "demo"));
    assert.ok(!t.stderr().includes(code), "what was pasted is never echoed");
  } finally {
    await env.close();
  }
});

test("no browser: when the opener fails, the login says so at once and, on a terminal, takes the pasted redirect", async () => {
  const env = await environment();
  try {
    const stdin = new PassThrough();
    const t = testContext({
      cwd: env.dir,
      env: {},
      terminalStdin: async () => stdin,
      openBrowser: async () => {
        throw new Error("xdg-open exited with code 3");
      },
    });
    const running = run(["mcp", "login", "demo", "--timeout", "600"], t.ctx);
    let ended = false;
    void running.finally(() => (ended = true));
    await waitFor(t.stderr, (s) => (/could not open a browser \(xdg-open exited with code 3\)/.test(s) ? true : undefined), 60_000);
    await waitFor(t.stderr, (s) => (/paste the address it was redirected to/.test(s) ? true : undefined), 60_000);
    // An order: said while the login still waits for the person, not once it has timed out.
    assert.equal(ended, false, "said at once, not after the timeout");
    const url = authorizeUrl(t.stderr())!;
    const location = (await fetch(url, { redirect: "manual" })).headers.get("location")!;
    stdin.write(`${location}\n`);
    assert.equal(await running, 0, t.stderr());
    assert.ok(credential(env, "demo"));
  } finally {
    await env.close();
  }
});

test("one-time link: the browser's argv holds no state; a second visit to the link stops the login and nothing is stored", async () => {
  const env = await environment();
  try {
    const opened: string[] = [];
    const replay = async (link: string) => {
      opened.push(link);
      // Another local user read the link from /proc and got there first; then the real browser.
      const first = await fetch(link, { redirect: "manual" });
      await first.body?.cancel();
      const second = await fetch(link, { redirect: "manual" });
      await second.body?.cancel();
      assert.equal(second.status, 410);
    };
    const login = await env.subs(["mcp", "login", "demo", "--json", "--timeout", "20"], { openBrowser: replay });
    assert.equal(login.code, 1, login.stderr);
    assert.equal(JSON.parse(login.stdout).error.code, "link_replayed");
    assert.match(login.stderr, /opened twice/);
    assert.doesNotMatch(opened[0]!, /state|authorize/);
    assert.equal(env.as.counters.codeExchanges, 0);
    assert.equal(credential(env, "demo"), undefined);
  } finally {
    await env.close();
  }
});
