// `subs deployment serve` as a real process, on each of its stores: roles on every /v1 route, the
// protocol's error bodies, health, readiness, metrics, the request log, start-up refusals, a
// graceful stop, and (Postgres) a database outage answered 503 and recovered from without a restart.
import assert from "node:assert/strict";
import { writeFileSync } from "node:fs";
import path from "node:path";
import { after, before, describe, test } from "node:test";
import type { How } from "../support/cli.ts";
import { serveOnce } from "../support/serve-once.ts";
import { startServedDeployment, STORES, type ServedDeployment } from "../support/deployment-serve.ts";
import { waitFor, within } from "../support/wait.ts";
import { ownPostgresForThisFile } from "../support/postgres.ts";

// Postgres is stopped and started here: a server of this file's own, not the run's shared one.
ownPostgresForThisFile();

const call = async (d: ServedDeployment, method: string, pathname: string, token: string | undefined, body?: unknown) => {
  const res = await fetch(`${d.url}${pathname}`, {
    method,
    headers: { ...(token ? { authorization: `Bearer ${token}` } : {}), ...(body === undefined ? {} : { "content-type": "application/json" }) },
    ...(body === undefined ? {} : { body: typeof body === "string" ? body : JSON.stringify(body) }),
  });
  const text = await res.text();
  return { status: res.status, headers: res.headers, body: text && res.headers.get("content-type")?.includes("json") ? JSON.parse(text) : text };
};

