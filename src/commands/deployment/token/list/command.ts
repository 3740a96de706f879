// `subs deployment token list`: its declaration; the run code is ./run.ts beside it.
import { examples, jsonOption, type CommandDeclaration } from "../../../options.ts";
import { targetOf, targetOptions, type TargetFlags } from "../../target.ts";

export const tokenList: CommandDeclaration = {
  name: "list",
  declare(command, { ctx, setJson, configOf }) {
    targetOptions(command)
      .description("List the tokens: id, role, name, when made, when they expire and were last used, whose (never a token or its hash).")
      .addOption(jsonOption())
      .addHelpText("after", examples(["subs deployment token list", "subs deployment token list --url https://subs.example.com --json", "subs deployment token list --store /var/lib/subs   # on the host"]))
      .action(async (opts: TargetFlags & { json?: boolean }) => {
        setJson(Boolean(opts.json));
        const { tokenListCommand } = await import("./run.ts");
        await tokenListCommand(ctx, { target: targetOf(opts, configOf), json: Boolean(opts.json) });
      });
  },
};
