// A connection's `headers` with [remote] (docs/deployment-protocol.md sections 2, 3.2, 3.12 and 8):
// `subs apply` declares the header templates, `subs mcp login` hands the deployment the value of
// each variable they name (from this machine's variable with --from-env, else typed hidden on a
// terminal) instead of starting a consent, and `subs mcp list` says which are not held. Against
// the reference deployment (test/support/deployment/server.ts), which fills the headers from the
// values it holds when it lists a server's tools, and an MCP server that answers only with the
// right X-API-Key. The built CLI (bin/subs.cjs) runs the login with --from-env (and the list and
// tools after it), the login without a terminal, and the logins on a real terminal (a
// pseudo-terminal: the value typed is not echoed, Ctrl-C interrupts); the rest runs `run()`
// in this process, where what is checked is what is sent, held and printed.
import assert from "node:assert/strict";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { after, afterEach, before, beforeEach, describe, test } from "node:test";
import { runAs, type How } from "../support/cli.ts";
import { startDeployment, type ReferenceDeployment } from "../support/deployment/server.ts";
import { annotatedTool, startMcpServer, type RunningMcpServer } from "../support/mcp-server.ts";
import { onTerminal } from "../support/terminal.ts";

const TOKEN = "deploy-api-token-SECRET";
const KEY = "exa-key-VALUE-0123456789";
const dirs: string[] = [];
let mcp: RunningMcpServer;
/** The X-API-Key of every request that reached the MCP server. */
const keysSeen: Array<string | undefined> = [];

before(async () => {
  // An API-key server: without the right X-API-Key, 401.
  mcp = await startMcpServer({
    tools: [annotatedTool("web_search", { readOnlyHint: true })],
    gate: (req, res) => {
      const key = req.headers["x-api-key"];
      keysSeen.push(typeof key === "string" ? key : undefined);
      if (key === KEY) return false;
      res.writeHead(401, { "content-type": "text/plain" }).end("missing or wrong X-API-Key");
      return true;
    },
  });
});
after(async () => {
  await mcp.close();
  dirs.forEach((d) => rmSync(d, { recursive: true, force: true }));
});

let deployment: ReferenceDeployment;
beforeEach(async () => {
  deployment = await startDeployment({ token: TOKEN });
});
afterEach(() => deployment.close());

const EXA = () => `[mcp.exa]\nurl = "${mcp.url}"\nheaders = { "X-API-Key" = "\${EXA_API_KEY}", "X-Client" = "subs-test" }\n`;

/** `remote`: the deployment's url (default: this test's reference deployment). */
function project(body: string, remote = deployment.url) {
  const dir = mkdtempSync(path.join(tmpdir(), "subs-remote-headers-"));
  dirs.push(dir);
  const write = (text: string) => writeFileSync(path.join(dir, "substructure.toml"), `[remote]\nurl = "${remote}"\n\n${text}`);
  write(body);
  const run = (args: string[], options: { how?: How; env?: Record<string, string> } = {}) =>
    runAs(options.how ?? "in-process", args, { cwd: dir, env: { SUBSTRUCTURE_TOKEN: TOKEN, ...options.env } });
  return { dir, write, run };
}

const writes = () => deployment.requests.filter((r) => !r.startsWith("GET"));
const printed = (...results: Array<{ stdout: string; stderr: string }>) => results.map((r) => r.stdout + r.stderr).join("\n");

