// Each rule of product.md "The file" against a fixture, checking the exact file:line:col and
// message users see.
import assert from "node:assert/strict";
import { mkdtempSync, mkdirSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { describe, test } from "node:test";
import { loadConfig, parseConfig } from "../src/config/load.ts";
import { ConfigError, formatDiagnostic, exitCodeFor, SubsError } from "../src/errors.ts";
import { REPO } from "./support/cli.ts";

const FIXTURES = path.join(REPO, "fixtures", "config");

function diagnosticsOf(fixture: string): string[] {
  try {
    loadConfig({ configPath: path.join(FIXTURES, fixture), env: {}, cwd: FIXTURES });
  } catch (error) {
    assert.ok(error instanceof ConfigError, `expected a ConfigError, got ${String(error)}`);
    assert.equal(exitCodeFor(error), 2);
    return error.diagnostics.map((d) => formatDiagnostic(d) + (d.hint ? ` | ${d.hint}` : ""));
  }
  assert.fail(`${fixture} loaded without errors`);
}

const cases: Array<[rule: string, fixture: string, expected: string[]]> = [
  ["a `token` in a table is a parse error", "token-in-auth.toml", [
    'token-in-auth.toml:3:10: `token` would put a secret in the file | name an environment variable instead, e.g. token_env = "MY_TOKEN"',
  ]],
  ["a `token` at the top level is a parse error", "token-top-level.toml", [
    'token-top-level.toml:1:1: `token` would put a secret in the file | name an environment variable instead, e.g. token_env = "MY_TOKEN"',
  ]],
  ["a `client_secret` is a parse error", "client-secret.toml", [
    'client-secret.toml:6:1: `client_secret` would put a secret in the file | name an environment variable instead, e.g. client_secret_env = "MY_CLIENT_SECRET"',
  ]],
  ["an unknown key in a connection, with a suggestion", "unknown-key.toml", [
    "unknown-key.toml:3:1: unknown key `prefix_tool` in [mcp.github] | did you mean `prefix_tools`?",
  ]],
  ["an unknown key inside an inline tool filter", "unknown-key-filter.toml", [
    "unknown-key-filter.toml:5:35: unknown key `readonly` in [agent.triage.mcp[0].tools] | did you mean `read_only`?",
  ]],
  ["a wrong type", "wrong-type.toml", ["wrong-type.toml:3:1: `prefix_tools` must be a boolean"]],
  ["`credential`: shared or personal, and a remote server's only", "credential-kind.toml", [
    "credential-kind.toml:3:1: [mcp.fs] has `command` and `credential` | a local server holds no credential of subs': each person runs their own",
    'credential-kind.toml:7:1: `credential` must be "shared" (one credential for everyone) or "personal" (one per person)',
  ]],
  ["a missing url", "missing-url.toml", ["missing-url.toml:1:1: [mcp.sentry] needs `url` (a server reached over HTTP) or `command` (a server subs starts on this machine)"]],
  ["a local server: `command` and `url` together", "local-command-and-url.toml", [
    "local-command-and-url.toml:3:1: [mcp.fs] has `command` and `url` | a connection is reached at `url` or started with `command`, not both",
  ]],
  ["a local server: `auth` is a remote server's", "local-with-auth.toml", [
    'local-with-auth.toml:3:1: [mcp.fs] has `command` and `auth` | a local server takes its credentials in `env`, e.g. env = { API_TOKEN = "${MY_TOKEN}" }',
  ]],
  ["a local server: a literal value for a variable named as a credential, never echoed", "local-env-literal-secret.toml", [
    'local-env-literal-secret.toml:3:29: `API_KEY` would put a secret in the file | read it from this machine\'s environment instead: API_KEY = "${API_KEY}"',
  ]],
  ["a local server: a template left open", "local-template-unclosed.toml", [
    "local-template-unclosed.toml:3:19: entry 2 of `args` has a `${` that is not closed with `}`",
  ]],
  ["a remote server: `cwd` is a local server's", "remote-with-cwd.toml", [
    "remote-with-cwd.toml:3:1: `cwd` belongs to a local server, started with `command` | [mcp.sentry] is reached at its `url`",
  ]],
  ["headers: a literal in a credential's header, and Authorization, which subs sets", "headers-literal-secret.toml", [
    'headers-literal-secret.toml:3:34: `X-API-Key` would put a secret in the file | read it from the environment instead: "X-API-Key" = "${X_API_KEY}"',
    'headers-literal-secret.toml:3:66: `Authorization` is the credential\'s header: subs sets it | for "Bearer <token>", write auth = { token_env = "MY_TOKEN" }; without it subs uses OAuth',
  ]],
  ["an id with uppercase letters", "bad-id-uppercase.toml", [
    "bad-id-uppercase.toml:1:1: [mcp.Sentry]: a connection id may contain only lowercase letters, digits, '-' and '_'",
  ]],
  ['an id containing "__"', "bad-id-double-underscore.toml", [
    'bad-id-double-underscore.toml:1:1: [mcp.sentry__eu]: a connection id must not contain "__" (it separates the id from the tool name, as in sentry__search)',
  ]],
  ["a non-http(s) url", "url-not-http.toml", ["url-not-http.toml:2:1: `url` must be an http(s) URL"]],
  ["plain http to a non-loopback host", "url-plain-http.toml", [
    "url-plain-http.toml:2:1: `url` must use https (plain http is allowed only to 127.0.0.1, [::1] or localhost)",
  ]],
  ["a url carrying credentials", "url-with-credentials.toml", [
    "url-with-credentials.toml:2:1: `url` must not carry credentials (user:password@); name them with an *_env key",
  ]],
  ["an agent naming an undeclared connection", "agent-undeclared-connection.toml", [
    "agent-undeclared-connection.toml:5:8: agent `support` names connection `sentri`, which is not declared | did you mean `sentry`?",
  ]],
  ["an agent naming an undeclared sub-agent", "agent-undeclared-subagent.toml", [
    "agent-undeclared-subagent.toml:6:11: agent `triage` names sub-agent `suport`, which is not declared | did you mean `support`?",
  ]],
  ["both auth and oauth on one connection", "auth-and-oauth.toml", [
    "auth-and-oauth.toml:4:1: [mcp.linear] has both `auth` and `oauth` | a connection uses a static token (auth) or OAuth, not both",
  ]],
  ["a string left open at the end of its line", "syntax-error.toml", [
    'syntax-error.toml:2:34: invalid TOML: this string is not closed before the end of the line | close it with the quote it opens with (a string of several lines opens and closes with """)',
  ]],
  ["a TOML syntax error", "syntax-error-key.toml", ["syntax-error-key.toml:2:5: invalid TOML: illegal character in key"]],
  ["a bad name does not hide the mistakes inside its table", "bad-names-and-contents.toml", [
    "bad-names-and-contents.toml:1:1: [mcp.Sentry]: a connection id may contain only lowercase letters, digits, '-' and '_'",
    "bad-names-and-contents.toml:2:1: `url` must use https (plain http is allowed only to 127.0.0.1, [::1] or localhost)",
    "bad-names-and-contents.toml:3:1: `prefix_tools` must be a boolean",
    "bad-names-and-contents.toml:5:1: [agent.Triage]: an agent name may contain only lowercase letters, digits, '-' and '_'",
    "bad-names-and-contents.toml:7:1: unknown key `model` in [agent.Triage] | expected one of: mcp, tools, agents",
  ]],
  ["every error at once, in file order", "many-errors.toml", [
    "many-errors.toml:1:1: unknown key `colour` in the top level | expected one of: db, remote, mcp, agent",
    "many-errors.toml:3:1: [mcp.Sentry]: a connection id may contain only lowercase letters, digits, '-' and '_'",
    "many-errors.toml:7:1: `url` must use https (plain http is allowed only to 127.0.0.1, [::1] or localhost)",
    'many-errors.toml:8:10: `token` would put a secret in the file | name an environment variable instead, e.g. token_env = "MY_TOKEN"',
    "many-errors.toml:11:8: agent `support` names connection `nope`, which is not declared | declare it with [mcp.nope]",
  ]],
];

describe("substructure.toml rules", () => {
  for (const [rule, fixture, expected] of cases) {
    test(rule, () => assert.deepEqual(diagnosticsOf(fixture), expected));
  }

  test("no error message repeats a secret value written in the file", () => {
    for (const fixture of ["token-in-auth.toml", "token-top-level.toml", "client-secret.toml", "url-with-credentials.toml", "many-errors.toml", "local-env-literal-secret.toml", "headers-literal-secret.toml"]) {
      const text = diagnosticsOf(fixture).join("\n");
      assert.doesNotMatch(text, /ghp_not_a_real_token|s3cr3t|hunter2/);
    }
  });

  test("a full valid file loads: two ids on one url, loopback http, defaults, paths beside the file", () => {
    const config = loadConfig({ configPath: path.join(FIXTURES, "valid-full.toml"), env: {}, cwd: REPO });
    assert.equal(config.dbPath, path.join(FIXTURES, "state", "env.db"));
    assert.deepEqual(config.connections.map((c) => c.id), ["sentry", "sentry2", "local", "github", "linear"]);
    const [sentry, sentry2, local, github, linear] = config.connections;
    assert.equal(sentry!.url, sentry2!.url);
    assert.equal(local!.url, "http://127.0.0.1:8080/mcp");
    assert.equal(sentry!.prefixTools, true);
    assert.deepEqual(github!.auth, { tokenEnv: "GITHUB_TOKEN" });
    assert.equal(github!.prefixTools, false);
    assert.deepEqual(linear!.oauth, { clientId: "abc", clientSecretEnv: "LINEAR_CLIENT_SECRET", scopes: ["read", "write"] });
    assert.deepEqual(config.agents, [
      { name: "support", mcp: [{ id: "sentry" }], tools: [], agents: [] },
      {
        name: "triage",
        mcp: [{ id: "sentry", tools: { read_only: true, include: ["search_*"], exclude: ["*_delete"] } }, { id: "sentry2" }],
        tools: ["summarize"],
        agents: ["support"],
      },
    ]);
    assert.equal(config.remote, undefined);
    assert.equal(config.displayPath, path.join("fixtures", "config", "valid-full.toml"));
  });

  test("[remote] defaults token_env to SUBSTRUCTURE_TOKEN; loopback http is allowed", () => {
    const config = parseConfig('[remote]\nurl = "http://localhost:9999"\n', { path: "/x/substructure.toml", cwd: "/x" });
    assert.deepEqual(config.remote, { url: "http://localhost:9999", tokenEnv: "SUBSTRUCTURE_TOKEN" });
    assert.equal(config.dbPath, "/x/substructure.db");
  });

  test("[::1] and 127.x are loopback; other private addresses are not", () => {
    parseConfig('[mcp.a]\nurl = "http://[::1]:8080/mcp"\n[mcp.b]\nurl = "http://127.1.2.3/mcp"\n', { path: "/x/s.toml", cwd: "/x" });
    assert.throws(() => parseConfig('[mcp.a]\nurl = "http://10.0.0.1/mcp"\n', { path: "/x/s.toml", cwd: "/x" }), ConfigError);
  });

  test("positions inside dotted keys, array tables and multi-line arrays", () => {
    const source = [
      'agent.y.mcp = ["a", "b"]',
      "[mcp.a]",
      'url = "https://a.example/mcp"',
      "[agent.x]",
      "mcp = [",
      '  "a",',
      "  # a comment, then an entry on its own line",
      '  "missing",',
      "]",
    ].join("\n");
    try {
      parseConfig(source, { path: "/x/substructure.toml", cwd: "/x" });
      assert.fail("expected errors");
    } catch (error) {
      assert.ok(error instanceof ConfigError);
      assert.deepEqual(
        error.diagnostics.map((d) => `${d.line}:${d.col} ${d.message}`),
        ["1:21 agent `y` names connection `b`, which is not declared", "8:3 agent `x` names connection `missing`, which is not declared"],
      );
    }
  });
});

describe("finding the file", () => {
  const root = mkdtempSync(path.join(tmpdir(), "subs-find-"));
  const nested = path.join(root, "a", "b");
  mkdirSync(nested, { recursive: true });
  writeFileSync(path.join(root, "substructure.toml"), '[mcp.top]\nurl = "https://top.example/mcp"\n');
  writeFileSync(path.join(root, "a", "other.toml"), '[mcp.other]\nurl = "https://other.example/mcp"\n');

  test("the nearest substructure.toml upward from the working directory", () => {
    const config = loadConfig({ env: {}, cwd: nested });
    assert.equal(config.path, path.join(root, "substructure.toml"));
    assert.equal(config.dbPath, path.join(root, "substructure.db"));
  });

  test("$SUBS_CONFIG wins over the search, --config over both", () => {
    assert.equal(loadConfig({ env: { SUBS_CONFIG: "../other.toml" }, cwd: nested }).connections[0]!.id, "other");
    assert.equal(loadConfig({ configPath: path.join(root, "substructure.toml"), env: { SUBS_CONFIG: "../other.toml" }, cwd: nested }).connections[0]!.id, "top");
  });

  test("a missing file is a usage error that says what to do", () => {
    const empty = mkdtempSync(path.join(tmpdir(), "subs-none-"));
    assert.throws(
      () => loadConfig({ env: {}, cwd: empty }),
      (error: unknown) => error instanceof SubsError && exitCodeFor(error) === 2 && /no substructure\.toml/.test(error.message) && /--config/.test(error.hint ?? ""),
    );
    assert.throws(() => loadConfig({ configPath: "nope.toml", env: {}, cwd: empty }), /nope\.toml: no such file \(from --config\)/);
  });
});
