// Builds the command tree. Each action parses its flags into a typed options object and loads its
// command module only when it runs (DEVELOPERS.md, "Load lazily").
import { Command, CommanderError, Option } from "commander";
import type { Context } from "./context.ts";
import { ConfigError, SubsError, exitCodeFor, formatDiagnostic } from "./errors.ts";
import { styleFor } from "./output/style.ts";
import { VERSION } from "./version.ts";

const examples = (lines: string[]) => `\nExamples:\n${lines.map((l) => `  $ ${l}`).join("\n")}\n`;

const configOption = () => new Option("--config <path>", "use this substructure.toml (default: $SUBS_CONFIG, else the nearest one upward)");
const jsonOption = () => new Option("--json", "print JSON (a documented, stable shape) on stdout");

export async function run(argv: readonly string[], ctx: Context): Promise<number> {
  let exitCode = 0;
  let jsonRequested = false;
  const program = buildProgram(ctx, (json) => (jsonRequested = json));
  try {
    await program.parseAsync(argv as string[], { from: "user" });
  } catch (error) {
    if (error instanceof CommanderError) {
      // --help and --version end here with exitCode 0; usage mistakes with 1, which is our 2.
      return error.exitCode === 0 ? 0 : 2;
    }
    if (ctx.signal.aborted && !(error instanceof SubsError && error.kind !== "interrupted")) {
      ctx.stderr.write("Interrupted.\n");
      return 130;
    }
    renderError(ctx, error, jsonRequested);
    exitCode = exitCodeFor(error);
  }
  return exitCode;
}

function buildProgram(ctx: Context, setJson: (json: boolean) => void): Command {
  const program = new Command("subs")
    .description("Connect AI agents to MCP servers declared in substructure.toml.")
    .version(VERSION, "-V, --version", "print the version")
    .helpOption("-h, --help", "show help")
    .showSuggestionAfterError(true)
    .exitOverride()
    .configureOutput({
      writeOut: (s) => ctx.stdout.write(s),
      writeErr: (s) => ctx.stderr.write(s),
      outputError: (s, write) => write(s),
    })
    .addHelpText(
      "after",
      examples(["subs mcp login sentry", "subs mcp list", "subs mcp list --json | jq '.[] | select(.usable | not) | .id'", "subs apply --dry-run"]),
    );
  const commandWithDefaults = (parent: Command, name: string) => {
    const command = parent.command(name).helpOption("-h, --help", "show help").exitOverride().configureOutput({
      writeOut: (s) => ctx.stdout.write(s),
      writeErr: (s) => ctx.stderr.write(s),
    });
    command.showSuggestionAfterError(true);
    return command;
  };

  const mcp = commandWithDefaults(program, "mcp").description("Declared MCP connections: log in, list, inspect.");

  commandWithDefaults(mcp, "list")
    .description("List every declared connection, its auth and status, and the agents that use it. Reads only the file, the environment and the local db.")
    .addOption(configOption())
    .addOption(jsonOption())
    .addHelpText("after", examples(["subs mcp list", "subs mcp list --json", "subs mcp list --config ./deploy/substructure.toml"]))
    .action(async (opts: { config?: string; json?: boolean }) => {
      setJson(Boolean(opts.json));
      const { mcpListCommand } = await import("./commands/mcp-list.ts");
      await mcpListCommand(ctx, { ...pick(opts, "config"), json: Boolean(opts.json) });
    });

  commandWithDefaults(program, "apply")
    .description("Make the target match the file: the deployment named by [remote], else the local db (deletes credentials of connections no longer declared).")
    .addOption(configOption())
    .addOption(jsonOption())
    .option("--dry-run", "print the plan; change nothing")
    .addHelpText("after", examples(["subs apply --dry-run", "subs apply", "subs apply --json   # in CI"]))
    .action(async (opts: { config?: string; json?: boolean; dryRun?: boolean }) => {
      setJson(Boolean(opts.json));
      const { applyCommand } = await import("./commands/apply.ts");
      await applyCommand(ctx, { ...pick(opts, "config"), json: Boolean(opts.json), dryRun: Boolean(opts.dryRun) });
    });

  return program;
}

/** Copies a key only when set, so options objects never carry `undefined` for absent flags. */
function pick<T extends object, K extends keyof T>(obj: T, key: K): Pick<T, K> | Record<string, never> {
  return obj[key] === undefined ? {} : ({ [key]: obj[key] } as Pick<T, K>);
}

function renderError(ctx: Context, error: unknown, json: boolean): void {
  const style = styleFor(ctx.stderrColor);
  if (error instanceof ConfigError) {
    for (const d of error.diagnostics) {
      ctx.stderr.write(`${formatDiagnostic(d)}\n`);
      if (d.hint) ctx.stderr.write(`  ${style.dim("hint:")} ${d.hint}\n`);
    }
    const n = error.diagnostics.length;
    const what = error.kind === "refused" ? "refusal" : "error";
    ctx.stderr.write(`${n} ${what}${n === 1 ? "" : "s"} in ${error.diagnostics[0]?.file ?? "the file"}; nothing was changed.\n`);
  } else if (error instanceof SubsError) {
    ctx.stderr.write(`${style.red("error:")} ${error.message}\n`);
    if (error.hint) ctx.stderr.write(`${style.dim("hint:")} ${error.hint}\n`);
  } else {
    // A bug, not a user error: say so without a stack trace (SUBS_DEBUG=1 shows it).
    const message = error instanceof Error ? error.message : String(error);
    ctx.stderr.write(`${style.red("error:")} unexpected: ${message}\n`);
    if (ctx.env.SUBS_DEBUG && error instanceof Error && error.stack) ctx.stderr.write(`${error.stack}\n`);
  }
  if (json) {
    const body =
      error instanceof ConfigError
        ? { code: error.code ?? "invalid_config", message: error.message, diagnostics: error.diagnostics }
        : error instanceof SubsError
          ? { code: error.code ?? error.kind, message: error.message, ...(error.hint ? { hint: error.hint } : {}), ...error.details }
          : { code: "unexpected", message: error instanceof Error ? error.message : String(error) };
    ctx.stdout.write(JSON.stringify({ error: body }, null, 2) + "\n");
  }
}
