// Every command explains itself (--help with examples), mistakes get a "did you mean",
// and every error ends with the next command to run.
import assert from "node:assert/strict";
import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import path from "node:path";
import { test } from "node:test";
import { runInProcess } from "./support/cli.ts";
import { refusedUrl } from "./support/ports.ts";
import { projectsForThisFile } from "./support/projects.ts";

const project = projectsForThisFile("comfort");

const FILE = '[mcp.sentry]\nurl = "https://s.example/mcp"\n[mcp.down]\nurl = "http://127.0.0.1:9/mcp"\nauth = { token_env = "DOWN_TOKEN" }\n[agent.triage]\nmcp = ["sentry"]\n';

test("--help on every command and command group shows real examples", async () => {
  const cwd = project(FILE);
  const names = async (words: string[]) => (await runInProcess(["__complete", ...words, ""], { cwd })).stdout.split("\n").filter(Boolean);
  const paths: string[][] = [[]];
  for (const top of await names([])) {
    paths.push([top]);
    const subs = top === "completion" ? [] : await names([top]);
    for (const sub of subs) if (!["bash", "zsh", "fish"].includes(sub)) paths.push([top, sub]);
  }
  assert.ok(paths.length >= 12, `found ${paths.map((p) => p.join(" ")).join(", ")}`);
  for (const p of paths) {
    const r = await runInProcess([...p, "--help"], { cwd });
    assert.equal(r.code, 0, `subs ${p.join(" ")} --help`);
    assert.match(r.stdout, /\nExamples:\n {2}\$ subs /, `subs ${p.join(" ")} --help has examples`);
    const examples = r.stdout.slice(r.stdout.indexOf("Examples:"));
    assert.ok(p.every((word) => examples.includes(word)), `subs ${p.join(" ")}'s examples use the command`);
  }
});

test("a mistyped command or option: did you mean, and the --help to run; exit 2", async () => {
  const cwd = project(FILE);
  const command = await runInProcess(["mcp", "lst"], { cwd });
  assert.equal(command.code, 2);
  // One style for suggestions, commander's included: an `error:` line, then a `hint:` line.
  assert.equal(command.stderr, "error: unknown command 'lst'\nhint: did you mean `subs mcp list`? run `subs mcp --help` for its usage and examples\n");
  const option = await runInProcess(["mcp", "login", "sentry", "--prot", "8765"], { cwd });
  assert.equal(option.code, 2);
  assert.equal(option.stderr, "error: unknown option '--prot'\nhint: did you mean `--port`? run `subs mcp login --help` for its usage and examples\n");
  const missing = await runInProcess(["mcp", "tools"], { cwd });
  assert.equal(missing.code, 2);
  assert.equal(missing.stderr, "error: missing required argument 'id'\nhint: run `subs mcp tools --help` for its usage and examples\n");
});

test("with --json, a mistake the parser catches still prints the error object on stdout (README, \"Errors with --json\")", async () => {
  const cwd = project(FILE);
  const option = await runInProcess(["mcp", "list", "--json", "--jsn"], { cwd });
  assert.equal(option.code, 2);
  assert.deepEqual(JSON.parse(option.stdout), {
    error: { code: "usage", message: "unknown option '--jsn'", hint: "did you mean `--json`? run `subs mcp list --help` for its usage and examples" },
  });
  assert.match(option.stderr, /^error: unknown option '--jsn'\nhint: did you mean `--json`\? run `subs mcp list --help`/);
  const missing = await runInProcess(["mcp", "tools", "--json"], { cwd });
  assert.equal(missing.code, 2);
  assert.deepEqual(JSON.parse(missing.stdout), { error: { code: "usage", message: "missing required argument 'id'", hint: "run `subs mcp tools --help` for its usage and examples" } });
  // Without --json (or with it only after `--`, where it is no flag), stdout stays empty.
  assert.equal((await runInProcess(["mcp", "list", "--jsn"], { cwd })).stdout, "");
  assert.equal((await runInProcess(["mcp", "call", "sentry", "--", "--json"], { cwd })).stdout, "");
  // --help is not a mistake.
  assert.doesNotMatch((await runInProcess(["mcp", "list", "--json", "--help"], { cwd })).stdout, /"error"/);
});

