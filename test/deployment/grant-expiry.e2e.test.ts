// Credentials that warn before they die, on a real `subs deployment serve` (FEATURE_STORES; the
// grant's expiry and loss kept by both stores: test/deployment/store.test.ts; one served deployment
// per store, shared by the file's tests): a real authorization server
// (test/support/oauth-server.ts) that states its refresh tokens' lifetime (refresh_token_expires_in,
// as GitHub does) and, when told, rejects refreshes with invalid_grant and a hostile description (an
// escape sequence, the refresh token it was sent); a protected MCP server; `subs` with `[remote]`.
// GET /v1/mcp says refresh_expires_at and, once a refresh is rejected, `lost` (status `declared`,
// docs/deployment-protocol.md sections 2, 5 and 9); `subs mcp list` warns within its window and
// says why a login is needed; /metrics has the gauge and the count. The built CLI runs
// `subs mcp list` once (SQLite); every other run of subs is in this process.
import assert from "node:assert/strict";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { after, before, describe, test } from "node:test";
import { runAs } from "../support/cli.ts";
import { callServed, startServedDeployment, FEATURE_STORES, type ServedDeployment } from "../support/deployment-serve.ts";
import { annotatedTool, startMcpServer, type RunningMcpServer } from "../support/mcp-server.ts";
import { startAuthServer, type RunningAuthServer } from "../support/oauth-server.ts";

const DAY = 86_400;
/** What the hostile server says when it rejects a refresh: a colour escape, and the token it was sent. */
const hostile = (token: string) => `grant revoked \u001b[31mRED\u001b[0m for ${token}`;

type Listed = { id: string; status: string; usable: boolean; refresh_expires_at: string | null; lost: { reason: string; message: string | null; lost_at: string | null } | null };

