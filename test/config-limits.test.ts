// Files that are not files, nesting, reserved names and "did you mean" at scale.
// Each case goes through the CLI in-process (the real loading path: --config, $SUBS_CONFIG and the
// upward search) and checks the exit code and the message users see.
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { mkdirSync, mkdtempSync, symlinkSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { describe, test } from "node:test";
import { closest } from "../src/config/closest.ts";
import { parseConfig } from "../src/config/load.ts";
import { CONFIG_MAX_BYTES } from "../src/config/read.ts";
import { ConfigError } from "../src/errors.ts";
import { runCli, runInProcess, type RunResult } from "./support/cli.ts";
import { inTurns, timed } from "./support/ratio.ts";

const VALID = '[mcp.a]\nurl = "https://a.example/mcp"\n';

function noTrace(stderr: string) {
  assert.doesNotMatch(stderr, /^\s+at /m);
  assert.doesNotMatch(stderr, /unexpected/);
}

describe("substructure.toml must be a regular file under 1 MiB", () => {
  const dir = mkdtempSync(path.join(tmpdir(), "subs-notfile-"));
  const fifo = path.join(dir, "fifo.toml");
  assert.equal(spawnSync("mkfifo", [fifo]).status, 0);
  symlinkSync("/dev/zero", path.join(dir, "zero.toml"));
  mkdirSync(path.join(dir, "dir.toml"));
  writeFileSync(path.join(dir, "real.toml"), VALID);
  symlinkSync("real.toml", path.join(dir, "link.toml"));
  writeFileSync(path.join(dir, "big.toml"), `# ${"x".repeat(CONFIG_MAX_BYTES)}\n${VALID}`);
  writeFileSync(path.join(dir, "cap.toml"), `${VALID}# ${"x".repeat(CONFIG_MAX_BYTES - VALID.length - 3)}\n`);

  const refusals: Array<[name: string, file: string, message: RegExp]> = [
    ["a FIFO is refused at once (it used to block forever)", "fifo.toml", /fifo\.toml is a named pipe \(FIFO\), not a regular file/],
    ["a symlink to /dev/zero is refused (it used to grow to 16 GB)", "zero.toml", /zero\.toml is a device, not a regular file/],
    ["a directory is refused", "dir.toml", /dir\.toml is a directory, not a regular file/],
    ["a file over 1 MiB is refused", "big.toml", /big\.toml is larger than 1 MiB/],
  ];
  for (const [name, file, message] of refusals) {
    // That none waits (a FIFO blocks its reader) is the upward-search test's below, through the real CLI.
    test(`${name} (--config)`, async () => {
      const result = await runInProcess(["mcp", "list", "--config", file], { cwd: dir, env: {} });
      assert.equal(result.code, 2, result.stderr);
      assert.match(result.stderr, message);
      assert.match(result.stderr, /hint: substructure\.toml must be a regular file|hint: a substructure\.toml is a few kilobytes/);
      assert.equal(result.stdout, "");
      noTrace(result.stderr);
    });
  }

  test("$SUBS_CONFIG naming a FIFO is refused the same way", async () => {
    const result = await runInProcess(["agent", "list"], { cwd: dir, env: { SUBS_CONFIG: "fifo.toml" } });
    assert.equal(result.code, 2);
    assert.match(result.stderr, /fifo\.toml is a named pipe \(FIFO\), not a regular file/);
  });

  test("a FIFO found by the upward search is refused, through the real CLI, without waiting", async () => {
    const project = mkdtempSync(path.join(tmpdir(), "subs-fifo-up-"));
    assert.equal(spawnSync("mkfifo", [path.join(project, "substructure.toml")]).status, 0);
    const nested = path.join(project, "src");
    mkdirSync(nested);
    const result = await runCli(["mcp", "list", "--json"], { cwd: nested, timeoutMs: 15_000 });
    assert.equal(result.code, 2, result.stderr);
    assert.match(result.stderr, /substructure\.toml is a named pipe \(FIFO\), not a regular file/);
    assert.equal(JSON.parse(result.stdout).error.code, "usage");
  });

  test("a symlink to a regular file is followed; a file of exactly 1 MiB is read", async () => {
    const linked = await runInProcess(["mcp", "list", "--json", "--config", "link.toml"], { cwd: dir, env: {} });
    assert.equal(linked.code, 0, linked.stderr);
    assert.deepEqual(JSON.parse(linked.stdout).map((c: { id: string }) => c.id), ["a"]);
    const atCap = await runInProcess(["mcp", "list", "--json", "--config", "cap.toml"], { cwd: dir, env: {} });
    assert.equal(atCap.code, 0, atCap.stderr);
  });
});

describe("nesting is bounded", () => {
  const deep = 10_000;
  const dotted = Array.from({ length: deep }, () => "a").join(".");
  const cases: Array<[name: string, source: string, at: string, message: RegExp]> = [
    ["nested arrays", `x = ${"[".repeat(deep)}${"]".repeat(deep)}\n`, "1:69", /invalid TOML: nested deeper than 64 levels/],
    ["nested inline tables", `x = ${"{ a = ".repeat(deep)}1${" }".repeat(deep)}\n`, "1:", /invalid TOML: nested deeper than 64 levels/],
    ["a table header", `[${dotted}]\n`, "1:130", /nested deeper than 64 levels/],
    ["an array-of-tables header", `[[${dotted}]]\n`, "1:131", /nested deeper than 64 levels/],
    ["a dotted key", `${VALID}[mcp.b]\n${dotted} = 1\n`, "4:125", /nested deeper than 64 levels/],
  ];
  for (const [name, source, at, message] of cases) {
    test(`${deep}-deep ${name}: exit 2 at file:line:col, no stack overflow`, async () => {
      const dir = mkdtempSync(path.join(tmpdir(), "subs-deep-"));
      writeFileSync(path.join(dir, "substructure.toml"), source);
      const result = await runInProcess(["mcp", "list", "--json"], { cwd: dir, env: {} });
      assert.equal(result.code, 2, result.stderr);
      assert.match(result.stderr, new RegExp(`^substructure\\.toml:${at}`, "m"));
      assert.match(result.stderr, message);
      noTrace(result.stderr);
    });
  }

  test("64 levels pass the bound, 65 do not: it refuses only what no real file has", () => {
    const nested = (levels: number) => `x = ${"[".repeat(levels)}${"]".repeat(levels)}\n${VALID}`;
    // 64 levels: an unknown key, reported as one, not a nesting error.
    assert.throws(
      () => parseConfig(nested(64), { path: "/x/substructure.toml", cwd: "/x" }),
      (error: unknown) => error instanceof ConfigError && error.diagnostics.length === 1 && /unknown key `x`/.test(error.message),
    );
    assert.throws(() => parseConfig(nested(65), { path: "/x/substructure.toml", cwd: "/x" }), /nested deeper than 64 levels/);
    const header = (levels: number) => `[${Array.from({ length: levels }, () => "a").join(".")}]\n`;
    assert.throws(() => parseConfig(header(64), { path: "/x/substructure.toml", cwd: "/x" }), /unknown key `a`/);
    assert.throws(() => parseConfig(header(65), { path: "/x/substructure.toml", cwd: "/x" }), /1:1: nested deeper than 64 levels/);
  });
});

describe("reserved names are errors where they are written", () => {
  const cases: Array<[source: string, expected: string]> = [
    [`[mcp.__proto__]\nurl = "https://a.example/mcp"\n`, "1:1: `__proto__` is a reserved name"],
    [`${VALID}[agent.constructor]\nmcp = ["a"]\n`, "3:1: `constructor` is a reserved name"],
    [`${VALID}__proto__ = 1\n`, "3:1: `__proto__` is a reserved name"],
    [`${VALID}oauth = { prototype = "x" }\n`, "3:11: `prototype` is a reserved name"],
    [`[[mcp.a.__proto__]]\n`, "1:9: `__proto__` is a reserved name"],
    [`${VALID}[agent.x]\nmcp = [{ id = "a", tools = { constructor = true } }]\n`, "4:30: `constructor` is a reserved name"],
  ];
  for (const [source, expected] of cases) {
    test(JSON.stringify(source.split("\n").find((l) => /__proto__|constructor|prototype/.test(l))), () => {
      try {
        parseConfig(source, { path: "/x/substructure.toml", cwd: "/x" });
      } catch (error) {
        assert.ok(error instanceof ConfigError, String(error));
        const lines = error.diagnostics.map((d) => `${d.line}:${d.col}: ${d.message}`);
        assert.ok(lines.includes(expected), lines.join("\n"));
        assert.equal(error.diagnostics.find((d) => d.message.includes("reserved"))?.hint, "JavaScript gives it a meaning of its own; choose another name");
        return;
      }
      assert.fail("loaded without errors");
    });
  }

  test("a reserved name does not hide the file's other errors", () => {
    const source = `[mcp.__proto__]\nurl = "https://a.example/mcp"\n[mcp.b]\nurl = "ftp://b.example"\n`;
    assert.throws(
      () => parseConfig(source, { path: "/x/substructure.toml", cwd: "/x" }),
      (error: unknown) =>
        error instanceof ConfigError &&
        error.diagnostics.map((d) => `${d.line}:${d.col}`).join(" ") === "1:1 4:1" &&
        /must be an http\(s\) URL/.test(error.diagnostics[1]!.message),
    );
  });
});

describe('"did you mean" is linear', () => {
  test("16,000 agents naming missing connections (and 16,000 declared) end with exit 2, at a cost that follows their count (2,000 against 16,000)", async () => {
    /** `subs agent list` on n declared connections and n agents naming missing ones: its time and result. */
    const listed = (n: number) => {
      const dir = mkdtempSync(path.join(tmpdir(), "subs-suggest-"));
      const parts: string[] = [];
      // Dotted keys keep the file under the 1 MiB cap.
      for (let i = 0; i < n; i++) parts.push(`mcp.s${i}.url="https://s.io"\n`);
      for (let i = 0; i < n; i++) parts.push(`agent.a${i}.mcp=["x${i}"]\n`);
      for (let i = 0; i < n / 4; i++) parts.push(`agent.a${i}.agents=["b${i}"]\n`);
      const source = parts.join("");
      assert.ok(source.length < 1024 * 1024);
      writeFileSync(path.join(dir, "substructure.toml"), source);
      return { dir, result: undefined as RunResult | undefined };
    };
    const large = listed(16_000);
    const small = listed(2_000);
    const run = (at: ReturnType<typeof listed>) => () => timed(async () => (at.result = await runInProcess(["agent", "list"], { cwd: at.dir, env: {} })));
    // In turns, the least of two each: a ratio in one run, not a figure a loaded machine can break.
    // Linear is 8 times the time; a search of every name against every other was 64 times.
    const ms = await inTurns(run(small), run(large), 2);
    assert.ok(ms.b < ms.a * 24, `2,000 agents took ${Math.round(ms.a)} ms, 16,000 took ${Math.round(ms.b)} ms (the least of 2 each)`);
    const result = large.result!;
    assert.equal(result.code, 2, result.stderr.slice(0, 500));
    // Every dangling name is reported; the first ones with a suggestion (x0 is one edit from s0).
    assert.match(result.stderr, /agent `a0` names connection `x0`, which is not declared\n\s+hint: did you mean `s0`\?/);
    assert.match(result.stderr, /agent `a15999` names connection `x15999`, which is not declared/);
    assert.match(result.stderr, /agent `a3999` names sub-agent `b3999`, which is not declared/);
    assert.match(result.stderr, /20000 errors in substructure\.toml/);
    assert.match(small.result!.stderr, /2500 errors in substructure\.toml/);
  });

  test("closest: within two edits, the nearest candidate", () => {
    assert.equal(closest("sentri", ["github", "sentry"]), "sentry");
    assert.equal(closest("prefix_tool", ["url", "prefix_tools"]), "prefix_tools");
    assert.equal(closest("abcd", ["abdc"]), "abdc");
    assert.equal(closest("ab", ["ba", "abc"]), "abc");
    assert.equal(closest("kitten", ["sitting"]), undefined);
    assert.equal(closest("", ["ab", "abc"]), "ab");
    assert.equal(closest("x".repeat(100_000), ["x".repeat(99_999) + "y"]), "x".repeat(99_999) + "y");
    assert.equal(closest("x".repeat(100_000), ["y".repeat(100_000)]), undefined);
  });
});

describe("the upward search stops at the first entry named substructure.toml", () => {
  test("a dangling symlink is reported, not skipped for a parent's file", async () => {
    const root = mkdtempSync(path.join(tmpdir(), "subs-dangling-"));
    writeFileSync(path.join(root, "substructure.toml"), VALID);
    const project = path.join(root, "project");
    mkdirSync(project);
    symlinkSync("missing.toml", path.join(project, "substructure.toml"));
    const result = await runInProcess(["mcp", "list"], { cwd: project, env: {} });
    assert.equal(result.code, 2, result.stderr);
    assert.match(result.stderr, /cannot read .*project\/substructure\.toml: ENOENT/);
    assert.equal(result.stdout, "");
  });
});