test("a mistyped id or agent name: did you mean, in every command that takes one; exit 2", async () => {
  const cwd = project(FILE);
  for (const argv of [["mcp", "login", "sentri"], ["mcp", "tools", "sentri"], ["mcp", "call", "sentri", "whoami"]]) {
    const r = await runInProcess(argv, { cwd });
    assert.equal(r.code, 2, argv.join(" "));
    assert.match(r.stderr, /error: `sentri` is not declared in substructure\.toml\nhint: did you mean `sentry`\? \(`subs mcp list` shows every connection\)\n/, argv.join(" "));
  }
  const agent = await runInProcess(["agent", "tools", "triag"], { cwd });
  assert.equal(agent.code, 2);
  assert.match(agent.stderr, /no agent `triag` in substructure\.toml\nhint: did you mean `triage`\? \(`subs agent list` shows every agent\)/);
  const far = await runInProcess(["mcp", "tools", "linear"], { cwd });
  assert.match(far.stderr, /hint: declared: sentry, down; or declare it with \[mcp\.linear\]/);
});

test("errors without a hint of their own end with the next command: --help for usage, --debug for failures", async () => {
  const cwd = project(FILE);
  const badPort = await runInProcess(["mcp", "login", "sentry", "--port", "abc"], { cwd });
  assert.equal(badPort.code, 2);
  assert.match(badPort.stderr, /--port must be a port number.*\nhint: run `subs mcp login --help` for its usage and examples\n$/);
  // A failure with a fix of its own says that fix, not --debug: nothing listens there.
  const refused = await refusedUrl();
  const unreachable = await runInProcess(["mcp", "tools", "down", "--config", "substructure.toml"], {
    cwd: project(FILE.replace("http://127.0.0.1:9/mcp", refused)),
    env: { DOWN_TOKEN: "not-a-real-token" },
  });
  assert.equal(unreachable.code, 1);
  assert.match(unreachable.stderr, new RegExp(`down: cannot reach ${new URL(refused).origin.replaceAll(".", "\\.")} \\(ECONNREFUSED\\)\nhint: check the url in the file and that the server is up\n`));
  assert.doesNotMatch(unreachable.stderr, /not-a-real-token/);
  // Port 9 is one fetch will not connect to at all (Fetch standard, "port blocking"): a deployment
  // up there is no help, so the hint is not "that the server is up". (An MCP request is sent with
  // node:http, which has no such list: test/net/blocked-port.test.ts.)
  const blocked = await runInProcess(["mcp", "list"], { cwd: project('[remote]\nurl = "http://127.0.0.1:9"\n\n[mcp.sentry]\nurl = "https://s.example/mcp"\n'), env: { SUBSTRUCTURE_TOKEN: "not-a-real-token" } });
  assert.equal(blocked.code, 1, blocked.stderr);
  assert.match(blocked.stderr, /cannot reach the deployment at http:\/\/127\.0\.0\.1:9: fetch refuses port 9, one the Fetch standard blocks as browsers do\nhint: serve the deployment on another port and change \[remote\]\.url\n/);
  // A server error has no fix subs can name: the same command with --debug shows the exchange.
  const broken = createServer((_req, res) => res.writeHead(500, { "content-type": "text/plain" }).end("boom"));
  await new Promise<void>((resolve) => broken.listen(0, "127.0.0.1", resolve));
  try {
    const port = (broken.address() as AddressInfo).port;
    const brokenCwd = project(`[mcp.broken]\nurl = "http://127.0.0.1:${port}/mcp"\nauth = { token_env = "DOWN_TOKEN" }\n`);
    const failing = await runInProcess(["mcp", "tools", "broken", "--config", "substructure.toml"], { cwd: brokenCwd, env: { DOWN_TOKEN: "not-a-real-token" } });
    assert.equal(failing.code, 1);
    assert.match(failing.stderr, /broken: .*500.*\nhint: run `subs mcp tools broken --config substructure.toml --debug` to see every HTTP exchange/);
    // Already under --debug: no suggestion to add it; --json keeps its documented shape.
    const debugged = await runInProcess(["--debug", "mcp", "tools", "broken", "--json"], { cwd: brokenCwd, env: { DOWN_TOKEN: "not-a-real-token" } });
    assert.doesNotMatch(debugged.stderr, /hint: run .*--debug/);
    assert.deepEqual(Object.keys(JSON.parse(debugged.stdout).error), ["code", "message"]);
  } finally {
    broken.close();
  }
});

