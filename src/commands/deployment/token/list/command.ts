// `subs deployment token list`: its declaration; the run code is src/deployment/commands.ts.
import { examples, jsonOption, type CommandDeclaration } from "../../../options.ts";
import { flagsOf, settings, type DeploymentFlags } from "../../options.ts";

export const tokenList: CommandDeclaration = {
  name: "list",
  declare(command, { ctx, setJson }) {
    settings(command)
      .description("List the tokens: id, role, name, when made and last used (never a token or its hash).")
      .addOption(jsonOption())
      .addHelpText("after", examples(["subs deployment token list", "subs deployment token list --store /var/lib/subs --json"]))
      .action(async (opts: DeploymentFlags & { json?: boolean }) => {
        setJson(Boolean(opts.json));
        const { tokenListCommand } = await import("../../../../deployment/commands.ts");
        await tokenListCommand(ctx, { flags: flagsOf(opts), json: Boolean(opts.json) });
      });
  },
};
