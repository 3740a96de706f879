// `subs mcp remove`: its declaration; the run code is ./run.ts beside it, loaded when it runs.
import { configOption, examples, type CommandDeclaration } from "../../options.ts";

export const mcpRemove: CommandDeclaration = {
  name: "remove",
  declare(command, { ctx, configOf }) {
    command
      .summary("Disconnect a connection: cut its section, delete and revoke its credential.")
      .description(
        "Disconnect a connection: cut its [mcp.<id>] section from the file (comments and layout elsewhere kept), then delete its stored credential and revoke it where the server offers revocation. With [remote], `subs apply` then removes it from the deployment.",
      )
      .argument("<id>", "connection id")
      .addOption(configOption())
      .addHelpText("after", examples(["subs mcp remove sentry", "subs mcp remove linear --config ./deploy/substructure.toml && subs apply --config ./deploy/substructure.toml"]))
      .action(async (id: string, opts: { config?: string }) => {
        const { mcpRemoveCommand } = await import("./run.ts");
        await mcpRemoveCommand(ctx, { ...configOf(opts), id });
      });
  },
};