test("start-up builds only the command argv names, and COMMAND_TREE is the whole tree", async () => {
  const { buildProgram } = await import("../src/cli.ts");
  const { COMMAND_TREE, namedPath } = await import("../src/run.ts");
  const { testContext } = await import("./support/cli.ts");
  const hooks = { setJson: () => {}, setExitCode: () => {} };
  const tree = (command: { commands: readonly { name(): string; commands: readonly unknown[] }[] }): Record<string, string[]> =>
    Object.fromEntries(command.commands.map((c) => [c.name(), (c.commands as { name(): string }[]).map((s) => s.name())]));
  assert.deepEqual(tree(buildProgram(testContext({ cwd: tmpdir() }).ctx, hooks)), COMMAND_TREE, "a new command is listed in COMMAND_TREE");
  assert.deepEqual(tree(buildProgram(testContext({ cwd: tmpdir() }).ctx, hooks, ["mcp", "list"])), { mcp: ["list"] });
  const cases: Array<[string[], string[] | undefined]> = [
    [["mcp", "list", "--json"], ["mcp", "list"]],
    [["--debug", "mcp", "list"], ["mcp", "list"]],
    [["mcp", "list", "--config", "apply"], ["mcp", "list"]],
    [["apply", "--dry-run"], ["apply"]],
    [["apply", "--config", "x.toml"], ["apply"]],
    [["agent", "tools", "triage"], ["agent", "tools"]],
    [["mcp", "lst"], ["mcp"]],
    [["mcp"], ["mcp"]],
    [["mpc", "list"], undefined],
    [["mcp", "list", "--help"], undefined],
    [["help", "mcp"], undefined],
    [["--config", "mcp", "apply", "--json"], ["apply"]],
    [["--config=x.toml", "mcp", "list"], ["mcp", "list"]],
    [["--no-such-flag", "mcp", "list"], undefined],
    [["__complete", "mcp", ""], undefined],
    [[], undefined],
  ];
  for (const [argv, expected] of cases) assert.deepEqual(namedPath(argv), expected, argv.join(" "));
  // --config before the command, as --debug may be; after it, the command's own wins.
  const elsewhere = project(FILE);
  const before = await runInProcess(["--config", path.join(elsewhere, "substructure.toml"), "mcp", "list", "--json"], { cwd: tmpdir() });
  assert.equal(before.code, 0, before.stderr);
  assert.ok(JSON.parse(before.stdout).length > 0);
  const both = await runInProcess(["--config", "/nonexistent/substructure.toml", "mcp", "list", "--config", path.join(elsewhere, "substructure.toml")], { cwd: tmpdir() });
  assert.equal(both.code, 0, both.stderr);
  const cwd = project(FILE);
  const top = await runInProcess(["mpc", "list"], { cwd });
  assert.equal(top.code, 2);
  assert.match(top.stderr, /unknown command 'mpc'\nhint: did you mean `subs mcp`\?/);
  const debugFirst = await runInProcess(["--debug", "mcp", "list", "--json"], { cwd });
  assert.equal(debugFirst.code, 0, debugFirst.stderr);
  assert.equal(JSON.parse(debugFirst.stdout).length, 2);
});

