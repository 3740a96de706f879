// `subs init`: a first substructure.toml that loads, never written over an existing file.
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { existsSync, mkdirSync, mkdtempSync, readFileSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { test } from "node:test";
import { runCli, runInProcess } from "./support/cli.ts";

const fresh = () => mkdtempSync(path.join(tmpdir(), "subs-init-"));

test("subs init writes a file every command loads; the ids given are declared and need login", async () => {
  const cwd = fresh();
  const empty = await runCli(["init"], { cwd });
  assert.equal(empty.code, 0, empty.stderr);
  assert.equal(empty.stdout, "");
  assert.match(empty.stderr, /Wrote substructure\.toml\.\nNext: declare a server under \[mcp\.<id>\]/);
  const listed = await runCli(["mcp", "list", "--json"], { cwd });
  assert.equal(listed.code, 0, listed.stderr);
  assert.deepEqual(JSON.parse(listed.stdout), []);

  const dir = fresh();
  const two = await runCli(["init", "sentry=https://mcp.sentry.dev/mcp", "linear=https://mcp.linear.app/mcp"], { cwd: dir });
  assert.equal(two.code, 0, two.stderr);
  assert.match(two.stderr, /Wrote substructure\.toml with sentry, linear\.\nNext: `subs mcp login sentry linear`, then `subs mcp list`\./);
  const list = await runCli(["mcp", "list", "--json"], { cwd: dir });
  assert.deepEqual(
    JSON.parse(list.stdout).map((c: { id: string; url: string; status: string }) => [c.id, c.url, c.status]),
    [
      ["sentry", "https://mcp.sentry.dev/mcp", "needs_login"],
      ["linear", "https://mcp.linear.app/mcp", "needs_login"],
    ],
  );
  // The commented examples are the real format: uncommented, the file still loads.
  const uncommented = readFileSync(path.join(dir, "substructure.toml"), "utf8").replace(/^# (?=\[|[a-z_]+ = )/gm, "");
  writeFileSync(path.join(dir, "substructure.toml"), uncommented.replace(/\[remote\][^]*$/, ""));
  const agents = await runInProcess(["agent", "list", "--json"], { cwd: dir });
  assert.equal(agents.code, 0, agents.stderr);
  assert.deepEqual(JSON.parse(agents.stdout).map((a: { name: string }) => a.name), ["support"]);
});

test("an existing file is never written over (exit 2), whatever is given", async () => {
  const cwd = fresh();
  writeFileSync(path.join(cwd, "substructure.toml"), "# mine\n");
  for (const argv of [["init"], ["init", "a=https://a.example/mcp"]]) {
    const r = await runInProcess(argv, { cwd });
    assert.equal(r.code, 2, r.stderr);
    assert.match(r.stderr, /substructure\.toml already exists; nothing was written/);
  }
  assert.equal(readFileSync(path.join(cwd, "substructure.toml"), "utf8"), "# mine\n");
});

test("a bad ID=URL is a usage error (exit 2), nothing is written, and a url is never echoed", async () => {
  for (const [argument, message] of [
    ["noequals", /`noequals` is not ID=URL/],
    ["Bad=https://a.example/mcp", /`Bad` is not a connection id/],
    ["a__b=https://a.example/mcp", /`a__b` is not a connection id/],
    ["a=http://remote.example/mcp?key=s3cret", /the url of a must use https/],
    ["a=https://user:s3cret@a.example/mcp", /the url of a must not carry credentials/],
    ["a=ftp://a.example/s3cret", /the url of a must be an http\(s\) URL/],
  ] as const) {
    const cwd = fresh();
    const r = await runInProcess(["init", argument], { cwd });
    assert.equal(r.code, 2, `${argument}: ${r.stderr}`);
    assert.match(r.stderr, message);
    assert.doesNotMatch(r.stderr, /s3cret/);
    assert.equal(existsSync(path.join(cwd, "substructure.toml")), false, argument);
  }
  const cwd = fresh();
  const twice = await runInProcess(["init", "a=https://a.example/mcp", "a=https://b.example/mcp"], { cwd });
  assert.equal(twice.code, 2);
  assert.match(twice.stderr, /a is given twice/);
  assert.equal(existsSync(path.join(cwd, "substructure.toml")), false);
});

test("--config and $SUBS_CONFIG choose where it goes, as they choose what other commands read", async () => {
  const cwd = fresh();
  mkdirSync(path.join(cwd, "env"));
  const r = await runInProcess(["init", "--config", "env/staging.toml", "s=https://s.example/mcp"], { cwd });
  assert.equal(r.code, 0, r.stderr);
  assert.match(r.stderr, /Wrote env\/staging\.toml with s\.\nNext: `subs mcp login s --config env\/staging\.toml`/);
  assert.equal((await runInProcess(["mcp", "list", "--json", "--config", "env/staging.toml"], { cwd })).code, 0);
  assert.equal(existsSync(path.join(cwd, "substructure.toml")), false);

  const fromEnv = await runInProcess(["init"], { cwd, env: { SUBS_CONFIG: "env/prod.toml" } });
  assert.equal(fromEnv.code, 0, fromEnv.stderr);
  assert.ok(existsSync(path.join(cwd, "env", "prod.toml")));
});

test("in a git work tree that does not ignore the db, init warns that it will hold credentials", async () => {
  const repo = fresh();
  spawnSync("git", ["init", "-q"], { cwd: repo });
  const r = await runInProcess(["init"], { cwd: repo });
  assert.equal(r.code, 0, r.stderr);
  assert.match(r.stderr, /warning: git does not ignore substructure\.db, which will hold credentials: add `\*\.db\*` to \.gitignore/);

  const ignoring = fresh();
  spawnSync("git", ["init", "-q"], { cwd: ignoring });
  writeFileSync(path.join(ignoring, ".gitignore"), "*.db*\n");
  const quiet = await runInProcess(["init"], { cwd: ignoring });
  assert.equal(quiet.code, 0, quiet.stderr);
  assert.doesNotMatch(quiet.stderr, /warning/);
});

test("a missing file's error names subs init", async () => {
  const cwd = fresh();
  const r = await runInProcess(["mcp", "list"], { cwd });
  assert.equal(r.code, 2);
  assert.match(r.stderr, /hint: run `subs init` to create one here, or pass --config PATH/);
  const named = await runInProcess(["mcp", "list", "--config", "my file.toml"], { cwd });
  assert.match(named.stderr, /create the file with `subs init --config "my file\.toml"`/);
});

test("init below a directory that has a file says which one commands here now read", async () => {
  const parent = fresh();
  writeFileSync(path.join(parent, "substructure.toml"), "");
  mkdirSync(path.join(parent, "svc"));
  const r = await runInProcess(["init"], { cwd: path.join(parent, "svc") });
  assert.equal(r.code, 0, r.stderr);
  assert.match(r.stderr, /note: commands run in this directory now read substructure\.toml, no longer \.\.\/substructure\.toml\n/);
  const alone = await runInProcess(["init"], { cwd: fresh() });
  assert.doesNotMatch(alone.stderr, /note:/);
});

test("the file subs mcp import writes shows no commented [mcp.github] beside a real one", async () => {
  const cwd = fresh();
  writeFileSync(path.join(cwd, ".mcp.json"), JSON.stringify({ mcpServers: { github: { type: "http", url: "https://api.githubcopilot.com/mcp/", headers: { Authorization: "Bearer ${GITHUB_TOKEN}" } } } }));
  const r = await runCli(["mcp", "import", "--from", ".mcp.json"], { cwd, env: { HOME: cwd } });
  assert.equal(r.code, 0, r.stderr);
  const text = readFileSync(path.join(cwd, "substructure.toml"), "utf8");
  assert.match(text, /^\[mcp\.github\]$/m);
  assert.doesNotMatch(text, /^# \[mcp\.github\]$/m);
  // Without a static connection of its own, the example stays: it is how one is written.
  const plain = fresh();
  assert.equal((await runCli(["init", "sentry=https://mcp.sentry.dev/mcp"], { cwd: plain })).code, 0);
  assert.match(readFileSync(path.join(plain, "substructure.toml"), "utf8"), /^# \[mcp\.github\]\n# url = .*\n# auth = \{ token_env = "GITHUB_TOKEN" \}$/m);
});
