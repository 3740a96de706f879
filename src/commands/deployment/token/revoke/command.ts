// `subs deployment token revoke`: its declaration; the run code is src/deployment/commands.ts.
import { examples, type CommandDeclaration } from "../../../options.ts";
import { flagsOf, settings, type DeploymentFlags } from "../../options.ts";

export const tokenRevoke: CommandDeclaration = {
  name: "revoke",
  declare(command, { ctx }) {
    settings(command)
      .description("Revoke tokens by id or name; the server refuses them from its next request.")
      .argument("<id-or-name>", "as `token list` shows it")
      .addHelpText("after", examples(["subs deployment token revoke ci", "subs deployment token revoke 3f9a61c0b2d4 --store /var/lib/subs"]))
      .action(async (idOrName: string, opts: DeploymentFlags) => {
        const { tokenRevokeCommand } = await import("../../../../deployment/commands.ts");
        await tokenRevokeCommand(ctx, { flags: flagsOf(opts), token: idOrName });
      });
  },
};
