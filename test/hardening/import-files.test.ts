// `subs mcp import` reads files other programs wrote, or a cloned repository brought: what is at
// a client's path may be a FIFO that never answers, a device that never ends (/dev/zero), a
// directory, a file of secrets it was linked to (/etc/shadow), one this user may not read, or
// JSON and TOML nested past any real config. Each is answered at once, in one line naming the file
// (and a hint), never with a stack trace or a byte of what the file holds; found among a client's
// usual places, it is one warning and the other files are still read. Runs meeting a FIFO or an
// endless device (/dev/zero, /dev/urandom) use the built CLI (bin/subs.cjs): a read that blocked or
// never ended would hang this very process, where a child is killed after 15 s; so does the
// unreadable file (a file mode, met by a process of another user when the tests run as root). The
// other files go to the same `run()` in this process: what is checked is the answer and the file
// left, not the process.
import assert from "node:assert/strict";
import { execFileSync, spawnSync } from "node:child_process";
import { chmodSync, existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, symlinkSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { after, before, describe, it } from "node:test";
import { BIN, ensureBuilt, runCli, runInProcess, type RunResult } from "../support/cli.ts";

const MARK = "SECRET-in-the-file-7c1d";
const DEPTH = 100_000;
/** Lines a failure prints: what happened, then what to do. Never a stack frame. */
const STACK = /^\s+at .+:\d+:\d+\)?$/m;
const shadow = existsSync("/etc/shadow") ? readFileSync("/etc/shadow", "utf8") : undefined;

/** The warning lines of `text` about `file`. */
const warningsAbout = (text: string, file: string) => text.split("\n").filter((line) => line.startsWith(`warning: ${file} `));

/** Nothing of a hostile file got out: no stack, no marker, no line of /etc/shadow. */
function nothingOfTheFile(r: RunResult, what: string): void {
  const all = r.stdout + r.stderr;
  assert.doesNotMatch(all, STACK, `${what}: a stack trace`);
  // A parser's message quotes a few characters around the fault: a piece of the marker is enough.
  assert.ok(!all.includes(MARK.slice(0, 9)), `${what}: the file's text was printed`);
  for (const line of shadow?.split("\n").filter((l) => l.length > 8) ?? []) assert.ok(!all.includes(line.slice(0, 8)), `${what}: a line of /etc/shadow was printed`);
}

