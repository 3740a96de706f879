// `subs completion bash` completes commands, flags, and ids from the file, in a real bash.
// Every completion runs in a real bash, whose script calls the built CLI (`subs __complete`) on
// PATH, as a shell does on TAB. The bash script is printed by the built CLI in the first test; the
// other tests take it, and the zsh and fish scripts, from `run()` in this process, where what is
// checked is the script printed, not the process.
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { mkdirSync, mkdtempSync, symlinkSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { test } from "node:test";
import { BIN, ensureBuilt, runAs, runInProcess, type How } from "./support/cli.ts";

/** Writes `subs completion bash`, run as `how` says, to dir/subs.bash, for bashComplete to source. */
async function writeBashScript(dir: string, how: How): Promise<void> {
  const script = (await runAs(how, ["completion", "bash"], { cwd: dir })).stdout;
  writeFileSync(path.join(dir, "subs.bash"), script);
}

/** The candidates bash's completion function gives for `line` in dir, with the script writeBashScript wrote. */
function bashComplete(dir: string, line: string): string[] {
  ensureBuilt();
  const binDir = path.join(dir, "bin");
  mkdirSync(binDir, { recursive: true });
  try {
    symlinkSync(BIN, path.join(binDir, "subs"));
  } catch {}
  // Split the line as readline would, then ask the completion function, as bash does on TAB.
  const program = `
    source ./subs.bash
    COMP_LINE=${JSON.stringify(line)}
    read -ra COMP_WORDS <<< "$COMP_LINE"
    [[ "$COMP_LINE" == *" " ]] && COMP_WORDS+=("")
    COMP_CWORD=$(( \${#COMP_WORDS[@]} - 1 ))
    _subs_complete
    printf '%s\\n' "\${COMPREPLY[@]}"
  `;
  const result = spawnSync("bash", ["-c", program], { cwd: dir, encoding: "utf8", env: { PATH: `${binDir}:${process.env.PATH}`, HOME: dir } });
  assert.equal(result.status, 0, result.stderr);
  return result.stdout.split("\n").filter(Boolean);
}

test("bash: commands, subcommands, flags and shells", async () => {
  const dir = mkdtempSync(path.join(tmpdir(), "subs-complete-"));
  writeFileSync(path.join(dir, "substructure.toml"), '[mcp.sentry]\nurl = "https://s.example/mcp"\n');
  await writeBashScript(dir, "cli");
  assert.ok(bashComplete(dir, "subs ").includes("mcp"));
  assert.ok(bashComplete(dir, "subs ").includes("apply"));
  assert.deepEqual(bashComplete(dir, "subs mcp li"), ["list"]);
  assert.deepEqual(bashComplete(dir, "subs mcp "), ["add", "call", "connect", "import", "list", "login", "proxy", "remove", "tools"]);
  assert.deepEqual(bashComplete(dir, "subs agent connect x --to c"), ["claude", "claude-desktop", "codex", "cursor"]);
  assert.deepEqual(bashComplete(dir, "subs mcp connect --to codex --scope "), ["local", "project", "user"]);
  assert.deepEqual(bashComplete(dir, "subs mcp connect --to codex s"), ["sentry"]);
  assert.deepEqual(bashComplete(dir, "subs mcp import --from c"), ["claude", "codex", "cursor"]);
  assert.ok(bashComplete(dir, "subs mcp import --").includes("--dry-run"));
  assert.deepEqual(bashComplete(dir, "subs mcp add x https://x.example/mcp --to"), ["--token-env"]);
  assert.deepEqual(bashComplete(dir, "subs apply --d"), ["--debug", "--dry-run"]);
  assert.deepEqual(bashComplete(dir, "subs completion "), ["bash", "fish", "zsh"]);
});

test("zsh and fish scripts call back into subs; an unknown shell is a usage error", async () => {
  const dir = mkdtempSync(path.join(tmpdir(), "subs-complete-"));
  for (const shell of ["zsh", "fish"]) {
    const result = await runInProcess(["completion", shell], { cwd: dir });
    assert.equal(result.code, 0);
    assert.match(result.stdout, /subs __complete/);
  }
  const bad = await runInProcess(["completion", "tcsh"], { cwd: dir });
  assert.equal(bad.code, 2);
  assert.match(bad.stderr, /no completion for shell 'tcsh'/);
});

test("bash: connection ids for `mcp login`, `mcp tools`, `mcp call`; agent names for `agent tools`; --config is honoured", async () => {
  const dir = mkdtempSync(path.join(tmpdir(), "subs-complete-"));
  writeFileSync(
    path.join(dir, "substructure.toml"),
    '[mcp.sentry]\nurl = "https://s.example/mcp"\n[mcp.linear]\nurl = "https://l.example/mcp"\n[agent.triage]\nmcp = ["sentry"]\n[agent.support]\nmcp = ["linear"]\n',
  );
  await writeBashScript(dir, "in-process");
  assert.deepEqual(bashComplete(dir, "subs mcp login "), ["linear", "sentry"]);
  assert.deepEqual(bashComplete(dir, "subs mcp login se"), ["sentry"]);
  // variadic: an id already given is not offered again
  assert.deepEqual(bashComplete(dir, "subs mcp login sentry "), ["linear"]);
  assert.deepEqual(bashComplete(dir, "subs mcp tools "), ["linear", "sentry"]);
  assert.deepEqual(bashComplete(dir, "subs mcp call l"), ["linear"]);
  // the second argument of `call` is a tool name on the server: nothing from the file
  assert.deepEqual(bashComplete(dir, "subs mcp call sentry "), []);
  assert.deepEqual(bashComplete(dir, "subs mcp remove "), ["linear", "sentry"]);
  // `mcp add` takes a new id: offering a declared one would only lead to "already declared"
  assert.deepEqual(bashComplete(dir, "subs mcp add "), []);
  assert.deepEqual(bashComplete(dir, "subs agent tools "), ["support", "triage"]);
  assert.deepEqual(bashComplete(dir, "subs agent tools t"), ["triage"]);

  const other = path.join(dir, "other");
  mkdirSync(other);
  writeFileSync(path.join(other, "elsewhere.toml"), '[mcp.github]\nurl = "https://g.example/mcp"\n');
  assert.deepEqual(bashComplete(dir, "subs mcp tools --config other/elsewhere.toml "), ["github"]);
});
