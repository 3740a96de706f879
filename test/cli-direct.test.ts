// `subs mcp list` in its everyday spellings is read by run.ts itself (directMcpList), without
// commander. Every line it reads must mean to it what it means to commander: the same --config,
// --json, --check, --timeout and --debug. Lines from a fixed seed, most of them spellings of
// `subs mcp list` and many with one word or flag too many; each one directMcpList takes is parsed
// by commander's tree too (cli.ts, the same action replaced by one that records its flags).
import assert from "node:assert/strict";
import { tmpdir } from "node:os";
import { test } from "node:test";
import { buildProgram } from "../src/cli.ts";
import { directMcpList, namedPath } from "../src/run.ts";
import { testContext } from "./support/cli.ts";
import { picker, prng } from "./support/prng.ts";

type Flags = { config?: string; json: boolean; check: boolean; timeout: string; debug: boolean };

/** What commander makes of `argv`: the flags `mcp list`'s action gets, or why it never ran. */
async function viaCommander(argv: string[]): Promise<Flags | "parse error" | "no action"> {
  const { ctx } = testContext({ cwd: tmpdir() });
  let got: { config?: string; json?: boolean; check?: boolean; timeout: string } | undefined;
  const program = buildProgram(ctx, { setJson: () => {}, setExitCode: () => {} }, namedPath(argv));
  const list = program.commands.find((c) => c.name() === "mcp")?.commands.find((c) => c.name() === "list");
  list?.action((opts: typeof got) => {
    got = opts;
  });
  try {
    await program.parseAsync(argv, { from: "user" });
  } catch {
    return "parse error";
  }
  if (!got) return "no action";
  const global = program.opts() as { config?: string; debug?: boolean };
  const config = got.config ?? global.config;
  return { ...(config !== undefined ? { config } : {}), json: Boolean(got.json), check: Boolean(got.check), timeout: got.timeout, debug: Boolean(global.debug) };
}

const direct = (argv: string[]): Flags | undefined => {
  const flags = directMcpList(argv);
  if (!flags) return undefined;
  return { ...(flags.config !== undefined ? { config: flags.config } : {}), json: Boolean(flags.json), check: Boolean(flags.check), timeout: flags.timeout, debug: flags.debug };
};

/** A spelling of `subs mcp list`, often with something more in it. */
function line(p: ReturnType<typeof picker>): string[] {
  const value = () => p.pick(["x.toml", "dir/sub.toml", "5", "0.5", "abc", "", "-x", "--json", "mcp", "list", "a b"]);
  const globals = () => p.pick<() => string[]>([() => ["--debug"], () => ["--config", value()], () => [`--config=${value()}`]])();
  const own = () =>
    p.pick<() => string[]>([
      () => ["--json"],
      () => ["--check"],
      () => ["--debug"],
      () => ["--timeout", value()],
      () => [`--timeout=${value()}`],
      () => ["--config", value()],
      () => [`--config=${value()}`],
    ])();
  const argv: string[] = [];
  for (let n = p.int(3); n > 0; n--) argv.push(...globals());
  argv.push("mcp");
  if (p.chance(0.1)) argv.push(...globals());
  argv.push("list");
  for (let n = p.int(5); n > 0; n--) argv.push(...own());
  if (p.chance(0.35)) {
    const extra = p.pick(["--jsn", "--json=1", "--check=yes", "--debug=1", "-h", "--help", "--", "extra", "lst", "--no-json", "-j", "--timeout", "--config", "--config=", "--version", "-V", "help", "mcp"]);
    argv.splice(p.int(argv.length + 1), 0, extra);
  }
  return argv;
}

test("every line run.ts reads without commander gets from it the flags commander gives (seed 0xd1ec7, 3000 lines)", async () => {
  const p = picker(prng(0xd1ec7));
  let taken = 0;
  let left = 0;
  for (let n = 0; n < 3000; n++) {
    const argv = line(p);
    const ours = direct(argv);
    if (!ours) {
      left++;
      continue;
    }
    taken++;
    assert.deepEqual(await viaCommander(argv), ours, `line ${n}: subs ${argv.map((a) => JSON.stringify(a)).join(" ")}`);
  }
  // Both ways, or the test proves little.
  assert.ok(taken > 1000 && left > 500, `taken ${taken}, left to commander ${left}`);
});

test("the lines run.ts reads without commander: the everyday spellings, and nothing commander would refuse or read otherwise", () => {
  const ok = (argv: string[]) => assert.ok(directMcpList(argv), argv.join(" "));
  const no = (argv: string[]) => assert.equal(directMcpList(argv), undefined, argv.join(" "));
  ok(["mcp", "list"]);
  ok(["mcp", "list", "--json"]);
  ok(["--debug", "mcp", "list", "--json"]);
  ok(["--config", "x.toml", "mcp", "list", "--check", "--timeout", "30"]);
  ok(["mcp", "list", "--config=x.toml", "--timeout=2.5"]);
  // Another command, a typo, help, a value that looks like a flag, an empty value, an operand.
  no(["mcp", "lst"]);
  no(["mcp", "list", "--help"]);
  no(["mcp", "list", "--jsn"]);
  no(["mcp", "list", "--config", "--json"]);
  no(["mcp", "list", "--config="]);
  no(["mcp", "list", "--timeout"]);
  no(["mcp", "list", "extra"]);
  no(["mcp", "list", "--", "--json"]);
  no(["--json", "mcp", "list"]);
  no(["agent", "list"]);
  no(["list", "mcp", "--json"]);
  no([]);
});