describe("subs mcp import and hostile client files", () => {
  let root: string;
  let dir: string;
  let home: string;
  const toml = '[mcp.kept]\nurl = "https://kept.example/mcp"\n';
  const cli = (argv: string[]) => runCli(["mcp", "import", ...argv], { cwd: dir, env: { HOME: home }, timeoutMs: 15_000 });
  const inProcess = (argv: string[]) => runInProcess(["mcp", "import", ...argv], { cwd: dir, env: { HOME: home } });
  /** What a read could wait on forever or never finish: given to the built CLI, whose child a timeout ends. */
  const endless = new Set(["fifo.json", "/dev/zero", "/dev/urandom"]);

  before(() => {
    root = mkdtempSync(path.join(tmpdir(), "subs-import-hostile-"));
    dir = path.join(root, "project");
    home = path.join(root, "home");
    mkdirSync(dir);
    mkdirSync(home);
    writeFileSync(path.join(dir, "substructure.toml"), toml);
    execFileSync("mkfifo", [path.join(dir, "fifo.json")]);
    mkdirSync(path.join(dir, "a-directory.json"));
    writeFileSync(path.join(dir, "deep-array.json"), "[".repeat(DEPTH) + "]".repeat(DEPTH));
    writeFileSync(path.join(dir, "deep-servers.json"), `{"mcpServers": {"a": ${'{"x":'.repeat(DEPTH)}"${MARK}"${"}".repeat(DEPTH)}}}`);
    writeFileSync(path.join(dir, "deep-header.json"), `{"servers": {"a": {"type": "http", "url": "https://a.example/mcp", "headers": {"Authorization": ${"[".repeat(DEPTH)}"${MARK}"${"]".repeat(DEPTH)}}}}}`);
    writeFileSync(path.join(dir, "config.toml"), `[mcp_servers.a]\nurl = "https://a.example/mcp"\nx = ["${MARK}", ${"[".repeat(DEPTH)}${"]".repeat(DEPTH)}]\n`);
    writeFileSync(path.join(dir, "broken.json"), `{"mcpServers": {"a": {"url": "https://a.example/mcp", "headers": {"Authorization": "Bearer ${MARK}"}}`);
    writeFileSync(path.join(dir, "quoted.json"), `{"mcpServers": ${MARK}}`);
    writeFileSync(path.join(dir, "broken.toml"), `[mcp_servers.a]\nurl = "https://a.example/mcp"\nbearer_token = "${MARK}\n`);
  });

  after(() => rmSync(root, { recursive: true, force: true }));

  it("--from a FIFO, /dev/zero, a directory, /etc/shadow, deep or broken JSON and TOML: exit 2 at once, one error line naming it (and a hint), nothing of it printed, nothing written", async () => {
    const files = ["fifo.json", "/dev/zero", "/dev/urandom", "a-directory.json", "deep-array.json", "config.toml", "broken.json", "quoted.json", "broken.toml", ...(shadow !== undefined ? ["/etc/shadow"] : [])];
    for (const file of files) {
      for (const extra of [[], ["--json"]]) {
        const r = await (endless.has(file) ? cli : inProcess)(["--from", file, ...extra]);
        assert.equal(r.code, 2, `${file}: ${r.stderr}`);
        const lines = r.stderr.trimEnd().split("\n");
        assert.match(lines[0]!, new RegExp(`^error: ${file.replace(/[.*+?^${}()|[\]\\/]/g, "\\$&")} `), `${file}: ${r.stderr}`);
        assert.ok(lines.length <= 2 && (lines.length === 1 || lines[1]!.startsWith("hint: ")), `${file}: more than one line and its hint:\n${r.stderr}`);
        if (extra.length > 0) assert.equal(JSON.parse(r.stdout).error.code, "usage");
        else assert.equal(r.stdout, "");
        nothingOfTheFile(r, file);
        assert.equal(readFileSync(path.join(dir, "substructure.toml"), "utf8"), toml);
      }
    }
  });

  it("--from a file this user may not read: exit 2, one line (EACCES)", async () => {
    const locked = path.join(root, "locked");
    mkdirSync(locked);
    writeFileSync(path.join(locked, "mcp.json"), `{"mcpServers": {"a": {"url": "https://a.example/mcp", "headers": {"Authorization": "Bearer ${MARK}"}}}}`, { mode: 0o600 });
    let r: RunResult;
    if (process.getuid?.() === 0) {
      // root reads every file: the CLI runs as nobody, the file stays root's.
      ensureBuilt();
      for (const d of [root, locked]) chmodSync(d, 0o755);
      const child = spawnSync(process.execPath, [BIN, "mcp", "import", "--from", "mcp.json", "--dry-run"], { cwd: locked, uid: 65534, gid: 65534, env: { PATH: process.env.PATH, HOME: locked }, encoding: "utf8", timeout: 15_000 });
      r = { code: child.status ?? 128, stdout: child.stdout, stderr: child.stderr };
    } else {
      chmodSync(path.join(locked, "mcp.json"), 0o000);
      r = await runCli(["mcp", "import", "--from", "mcp.json", "--dry-run"], { cwd: locked, env: { HOME: locked }, timeoutMs: 15_000 });
    }
    assert.equal(r.code, 2, r.stderr);
    assert.match(r.stderr, /^error: mcp\.json cannot be read \(EACCES\)\nhint: [^\n]+\n$/);
    nothingOfTheFile(r, "an unreadable file");
  });

  it("found in a client's usual places (a FIFO, a link to /dev/zero or /etc/shadow, deep JSON and TOML): one warning line each, at once; every other file is still read and imported", async () => {
    const project = path.join(root, "found");
    const user = path.join(root, "found-home");
    for (const d of [project, path.join(project, ".cursor"), path.join(project, ".vscode"), path.join(project, ".codex"), path.join(project, ".gemini"), user, path.join(user, ".cursor")]) mkdirSync(d);
    execFileSync("mkfifo", [path.join(project, ".mcp.json")]);
    symlinkSync("/dev/zero", path.join(project, ".cursor", "mcp.json"));
    writeFileSync(path.join(project, ".vscode", "mcp.json"), "[".repeat(DEPTH) + "]".repeat(DEPTH));
    writeFileSync(path.join(project, ".codex", "config.toml"), `[mcp_servers.a]\nx = ["${MARK}", ${"[".repeat(DEPTH)}${"]".repeat(DEPTH)}]\n`);
    symlinkSync(shadow !== undefined ? "/etc/shadow" : path.join(project, "no-such-file"), path.join(project, ".gemini", "settings.json"));
    writeFileSync(path.join(user, ".cursor", "mcp.json"), JSON.stringify({ mcpServers: { good: { url: "https://good.example/mcp" } } }));
    writeFileSync(path.join(project, "substructure.toml"), toml);

    const r = await runCli(["mcp", "import"], { cwd: project, env: { HOME: user }, timeoutMs: 15_000 });
    assert.equal(r.code, 0, r.stderr);
    nothingOfTheFile(r, "the found files");
    const hostile = [".mcp.json", ".cursor/mcp.json", ".codex/config.toml", ...(shadow !== undefined ? [".gemini/settings.json"] : [])];
    for (const file of hostile) {
      assert.equal(warningsAbout(r.stderr, file).length, 1, `${file}: ${r.stderr}`);
      assert.ok(!r.stderr.includes(` ${file} (`), `${file} is not read`);
    }
    // Nested past any real config but well-formed: read, and nothing in it.
    assert.match(r.stderr, /, \.vscode\/mcp\.json \(vscode, 0 servers\)/);
    assert.equal(readFileSync(path.join(project, "substructure.toml"), "utf8"), `${toml}\n[mcp.good]\nurl = "https://good.example/mcp"\n`);

    const json = await runCli(["mcp", "import", "--json", "--dry-run"], { cwd: project, env: { HOME: user }, timeoutMs: 15_000 });
    assert.equal(json.code, 0, json.stderr);
    nothingOfTheFile(json, "the found files, --json");
    const out = JSON.parse(json.stdout);
    assert.deepEqual(out.unreadable.map((u: { file: string }) => path.relative(project, u.file)).sort(), [...hostile].sort());
  });

  it("deep values inside a server entry of a well-formed file: the entry is skipped or imported without them, the run ends normally", async () => {
    for (const file of ["deep-servers.json", "deep-header.json"]) {
      const r = await inProcess(["--from", file, "--dry-run"]);
      assert.equal(r.code, 0, `${file}: ${r.stderr}`);
      nothingOfTheFile(r, file);
      assert.match(r.stderr, /^Read /);
    }
  });
});