for (const store of FEATURE_STORES) {
  describe(`credentials that warn before they die: subs deployment serve, ${store}`, () => {
    const dir = mkdtempSync(path.join(tmpdir(), "subs-grant-expiry-"));
    let d: ServedDeployment;
    let auth: RunningAuthServer;
    let mcp: RunningMcpServer;
    /** The refresh_token_expires_in the server states (seconds), or none. */
    let lifetime: number | undefined = 3 * DAY;
    let rejecting = false;

    before(async () => {
      auth = await startAuthServer({
        tokenResponse: (t) => (lifetime === undefined ? t : { ...t, refresh_token_expires_in: lifetime }),
        refreshRejection: (token) => (rejecting ? hostile(token) : undefined),
      });
      mcp = await startMcpServer({ tools: [annotatedTool("search")], oauth: { authServer: auth } });
      d = await startServedDeployment({ store, pollInterval: 0.05 });
      writeFileSync(path.join(dir, "substructure.toml"), `[remote]\nurl = "${d.url}"\n\n[mcp.gh]\nurl = "${mcp.url}"\n`);
    });
    after(async () => {
      await d?.close();
      await mcp?.close();
      await auth?.close();
      rmSync(dir, { recursive: true, force: true });
    });

    const env = () => ({ SUBSTRUCTURE_TOKEN: d.token });
    const call = (method: string, pathname: string) => callServed(d, method, pathname);
    const subs = (argv: string[], extra: Record<string, string> = {}) => runAs("in-process", argv, { cwd: dir, env: { ...env(), ...extra }, consents: true });
    const connection = async () => ((await call("GET", "/v1/mcp")).body.connections as Array<Record<string, any>>).find((c) => c.id === "gh")!;
    const metrics = async () => {
      const res = await fetch(`${d.url}/metrics`, { headers: { authorization: `Bearer ${d.token}` } });
      assert.equal(res.status, 200);
      return res.text();
    };
    /** No token the authorization server ever issued is in `text`. */
    const noToken = (text: string, what: string) => {
      for (const token of auth.issuedTokens()) assert.ok(!text.includes(token), `${what} holds an issued token`);
    };

    test("the refresh token's expiry the server states: GET /v1/mcp says it, `subs mcp list` warns within the window and not outside it, /metrics has the gauge", async () => {
      const login = await subs(["mcp", "login", "gh"]);
      assert.equal(login.code, 0, login.stderr);
      const c = await connection();
      assert.equal(c.status, "authorized");
      const expiry = Date.parse(c.refresh_expires_at);
      assert.ok(Math.abs(expiry - (Date.now() + 3 * DAY * 1000)) < 60_000, c.refresh_expires_at);
      assert.equal(c.lost, undefined);

      // The built CLI, once: the same listing a person runs.
      const listed = store === "sqlite" ? await runAs("cli", ["mcp", "list"], { cwd: dir, env: env() }) : await subs(["mcp", "list"]);
      assert.equal(listed.code, 0, listed.stderr);
      assert.match(listed.stdout, /authorized.*refresh token expires in [23]d/);
      assert.match(listed.stderr, /warning: gh: its refresh token expires in [23]d \([^)]+\); run `subs mcp login gh` before then/);

      const json = await subs(["mcp", "list", "--json"]);
      const [entry] = JSON.parse(json.stdout) as Listed[];
      assert.deepEqual([entry!.status, entry!.refresh_expires_at, entry!.lost], ["authorized", c.refresh_expires_at, null]);
      for (const quiet of [await subs(["mcp", "list", "--warn-within", "1d"]), await subs(["mcp", "list"], { SUBS_WARN_WITHIN: "0" })]) {
        assert.equal(quiet.code, 0, quiet.stderr);
        assert.doesNotMatch(quiet.stderr, /refresh token/);
      }

      const text = await metrics();
      const gauge = /^subs_deployment_credential_refresh_expiry_seconds\{connection="gh",kind="shared"\} (-?\d+)$/m.exec(text);
      assert.ok(gauge, text);
      assert.ok(Math.abs(Number(gauge[1]) - 3 * DAY) < 60, gauge[0]);
      assert.match(text, /^subs_deployment_credentials_needing_login\{kind="shared",reason="refresh_rejected"\} 0$/m);
    });

    test("a refresh rejected for good: the connection needs a login and says why, made visible, without the echoed token; the count says it; a new login clears it", async () => {
      rejecting = true;
      // The MCP server stops trusting the access token: the deployment refreshes, and is refused.
      auth.forgetAccessTokens();
      const tools = await call("GET", "/v1/mcp/gh/tools");
      assert.equal(tools.status, 409, JSON.stringify(tools.body));
      assert.equal(tools.body.error, "not_authorized");
      assert.match(tools.body.message, /refresh_rejected/);
      assert.match(tools.body.message, /subs mcp login gh/);
      assert.equal(auth.counters.rejectedRefreshes, 1);

      const c = await connection();
      assert.equal(c.status, "declared", "a client of v1 sees it needing a login");
      assert.equal(c.refresh_expires_at, undefined);
      assert.equal(c.lost.reason, "refresh_rejected");
      assert.match(c.lost.message, /invalid_grant: grant revoked \\x1b\[31mRED/);
      assert.match(c.lost.message, /\[redacted\]/, "the echoed refresh token is scrubbed");
      assert.ok(Math.abs(Date.parse(c.lost.lost_at) - Date.now()) < 60_000);
      const raw = JSON.stringify((await call("GET", "/v1/mcp")).body);
      assert.ok(!raw.includes("\u001b"), raw);
      noToken(raw, "GET /v1/mcp");
      noToken(await d.storeContents(), "the store");

      const listed = await subs(["mcp", "list"]);
      assert.equal(listed.code, 0, listed.stderr);
      assert.match(listed.stdout, /needs login: refresh rejected \(.*invalid_grant: grant revoked \\x1b\[31mRED.*\) · subs mcp login gh/);
      assert.ok(!listed.stdout.includes("\u001b"));
      const [entry] = JSON.parse((await subs(["mcp", "list", "--json"])).stdout) as Listed[];
      assert.deepEqual([entry!.status, entry!.usable, entry!.lost?.reason], ["needs_login", false, "refresh_rejected"]);
      noToken(listed.stdout + listed.stderr + JSON.stringify(entry), "subs mcp list");

      let text = await metrics();
      assert.match(text, /^subs_deployment_credentials_needing_login\{kind="shared",reason="refresh_rejected"\} 1$/m);
      assert.doesNotMatch(text, /refresh_expiry_seconds\{connection="gh"/, "no credential, no gauge");

      rejecting = false;
      lifetime = undefined;
      const login = await subs(["mcp", "login", "gh"]);
      assert.equal(login.code, 0, login.stderr);
      const again = await connection();
      assert.deepEqual([again.status, again.lost, again.refresh_expires_at], ["authorized", undefined, undefined], "a new consent clears it; this server stated no expiry");
      text = await metrics();
      assert.match(text, /^subs_deployment_credentials_needing_login\{kind="shared",reason="refresh_rejected"\} 0$/m);
      assert.equal((await call("GET", "/v1/mcp/gh/tools")).status, 200);
    });
  });
}