for (const store of STORES) describe(`subs deployment serve (${store})`, () => {
  let d: ServedDeployment;
  const tokens: Record<string, string> = {};
  before(async () => {
    d = await startServedDeployment({ store });
    for (const role of ["apply", "use", "read"] as const) tokens[role] = await d.tokenFor(role);
  });
  after(() => d.close());

  test("401 before anything else; each role may do what it says (a use token reads and consents, and changes nothing) and is refused the rest with 403 naming the roles that may", async () => {
    assert.deepEqual((await call(d, "GET", "/v1/nowhere", undefined)).status, 401);
    const bad = await call(d, "PUT", "/v1/mcp/x", "subsd_wrong", { url: "https://a.example/mcp", prefix_tools: true });
    assert.deepEqual([bad.status, bad.body.error], [401, "unauthorized"]);
    const read = await call(d, "PUT", "/v1/mcp/x", tokens.read, { url: "https://a.example/mcp", prefix_tools: true });
    assert.deepEqual([read.status, read.body.error], [403, "forbidden"]);
    // A teammate's use token reads and consents, and changes no declaration.
    const usePut = await call(d, "PUT", "/v1/mcp/x", tokens.use, { url: "https://a.example/mcp", prefix_tools: true });
    assert.deepEqual([usePut.status, usePut.body.error, usePut.body.message], [403, "forbidden", "changing the deployment needs a token with the role apply or admin; this one's role is use"]);
    assert.deepEqual((await call(d, "GET", "/v1/mcp", tokens.use)).body.connections, []);
    // Past the role check, to the connection it names: 404, as for an apply token.
    const useConsent = await call(d, "POST", "/v1/mcp/x/authorizations", tokens.use, {});
    assert.deepEqual([useConsent.status, useConsent.body.error], [404, "not_found"]);
    const readConsent = await call(d, "POST", "/v1/mcp/x/authorizations", tokens.read, {});
    assert.deepEqual([readConsent.status, readConsent.body.error, readConsent.body.message], [403, "forbidden", "authorizing a connection needs a token with the role use, apply or admin; this one's role is read"]);
    const put = await call(d, "PUT", "/v1/mcp/x", tokens.apply, { url: "https://a.example/mcp", prefix_tools: true });
    assert.equal(put.status, 201);
    assert.equal((await call(d, "GET", "/v1/mcp", tokens.read)).body.connections[0].id, "x");
    assert.equal((await call(d, "GET", "/v1/mcp", tokens.use)).body.connections[0].id, "x");
    assert.equal((await call(d, "DELETE", "/v1/mcp/x", tokens.read)).status, 403);
    assert.equal((await call(d, "DELETE", "/v1/mcp/x", tokens.use)).status, 403);
    assert.equal((await call(d, "DELETE", "/v1/mcp/x", tokens.apply)).status, 204);
  });

  test("protocol errors: local-only fields first, unknown fields, bad ids, 405 with Allow, body limit", async () => {
    const local = await call(d, "PUT", "/v1/mcp/x", d.token, { url: 7, auth: { token_env: "X" } });
    assert.deepEqual([local.status, local.body.error], [400, "local_only_field"]);
    const unknown = await call(d, "PUT", "/v1/mcp/x", d.token, { url: "https://a.example/mcp", prefix_tools: true, extra: 1 });
    assert.deepEqual([unknown.status, unknown.body.error], [400, "invalid_request"]);
    const plain = await call(d, "PUT", "/v1/mcp/x", d.token, { url: "http://a.example/mcp", prefix_tools: true });
    assert.deepEqual([plain.status, plain.body.error], [400, "invalid_request"]);
    assert.equal((await call(d, "PUT", "/v1/mcp/a__b", d.token, { url: "https://a.example/mcp", prefix_tools: true })).status, 400);
    assert.equal((await call(d, "GET", "/v1/mcp/%E0%A4%A/tools", d.token)).status, 400);
    const post = await call(d, "POST", "/v1/mcp", d.token, {});
    assert.deepEqual([post.status, post.body.error, post.headers.get("allow")], [405, "method_not_allowed", "GET"]);
    const huge = await call(d, "PUT", "/v1/mcp/x", d.token, `{"url": "${"a".repeat(1_100_000)}"}`);
    assert.deepEqual([huge.status, huge.body.error], [400, "invalid_request"]);
    const agent = await call(d, "PUT", "/v1/agents/t", d.token, { mcp: [{ id: "nope" }] });
    assert.deepEqual([agent.status, agent.body.error], [409, "unknown_connection"]);
  });

  test("PUT /v1/state: the single requests' rules for every entry, each refusal changing nothing; an apply token may, a read token may not", async () => {
    const conn = (id: string, extra: Record<string, unknown> = {}) => ({ id, url: `https://${id}.example/mcp`, prefix_tools: true, ...extra });
    const state = (body: unknown, token = d.token) => call(d, "PUT", "/v1/state", token, body);
    const ok = await state({ connections: [conn("s1"), conn("s2")], agents: [{ name: "sa", mcp: [{ id: "s1", tools: { read_only: false } }] }], prune: false }, tokens.apply);
    assert.equal(ok.status, 200, JSON.stringify(ok.body));
    assert.deepEqual(ok.body.changes.map((c: { action: string; kind: string; id: string }) => `${c.action} ${c.kind} ${c.id}`), ["add connection s1", "add connection s2", "add agent sa"]);
    assert.deepEqual(ok.body.agents.find((a: { name: string }) => a.name === "sa"), { name: "sa", mcp: [{ id: "s1", tools: { read_only: false } }], tools: [], agents: [] });
    const before = (await call(d, "GET", "/v1/mcp", d.token)).body;

    const refusals: Array<[unknown, number, string]> = [
      // local_only_field before the rest of the body is even valid
      [{ connections: [conn("s1"), { id: "s3", url: 7, oauth: { client_secret_env: "X" } }], agents: [], prune: true }, 400, "local_only_field"],
      [{ connections: [conn("s1"), conn("s1")], agents: [], prune: true }, 400, "invalid_request"],
      [{ connections: [conn("s1", { extra: 1 })], agents: [], prune: true }, 400, "invalid_request"],
      [{ connections: [conn("a__b")], agents: [], prune: true }, 400, "invalid_request"],
      [{ connections: [conn("s1")], agents: [{ name: "sa", mcp: [{ id: "s1" }], agents: ["sa"] }], prune: true }, 400, "invalid_request"],
      [{ connections: [conn("s1")], agents: [], prune: "yes" }, 400, "invalid_request"],
      // s2 would be pruned while sa names it
      [{ connections: [conn("s1")], agents: [{ name: "sa", mcp: [{ id: "s2" }] }], prune: true }, 409, "unknown_connection"],
    ];
    for (const [body, status, error] of refusals) {
      const answer = await state(body);
      assert.deepEqual([answer.status, answer.body.error], [status, error], JSON.stringify(body));
    }
    const read = await state({ connections: [], agents: [], prune: true }, tokens.read);
    assert.deepEqual([read.status, read.body.error], [403, "forbidden"]);
    const get = await call(d, "GET", "/v1/state", d.token);
    assert.deepEqual([get.status, get.headers.get("allow")], [405, "PUT"]);
    assert.deepEqual((await call(d, "GET", "/v1/mcp", d.token)).body, before, "no refusal changed anything");

    const pruned = await state({ connections: [], agents: [], prune: true });
    assert.equal(pruned.status, 200);
    assert.deepEqual([pruned.body.connections, pruned.body.agents], [[], []]);
  });

  test("health, readiness and metrics; one JSON log line per request, with no token in any", async () => {
    assert.deepEqual((await call(d, "GET", "/healthz", undefined)).body, { status: "ok" });
    assert.deepEqual((await call(d, "GET", "/readyz", undefined)).body, { status: "ready" });
    assert.equal((await call(d, "GET", "/metrics", undefined)).status, 401);
    assert.equal((await call(d, "GET", "/metrics", tokens.use)).status, 200, "use may do all that read may");
    const metrics = await call(d, "GET", "/metrics", tokens.read);
    assert.match(metrics.body, /subs_deployment_http_requests_total\{method="PUT",route="\/v1\/mcp\/\{id\}",status="201"\} 1/);
    assert.match(metrics.body, /subs_deployment_http_request_duration_seconds_bucket\{route="\/v1\/mcp",le="\+Inf"\} \d+/);
    assert.match(metrics.body, /subs_deployment_mcp_sessions 0/);
    const res = await fetch(`${d.url}/v1/agents?code=SECRETCODE`, { headers: { authorization: `Bearer ${d.token}`, "x-request-id": "req-42" } });
    assert.equal(res.headers.get("x-request-id"), "req-42");
    await res.text();
    // Logged once the answer has gone, which the client may see first.
    const line = await waitFor(() => d.logs.find((l) => l.request_id === "req-42"), "the request's log line");
    assert.deepEqual(Object.keys(line).sort(), ["duration_ms", "level", "method", "msg", "path", "request_id", "status", "time", "token"]);
    assert.equal(line.path, "/v1/agents");
    // Health probes that succeed are counted, not logged: the req-42 line came after them.
    assert.deepEqual(d.logs.filter((l) => l.msg === "request" && (l.path === "/healthz" || l.path === "/readyz")), [], "no log line for a probe answered 200");
    assert.match(metrics.body, /subs_deployment_http_requests_total\{method="GET",route="\/healthz",status="200"\} 1/);
    assert.match(metrics.body, /subs_deployment_http_requests_total\{method="GET",route="\/readyz",status="200"\} 1/);
    const everything = JSON.stringify(d.logs) + d.stderr();
    for (const t of [d.token, ...Object.values(tokens)]) assert.ok(!everything.includes(t), "no token in the logs");
    assert.doesNotMatch(everything, /SECRETCODE/);
    const listening = d.logs.find((l) => l.msg === "listening")!;
    if (store === "postgres") {
      assert.match(String(listening.store), /^postgres:\/\/subs:\*\*\*@127\.0\.0\.1:\d+\/\w+$/);
      assert.ok(!everything.includes(d.postgres!.password), "the database password is in no log line");
    } else {
      assert.equal(listening.store, d.dbPath);
    }
  });

  if (store === "postgres") {
    test("Postgres down: /readyz says so and requests fail fast with a clear 503; both recover when it returns, without a restart", async () => {
      const pg = d.postgres!;
      await pg.stop();
      try {
        const ready = await call(d, "GET", "/readyz", undefined);
        assert.deepEqual([ready.status, ready.body.error, ready.body.message], [503, "unavailable", "the store does not answer"]);
        // A probe that fails is logged, unlike one answered 200.
        await waitFor(() => d.logs.some((l) => l.msg === "request" && l.path === "/readyz" && l.status === 503), "the failed probe's log line");
        // That it comes fast is outage.e2e's to show, by a count over a longer outage.
        const listed = await call(d, "GET", "/v1/mcp", tokens.read);
        assert.deepEqual([listed.status, listed.body.error], [503, "store_unavailable"]);
        assert.equal(listed.headers.get("retry-after"), "2");
        assert.match(listed.body.message, /store does not answer; retry/);
        assert.ok(!JSON.stringify(listed.body).includes(pg.password));
      } finally {
        await pg.start();
      }
      const ready = await waitFor(async () => {
        const answer = await call(d, "GET", "/readyz", undefined);
        return answer.status === 200 && answer;
      }, "/readyz to say ready again once Postgres is back");
      assert.deepEqual(ready.body, { status: "ready" });
      const listed = await call(d, "GET", "/v1/mcp", tokens.read);
      assert.equal(listed.status, 200);
      assert.ok(Array.isArray(listed.body.connections));
      const put = await call(d, "PUT", "/v1/mcp/after", tokens.apply, { url: "https://a.example/mcp", prefix_tools: true });
      assert.equal(put.status, 201);
      assert.ok(!JSON.stringify(d.logs).includes(pg.password), "the database password is in no log line");
    });
  }

  // What follows ends this deployment: the tests above count requests in its metrics (the PUT of
  // the first test is the one PUT answered 201 the metrics test finds), so these come after them.
  // One deployment per store for every test here, instead of one each for these three: the left
  // request is done (and out of the in-flight count the SIGTERM test reads) once its client has
  // gone, which that test waits for; the wrong key needs only a store a deployment made.
  test("a request its client leaves while the deployment still works on it is logged with its token", async () => {
    // A server that accepts and never answers: the consent's discovery waits on it.
    const { createServer } = await import("node:net");
    const silent = createServer(() => {});
    const held: Array<import("node:net").Socket> = [];
    silent.on("connection", (s) => held.push(s));
    await new Promise<void>((resolve) => silent.listen(0, "127.0.0.1", resolve));
    try {
      const port = (silent.address() as import("node:net").AddressInfo).port;
      assert.equal((await call(d, "PUT", "/v1/mcp/silent", d.token, { url: `http://127.0.0.1:${port}/mcp`, prefix_tools: false })).status, 201);
      const left = new AbortController();
      const started = fetch(`${d.url}/v1/mcp/silent/authorizations`, { method: "POST", headers: { authorization: `Bearer ${d.token}`, "content-type": "application/json" }, body: "{}", signal: left.signal }).catch(() => "left");
      await waitFor(() => held.length > 0, "the deployment to reach the silent server");
      left.abort();
      assert.equal(await started, "left");
      // Its answer closed (the client left) before its handler returned: the log line is written
      // then, and names the token all the same.
      const line = await waitFor(() => d.logs.find((l) => l.msg === "request" && l.path === "/v1/mcp/silent/authorizations"), "the left request's log line");
      assert.equal(typeof line.token, "string", JSON.stringify(line));
    } finally {
      held.forEach((s) => s.destroy());
      silent.close();
    }
  });

  test("SIGTERM lets a request in flight finish, then exits 0", async () => {
    // A PUT whose body is held back: in flight when SIGTERM comes, finished only once the server
    // is stopping. An order, not timers: "100 Continue" says the server has the request; its
    // "stopping" log line, that SIGTERM arrived.
    const { request } = await import("node:http");
    const url = new URL(`${d.url}/v1/mcp/slow`);
    let received!: () => void;
    const inFlight = new Promise<void>((r) => (received = r));
    let req!: ReturnType<typeof request>;
    const answered = new Promise<number>((resolve, reject) => {
      req = request(url, { method: "PUT", headers: { authorization: `Bearer ${d.token}`, "content-type": "application/json", expect: "100-continue" } }, (res) => {
        res.resume();
        resolve(res.statusCode ?? 0);
      });
      req.on("error", reject);
      req.on("continue", () => received());
      req.write('{"url": "https://a.example/mcp", ');
    });
    await within(inFlight, "the server to take the request (100 Continue)");
    const exited = d.stop();
    const stopping = await waitFor(() => d.logs.find((l) => l.msg === "stopping"), "the deployment to say it is stopping");
    assert.equal(stopping.in_flight, 1, "the PUT was in flight when SIGTERM came");
    req.end('"prefix_tools": true}');
    assert.equal(await within(answered, "the answer to the PUT in flight"), 201);
    assert.equal(await within(exited, "subs to exit"), 0);
    assert.ok(d.logs.some((l) => l.msg === "stopped" && l.unfinished === 0));
  });

  test("a wrong key refuses to start and decrypts nothing; a plain-http public URL is refused, located", async () => {
    // The shared deployment, stopped by the test before (stopping again is a no-op): its data
    // directory and store, as a deployment that ran leaves them.
    await d.stop();
    writeFileSync(path.join(d.dir, "other.key"), "A".repeat(43) + "=", { mode: 0o600 });
    // The built CLI on SQLite; on Postgres the same run() in this process (what is checked is the
    // exit code and what it prints), bounded as the child is should it start instead.
    const how: How = store === "sqlite" ? "cli" : "in-process";
    const wrong = await serveOnce(["--store", d.storeArg, "--key-file", "other.key"], { cwd: d.dir, how });
    assert.equal(wrong.code, 2);
    assert.match(wrong.stderr, store === "postgres" ? /does not open postgres:\/\/subs:\*\*\*@127\.0\.0\.1:\d+\/\w+: its values are sealed/ : /does not open deployment\.db/);
    if (d.postgres) assert.ok(!wrong.stderr.includes(d.postgres.password));
    const insecure = await serveOnce(["--store", d.storeArg, "--key-file", "deployment.key"], { cwd: d.dir, env: { SUBS_DEPLOYMENT_PUBLIC_URL: "http://subs.example.com" }, how });
    assert.equal(insecure.code, 2);
    assert.match(insecure.stderr, /\$SUBS_DEPLOYMENT_PUBLIC_URL "http:\/\/subs\.example\.com": must be https/);
  });
});
