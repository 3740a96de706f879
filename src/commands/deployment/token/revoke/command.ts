// `subs deployment token revoke`: its declaration; the run code is ./run.ts beside it.
import { examples, type CommandDeclaration } from "../../../options.ts";
import { targetOf, targetOptions, type TargetFlags } from "../options.ts";

export const tokenRevoke: CommandDeclaration = {
  name: "revoke",
  declare(command, { ctx, configOf }) {
    targetOptions(command)
      .description("Revoke one token, by its id or its exact name; the server refuses it from its next request. The last admin token is kept.")
      .argument("<id-or-name>", "as `token list` shows it")
      .addHelpText("after", examples(["subs deployment token revoke ci", "subs deployment token revoke 3f9a61c0b2d4 --url https://subs.example.com", "subs deployment token revoke ci --store /var/lib/subs   # on the host"]))
      .action(async (idOrName: string, opts: TargetFlags) => {
        const { tokenRevokeCommand } = await import("./run.ts");
        await tokenRevokeCommand(ctx, { target: targetOf(opts, configOf), token: idOrName });
      });
  },
};
