// A step-up (403 insufficient_scope) asks for the union of scopes only within
// the file's `oauth.scopes` when it pins them, and says so when the server wants one outside; with
// no person to consent (stderr not a terminal, or CI) it fails at once with the next step instead
// of waiting for a browser; a consent that does not come names --timeout, the flag that waits
// longer. The login test servers on loopback, subs in-process.
import assert from "node:assert/strict";
import { afterEach, describe, it } from "node:test";
import { credential, environment, type Env } from "../auth/harness.ts";
import { within } from "../support/wait.ts";

const PROTECT = { requiredScopes: ["files:read"], toolScopes: { echo: ["files:write"], search: ["admin"] } };
const PINNED = (url: string) => `[mcp.demo]\nurl = "${url}"\noauth = { scopes = ["files:read", "files:write"] }\n`;

describe("step-up", () => {
  let env: Env;
  afterEach(() => env.close());

  it("with oauth.scopes pinned: asks for the union within them, and the call goes through", async () => {
    // Logged in before the file pinned its scopes: the credential holds `profile`, which the file now leaves out.
    env = await environment({ protect: { scopesSupported: ["files:read", "profile"], toolScopes: PROTECT.toolScopes }, as: { grantableScopes: ["files:read", "files:write", "profile"] } });
    assert.equal((await env.subs(["mcp", "login", "demo"])).code, 0);
    assert.equal(credential(env, "demo")?.scopes, "files:read profile");
    env.write(PINNED(env.mcp.url));
    const call = await env.subs(["mcp", "call", "demo", "echo", "--args", '{"n":1}'], { terminal: true });
    assert.equal(call.code, 0, call.stderr);
    assert.equal(call.stdout, 'echo:{"n":1}\n');
    assert.deepEqual(env.as.authorizations.at(-1)?.scopes, ["files:read", "files:write"]);
  });

  it("with oauth.scopes pinned: a scope outside them is refused (exit 2) before any browser, naming the key", async () => {
    env = await environment({ protect: PROTECT, as: { grantableScopes: ["files:read", "files:write", "admin"] }, toml: PINNED });
    assert.equal((await env.subs(["mcp", "login", "demo"])).code, 0);
    const before = env.as.counters.authorizations;
    const opened: string[] = [];
    const call = await env.subs(["mcp", "call", "demo", "search", "--timeout", "5", "--json"], { terminal: true, openBrowser: async (url) => void opened.push(url) });
    assert.equal(call.code, 2, call.stderr);
    const { error } = JSON.parse(call.stdout);
    assert.equal(error.code, "scope_not_in_file");
    assert.match(error.message, /^demo: the server needs admin, which the file's oauth\.scopes does not include/);
    assert.match(error.hint, /oauth\.scopes = \["files:read", "files:write", "admin"\]/);
    assert.deepEqual(opened, []);
    assert.equal(env.as.counters.authorizations, before);
  });

  it("without a terminal: fails at once (exit 4) with the next step, no browser, no wait", async () => {
    env = await environment({ protect: PROTECT, as: { grantableScopes: ["files:read", "files:write"] } });
    assert.equal((await env.subs(["mcp", "login", "demo"])).code, 0);
    const before = env.as.counters.authorizations;
    const opened: string[] = [];
    // A wait for consent would last the whole --timeout; the bound on the test's wait is far below it.
    const call = await within(env.subs(["mcp", "call", "demo", "echo", "--timeout", "600"], { openBrowser: async (url) => void opened.push(url) }), "the call to fail without waiting for consent");
    assert.equal(call.code, 4, call.stderr);
    assert.match(call.stderr, /demo: the server needs more permissions \(files:write\); authorizing them needs a person at a browser, and there is no terminal here/);
    assert.match(call.stderr, /oauth\.scopes = \["files:read", "files:write"\] under \[mcp\.demo\]/);
    assert.match(call.stderr, /`subs mcp login demo`/);
    assert.deepEqual(opened, []);
    assert.equal(env.as.counters.authorizations, before);
  });

  it("on a terminal with CI set: the same, saying CI; with pinned scopes the next step is mcp login", async () => {
    env = await environment({ protect: PROTECT, as: { grantableScopes: ["files:read"] }, toml: PINNED });
    assert.equal((await env.subs(["mcp", "login", "demo"])).code, 0);
    const opened: string[] = [];
    const tools = await env.subs(["mcp", "call", "demo", "echo", "--timeout", "5", "--json"], { terminal: true, env: { CI: "true" }, openBrowser: async (url) => void opened.push(url) });
    assert.equal(tools.code, 4, tools.stderr);
    const { error } = JSON.parse(tools.stdout);
    assert.equal(error.code, "needs_step_up");
    assert.match(error.message, /\(CI is set\)$/);
    assert.equal(error.hint, "run `subs mcp login demo` on a machine with a browser (it asks for the file's oauth.scopes)");
    assert.deepEqual(opened, []);
  });

  it("without a terminal but with $BROWSER naming an opener (an automated consent), even in CI: the step-up goes ahead", async () => {
    env = await environment({ protect: PROTECT, as: { grantableScopes: ["files:read", "files:write"] } });
    assert.equal((await env.subs(["mcp", "login", "demo"])).code, 0);
    // --no-browser opens nothing, so $BROWSER does not count there.
    const noBrowser = await env.subs(["mcp", "call", "demo", "echo", "--timeout", "5", "--no-browser"], { env: { BROWSER: "consent-bot" } });
    assert.equal(noBrowser.code, 4, noBrowser.stderr);
    const call = await env.subs(["mcp", "call", "demo", "echo", "--timeout", "5"], { env: { BROWSER: "consent-bot", CI: "true" } });
    assert.equal(call.code, 0, call.stderr);
    assert.equal(call.stdout, "echo:{}\n");
  });

  it("a consent that does not come: exit 1, code timeout, the hint names --timeout (not --request-timeout)", async () => {
    env = await environment({ protect: PROTECT, as: { grantableScopes: ["files:read", "files:write"] } });
    assert.equal((await env.subs(["mcp", "login", "demo"])).code, 0);
    const call = await env.subs(["mcp", "call", "demo", "echo", "--timeout", "1", "--json"], { terminal: true, openBrowser: async () => {} });
    assert.equal(call.code, 1, call.stderr);
    const { error } = JSON.parse(call.stdout);
    assert.equal(error.code, "timeout");
    assert.match(error.message, /timed out after 1s waiting for consent/);
    assert.match(error.hint, /--timeout\b/);
    assert.doesNotMatch(error.hint, /--request-timeout/);
  });
});
