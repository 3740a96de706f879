// Secret scan: every command and flag combination of the suite runs with known secret
// values planted (static env tokens, stored OAuth tokens, client secrets, the deployment token),
// plain and with --debug / SUBS_DEBUG=1, on success and on failure paths; the test fails if any
// planted value appears in stdout, stderr, --json, an error message or the debug log.
import assert from "node:assert/strict";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { test } from "node:test";
import Database from "better-sqlite3";
import { consentingBrowser } from "../support/browser.ts";
import { runCli, runInProcess, type RunResult } from "../support/cli.ts";
import { seedCredentials } from "../support/credentials.ts";
import { targets } from "../support/deployment-targets.ts";
import { annotatedTool, startMcpServer, type TestTool } from "../support/mcp-server.ts";
import { startAuthServer } from "../support/oauth-server.ts";

const STATIC = "static-env-token-PLANTED-1a2b";
const CLIENT_SECRET = "client-secret-PLANTED-3c4d";
const DEPLOY_WRONG = "deploy-token-PLANTED-wrong-7a8b";
const TOOLS: TestTool[] = [annotatedTool("search", { readOnlyHint: true }), { ...annotatedTool("echo"), reply: (args) => `echo:${JSON.stringify(args)}` }];

type Run = { argv: string[]; result: RunResult };

/** Every planted value found in any output, as "value in <argv>". */
function leaks(runs: Run[], secrets: string[]): string[] {
  const found: string[] = [];
  for (const { argv, result } of runs) {
    for (const secret of secrets) {
      if (result.stdout.includes(secret) || result.stderr.includes(secret)) found.push(`${secret.slice(0, 12)}… in \`subs ${argv.join(" ")}\``);
    }
  }
  return found;
}

