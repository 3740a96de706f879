// `subs agent list`: its declaration; the run code is ./run.ts beside it, loaded when it runs.
import { configOption, examples, jsonOption, type CommandDeclaration } from "../../options.ts";

export const agentList: CommandDeclaration = {
  name: "list",
  declare(command, { ctx, setJson, configOf }) {
    command
      .summary("List every declared agent with its connections, filters, tools and sub-agents.")
      .description("List every declared agent: its connections (and their filters), declared tools and sub-agents. Reads only the file.")
      .addOption(configOption())
      .addOption(jsonOption())
      .addHelpText("after", examples(["subs agent list", "subs agent list --json | jq '.[].name'"]))
      .action(async (opts: { config?: string; json?: boolean }) => {
        setJson(Boolean(opts.json));
        const { agentListCommand } = await import("./run.ts");
        await agentListCommand(ctx, { ...configOf(opts), json: Boolean(opts.json) });
      });
  },
};