describe("subs apply with headers", () => {
  test("sends the templates; a second apply is unchanged and sends no write; a changed value is a planned `headers` change", async () => {
    const p = project(EXA());
    const first = await p.run(["apply"]);
    assert.equal(first.code, 0, first.stderr);
    assert.match(first.stdout, /\+ exa/);
    assert.deepEqual(deployment.connections.get("exa")!.headers, { "X-API-Key": "${EXA_API_KEY}", "X-Client": "subs-test" });

    deployment.requests.length = 0;
    // The same names and values in another order are the same headers (section 8).
    p.write(`[mcp.exa]\nurl = "${mcp.url}"\nheaders = { "X-Client" = "subs-test", "X-API-Key" = "\${EXA_API_KEY}" }\n`);
    const second = await p.run(["apply", "--json"]);
    assert.equal(second.code, 0, second.stderr);
    assert.deepEqual(JSON.parse(second.stdout).connections.map((c: { action: string }) => c.action), ["unchanged"]);
    assert.deepEqual(writes(), []);

    p.write(EXA().replace("subs-test", "subs-test-2"));
    const dry = await p.run(["apply", "--dry-run", "--json"]);
    assert.equal(dry.code, 0, dry.stderr);
    const planned = JSON.parse(dry.stdout).connections[0];
    assert.deepEqual([planned.action, planned.changed, planned.credential], ["change", ["headers"], "none"]);
    const third = await p.run(["apply"]);
    assert.equal(third.code, 0, third.stderr);
    assert.match(third.stdout, /~ exa +headers changed; no credential/);
    assert.equal(deployment.connections.get("exa")!.headers!["X-Client"], "subs-test-2");

    // Removing the headers is a change too, and the declaration then carries none.
    p.write(`[mcp.exa]\nurl = "${mcp.url}"\n`);
    const fourth = await p.run(["apply"]);
    assert.equal(fourth.code, 0, fourth.stderr);
    assert.match(fourth.stdout, /~ exa +headers changed/);
    assert.equal(deployment.connections.get("exa")!.headers, undefined);
  });

  test("a deployment of v1 alone gets the headers in PUT /v1/mcp/{id}; a second apply is unchanged", async () => {
    const v1 = await startDeployment({ token: TOKEN, protocol: "v1" });
    try {
      const p = project(EXA(), v1.url);
      const applied = await p.run(["apply"]);
      assert.equal(applied.code, 0, applied.stderr);
      assert.deepEqual(v1.connections.get("exa")!.headers, { "X-API-Key": "${EXA_API_KEY}", "X-Client": "subs-test" });
      assert.deepEqual(v1.requests.filter((r) => !r.startsWith("GET")), ["PUT /v1/state", "PUT /v1/mcp/exa"]);
      v1.requests.length = 0;
      const again = await p.run(["apply"]);
      assert.equal(again.code, 0, again.stderr);
      assert.match(again.stderr, /Nothing to do/);
      assert.deepEqual(v1.requests.filter((r) => !r.startsWith("GET")), []);
    } finally {
      await v1.close();
    }
  });
});

