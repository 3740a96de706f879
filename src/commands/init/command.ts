// `subs init`: its declaration; the run code is ./run.ts beside it, loaded when it runs.
import { Option } from "commander";
import { examples, type CommandDeclaration } from "../options.ts";

export const init: CommandDeclaration = {
  name: "init",
  declare(command, { ctx, configOf }) {
    command
      .description("Write a first substructure.toml here: the servers given as ID=URL declared, the rest of the format shown in comments. Never overwrites a file.")
      .argument("[id=url...]", "connections to declare, e.g. sentry=https://mcp.sentry.dev/mcp")
      .addOption(new Option("--config <path>", "write this file instead (default: $SUBS_CONFIG, else ./substructure.toml)"))
      .addHelpText("after", examples(["subs init", "subs init sentry=https://mcp.sentry.dev/mcp && subs mcp login sentry"]))
      .action(async (connections: string[], opts: { config?: string }) => {
        const { initCommand } = await import("./run.ts");
        await initCommand(ctx, { ...configOf(opts), connections });
      });
  },
};
