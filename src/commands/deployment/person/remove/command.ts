// `subs deployment person remove`: its declaration; the run code is ./run.ts beside it.
import { examples, jsonOption, type CommandDeclaration } from "../../../options.ts";
import { targetOf, targetOptions, type TargetFlags } from "../../target.ts";

export const personRemove: CommandDeclaration = {
  name: "remove",
  declare(command, { ctx, setJson, configOf }) {
    targetOptions(command)
      .description("Remove a person who left: every token of theirs is revoked (their MCP sessions end) and the person is forgotten. The last admin token is kept.")
      .argument("<name>", "as `person list` shows it")
      .addOption(jsonOption())
      .addHelpText("after", examples(["subs deployment person remove bob@example.com", "subs deployment person remove bob@example.com --json --url https://subs.example.com"]))
      .action(async (name: string, opts: TargetFlags & { json?: boolean }) => {
        setJson(Boolean(opts.json));
        const { personRemoveCommand } = await import("./run.ts");
        await personRemoveCommand(ctx, { target: targetOf(opts, configOf), name, json: Boolean(opts.json) });
      });
  },
};
