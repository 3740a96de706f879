// `subs deployment token revoke`: its declaration; the run code is ./run.ts beside it.
import { examples, type CommandDeclaration } from "../../../options.ts";
import { targetOf, targetOptions, type TargetFlags } from "../../target.ts";

export const tokenRevoke: CommandDeclaration = {
  name: "revoke",
  declare(command, { ctx, configOf }) {
    targetOptions(command)
      .description("Revoke one token, by its id or its exact name; the server refuses it from its next request. The last admin token is kept.")
      .argument("<id-or-name>", "as `token list` shows it")
      .option("--remove-person", "when it is its person's last token, remove the person too (as `subs deployment person remove`); refused, nothing revoked, when they hold others")
      .addHelpText("after", examples(["subs deployment token revoke ci", "subs deployment token revoke 3f9a61c0b2d4 --url https://subs.example.com", "subs deployment token revoke ci --store /var/lib/subs   # on the host", "subs deployment token revoke \"bob laptop\" --remove-person   # bob's last token: bob leaves"]))
      .action(async (idOrName: string, opts: TargetFlags & { removePerson?: boolean }) => {
        const { tokenRevokeCommand } = await import("./run.ts");
        await tokenRevokeCommand(ctx, { target: targetOf(opts, configOf), token: idOrName, removePerson: Boolean(opts.removePerson) });
      });
  },
};
