// Assembles the command tree from the commands' own declarations (src/commands/<group>/<command>/
// command.ts): each declares its arguments, options, help and examples beside its run code, and
// loads that code only when it runs (CONTRIBUTING.md, rule 7). Loaded by run.ts for every run but
// the everyday `subs mcp list`, which needs no parser.
import { Command, Help } from "commander";
import { agent } from "./commands/agent/command.ts";
import { apply } from "./commands/apply/command.ts";
import { lock } from "./commands/lock/command.ts";
import { completion } from "./commands/completion/command.ts";
import { deployment } from "./commands/deployment/command.ts";
import { init } from "./commands/init/command.ts";
import { mcp } from "./commands/mcp/command.ts";
import { configOption, examples, type CommandDeclaration, type CommandScope, type ProgramHooks } from "./commands/options.ts";
import { schema } from "./commands/schema/command.ts";
import type { Context } from "./context.ts";
import { parseMistakeText } from "./output/parse-mistake.ts";
import { VERSION } from "./version.ts";

export { CommanderError } from "commander";

/** The program's commands, in the order `subs --help` lists them; each group names its own. */
const COMMANDS: readonly CommandDeclaration[] = [init, mcp, apply, lock, completion, schema, agent, deployment];

export function buildProgram(ctx: Context, hooks: ProgramHooks, only?: readonly string[]): Command {
  const { onParseMistake } = hooks;
  const program = new Command("subs")
    .description("Connect AI agents to MCP servers declared in substructure.toml.")
    .version(VERSION, "-V, --version", "print the version")
    .option("--debug", "print every HTTP exchange on stderr, credentials redacted (also SUBS_DEBUG=1)")
    // Also before the command (`subs --config X mcp list`), as --debug is; after it, the command's own wins.
    .addOption(configOption())
    .helpOption("-h, --help", "show help")
    // --debug and --config work after any command too: every command's help lists them, once
    // (a command's own --config is in its Options, so not again under Global Options).
    .configureHelp({
      showGlobalOptions: true,
      visibleGlobalOptions(cmd) {
        return Help.prototype.visibleGlobalOptions.call(this, cmd).filter((global) => !cmd.options.some((own) => own.long === global.long));
      },
    })
    .helpCommand("help [command]", "Show help for a command")
    .showSuggestionAfterError(true)
    .exitOverride()
    .configureOutput({
      writeOut: (s) => ctx.stdout.write(s),
      writeErr: (s) => ctx.stderr.write(s),
      outputError: (s, write) => {
        onParseMistake?.(s, "subs");
        write(parseMistakeText(ctx, { message: s, path: "subs" }));
      },
    })
    .addHelpText(
      "after",
      examples([
        "subs init sentry=https://mcp.sentry.dev/mcp",
        "subs mcp login sentry",
        "subs mcp list",
        "subs mcp list --json | jq '.[] | select(.usable | not) | .id'",
        "subs agent tools triage",
        "subs apply --dry-run",
      ]),
    );
  const scope: CommandScope = {
    ...hooks,
    ctx,
    configOf(opts): { config: string } | Record<string, never> {
      const config = opts.config ?? (program.opts() as { config?: string }).config;
      return config === undefined ? {} : { config };
    },
  };
  // Each command gets the program's help flag, its parse-mistake wording and its output, then
  // declares the rest itself; only those on the path argv names are built, when it names one.
  const add = (parent: Command, declarations: readonly CommandDeclaration[], depth: number) => {
    for (const declaration of declarations) {
      if (only?.[depth] !== undefined && only[depth] !== declaration.name) continue;
      const path = `${commandPath(parent)} ${declaration.name}`;
      const command = parent.command(declaration.name).helpOption("-h, --help", "show help").exitOverride().configureOutput({
        writeOut: (s) => ctx.stdout.write(s),
        writeErr: (s) => ctx.stderr.write(s),
        outputError: (s, write) => {
          onParseMistake?.(s, path);
          write(parseMistakeText(ctx, { message: s, path }));
        },
      });
      command.showSuggestionAfterError(true);
      declaration.declare(command, scope);
      if (declaration.commands) add(command, declaration.commands, depth + 1);
    }
  };
  add(program, COMMANDS, 0);
  return program;
}

export function commandPath(command: Command): string {
  const names: string[] = [];
  for (let c: Command | null = command; c; c = c.parent) names.unshift(c.name());
  return names.join(" ");
}
