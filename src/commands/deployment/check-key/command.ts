// `subs deployment check-key`: its declaration; the run code is src/deployment/commands.ts.
import { examples, type CommandDeclaration } from "../../options.ts";
import { flagsOf, settings, type DeploymentFlags } from "../options.ts";

export const checkKey: CommandDeclaration = {
  name: "check-key",
  declare(command, { ctx }) {
    settings(command, true)
      .description("Say whether the key opens the store, or a backup file of it (exit 0), or which key it needs (exit 1). Decrypts nothing else, writes nothing.")
      .argument("[file]", "a backup `subs deployment backup` made (default: the store)")
      .addHelpText(
        "after",
        examples(["subs deployment check-key --key-file /etc/subs/deployment.key --store /var/lib/subs", "subs deployment check-key --key-file /etc/subs/deployment.key.until-2026-12-01-101500 /backup/subs-2026-11-30.db"]),
      )
      .action(async (file: string | undefined, opts: DeploymentFlags) => {
        const { checkKeyCommand } = await import("../../../deployment/commands.ts");
        await checkKeyCommand(ctx, { flags: flagsOf(opts), ...(file !== undefined ? { file } : {}) });
      });
  },
};
