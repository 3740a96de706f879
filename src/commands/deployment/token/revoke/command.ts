// `subs deployment token revoke`: its declaration; the run code is src/deployment/commands.ts.
import type { CommandDeclaration } from "../../../options.ts";
import { flagsOf, settings, type DeploymentFlags } from "../../options.ts";

export const tokenRevoke: CommandDeclaration = {
  name: "revoke",
  declare(command, { ctx }) {
    settings(command)
      .description("Revoke tokens by id or name; the server refuses them from its next request.")
      .argument("<id-or-name>", "as `token list` shows it")
      .action(async (idOrName: string, opts: DeploymentFlags) => {
        const { tokenRevokeCommand } = await import("../../../../deployment/commands.ts");
        await tokenRevokeCommand(ctx, { flags: flagsOf(opts), token: idOrName });
      });
  },
};