describe("subs mcp login of a connection whose headers name variables", () => {
  test("--from-env hands the value over (no consent); the deployment holds it, lists the connection authorized and fills the header; nothing prints the value", async () => {
    const p = project(EXA());
    const cli = { how: "cli" as const, env: { EXA_API_KEY: KEY } };
    const listed = await p.run(["mcp", "list"], cli);
    assert.equal(listed.code, 0, listed.stderr);
    assert.match(listed.stdout, /^exa\t.*\tnot applied · subs apply/m);

    const login = await p.run(["mcp", "login", "exa", "--from-env"], cli);
    assert.equal(login.code, 0, login.stderr);
    assert.match(login.stdout, /✔ exa: authorized on http:\/\/127\.0\.0\.1:\d+\n {2}the deployment holds EXA_API_KEY for its headers\n/);
    assert.match(login.stderr, /http:\/\/127\.0\.0\.1:\d+ holds EXA_API_KEY for exa/);
    assert.doesNotMatch(login.stderr, /Opening the browser|authorizations/);
    // Declared first as the file says (it was not), then the value; no consent was started.
    assert.deepEqual(writes(), ["PUT /v1/mcp/exa", "PUT /v1/mcp/exa/secrets/EXA_API_KEY"]);
    assert.equal(deployment.headerValues.get("exa")?.get("EXA_API_KEY")?.value, KEY);
    assert.equal(deployment.headerValues.get("exa")?.get("EXA_API_KEY")?.url, mcp.url);

    const list = await p.run(["mcp", "list", "--json"], cli);
    assert.equal(list.code, 0, list.stderr);
    const [entry] = JSON.parse(list.stdout);
    assert.deepEqual([entry.status, entry.usable, entry.drift], ["authorized", true, null]);
    assert.deepEqual(
      entry.secrets.map((s: { name: string; held: boolean; set_at: string | null }) => [s.name, s.held, typeof s.set_at]),
      [["EXA_API_KEY", true, "string"]],
    );
    const table = await p.run(["mcp", "list"], cli);
    assert.match(table.stdout, /^exa\t.*\tauthorized/m);

    // The deployment sends the header filled from the value it holds (and no Bearer: it holds no OAuth credential).
    keysSeen.length = 0;
    const tools = await p.run(["mcp", "tools", "exa", "--json"], cli);
    assert.equal(tools.code, 0, tools.stderr);
    assert.deepEqual(JSON.parse(tools.stdout).tools.map((t: { name: string }) => t.name), ["web_search"]);
    assert.ok(keysSeen.length > 0 && keysSeen.every((k) => k === KEY), String(keysSeen));
    assert.deepEqual(mcp.authorizations.filter((a) => a.startsWith("Bearer ")), []);

    const again = await p.run(["mcp", "login", "exa", "--from-env", "--json"], { env: { EXA_API_KEY: KEY } });
    assert.equal(again.code, 0, again.stderr);
    const [json] = JSON.parse(again.stdout);
    assert.deepEqual([json.id, json.result, json.target, json.secrets], ["exa", "authorized", "remote", ["EXA_API_KEY"]]);
    assert.ok(!printed(listed, login, list, table, tools, again).includes(KEY), "the value reached this machine's output");
  });

  test("an answer that quotes the value back is scrubbed, --json included", async () => {
    const p = project(EXA());
    assert.equal((await p.run(["apply"])).code, 0);
    deployment.fault({ method: "PUT", path: "/v1/mcp/exa/secrets/", kind: "body", status: 400, body: { error: "invalid_request", message: `refused the value ${KEY} (${Buffer.from(KEY).toString("base64")})` } });
    const result = await p.run(["mcp", "login", "exa", "--from-env"], { env: { EXA_API_KEY: KEY } });
    assert.equal(result.code, 1, result.stderr);
    assert.match(result.stderr, /400 invalid_request: refused the value \[redacted\]/);
    deployment.fault({ method: "PUT", path: "/v1/mcp/exa/secrets/", kind: "body", status: 400, body: { error: "invalid_request", message: `refused the value ${KEY}` } });
    const json = await p.run(["mcp", "login", "exa", "--from-env", "--json"], { env: { EXA_API_KEY: KEY } });
    assert.equal(json.code, 1);
    assert.match(JSON.parse(json.stdout).error.message, /\[redacted\]/);
    assert.ok(!printed(result, json).includes(KEY) && !printed(result, json).includes(Buffer.from(KEY).toString("base64")));
    assert.equal(deployment.headerValues.has("exa"), false);
  });

  test("--from-env with the variable unset, or an empty one, is a usage error naming it, and nothing is sent", async () => {
    const p = project(EXA());
    const unset = await p.run(["mcp", "login", "exa", "--from-env"]);
    assert.equal(unset.code, 2, unset.stderr);
    assert.match(unset.stderr, /error: exa: \$EXA_API_KEY is not set; --from-env reads the value of EXA_API_KEY/);
    assert.match(unset.stderr, /hint: export EXA_API_KEY=/);
    const empty = await p.run(["mcp", "login", "exa", "--from-env", "--json"], { env: { EXA_API_KEY: "" } });
    assert.equal(empty.code, 2, empty.stderr);
    assert.match(JSON.parse(empty.stdout).error.message, /exa: the value given for EXA_API_KEY is empty; nothing was sent/);
    assert.deepEqual(deployment.requests, []);
  });

  test("without a terminal and without --from-env, a usage error says to pass --from-env, and nothing is sent", async () => {
    const p = project(EXA());
    const result = await p.run(["mcp", "login", "exa"], { how: "cli", env: { EXA_API_KEY: KEY } });
    assert.equal(result.code, 2, result.stderr);
    assert.match(result.stderr, /exa: its headers need the value of EXA_API_KEY, which subs asks for on a terminal, and stdin is not one; nothing was sent/);
    assert.match(result.stderr, /hint: export EXA_API_KEY=<the value exa expects>, then run `subs mcp login exa --from-env`/);
    assert.deepEqual(deployment.requests, []);
  });

  test("the deployment's declaration differing from the file (unknown_variable), or none (404), says to run `subs apply`", async () => {
    const p = project(EXA());
    assert.equal((await p.run(["apply"])).code, 0);
    deployment.fault({ method: "PUT", path: "/v1/mcp/exa/secrets/", kind: "body", status: 400, body: { error: "unknown_variable", message: "exa: its headers do not name ${EXA_API_KEY}; they name ${OTHER}" } });
    const unknown = await p.run(["mcp", "login", "exa", "--from-env", "--json"], { env: { EXA_API_KEY: KEY } });
    assert.equal(unknown.code, 1, unknown.stderr);
    assert.match(unknown.stderr, /error: exa: the deployment's declaration of exa does not name \$\{EXA_API_KEY\} in its headers/);
    assert.match(unknown.stderr, /hint: the deployment's connection differs from the file: run `subs apply`, then `subs mcp login exa` again/);
    assert.equal(JSON.parse(unknown.stdout).error.code, "unknown_variable");
    deployment.fault({ method: "PUT", path: "/v1/mcp/exa/secrets/", kind: "body", status: 404, body: { error: "not_found", message: "no connection exa" } });
    const missing = await p.run(["mcp", "login", "exa", "--from-env"], { env: { EXA_API_KEY: KEY } });
    assert.equal(missing.code, 1, missing.stderr);
    assert.match(missing.stderr, /error: exa: not declared on the deployment \(no connection exa\)/);
    assert.match(missing.stderr, /hint: run `subs apply`, then `subs mcp login exa` again/);
  });

  test("`subs mcp list` names the variables not held; --all hands over each connection's values", async () => {
    const p = project(`${EXA()}\n[mcp.other]\nurl = "${mcp.url}"\nheaders = { "X-Org-Token" = "org \${ORG_TOKEN}", "X-API-Key" = "\${EXA_API_KEY}" }\n`);
    assert.equal((await p.run(["apply"])).code, 0);
    const list = await p.run(["mcp", "list"]);
    assert.equal(list.code, 0, list.stderr);
    assert.match(list.stdout, /^exa\t.*\tneeds login \(EXA_API_KEY not held\) · subs mcp login exa/m);
    assert.match(list.stdout, /^other\t.*\tneeds login \(ORG_TOKEN, EXA_API_KEY not held\) · subs mcp login other/m);
    const json = JSON.parse((await p.run(["mcp", "list", "--json"])).stdout);
    assert.deepEqual(json[1].secrets, [
      { name: "ORG_TOKEN", held: false, set_at: null, set_by: null },
      { name: "EXA_API_KEY", held: false, set_at: null, set_by: null },
    ]);

    const all = await p.run(["mcp", "login", "--all", "--from-env", "--json"], { env: { EXA_API_KEY: KEY, ORG_TOKEN: "org-token-VALUE-42" } });
    assert.equal(all.code, 0, all.stderr);
    assert.deepEqual(JSON.parse(all.stdout).map((r: { id: string; secrets: string[] }) => [r.id, r.secrets]), [["exa", ["EXA_API_KEY"]], ["other", ["ORG_TOKEN", "EXA_API_KEY"]]]);
    assert.deepEqual([...deployment.headerValues.get("other")!.keys()].sort(), ["EXA_API_KEY", "ORG_TOKEN"]);
    const after = JSON.parse((await p.run(["mcp", "list", "--json"])).stdout);
    assert.deepEqual(after.map((e: { status: string }) => e.status), ["authorized", "authorized"]);
    assert.ok(!printed(list, all).includes("org-token-VALUE-42"));
    // A header no longer naming a variable drops its value there; the connection needs a login again for the new one.
    p.write(`${EXA()}\n[mcp.other]\nurl = "${mcp.url}"\nheaders = { "X-Org-Token" = "org \${ORG_TOKEN_2}" }\n`);
    assert.equal((await p.run(["apply"])).code, 0);
    assert.equal(deployment.headerValues.has("other"), false);
    const changed = await p.run(["mcp", "list"]);
    assert.match(changed.stdout, /^other\t.*\tneeds login \(ORG_TOKEN_2 not held\)/m);
  });
});

describe("subs mcp login on a terminal", () => {
  test("asks for the value with hidden input: what is typed is not echoed, Backspace takes a character back", async () => {
    const p = project(EXA());
    const run = await onTerminal(["mcp", "login", "exa"], {
      cwd: p.dir,
      env: { SUBSTRUCTURE_TOKEN: TOKEN },
      prompt: /EXA_API_KEY for exa \(input hidden\): /,
      // A stray character taken back with Backspace (DEL, as terminals send it), then Enter.
      typed: `${KEY}Z\u007f\r`,
    });
    assert.equal(run.code, 0, run.screen);
    assert.match(run.screen, /✔ exa: authorized on http:\/\/127\.0\.0\.1:\d+/);
    assert.equal(deployment.headerValues.get("exa")?.get("EXA_API_KEY")?.value, KEY);
    assert.ok(!run.screen.includes(KEY) && !run.screen.includes(KEY.slice(0, 8)), `the value was echoed:\n${run.screen}`);
  });

  test("Ctrl-C at the question interrupts (exit 130) and sends nothing", async () => {
    const p = project(EXA());
    const run = await onTerminal(["mcp", "login", "exa"], { cwd: p.dir, env: { SUBSTRUCTURE_TOKEN: TOKEN }, prompt: /\(input hidden\): /, typed: "part\u0003" });
    assert.equal(run.code, 130, run.screen);
    assert.match(run.screen, /Interrupted\./);
    assert.deepEqual(deployment.requests, []);
  });
});

describe("the reference deployment's headers and held values (sections 3.2, 3.12, 5)", () => {
  const call = async (method: string, pathname: string, body?: unknown) => {
    const res = await fetch(`${deployment.url}${pathname}`, {
      method,
      headers: { authorization: `Bearer ${TOKEN}`, ...(body === undefined ? {} : { "content-type": "application/json" }) },
      ...(body === undefined ? {} : { body: JSON.stringify(body) }),
    });
    const text = await res.text();
    return { status: res.status, body: text ? JSON.parse(text) : undefined, text };
  };
  const connection = async (id: string) => (await call("GET", "/v1/mcp")).body.connections.find((c: { id: string }) => c.id === id);

  test("refuses what section 3.2 refuses, never quoting a literal", async () => {
    for (const headers of [{ Authorization: "${T}" }, { Host: "x" }, { "X-API-Key": "literal-secret-1" }, { "X-A": "${1BAD}" }, { "x-a": "1", "X-A": "2" }, { "Bad Name": "x" }]) {
      const res = await call("PUT", "/v1/mcp/a", { url: mcp.url, prefix_tools: true, headers });
      assert.deepEqual([res.status, res.body.error], [400, "invalid_request"], JSON.stringify(headers));
      assert.ok(!res.text.includes("literal-secret-1"));
    }
    const state = await call("PUT", "/v1/state", { connections: [{ id: "a", url: mcp.url, prefix_tools: true, headers: { Cookie: "c=1" } }], agents: [], prune: true });
    assert.deepEqual([state.status, state.body.error], [400, "invalid_request"]);
    assert.equal(deployment.connections.size, 0);
    // `{}` is none: not echoed.
    const none = await call("PUT", "/v1/mcp/a", { url: mcp.url, prefix_tools: true, headers: {} });
    assert.equal(none.status, 201);
    assert.equal(Object.hasOwn(none.body, "headers"), false);
  });

  test("holds a value, refuses a variable not named and an undeclared id, drops values on a url change, a header change and a delete", async () => {
    const declared = await call("PUT", "/v1/mcp/exa", { url: mcp.url, prefix_tools: true, headers: { "X-API-Key": "${EXA_API_KEY}" } });
    assert.equal(declared.status, 201);
    assert.deepEqual([declared.body.status, declared.body.secrets], ["declared", [{ name: "EXA_API_KEY", held: false }]]);
    const tools = await call("GET", "/v1/mcp/exa/tools");
    assert.deepEqual([tools.status, tools.body.error], [409, "not_authorized"]);
    assert.match(tools.body.message, /no value for EXA_API_KEY; run `subs mcp login exa`/);

    assert.deepEqual((await call("PUT", "/v1/mcp/exa/secrets/OTHER", { value: KEY })).body.error, "unknown_variable");
    assert.equal((await call("PUT", "/v1/mcp/nope/secrets/EXA_API_KEY", { value: KEY })).status, 404);
    for (const body of [{ value: "" }, { value: "a\nb" }, { value: 1 }, { value: KEY, more: 1 }]) {
      assert.equal((await call("PUT", "/v1/mcp/exa/secrets/EXA_API_KEY", body)).status, 400, JSON.stringify(body));
    }
    assert.equal((await call("PUT", "/v1/mcp/exa/secrets/EXA_API_KEY", { value: KEY })).status, 204);
    const held = await connection("exa");
    assert.equal(held.status, "authorized");
    assert.ok(!JSON.stringify(held).includes(KEY));
    assert.equal((await call("GET", "/v1/mcp/exa/tools")).status, 200);

    // The same url, the variable still named: kept. Another url: dropped.
    await call("PUT", "/v1/mcp/exa", { url: mcp.url, prefix_tools: false, headers: { "X-API-Key": "${EXA_API_KEY}", "X-More": "${MORE}" } });
    assert.equal(deployment.headerValues.get("exa")?.has("EXA_API_KEY"), true);
    assert.equal((await connection("exa")).status, "declared", "MORE is not held");
    await call("PUT", "/v1/mcp/exa", { url: `${mcp.url}/other`, prefix_tools: true, headers: { "X-API-Key": "${EXA_API_KEY}" } });
    assert.equal(deployment.headerValues.has("exa"), false);

    await call("PUT", "/v1/mcp/exa/secrets/EXA_API_KEY", { value: KEY });
    await call("PUT", "/v1/mcp/exa", { url: `${mcp.url}/other`, prefix_tools: true, headers: { "X-Key": "${NEW_KEY}" } });
    assert.equal(deployment.headerValues.has("exa"), false, "a variable no longer named");

    await call("PUT", "/v1/mcp/exa/secrets/NEW_KEY", { value: KEY });
    assert.equal((await call("DELETE", "/v1/mcp/exa/secrets/NEW_KEY")).status, 204);
    assert.equal((await call("DELETE", "/v1/mcp/exa/secrets/NEW_KEY")).status, 404);
    await call("PUT", "/v1/mcp/exa/secrets/NEW_KEY", { value: KEY });
    assert.equal((await call("DELETE", "/v1/mcp/exa")).status, 204);
    assert.equal(deployment.headerValues.has("exa"), false);
  });
});
