// `subs mcp list`'s action, shared by its declaration (commander's tree) and by run.ts, which reads
// the everyday spellings of the command itself: loading commander and building the command was
// about 1 ms of every listing (docs/speed.md). So this module imports nothing but the flag parser.
import type { Context } from "../../../context.ts";
import { usage } from "../../../errors.ts";
import { parseDuration, parseSeconds } from "../../flags.ts";
import type { ProgramHooks } from "../../options.ts";

/** The flags of `subs mcp list`, as its action takes them (`config` from before the command too). */
export type ListFlags = { config?: string; json?: boolean; check?: boolean; timeout: string; warnWithin?: string };

/**
 * The warning window of `subs mcp list`, in seconds: `--warn-within`, else `$SUBS_WARN_WITHIN`,
 * else undefined (the default, 7 days). `0` turns the warnings off.
 */
export function warnWithinSeconds(flag: string | undefined, env: Readonly<Record<string, string | undefined>>): number | undefined {
  const [value, name] = flag !== undefined ? [flag, "--warn-within"] : env.SUBS_WARN_WITHIN !== undefined && env.SUBS_WARN_WITHIN !== "" ? [env.SUBS_WARN_WITHIN, "SUBS_WARN_WITHIN"] : [undefined, ""];
  if (value === undefined) return undefined;
  if (value === "0") return 0;
  try {
    return parseDuration(value, name);
  } catch {
    throw usage(`${name} must be a duration (seconds, or a whole number with s, m, h or d, e.g. 7d; 0 turns the warnings off), not ${JSON.stringify(value)}`);
  }
}

/** `subs mcp list`'s action, for commander's tree (cli.ts) and for directMcpList's runs alike. */
export async function mcpListAction(ctx: Context, { setJson, setExitCode }: Pick<ProgramHooks, "setJson" | "setExitCode">, flags: ListFlags): Promise<void> {
  setJson(Boolean(flags.json));
  const timeoutSeconds = parseSeconds(flags.timeout);
  const warnWithin = warnWithinSeconds(flags.warnWithin, ctx.env);
  const { mcpListCommand } = await import("./run.ts");
  setExitCode(
    await mcpListCommand(ctx, {
      ...(flags.config !== undefined ? { config: flags.config } : {}),
      json: Boolean(flags.json),
      ...(flags.check ? { check: { timeoutSeconds } } : {}),
      ...(warnWithin !== undefined ? { warnWithinSeconds: warnWithin } : {}),
    }),
  );
}

/**
 * `subs mcp list` in its everyday spellings, read without commander: loading commander and
 * building the command was about 1 ms of every listing (docs/speed.md). Read as commander reads
 * them: `--debug` and `--config PATH` (or `--config=PATH`) anywhere, the last `--config` winning
 * (they are the program's own options), the words `mcp list`, then `--json`, `--check` and
 * `--timeout SECONDS` (or `=SECONDS`, the last winning, "10" by default). Anything else (another
 * word or flag, `--help`, `--`, a value that is empty or starts with "-") is left to commander,
 * which then parses and judges the whole line. test/cli-direct.test.ts holds the two to the same
 * flags.
 */
export function directMcpList(argv: readonly string[]): (ListFlags & { debug: boolean }) | undefined {
  const flags: ListFlags & { debug: boolean } = { timeout: "10", debug: false };
  let words = 0;
  const valueOf = (n: number, flag: string): [value: string | undefined, next: number] => {
    const arg = argv[n]!;
    const value = arg === flag ? argv[n + 1] : arg.slice(flag.length + 1);
    return [value === undefined || value === "" || value.startsWith("-") ? undefined : value, arg === flag ? n + 1 : n];
  };
  for (let n = 0; n < argv.length; n++) {
    const arg = argv[n]!;
    if (arg === "--debug") flags.debug = true;
    else if (arg === "--config" || arg.startsWith("--config=")) {
      const [value, next] = valueOf(n, "--config");
      if (value === undefined) return undefined;
      flags.config = value;
      n = next;
    } else if (words < 2) {
      if (arg !== (words === 0 ? "mcp" : "list")) return undefined;
      words++;
    } else if (arg === "--json") flags.json = true;
    else if (arg === "--check") flags.check = true;
    else if (arg === "--timeout" || arg.startsWith("--timeout=")) {
      const [value, next] = valueOf(n, "--timeout");
      if (value === undefined) return undefined;
      flags.timeout = value;
      n = next;
    } else return undefined;
  }
  return words === 2 ? flags : undefined;
}
