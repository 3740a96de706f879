// `subs deployment person list`: its declaration; the run code is ./run.ts beside it.
import { examples, jsonOption, type CommandDeclaration } from "../../../options.ts";
import { targetOf, targetOptions, type TargetFlags } from "../../target.ts";

export const personList: CommandDeclaration = {
  name: "list",
  declare(command, { ctx, setJson, configOf }) {
    targetOptions(command)
      .description("List the people: name, when first seen, how many tokens each holds now.")
      .addOption(jsonOption())
      .addHelpText("after", examples(["subs deployment person list", "subs deployment person list --json --url https://subs.example.com", "subs deployment person list --store /var/lib/subs   # on the host"]))
      .action(async (opts: TargetFlags & { json?: boolean }) => {
        setJson(Boolean(opts.json));
        const { personListCommand } = await import("./run.ts");
        await personListCommand(ctx, { target: targetOf(opts, configOf), json: Boolean(opts.json) });
      });
  },
};
