// Local (stdio) servers, end to end through the built CLI (docs/file.md, "Local servers"): the
// third-party servers people run from npm (@modelcontextprotocol/server-filesystem and
// server-everything, pinned in tools/servers), and a server of our own that does what `npx`-started
// servers do to their host (a child of its own, stderr, a crash: test/support/stdio-server.mjs).
// What is checked: every command that uses a connection takes one; `mcp list` starts none; the
// process gets only the base variables and its own `env`, its template values scrubbed; no process
// is left after a serve ends by SIGTERM, by Ctrl-C or by its client being killed; a crash names its
// exit status and last words; `[remote]` refuses `command`.
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, statSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { after, before, describe, it } from "node:test";
import { ensureTools } from "../scripts/tools.mjs";
import { baseEnv, BIN, REPO, runCli, runInProcess } from "./support/cli.ts";
import { annotatedTool, startMcpServer, type RunningMcpServer } from "./support/mcp-server.ts";
import { serveSession } from "./support/serve-client.ts";
import { waitFor, within } from "./support/wait.ts";

const SERVER = path.join(REPO, "test", "support", "stdio-server.mjs");
/** An MCP client as a process of its own (test/support/stdio-client.mjs), to be killed. */
const CLIENT = path.join(REPO, "test", "support", "stdio-client.mjs");
const BASE = new Set(["PATH", "HOME", "USER", "LOGNAME", "SHELL", "TERM", "LANG", "LC_ALL", "LC_CTYPE", "TMPDIR", "TZ"]);
const OTHER_SECRET = "other-variable-value-8f2a1c";
const TEMPLATE_SECRET = "template-value-3b9d7e";

/** Whether a process with this pid is running (a zombie is not: it has ended). */
function running(pid: number): boolean {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
    return !/^\d+ \(.*\) Z /.test(stat);
  } catch {
    return false;
  }
}

/** The pids stdio-server.mjs wrote: itself and its child, per start. */
function pidsIn(file: string): number[] {
  if (!existsSync(file)) return [];
  return readFileSync(file, "utf8").split(/\s+/).filter(Boolean).map(Number);
}