test("secret scan: no planted secret appears in any output of any command, flag, failure or debug log", { timeout: 180_000 }, async () => {
  const dir = mkdtempSync(path.join(tmpdir(), "subs-secrets-"));
  const remoteDir = mkdtempSync(path.join(tmpdir(), "subs-secrets-remote-"));
  // Only client_secret_post: dynamic registration hands out a client secret, which subs stores.
  const as = await startAuthServer({ tokenEndpointAuthMethods: ["client_secret_post"], preRegistered: [{ client_id: "pre-client", client_secret: CLIENT_SECRET }] });
  const mcp = await startMcpServer({ tools: TOOLS, oauth: { authServer: as } });
  let staticAccepted = STATIC;
  const staticServer = await startMcpServer({
    tools: TOOLS,
    gate: (req, res) => {
      if (req.headers.authorization === `Bearer ${staticAccepted}`) return false;
      res.writeHead(401, { "content-type": "application/json" }).end(JSON.stringify({ error: "invalid_token", error_description: `token ${req.headers.authorization} rejected` }));
      return true;
    },
  });
  const remoteAs = await startAuthServer();
  const remoteMcp = await startMcpServer({ tools: TOOLS, oauth: { authServer: remoteAs } });
  const runs: Run[] = [];
  const deployTokens: string[] = [];
  try {
    writeFileSync(
      path.join(dir, "substructure.toml"),
      `[mcp.demo]\nurl = "${mcp.url}"\n\n[mcp.pre]\nurl = "${mcp.url}"\noauth = { client_id = "pre-client", client_secret_env = "PRE_SECRET" }\n\n` +
        `[mcp.gh]\nurl = "${staticServer.url}"\nauth = { token_env = "GH_TOKEN" }\n\n[agent.a]\nmcp = ["demo", "gh", { id = "pre", tools = { read_only = true } }]\n`,
    );
    // A credential of an id no longer declared: listed, kept, then deleted and revoked by `subs apply` (its secrets in the revocation request).
    await seedCredentials(path.join(dir, "substructure.db"), [{ id: "gone", url: "https://gone.example/mcp", issuer: as.issuer, client_json: JSON.stringify({ client_id: "pre-client", client_secret_env: "PRE_SECRET" }) }]);
    const seeded = ["access-gone-SECRET", "refresh-gone-SECRET"];
    const env = { GH_TOKEN: STATIC, PRE_SECRET: CLIENT_SECRET };
    const local = async (argv: string[], extra: Record<string, string> = {}) => {
      for (const variant of [["--debug"], []]) {
        const full = [...argv, ...variant];
        runs.push({ argv: full, result: await runInProcess(full, { cwd: dir, env: { ...env, ...extra }, openBrowser: consentingBrowser() }) });
      }
      return runs.at(-1)!.result;
    };

    // Logged out, then every way of logging in.
    await local(["mcp", "list"]);
    await local(["mcp", "list", "--json"]);
    await local(["mcp", "tools", "demo"]);
    await local(["apply", "--dry-run"]);
    assert.equal((await local(["mcp", "login", "demo"])).code, 0);
    assert.equal((await local(["mcp", "login", "pre", "--json"])).code, 0);
    await local(["mcp", "login", "gh"]);
    await local(["mcp", "login", "--all", "--json"]);
    await local(["mcp", "login", "demo", "pre", "--json"]);
    // Logged in: every reading and calling command, human and JSON.
    for (const argv of [
      ["mcp", "list"],
      ["mcp", "list", "--json"],
      ["mcp", "tools", "demo"],
      ["mcp", "tools", "pre", "--json"],
      ["mcp", "tools", "gh", "--json"],
      ["mcp", "call", "demo", "echo", "--args", '{"q":"x"}'],
      ["mcp", "call", "pre", "echo", "--json"],
      ["mcp", "call", "gh", "echo", "--args", '{"q":1}', "--json"],
      ["agent", "list"],
      ["agent", "list", "--json"],
      ["agent", "tools", "a"],
      ["agent", "tools", "a", "--json", "-v"],
      ["apply"],
      ["apply", "--json"],
    ]) {
      assert.ok([0, 4].includes((await local(argv)).code), `subs ${argv.join(" ")}: ${runs.at(-1)!.result.stderr}`);
    }
    // Failure paths: a rejected access token (refresh and retry), a dead refresh token, a static
    // token the server rejects, an unset client secret, a url changed since login, bad --args.
    as.forgetAccessTokens();
    await local(["mcp", "tools", "demo", "--json"]);
    await local(["mcp", "call", "pre", "echo"]);
    as.forgetAccessTokens();
    as.revokeAllRefreshTokens();
    await local(["mcp", "tools", "demo"]);
    await local(["agent", "tools", "a", "--json"]);
    staticAccepted = "something-else";
    await local(["mcp", "tools", "gh"]);
    await local(["mcp", "call", "gh", "echo", "--json"]);
    await local(["mcp", "login", "pre"], { PRE_SECRET: "" });
    await local(["mcp", "call", "demo", "echo", "--args", "{not json"]);
    assert.equal((await local(["mcp", "login", "demo", "pre"])).code, 0);
    writeFileSync(path.join(dir, "substructure.toml"), `[mcp.demo]\nurl = "${mcp.url}?moved=1"\n\n[mcp.gh]\nurl = "${staticServer.url}"\nauth = { token_env = "GH_TOKEN" }\n`);
    await local(["mcp", "list", "--json"]);
    await local(["mcp", "tools", "demo"]);
    await local(["apply", "--json"]);
    // A token in the file is an error that must not echo it.
    writeFileSync(path.join(dir, "substructure.toml"), `[mcp.demo]\nurl = "${mcp.url}"\nauth = { token = "${STATIC}" }\n`);
    await local(["mcp", "list", "--json"]);

    // The real process, debug by environment: the CLI's own error and debug paths.
    for (const argv of [["mcp", "tools", "gh"], ["agent", "tools", "a", "--json"]]) {
      runs.push({ argv: [...argv, "(SUBS_DEBUG=1)"], result: await runCli([...argv], { cwd: dir, env: { GH_TOKEN: STATIC, SUBS_DEBUG: "1" } }) });
    }

    // [remote]: the deployment token, and the tokens the deployment holds for the MCP server; on
    // the reference deployment and on a real `subs deployment serve`.
    for (const target of targets()) {
      const deployment = await target.start({ pollInterval: 0.05 });
      try {
        deployTokens.push(deployment.token);
        writeFileSync(
          path.join(remoteDir, "substructure.toml"),
          `[remote]\nurl = "${deployment.url}"\n\n[mcp.sentry]\nurl = "${remoteMcp.url}"\n\n[agent.a]\nmcp = ["sentry"]\n`,
        );
        const remote = async (argv: string[], token = deployment.token) => {
          for (const variant of [["--debug"], []]) {
            const full = [...argv, ...variant, `(${target.name})`];
            runs.push({ argv: full, result: await runInProcess(full.slice(0, -1), { cwd: remoteDir, env: { SUBSTRUCTURE_TOKEN: token }, openBrowser: consentingBrowser() }) });
          }
          return runs.at(-1)!.result;
        };
        for (const argv of [["apply", "--dry-run"], ["apply", "--json"], ["apply"], ["mcp", "list"], ["mcp", "list", "--json"], ["mcp", "tools", "sentry"]]) await remote(argv);
        assert.equal((await remote(["mcp", "login", "sentry", "--json"])).code, 0, runs.at(-1)!.result.stderr);
        await remote(["mcp", "login", "--all"]);
        for (const argv of [["mcp", "list", "--json"], ["mcp", "tools", "sentry", "--json"], ["agent", "tools", "a", "--json"], ["apply", "--json"]]) await remote(argv);
        for (const argv of [["apply"], ["mcp", "list", "--json"], ["mcp", "login", "sentry"]]) await remote(argv, DEPLOY_WRONG);
        for (const [argv, token] of [
          [["apply", "--json"], deployment.token],
          [["mcp", "list"], DEPLOY_WRONG],
        ] as const) {
          runs.push({ argv: [...argv, "(SUBS_DEBUG=1)", `(${target.name})`], result: await runCli([...argv], { cwd: remoteDir, env: { SUBSTRUCTURE_TOKEN: token, SUBS_DEBUG: "1" } }) });
        }
        assert.ok((await deployment.seen()).length > 0, `${target.name} was asked`);
        assert.ok(deployment.credentials.has("sentry"), `${target.name} holds the credential its login made`);
      } finally {
        await deployment.close();
      }
    }

    const db = new Database(path.join(dir, "substructure.db"), { readonly: true });
    const storedClientSecrets = (db.prepare("SELECT client_json FROM subs_clients").all() as { client_json: string }[])
      .map((r) => (JSON.parse(r.client_json) as { client_secret?: string }).client_secret)
      .filter((s): s is string => typeof s === "string");
    db.close();
    const secrets = [STATIC, CLIENT_SECRET, ...deployTokens, DEPLOY_WRONG, ...seeded, ...storedClientSecrets, ...as.issuedTokens(), ...remoteAs.issuedTokens()];

    // The scan looked where secrets travel: each planted kind was really used, and the debug log was there.
    assert.ok(storedClientSecrets.length > 0, "dynamic registration stored a client secret");
    assert.ok(as.issuedTokens().length >= 6 && remoteAs.issuedTokens().length >= 4, "each deployment's login was issued tokens");
    assert.ok(mcp.authorizations.length > 0 && staticServer.authorizations.includes(`Bearer ${STATIC}`));
    assert.ok(as.counters.revocations > 0, "apply revoked the undeclared credential");
    const debug = runs.filter((r) => r.argv.includes("--debug") || r.argv.includes("(SUBS_DEBUG=1)")).map((r) => r.result.stderr).join("\n");
    for (const shown of [/\[debug\] #\d+ → POST .*\/token/, /\[debug\] #\d+ → POST .*\/register/, /\[debug\] #\d+ → POST .*\/revoke/, /\[debug\] #\d+ → GET .*\/v1\/mcp/, /authorization: \[redacted\]/, /"access_token":"\[redacted\]"/, /"client_secret":"\[redacted\]"/]) {
      assert.match(debug, shown);
    }
    assert.ok(runs.length >= 100, `${runs.length} runs`);
    assert.deepEqual(leaks(runs, secrets), []);
  } finally {
    await Promise.all([as.close(), mcp.close(), staticServer.close(), remoteAs.close(), remoteMcp.close()]);
    rmSync(dir, { recursive: true, force: true });
    rmSync(remoteDir, { recursive: true, force: true });
  }
});
