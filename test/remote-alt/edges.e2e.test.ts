// The freedoms docs/deployment-protocol.md gives a deployment, each exercised against subs with
// deployment-alt: a base path (section 1), optional fields left out, "no oauth" spelled {},
// unknown answer fields (sections 1, 2, 9), retried faults (sections 6, 7), re-consent (3.4).
// The base path (apply, login with its $BROWSER, tools) and the redirect not followed (mcp list:
// what the process's own fetch does with a 3xx) run the built CLI (bin/subs.cjs) as a person does;
// the rest run the same `run()` in this process, where what is checked is the requests the
// deployment saw and what is printed, not the process (a tenth of the CPU: a child costs a Node
// start-up and the bundle's load per run, and its $BROWSER another).
import assert from "node:assert/strict";
import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
import { describe, it } from "node:test";
import { startHarness, withHarness as withFreshHarness, type Harness } from "./harness.ts";
import type { How } from "../support/cli.ts";

// These cases read best with the deployment's options first.
const withHarness = (
  options: Parameters<typeof startHarness>[0],
  fn: (h: Harness) => Promise<void>,
  authOptions: Parameters<typeof startHarness>[1] = {},
  how: How = "in-process",
) => withFreshHarness(fn, options, authOptions, how);

const file = (h: Harness) => `[mcp.sentry]
url = "${h.mcp.url}"

[mcp.other]
url = "${h.other.url}"
oauth = { scopes = ["b", "a"] }

[agent.triage]
mcp = ["sentry", { id = "other", tools = { include = ["other_*"] } }]
`;