describe("local (stdio) servers", () => {
  let servers: string;
  let notes: RunningMcpServer;
  let cwd: string;
  let pidsFile: string;
  let env: Record<string, string>;

  before(async () => {
    servers = ensureTools("servers", "local-server.e2e");
    notes = await startMcpServer({ tools: [annotatedTool("search_notes")] });
    cwd = mkdtempSync(path.join(tmpdir(), "subs-local-"));
    mkdirSync(path.join(cwd, "docs"));
    writeFileSync(path.join(cwd, "docs", "hello.txt"), "hello from a local file\n");
    pidsFile = path.join(cwd, "pids");
    env = { PIDS_FILE: pidsFile, EV_SECRET: TEMPLATE_SECRET, SUBS_TEST_OTHER: OTHER_SECRET, NOTES_TOKEN: "static-notes-token" };
    const bin = (name: string) => JSON.stringify(path.join(servers, "node_modules", ".bin", name));
    writeFileSync(
      path.join(cwd, "substructure.toml"),
      `[mcp.fs]
command = ${bin("mcp-server-filesystem")}
args = ["./docs"]

[mcp.ev]
command = ${bin("mcp-server-everything")}
env = { API_TOKEN = "\${EV_SECRET}", LOG_LEVEL = "info" }

[mcp.own]
command = ${JSON.stringify(process.execPath)}
args = [${JSON.stringify(SERVER)}]
env = { PIDS_FILE = "\${PIDS_FILE}" }

[mcp.notes]
url = "${notes.url}"
auth = { token_env = "NOTES_TOKEN" }

[agent.mixed]
mcp = ["own", "notes", { id = "fs", tools = { include = ["read_text_file", "list_allowed_directories"] } }]

[agent.lone]
mcp = ["own"]
`,
    );
  });
  after(async () => {
    await notes.close();
  });

  it("`mcp list` shows them without starting one; `--check` starts each, counts its tools and ends it", async () => {
    const listed = await runCli(["mcp", "list", "--json"], { cwd, env });
    assert.equal(listed.code, 0, listed.stderr);
    const byId = Object.fromEntries((JSON.parse(listed.stdout) as Array<{ id: string }>).map((c) => [c.id, c])) as Record<string, Record<string, unknown>>;
    assert.deepEqual(
      { url: byId.own!.url, command: byId.own!.command, status: byId.own!.status, usable: byId.own!.usable, auth: byId.own!.auth, unset_env: byId.own!.unset_env },
      { url: null, command: process.execPath, status: "local", usable: true, auth: "none", unset_env: [] },
    );
    assert.equal(byId.notes!.command, null);
    assert.deepEqual(pidsIn(pidsFile), [], "mcp list started a local server");

    // In-process: the built CLI's `mcp list` ran just above; this run is about its text for an unset variable.
    const unset = await runInProcess(["mcp", "list"], { cwd, env: { ...env, HOME: cwd, PIDS_FILE: undefined as unknown as string } });
    assert.match(unset.stdout, /own\s.*\$PIDS_FILE unset/);

    const checked = await runCli(["mcp", "list", "--check", "--json"], { cwd, env });
    assert.equal(checked.code, 0, checked.stderr);
    const checks = Object.fromEntries((JSON.parse(checked.stdout) as Array<{ id: string; check: { tools: number | null } }>).map((c) => [c.id, c.check.tools]));
    assert.equal(checks.own, 3);
    assert.ok((checks.fs ?? 0) >= 10 && (checks.ev ?? 0) >= 10, JSON.stringify(checks));
    const pids = pidsIn(pidsFile);
    assert.equal(pids.length, 2, "--check started the server once");
    for (const pid of pids) assert.equal(running(pid), false, `pid ${pid} is left running after mcp list --check`);
  });

  // server-everything's `mcp call` is the next test's (get-env): an `echo` call of it here (which
  // ran) checked the same command on the same server, at a start of each of them; arguments
  // reaching a local server are checked here, by the path server-filesystem reads. Its refusal of
  // a path outside its directory is read in the served agent's session below, where it is already
  // running (an `mcp call` of its own here started it once more; `mcp call`'s exit 1 for a tool's
  // error is mcp-call.e2e.test.ts's).
  it("server-filesystem from npm: `mcp tools` and `mcp call`", async () => {
    const tools = await runCli(["mcp", "tools", "fs"], { cwd, env });
    assert.equal(tools.code, 0, tools.stderr);
    assert.match(tools.stdout, /^read_text_file\tread-only\t/m);
    const read = await runCli(["mcp", "call", "fs", "read_text_file", "--args", JSON.stringify({ path: path.join(cwd, "docs", "hello.txt") })], { cwd, env });
    assert.equal(read.code, 0, read.stderr);
    assert.match(read.stdout, /hello from a local file/);
  });

  it("server-everything from npm through `mcp call`: a server gets only the base variables and its own `env`; a template's value is a secret of the run", async () => {
    const shown = await runCli(["mcp", "call", "ev", "get-env", "--json"], { cwd, env: { ...env, USER: "someone", LANG: "C.UTF-8" } });
    assert.equal(shown.code, 0, shown.stderr);
    const text = (JSON.parse(shown.stdout) as { content: Array<{ text: string }> }).content.map((c) => c.text).join("");
    const seen = JSON.parse(text.slice(text.indexOf("{"))) as Record<string, string>;
    const own = new Set(["API_TOKEN", "LOG_LEVEL"]);
    assert.deepEqual(Object.keys(seen).filter((name) => !BASE.has(name) && !own.has(name)), [], "variables beyond the base and its own");
    assert.equal(seen.LOG_LEVEL, "info");
    assert.equal(seen.USER, "someone");
    assert.equal(seen.SUBS_TEST_OTHER, undefined);
    // The value reached the server (it is in its environment) and nothing subs printed holds it.
    assert.equal(seen.API_TOKEN, "[redacted]");
    assert.doesNotMatch(shown.stdout + shown.stderr, new RegExp(`${TEMPLATE_SECRET}|${OTHER_SECRET}`));
  });

  it("an agent mixing local and remote connections is served to the SDK client, and its calls run", async () => {
    const tools = await runCli(["agent", "tools", "mixed", "--json"], { cwd, env });
    assert.equal(tools.code, 0, tools.stderr);
    const session = await serveSession(["agent", "serve", "mixed"], { cwd, env });
    try {
      const listed = (await session.client.listTools()).tools.map((t) => t.name).sort();
      assert.deepEqual(listed, ["fs__list_allowed_directories", "fs__read_text_file", "notes__search_notes", "own__crash", "own__echo", "own__env"]);
      const echoed = await session.client.callTool({ name: "own__echo", arguments: { text: "local" } });
      assert.deepEqual(echoed.content, [{ type: "text", text: "local" }]);
      const read = await session.client.callTool({ name: "fs__read_text_file", arguments: { path: path.join(cwd, "docs", "hello.txt") } });
      assert.match(JSON.stringify(read.content), /hello from a local file/);
      // The server's own rule, with its own words: outside the directory it was started on.
      const outside = await session.client.callTool({ name: "fs__read_text_file", arguments: { path: "/etc/hostname" } });
      assert.equal(outside.isError, true, JSON.stringify(outside));
      assert.match(JSON.stringify(outside.content), /outside allowed directories|Access denied/i);
      const remote = await session.client.callTool({ name: "notes__search_notes", arguments: { q: "x" } });
      assert.equal(remote.isError, undefined, JSON.stringify(remote));
      // Its stderr went to the log, not to the serve's stderr.
      assert.doesNotMatch(session.stderr(), /stdio-server \d+: starting/);
    } finally {
      await session.close();
    }
  });

  // An agent of `own` alone: the pids checked are its own and its child's, and the other local
  // server of `mixed` (server-filesystem, which no check here looks at) cost a start in each round.
  for (const [how, end] of [
    ["SIGTERM to `subs agent serve`", "term"],
    ["Ctrl-C (SIGINT) to `subs agent serve`", "int"],
    ["SIGKILL of the MCP client that started it", "client"],
    // Nothing of subs runs on a SIGKILL: the watcher in the server's group ends it (local-server.ts, WATCHED).
    ["SIGKILL of `subs agent serve` itself", "kill"],
  ] as const) {
    it(`no process is left after ${how}`, async () => {
      const file = path.join(cwd, `pids-${end}`);
      const runEnv = { ...env, PIDS_FILE: file };
      if (end === "client") {
        // The client is a process of its own that starts subs as Claude Code does (stdio), then is killed.
        const client = spawn(process.execPath, [CLIENT, BIN, "agent", "serve", "lone"], {
          cwd,
          env: { ...baseEnv(cwd), ...runEnv },
          stdio: ["ignore", "pipe", "pipe"],
        });
        let out = "";
        client.stdout.on("data", (d) => (out += d));
        client.stderr.on("data", (d) => (out += d));
        await waitFor(() => out.includes("called"), () => `the client to call the tool: ${out}`);
        assert.equal(pidsIn(file).length, 2);
        client.kill("SIGKILL");
      } else {
        const session = await serveSession(["agent", "serve", "lone"], { cwd, env: runEnv });
        await session.client.callTool({ name: "own__echo", arguments: { text: "x" } });
        assert.equal(pidsIn(file).length, 2);
        session.child.kill(end === "term" ? "SIGTERM" : end === "int" ? "SIGINT" : "SIGKILL");
        const exited = await within(session.exited, "subs agent serve to end");
        // A serve told to stop has done its job (docs/serve.md): exit 0.
        if (end === "kill") assert.equal(exited.signal, "SIGKILL");
        else assert.equal(exited.code, 0, session.stderr());
      }
      for (const pid of pidsIn(file)) await waitFor(() => !running(pid), `pid ${pid} (the server or its child) to end`, 30_000);
    });
  }

  it("a server that exits says how, with its last words, and its log file (0600) keeps them", async () => {
    const crashed = await runCli(["mcp", "call", "own", "crash"], { cwd, env });
    assert.equal(crashed.code, 1, crashed.stderr);
    assert.match(crashed.stderr, /own: the local server exited with status 3; stderr ended with: .*fatal: the disk is on fire/);
    const logs = path.join(cwd, ".local", "state", "subs", "logs");
    const [log] = readdirSync(logs).filter((name) => name.startsWith("own-"));
    assert.ok(log, readdirSync(logs).join(", "));
    assert.match(crashed.stderr, new RegExp(`its whole log: ${logs}/${log}`));
    assert.equal(statSync(path.join(logs, log)).mode & 0o777, 0o600);
    assert.match(readFileSync(path.join(logs, log), "utf8"), /subs started: .*stdio-server\.mjs[\s\S]*fatal: the disk is on fire/);
    for (const pid of pidsIn(pidsFile)) await waitFor(() => !running(pid), `pid ${pid} to end`, 30_000);
  });

  it("a secret a server writes on stderr is scrubbed from the log, and --debug shows its stderr", async () => {
    const dir = mkdtempSync(path.join(tmpdir(), "subs-local-log-"));
    writeFileSync(
      path.join(dir, "substructure.toml"),
      `[mcp.own]\ncommand = ${JSON.stringify(process.execPath)}\nargs = [${JSON.stringify(SERVER)}]\nenv = { STDERR_SECRET = "\${THE_KEY}" }\n`,
    );
    const ran = await runCli(["mcp", "tools", "own", "--debug"], { cwd: dir, env: { THE_KEY: "key-value-5c8e2f" } });
    assert.equal(ran.code, 0, ran.stderr);
    assert.match(ran.stderr, /own \(stderr\): stdio-server \d+: starting/);
    assert.match(ran.stderr, /own \(stderr\): stdio-server: using key \[redacted\]/);
    const logs = path.join(dir, ".local", "state", "subs", "logs");
    const text = readdirSync(logs).map((name) => readFileSync(path.join(logs, name), "utf8")).join("");
    assert.match(text, /using key \[redacted\]/);
    assert.doesNotMatch(text + ran.stderr + ran.stdout, /key-value-5c8e2f/);
    const quiet = await runCli(["mcp", "tools", "own"], { cwd: dir, env: { THE_KEY: "key-value-5c8e2f" } });
    assert.doesNotMatch(quiet.stderr, /stdio-server/);
  });

  it("a program that is not there, and a variable that is not set, are said before anything runs", async () => {
    const dir = mkdtempSync(path.join(tmpdir(), "subs-local-missing-"));
    writeFileSync(path.join(dir, "substructure.toml"), `[mcp.gone]\ncommand = "no-such-program-7d1"\n\n[mcp.needs]\ncommand = "true"\nenv = { API_TOKEN = "\${NOT_SET_HERE}" }\n`);
    // `mcp tools` in-process: the built CLI's start of a local server for it is the --debug test's,
    // and these two stop before any start. `mcp login` of a local server runs as a person runs it.
    const inProcessEnv = baseEnv(dir);
    const gone = await runInProcess(["mcp", "tools", "gone"], { cwd: dir, env: inProcessEnv });
    assert.equal(gone.code, 1);
    assert.match(gone.stderr, /gone: `no-such-program-7d1` was not found/);
    const needs = await runInProcess(["mcp", "tools", "needs"], { cwd: dir, env: inProcessEnv });
    assert.equal(needs.code, 2);
    assert.match(needs.stderr, /needs: \$NOT_SET_HERE is not set/);
    const login = await runCli(["mcp", "login", "needs"], { cwd: dir });
    assert.equal(login.code, 0, login.stderr);
    assert.match(login.stderr, /needs is a local server: subs starts it when a command uses it; there is nothing to log in/);
    assert.match(login.stderr, /\$NOT_SET_HERE is not set/);
  });

  it("with [remote], `subs apply` and `subs mcp login` refuse a local server at file:line:col, sending nothing", async () => {
    const dir = mkdtempSync(path.join(tmpdir(), "subs-local-remote-"));
    writeFileSync(path.join(dir, "substructure.toml"), `[remote]\nurl = "http://127.0.0.1:9"\n\n[mcp.fs]\ncommand = "npx"\nargs = ["-y", "@modelcontextprotocol/server-filesystem", "."]\n`);
    // In-process: the refusal is the file's, read before anything is sent; the built CLI runs `mcp
    // login` in this file (above) and `apply` with [remote] in the deployment's own tests.
    for (const argv of [["apply"], ["mcp", "login", "fs"]]) {
      const refused = await runInProcess(argv, { cwd: dir, env: { ...baseEnv(dir), SUBSTRUCTURE_TOKEN: "deployment-token-1234567" } });
      assert.equal(refused.code, 2, `${argv.join(" ")}: ${refused.stderr}`);
      assert.match(refused.stderr, /substructure\.toml:5:1: \[mcp\.fs\] has `command`: a local server runs on the machine that starts it/);
      assert.doesNotMatch(refused.stderr, /cannot reach|127\.0\.0\.1:9/);
    }
  });
});

