// API tokens without a shell on the host: `subs deployment token create|list|revoke` against a real
// `subs deployment serve`, on each store, over its API (--url, or the
// project's [remote]) and on its host (--store). The token shown once and nowhere else; unique
// names; admin only, the 403 naming the role needed; expiry; last use; the last admin token kept;
// revoking by exact name; a --store that does not exist refused and not made. On the SQLite store
// the first test and the project's [remote] run the built CLI (bin/subs.cjs) as a person does;
// on each store the host's first --store create and its refusal of a store that does not exist
// do too (the process opens the store itself, SQLite's native module or a Postgres connection,
// and must exit after). The rest, the same first tests on Postgres included, run the same `run()`
// in this process (what they check is the deployment's answer and what is printed, not the
// process; a child per step cost a Node start-up and the bundle's load each). The deployments
// themselves stay real processes.
import assert from "node:assert/strict";
import { existsSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { after, before, describe, test } from "node:test";
import { runAs, type How } from "../support/cli.ts";
import { callServed, startServedDeployment, STORES, type ServedDeployment } from "../support/deployment-serve.ts";
import { waitFor } from "../support/wait.ts";

type Listed = { id: string; name: string; role: string; person: string; created_at: string; expires_at: string | null; last_used_at: string | null };

/**
 * The store whose tests over the API run the built CLI. Over --url the store is the deployment's,
 * not the CLI's: on the other, the same runs are `run()` in-process.
 */
const CLI_ON: (typeof STORES)[number] = "sqlite";

for (const store of STORES) describe(`API tokens over the API and on the host (${store})`, () => {
  const how: How = store === CLI_ON ? "cli" : "in-process";
  let d: ServedDeployment;
  let cwd: string;
  /** Every token value seen in these tests: none may appear in a listing, a log line or stderr. */
  const values: string[] = [];
  const subs = (args: string[], token: string = d.token, how: How = "in-process") => runAs(how, ["deployment", "token", ...args], { cwd, env: { SUBSTRUCTURE_TOKEN: token } });
  const create = async (name: string, role: string, extra: string[] = [], token?: string) => {
    const made = await subs(["create", "--name", name, "--role", role, "--url", d.url, "--json", ...extra], token);
    assert.equal(made.code, 0, made.stderr);
    const body = JSON.parse(made.stdout);
    values.push(body.token);
    return { body, stderr: made.stderr };
  };
  const list = async (token?: string): Promise<Listed[]> => {
    const listed = await subs(["list", "--url", d.url, "--json"], token);
    assert.equal(listed.code, 0, listed.stderr);
    for (const value of values) assert.ok(!listed.stdout.includes(value), "no token value in a listing");
    return JSON.parse(listed.stdout);
  };

  before(async () => {
    d = await startServedDeployment({ store });
    values.push(d.token);
    cwd = mkdtempSync(path.join(tmpdir(), "subs-tokens-"));
  });
  after(async () => {
    await d.close();
    rmSync(cwd, { recursive: true, force: true });
  });

  test("create over the API prints the token once on stdout (never on stderr); list shows it without its value or hash; the new token works at once", async () => {
    const plain = await subs(["create", "--name", "alice laptop", "--role", "use", "--url", d.url], d.token, how);
    assert.equal(plain.code, 0, plain.stderr);
    const value = plain.stdout.trim();
    values.push(value);
    assert.match(value, /^subsd_[A-Za-z0-9_-]{43}$/);
    assert.ok(!plain.stderr.includes(value), "the token is not on stderr");
    assert.match(plain.stderr, /made use token [0-9a-f]{12} \(alice laptop\) on http:\/\/127\.0\.0\.1:\d+; it never expires\. It is shown this once/);

    const { body } = await create("ci", "apply");
    assert.deepEqual(Object.keys(body).sort(), ["created_at", "expires_at", "id", "name", "person", "role", "token"]);
    assert.deepEqual([body.name, body.role, body.expires_at], ["ci", "apply", null]);

    const tokens = await list();
    const ci = tokens.find((t) => t.name === "ci")!;
    assert.deepEqual(Object.keys(ci), ["id", "name", "role", "person", "created_at", "expires_at", "last_used_at"]);
    assert.deepEqual([ci.id, ci.role, ci.person, ci.last_used_at], [body.id, "apply", "ci", null]);
    const raw = await callServed(d, "GET", "/v1/tokens");
    assert.equal(raw.status, 200);
    assert.ok(!/hash|token"/.test(JSON.stringify(raw.body.tokens)), "no token nor hash field in GET /v1/tokens");

    // Good at once, with its role: apply may declare.
    const put = await callServed(d, "PUT", "/v1/mcp/x", { url: "https://a.example/mcp", prefix_tools: true }, body.token);
    assert.equal(put.status, 201);

    const table = await subs(["list", "--url", d.url], d.token, how);
    assert.equal(table.code, 0, table.stderr);
    assert.match(table.stdout, new RegExp(`^${body.id}\\tapply\\tci\\tcreated \\S+\\tnever expires\\tlast used \\S+\\tof ci$`, "m"));
  });

  test("names are unique: a second token of a name is refused (exit 2 from the CLI, 409 name_taken from the API) and nothing is made", async () => {
    await create("shared", "read");
    const before = (await list()).length;
    const again = await subs(["create", "--name", "shared", "--role", "admin", "--url", d.url]);
    assert.equal(again.code, 2, again.stderr);
    assert.match(again.stderr, /409 name_taken|name_taken|named "shared" exists/);
    assert.equal(again.stdout, "");
    const raw = await callServed(d, "POST", "/v1/tokens", { name: "shared", role: "use" });
    assert.deepEqual([raw.status, raw.body.error], [409, "name_taken"]);
    assert.equal((await list()).length, before);
  });

  test("bodies are checked: a bad name, role or expires_in, or an unknown field, is 400 and makes nothing", async () => {
    const before = (await list()).length;
    for (const body of [
      { name: "", role: "use" },
      { name: "x".repeat(65), role: "use" },
      { name: "-dash", role: "use" },
      { name: "ok", role: "owner" },
      { name: "ok", role: "use", expires_in: 0 },
      { name: "ok", role: "use", expires_in: 1.5 },
      { name: "ok", role: "use", expires_in: 11 * 366 * 86400 },
      { name: "ok", role: "use", token: "subsd_mine" },
      { name: "ok", role: "use", person: "" },
      { name: "ok", role: "use", person: "a/b" },
      { name: "ok", role: "use", person: "x".repeat(129) },
    ]) {
      const raw = await callServed(d, "POST", "/v1/tokens", body);
      assert.deepEqual([raw.status, raw.body.error], [400, "invalid_request"], JSON.stringify(body));
    }
    const flag = await subs(["create", "--name", "ok", "--role", "use", "--expires-in", "soon", "--url", d.url]);
    assert.equal(flag.code, 2);
    assert.match(flag.stderr, /--expires-in must be a duration/);
    assert.equal((await list()).length, before);
  });

  test("only admin tokens manage tokens: apply, use and read get 403 naming the role needed, over the API and through the CLI", async () => {
    for (const role of ["apply", "use", "read"] as const) {
      const token = await d.tokenFor(role);
      values.push(token);
      for (const [method, pathname, body] of [
        ["GET", "/v1/tokens", undefined],
        ["POST", "/v1/tokens", { name: `by-${role}`, role: "admin" }],
        ["DELETE", "/v1/tokens/000000000000", undefined],
        ["GET", "/v1/people", undefined],
        ["DELETE", "/v1/people/ci", undefined],
      ] as const) {
        const raw = await callServed(d, method, pathname, body, token);
        assert.deepEqual([raw.status, raw.body.error], [403, "forbidden"], `${role} ${method}`);
        assert.equal(raw.body.message, `managing API tokens needs a token with the admin role; this one's role is ${role}`);
      }
      const listed = await subs(["list", "--url", d.url], token);
      assert.equal(listed.code, 1);
      assert.match(listed.stderr, new RegExp(`^error: the deployment refused GET /v1/tokens: managing API tokens needs a token with the admin role; this one's role is ${role}$`, "m"));
      assert.match(listed.stderr, /^hint: ask the deployment's operator for a token with that role/m);
    }
    assert.ok(!(await list()).some((t) => t.name.startsWith("by-")), "none was made");
  });

  test("people over the API: a person's tokens, listed; removing them revokes each at once, on the next request; the CLI says which went", async () => {
    const laptop = await create("dana laptop", "use", ["--person", "dana@example.com"]);
    const client = await create("dana claude", "use", ["--person", "dana@example.com"]);
    assert.equal(laptop.body.person, "dana@example.com");
    assert.match(laptop.stderr, /\(dana laptop, of dana@example\.com\)/);
    const raw = await callServed(d, "GET", "/v1/people");
    assert.equal(raw.status, 200);
    assert.deepEqual(
      raw.body.people.find((p: { name: string }) => p.name === "dana@example.com"),
      { name: "dana@example.com", created_at: laptop.body.created_at, tokens: 2 },
    );
    const listed = await runAs(how, ["deployment", "person", "list", "--url", d.url], { cwd, env: { SUBSTRUCTURE_TOKEN: d.token } });
    assert.equal(listed.code, 0, listed.stderr);
    assert.match(listed.stdout, /^dana@example\.com\tsince \S+\t2 tokens$/m);
    assert.equal((await callServed(d, "GET", "/v1/mcp", undefined, client.body.token)).status, 200, "dana's token works");

    const removed = await runAs(how, ["deployment", "person", "remove", "dana@example.com", "--url", d.url], { cwd, env: { SUBSTRUCTURE_TOKEN: d.token } });
    assert.equal(removed.code, 0, removed.stderr);
    assert.match(removed.stderr, new RegExp(`removed dana@example\\.com from http://127\\.0\\.0\\.1:\\d+; revoked with them: ${laptop.body.id} \\(dana laptop\\), ${client.body.id} \\(dana claude\\)`));
    for (const token of [laptop.body.token, client.body.token]) {
      const refused = await callServed(d, "GET", "/v1/mcp", undefined, token);
      assert.deepEqual([refused.status, refused.body.error], [401, "unauthorized"]);
    }
    assert.ok(!(await list()).some((t) => t.person === "dana@example.com"));
    const again = await callServed(d, "DELETE", "/v1/people/dana%40example.com");
    assert.deepEqual([again.status, again.body.error], [404, "not_found"]);
    const bad = await callServed(d, "DELETE", "/v1/people/-x");
    assert.deepEqual([bad.status, bad.body.error], [400, "invalid_request"]);
  });

  test("a token past its expiry is refused as a wrong one (401), and shows its expiry in the list", async () => {
    const { body } = await create("short", "read", ["--expires-in", "2s"]);
    assert.ok(body.expires_at !== null && Date.parse(body.expires_at) - Date.parse(body.created_at) === 2000, JSON.stringify(body));
    const listed = (await list()).find((t) => t.name === "short")!;
    assert.equal(listed.expires_at, body.expires_at);
    const answered = await waitFor(async () => {
      const got = await callServed(d, "GET", "/v1/mcp", undefined, body.token);
      return got.status !== 200 && got;
    }, "the short-lived token to be refused");
    assert.deepEqual([answered.status, answered.body.error], [401, "unauthorized"]);
    const cli = await subs(["list", "--url", d.url], body.token);
    assert.equal(cli.code, 1);
    assert.match(cli.stderr, /rejected the credential in \$SUBSTRUCTURE_TOKEN/);
  });

  test("last_used_at is set on use, and not rewritten on every request", async () => {
    const { body } = await create("reader", "read");
    assert.equal((await list()).find((t) => t.id === body.id)!.last_used_at, null);
    assert.equal((await callServed(d, "GET", "/v1/mcp", undefined, body.token)).status, 200);
    const first = (await list()).find((t) => t.id === body.id)!.last_used_at;
    assert.notEqual(first, null, "its use is recorded");
    for (let n = 0; n < 3; n++) assert.equal((await callServed(d, "GET", "/v1/agents", undefined, body.token)).status, 200);
    assert.equal((await list()).find((t) => t.id === body.id)!.last_used_at, first, "recorded to the minute, not per request");
  });

  test("revoke by exact name hits that token only; by id; an unknown one is exit 1", async () => {
    const bob = (await create("bob", "use")).body;
    const bobby = (await create("bobby", "use")).body;
    const byName = await subs(["revoke", "bob", "--url", d.url]);
    assert.equal(byName.code, 0, byName.stderr);
    assert.match(byName.stderr, new RegExp(`revoked use token ${bob.id} \\(bob\\)`));
    let ids = (await list()).map((t) => t.id);
    assert.ok(!ids.includes(bob.id) && ids.includes(bobby.id), "bobby stays");
    assert.equal((await callServed(d, "GET", "/v1/agents/x/mcp", undefined, bob.token)).status, 401);
    const byId = await subs(["revoke", bobby.id, "--url", d.url]);
    assert.equal(byId.code, 0, byId.stderr);
    ids = (await list()).map((t) => t.id);
    assert.ok(!ids.includes(bobby.id));
    const unknown = await subs(["revoke", "nobody", "--url", d.url]);
    assert.equal(unknown.code, 1);
    assert.match(unknown.stderr, /no token has the id or name "nobody"/);
    const raw = await callServed(d, "DELETE", "/v1/tokens/000000000000");
    assert.deepEqual([raw.status, raw.body.error], [404, "not_found"]);
  });

  test("the last admin token that has not expired cannot be revoked (409 last_admin, exit 2); with another admin it can", async () => {
    const admins = (await list()).filter((t) => t.role === "admin");
    assert.equal(admins.length, 1, JSON.stringify(admins));
    const own = admins[0]!;
    const raw = await callServed(d, "DELETE", `/v1/tokens/${own.id}`);
    assert.deepEqual([raw.status, raw.body.error], [409, "last_admin"]);
    const person = await callServed(d, "DELETE", `/v1/people/${encodeURIComponent(own.person)}`);
    assert.deepEqual([person.status, person.body.error], [409, "last_admin"], "nor its person removed");
    const cli = await subs(["revoke", own.name, "--url", d.url]);
    assert.equal(cli.code, 2);
    assert.match(cli.stderr, /last admin token/);
    // An admin that has expired does not count as another.
    const short = (await create("admin-short", "admin", ["--expires-in", "1s"])).body;
    await waitFor(async () => (await callServed(d, "GET", "/v1/mcp", undefined, short.token)).status === 401, "the short admin token to expire");
    assert.equal((await callServed(d, "DELETE", `/v1/tokens/${own.id}`)).status, 409);

    const second = (await create("admin-two", "admin")).body;
    const gone = await subs(["revoke", own.id, "--url", d.url], second.token);
    assert.equal(gone.code, 0, gone.stderr);
    assert.equal((await callServed(d, "GET", "/v1/mcp")).status, 401, "the revoked admin token is refused");
    d.token = second.token;
    assert.equal((await callServed(d, "DELETE", `/v1/tokens/${second.id}`)).body.error, "last_admin");
  });

  test("a project's [remote] is the default; --url and --store together are refused", async () => {
    const project = mkdtempSync(path.join(tmpdir(), "subs-tokens-project-"));
    try {
      writeFileSync(path.join(project, "substructure.toml"), `[remote]\nurl = "${d.url}"\ntoken_env = "TEAM_TOKEN"\n`);
      const listed = await runAs(how, ["deployment", "token", "list", "--json"], { cwd: project, env: { TEAM_TOKEN: d.token } });
      assert.equal(listed.code, 0, listed.stderr);
      assert.ok(JSON.parse(listed.stdout).some((t: Listed) => t.role === "admin"));
      const nowhere = await runAs(how, ["deployment", "token", "list"], { cwd });
      assert.equal(nowhere.code, 2);
      assert.match(nowhere.stderr, /which deployment\?/);
      const both = await subs(["list", "--url", d.url, "--store", d.storeArg]);
      assert.equal(both.code, 2);
      assert.match(both.stderr, /--url and --store name two places/);
    } finally {
      rmSync(project, { recursive: true, force: true });
    }
  });

  test("on the host: --store manages the same tokens; a store that does not exist is refused (exit 2) and nothing is made", async () => {
    const made = await runAs("cli", ["deployment", "token", "create", "--name", "from-host", "--role", "read", "--store", d.storeArg, "--json"], { cwd });
    assert.equal(made.code, 0, made.stderr);
    values.push(JSON.parse(made.stdout).token);
    assert.ok((await list()).some((t) => t.name === "from-host"), "the server lists a token made in its store");
    const dup = await runAs("in-process", ["deployment", "token", "create", "--name", "from-host", "--role", "read", "--store", d.storeArg], { cwd });
    assert.equal(dup.code, 2);
    assert.match(dup.stderr, /a token named "from-host" exists/);
    const revoked = await runAs("in-process", ["deployment", "token", "revoke", "from-host", "--store", d.storeArg], { cwd });
    assert.equal(revoked.code, 0, revoked.stderr);

    const missing = store === "sqlite" ? path.join(cwd, "typo") : await d.postgres!.database();
    // The first refusal is the built CLI's (it must exit after the store it could not open).
    for (const [i, args] of [["create", "--name", "x", "--role", "admin"], ["list"], ["revoke", "x"]].entries()) {
      const refused = await runAs(i === 0 ? "cli" : "in-process", ["deployment", "token", ...args, "--store", missing], { cwd });
      assert.equal(refused.code, 2, refused.stderr);
      assert.match(refused.stderr, /no deployment store in .*; nothing was created/);
      assert.equal(refused.stdout, "");
    }
    if (store === "sqlite") assert.equal(existsSync(missing), false, "no directory was made");
    else assert.deepEqual(await d.postgres!.query(missing, "SELECT table_name FROM information_schema.tables WHERE table_schema = 'public'"), [], "no table was made");
  });

  test("no token value is in the deployment's log or stderr", () => {
    const everything = JSON.stringify(d.logs) + d.stderr();
    for (const value of values) assert.ok(!everything.includes(value));
    assert.ok(d.logs.some((l) => l.path === "/v1/tokens" && l.method === "POST" && l.status === 201), "the creations were logged, without their answers");
  });
});