describe("deployment freedoms the document grants, against the real CLI", () => {
  it("a deployment served under a base path (/team-a) works for apply, login and tools", () =>
    withHarness({ basePath: "/team-a" }, async (h) => {
      h.write(file(h));
      assert.equal((await h.run(["apply"])).code, 0);
      const login = await h.run(["mcp", "login", "sentry"]);
      assert.equal(login.code, 0, login.stderr);
      const tools = await h.run(["mcp", "tools", "sentry", "--json"]);
      assert.equal(tools.code, 0, tools.stderr);
      assert.equal(JSON.parse(tools.stdout).tools.length, 3);
      const api = h.dep.requests.filter((r) => r.path !== "/team-a/oauth/callback");
      assert.ok(api.length > 0 && api.every((r) => r.path.startsWith("/team-a/v1/")), api.map((r) => r.path).join(", "));
    }, {}, "cli"));

  it("answers that leave optional fields out, spell no-oauth as {}, and carry unknown fields are read the same", () =>
    withHarness({ answers: { absent: "omit", noOauth: "empty", extraFields: true } }, async (h) => {
      h.write(file(h));
      const first = await h.run(["apply"]);
      assert.equal(first.code, 0, first.stderr);
      const raw = (await h.api("GET", "/v1/mcp")).body.connections.find((c: any) => c.id === "sentry");
      assert.deepEqual(raw.oauth, {});
      assert.equal("authorized_at" in raw, false);
      assert.equal(raw.x_revision, 7);

      const writes = h.writes();
      const second = await h.run(["apply"]);
      assert.equal(second.code, 0, second.stderr);
      assert.match(second.stderr, /Nothing to do/, "oauth {} equals no oauth; scopes compare as a set; extra fields are ignored");
      assert.equal(h.writes(), writes);

      assert.equal((await h.run(["mcp", "login", "sentry"])).code, 0);
      const list = JSON.parse((await h.run(["mcp", "list", "--json"])).stdout);
      const sentry = list.find((e: any) => e.id === "sentry");
      assert.equal(sentry.status, "authorized");
      assert.equal(sentry.drift, null);
      const other = list.find((e: any) => e.id === "other");
      assert.equal(other.status, "needs_login");
      assert.equal(other.authorized_at, null);
    }));

  it("5xx and 429 answers are retried (Retry-After honoured); four 500s are reported after 4 attempts", () =>
    withHarness({}, async (h) => {
      h.write(file(h));
      h.dep.fail({ status: 503, error: "unavailable", retryAfter: "0" }, { status: 429, error: "rate_limited", retryAfter: "0" });
      const retried = await h.run(["apply"]);
      assert.equal(retried.code, 0, retried.stderr);
      assert.equal((await h.api("GET", "/v1/mcp")).body.connections.length, 2);

      h.dep.fail(...Array.from({ length: 4 }, () => ({ status: 500, error: "internal_error", retryAfter: "0" })));
      const failed = await h.run(["mcp", "list"]);
      assert.equal(failed.code, 1, failed.stderr);
      assert.match(failed.stderr, /500/);
      assert.match(failed.stderr, /4 attempts/);

      // A 4xx other than 429 is never retried.
      const before = h.dep.requests.length;
      h.dep.fail({ status: 403, error: "forbidden" });
      const forbidden = await h.run(["mcp", "list"]);
      assert.equal(forbidden.code, 1, forbidden.stderr);
      assert.match(forbidden.stderr, /^error: the deployment refused GET \/v1\/mcp: injected forbidden$/m);
      assert.match(forbidden.stderr, /^hint: ask the deployment's operator for a token with that role \(`subs deployment token create --role ROLE`\) and set ALT_DEPLOY_TOKEN to it$/m);
      assert.equal(h.dep.requests.length - before, 1, "one request, no retry");
    }));

  it("logging in again while authorized re-consents and replaces the credential", () =>
    withHarness({}, async (h) => {
      h.write(file(h));
      assert.equal((await h.run(["mcp", "login", "sentry"])).code, 0);
      const firstAt = (await h.api("GET", "/v1/mcp")).body.connections[0].authorized_at;
      const again = await h.run(["mcp", "login", "sentry"]);
      assert.equal(again.code, 0, again.stderr);
      assert.equal(h.auth.counters.codeExchanges, 2);
      const now = (await h.api("GET", "/v1/mcp")).body.connections[0];
      assert.equal(now.status, "authorized");
      assert.ok(now.authorized_at >= firstAt);
      assert.equal((await h.run(["mcp", "tools", "sentry"])).code, 0);
    }));

  it("a redirect from the API is not followed: the bearer token never reaches the Location", () =>
    withHarness({}, async (h) => {
      const seen: Array<string | undefined> = [];
      const elsewhere = createServer((req, res) => {
        seen.push(req.headers.authorization);
        res.writeHead(200, { "content-type": "application/json" }).end('{"connections": []}');
      });
      await new Promise<void>((resolve) => elsewhere.listen(0, "127.0.0.1", resolve));
      try {
        const target = `http://127.0.0.1:${(elsewhere.address() as AddressInfo).port}/v1/mcp`;
        h.write(file(h));
        h.dep.fail(...Array.from({ length: 4 }, () => ({ status: 307, error: "moved", location: target, match: "GET /v1/mcp" })));
        const result = await h.run(["mcp", "list"]);
        assert.equal(result.code, 1, result.stderr);
        assert.match(result.stderr, /error: cannot reach the deployment at http:\/\/127\.0\.0\.1:\d+ \(GET \/v1\/mcp: unexpected redirect; 4 attempts\)/, "a 3xx is an error, not an answer");
        assert.deepEqual(seen, [], "nothing was sent to the redirect's target");
        assert.ok(!(result.stdout + result.stderr).includes(h.dep.token));
      } finally {
        elsewhere.closeAllConnections();
        await new Promise<void>((resolve) => elsewhere.close(() => resolve()));
      }
    }, {}, "cli"));

  it("an error answer that is not JSON is handled by its status (a 502 page is retried)", () =>
    withHarness({}, async (h) => {
      h.write(file(h));
      h.dep.fail({ status: 502, error: "bad_gateway", raw: "<html>502 Bad Gateway</html>", retryAfter: "0" });
      const result = await h.run(["apply"]);
      assert.equal(result.code, 0, result.stderr);
      assert.equal((await h.api("GET", "/v1/mcp")).body.connections.length, 2);
    }));

  it("a DELETE answered 404 not_found counts as done", () =>
    withHarness({}, async (h) => {
      h.write(file(h));
      assert.equal((await h.run(["apply"])).code, 0);
      h.write(`[mcp.sentry]\nurl = "${h.mcp.url}"\n`);
      // Someone else removed the agent between subs's read and its DELETE.
      h.dep.fail({ status: 404, error: "not_found", match: "DELETE /v1/agents/triage", afterApplying: true });
      const result = await h.run(["apply"]);
      assert.equal(result.code, 0, `404 on DELETE is success (section 3.3/3.9): ${result.stderr}`);
      assert.deepEqual((await h.api("GET", "/v1/mcp")).body.connections.map((c: any) => c.id), ["sentry"]);
    }));

  it("a poll answered 404 not_found is treated as expired", () =>
    withHarness({ forgetOutcomes: true }, async (h) => {
      h.write(file(h));
      const result = await h.run(["mcp", "login", "sentry"], { SUBS_TEST_BROWSER: "ignore" });
      assert.equal(result.code, 1, result.stderr);
      assert.match(result.stderr, /expire/i);
    }));

  it("poll_url may be an absolute URL on the deployment's origin", () =>
    withHarness({ pollUrl: "absolute" }, async (h) => {
      h.write(file(h));
      const result = await h.run(["mcp", "login", "sentry"]);
      assert.equal(result.code, 0, result.stderr);
      assert.ok(h.dep.requests.some((r) => r.path.startsWith("/v1/authorizations/")));
    }));

  it("a relative poll_url is resolved against the URL of the POST (section 3.4)", () =>
    withHarness({ pollUrl: "relative" }, async (h) => {
      h.write(file(h));
      const result = await h.run(["mcp", "login", "sentry"]);
      assert.equal(result.code, 0, result.stderr);
      assert.ok(h.dep.requests.some((r) => r.path.startsWith("/v1/authorizations/")));
    }));

  it("a poll answered 429 rate_limited with Retry-After is retried, and the login completes", () =>
    withHarness({}, async (h) => {
      h.write(file(h));
      h.dep.fail({ status: 429, error: "rate_limited", retryAfter: "0", match: "GET /v1/authorizations/" });
      const result = await h.run(["mcp", "login", "sentry"]);
      assert.equal(result.code, 0, result.stderr);
      assert.ok(h.dep.hasCredential("sentry"));
    }));

  it("a poll_url on another origin (localhost for 127.0.0.1) is refused: the token is not sent there", () =>
    withHarness({ pollUrl: "other-origin" }, async (h) => {
      h.write(file(h));
      const result = await h.run(["mcp", "login", "sentry"], { SUBS_TEST_BROWSER: "ignore" });
      assert.equal(result.code, 1, result.stderr);
      assert.match(result.stderr, /error: sentry: the deployment gave a poll_url on another origin \(http:\/\/localhost:\d+\); subs sends \$ALT_DEPLOY_TOKEN only to http:\/\/127\.0\.0\.1:\d+/);
      assert.deepEqual(h.dep.requests.filter((r) => r.path.startsWith("/v1/authorizations/")), [], "no poll was sent");
    }));

  it("the client stops polling once expires_in has passed, even if the deployment still says pending", () =>
    withHarness({ expiresIn: 1, expireAuthorizations: false, interval: 0.2 }, async (h) => {
      h.write(file(h));
      const result = await h.run(["mcp", "login", "sentry", "--timeout", "20"], { SUBS_TEST_BROWSER: "ignore" });
      assert.equal(result.code, 1, result.stderr);
      assert.match(result.stderr, /expired/, "section 8: poll until a final status, expires_in, or --timeout");
    }));

  it("oauth.client_id from the file takes precedence over the deployment's own registration", () =>
    withHarness(
      // The pre-registered client accepts http://127.0.0.1:ANY/callback (RFC 8252 section 7.3), so the
      // deployment's redirect URI must be on that path: the document does not say how a
      // pre-registered client learns the deployment's redirect URI (see the report).
      { callbackPath: "/callback" },
      async (h) => {
        h.write(`[mcp.sentry]\nurl = "${h.mcp.url}"\noauth = { client_id = "abc", scopes = ["read"] }\n`);
        const result = await h.run(["mcp", "login", "sentry"]);
        assert.equal(result.code, 0, result.stderr);
        assert.equal(h.auth.counters.registrations, 0, "no dynamic registration when the declaration names a client");
        assert.deepEqual(h.auth.authorizations.map((a) => [a.client_id, a.scopes]), [["abc", ["read"]]]);
        assert.equal(h.auth.authorizations[0]!.redirect_uri, `${h.dep.url}/callback`);
      },
      { preRegistered: [{ client_id: "abc" }] },
    ));
});
