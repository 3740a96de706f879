// `subs deployment rotate-key`: its declaration; the run code is src/deployment/commands.ts.
import { examples, type CommandDeclaration } from "../../options.ts";
import { flagsOf, settings, type DeploymentFlags } from "../options.ts";

export const rotateKey: CommandDeclaration = {
  name: "rotate-key",
  declare(command, { ctx }) {
    settings(command, true)
      .description("Re-encrypt every credential under a new key, in one transaction. Stop the server first; start it again with the new key.")
      .requiredOption("--new-key-file <path>", "the new key (made, 0600, when the file does not exist)")
      .option("--force", "rotate even though processes said in the last 15 s that they serve the store (they then fail on every sealed value until restarted with the new key)")
      .addHelpText("after", examples(["subs deployment rotate-key --key-file ./deployment.key --new-key-file ./deployment.key.new"]))
      .action(async (opts: DeploymentFlags & { newKeyFile: string; force?: boolean }) => {
        const { rotateKeyCommand } = await import("../../../deployment/commands.ts");
        await rotateKeyCommand(ctx, { flags: flagsOf(opts), newKeyFile: opts.newKeyFile, force: Boolean(opts.force) });
      });
  },
};