test("an unexpected internal error: one line, no stack; its stack only when SUBS_DEBUG turns debugging on (README, \"Environment variables\")", async () => {
  const cwd = project(FILE);
  const now = () => {
    throw new TypeError("a bug");
  };
  const STACK = /\n\s+at .*:\d+:\d+\)?\n/;
  for (const [value, stack] of [[undefined, false], ["0", false], ["1", true], ["true", true]] as const) {
    const r = await runInProcess(["mcp", "list"], { cwd, now, env: value === undefined ? {} : { SUBS_DEBUG: value } });
    assert.equal(r.code, 1);
    assert.match(r.stderr, /^error: unexpected: a bug\n/);
    assert.equal(STACK.test(r.stderr), stack, `SUBS_DEBUG=${value}: ${r.stderr}`);
  }
});

test("--help shows each --timeout default as the number of seconds README gives", async () => {
  const cwd = project(FILE);
  for (const [argv, seconds] of [[["mcp", "login"], 300], [["mcp", "tools"], 300], [["mcp", "call"], 300], [["agent", "tools"], 10]] as const) {
    const help = (await runInProcess([...argv, "--help"], { cwd })).stdout.replace(/\s+/g, " ");
    assert.match(help, new RegExp(`--timeout <seconds> .*\\(default: ${seconds}\\)`), argv.join(" "));
  }
});

test("habits of other tools get the subs way, never the opposite action; `subs` alone and `subs help mcp login` print help on stdout", async () => {
  const cwd = project(FILE);
  const cases: Array<[string[], RegExp]> = [
    [["mcp", "logout", "sentry"], /there is no logout: `subs mcp remove <id>` disconnects it/],
    [["mcp", "logut"], /there is no logout/],
    [["logout"], /there is no logout/],
    [["mcp", "rm", "sentry"], /did you mean `subs mcp remove`\?/],
    [["mcp", "delete", "sentry"], /did you mean `subs mcp remove`\?/],
    [["login"], /did you mean `subs mcp login`\?/],
    [["list"], /did you mean `subs mcp list`\?/],
    [["version"], /`subs --version` prints the version/],
    [["-v"], /`subs --version` \(or `subs -V`\) prints the version/],
  ];
  for (const [argv, hint] of cases) {
    const r = await runInProcess(argv, { cwd });
    assert.equal(r.code, 2, argv.join(" "));
    assert.match(r.stderr, hint, argv.join(" "));
    if (argv.some((a) => /log|rm|delete/.test(a) && a !== "login")) assert.doesNotMatch(r.stderr, /login/, argv.join(" "));
  }
  const alone = await runInProcess([], { cwd });
  assert.equal(alone.code, 0);
  assert.match(alone.stdout, /^Usage: subs /);
  const help = await runInProcess(["help", "mcp", "login"], { cwd });
  assert.equal(help.code, 0);
  assert.match(help.stdout, /^Usage: subs mcp login /);
  for (const argv of [["mcp", "add"], ["mcp", "remove"], ["agent", "tools"]]) {
    const r = await runInProcess([...argv, "--help"], { cwd });
    assert.match(r.stdout, /Global Options:[\s\S]*--debug/, argv.join(" "));
    assert.equal(r.stdout.match(/--config <path>/g)?.length, 1, `${argv.join(" ")}: --config listed once`);
  }
  // A group alone is asking for its help, as `subs` alone is: stdout, exit 0.
  for (const group of ["mcp", "agent"]) {
    const r = await runInProcess([group], { cwd });
    assert.equal(r.code, 0, r.stderr);
    assert.match(r.stdout, new RegExp(`^Usage: subs ${group} `));
    assert.match(r.stdout, /help \[command\] +Show help for a command/, "commander's own line speaks as the others do");
    assert.equal(r.stderr, "");
  }
});