describe("header templates on a server at a url", () => {
  const KEY = "exa-key-value-71c4d9";
  let keyed: RunningMcpServer;
  let cwd: string;
  const seen: string[] = [];

  before(async () => {
    // An API-key server: without the right X-API-Key, 401; a call of `leak` answers an error that quotes the key back.
    keyed = await startMcpServer({
      tools: [annotatedTool("search"), annotatedTool("leak")],
      gate: (req, res, body) => {
        const key = req.headers["x-api-key"];
        seen.push(String(key));
        if (key !== KEY) {
          res.writeHead(401, { "content-type": "text/plain" }).end("missing or wrong X-API-Key");
          return true;
        }
        if ((body as { params?: { name?: string } } | undefined)?.params?.name === "leak") {
          res.writeHead(500, { "content-type": "text/plain" }).end(`upstream refused key ${KEY}`);
          return true;
        }
        return false;
      },
    });
    cwd = mkdtempSync(path.join(tmpdir(), "subs-headers-"));
    writeFileSync(
      path.join(cwd, "substructure.toml"),
      `[mcp.exa]\nurl = "${keyed.url}"\nheaders = { "X-API-Key" = "\${EXA_API_KEY}", "X-Client" = "subs-test" }\n\n[agent.search]\nmcp = ["exa"]\n`,
    );
  });
  after(async () => {
    await keyed.close();
  });

  it("the header is sent with every request, its value read from the environment; the server's quote of it is scrubbed", async () => {
    const tools = await runCli(["mcp", "tools", "exa"], { cwd, env: { EXA_API_KEY: KEY } });
    assert.equal(tools.code, 0, tools.stderr);
    assert.match(tools.stdout, /^search\t/m);
    assert.ok(seen.length > 0 && seen.every((key) => key === KEY), `every request carried the key: ${seen.length}`);
    const leaked = await runCli(["mcp", "call", "exa", "leak", "--json"], { cwd, env: { EXA_API_KEY: KEY } });
    assert.equal(leaked.code, 1);
    assert.match(leaked.stdout + leaked.stderr, /upstream refused key \[redacted\]/);
    assert.doesNotMatch(leaked.stdout + leaked.stderr, new RegExp(KEY));
  });

  it("served: `agent serve` and `mcp proxy` send it too", async () => {
    for (const argv of [["agent", "serve", "search"], ["mcp", "proxy", "exa"]]) {
      const session = await serveSession(argv, { cwd, env: { EXA_API_KEY: KEY } });
      try {
        const names = (await session.client.listTools()).tools.map((t) => t.name);
        assert.ok(names.includes(argv[0] === "agent" ? "exa__search" : "search"), `${argv.join(" ")}: ${names.join(", ")}`);
        const called = await session.client.callTool({ name: argv[0] === "agent" ? "exa__search" : "search", arguments: {} });
        assert.equal(called.isError, undefined, JSON.stringify(called));
        assert.doesNotMatch(session.received.join("\n") + session.stderr(), new RegExp(KEY));
      } finally {
        await session.close();
      }
    }
  });

  it("an unset variable is said by `mcp list` and stops a command before any request, naming it", async () => {
    const before = seen.length;
    // In-process: the built CLI runs `mcp list` (the first describe) and `mcp tools exa` (above);
    // what is checked here is what they say of an unset variable, and that nothing is sent.
    const inProcessEnv = baseEnv(cwd);
    const listed = await runInProcess(["mcp", "list"], { cwd, env: inProcessEnv });
    assert.match(listed.stdout, /\$EXA_API_KEY unset \(headers\)/);
    const json = await runInProcess(["mcp", "list", "--json"], { cwd, env: inProcessEnv });
    const [entry] = JSON.parse(json.stdout) as Array<{ unset_env: string[]; usable: boolean }>;
    assert.deepEqual([entry!.unset_env, entry!.usable], [["EXA_API_KEY"], false]);
    const tools = await runInProcess(["mcp", "tools", "exa"], { cwd, env: inProcessEnv });
    assert.equal(tools.code, 2, tools.stderr);
    assert.match(tools.stderr, /exa: \$EXA_API_KEY is not set; \[mcp\.exa\] sends it in its headers/);
    assert.equal(seen.length, before, "no request went out");
  });
});

