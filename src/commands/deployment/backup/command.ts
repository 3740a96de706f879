// `subs deployment backup`: its declaration; the run code is src/deployment/commands.ts.
import { examples, type CommandDeclaration } from "../../options.ts";
import { flagsOf, settings, type DeploymentFlags } from "../options.ts";

export const backup: CommandDeclaration = {
  name: "backup",
  declare(command, { ctx }) {
    settings(command)
      .description("Copy the SQLite store, consistently, while it serves, into a new file of mode 0600; say which key opens it. (Postgres: pg_dump.)")
      .argument("<file>", "the backup to make (never an existing file)")
      .addHelpText("after", examples(['subs deployment backup --store /var/lib/subs "/backup/subs-$(date +%F).db"']))
      .action(async (file: string, opts: DeploymentFlags) => {
        const { backupCommand } = await import("../../../deployment/commands.ts");
        await backupCommand(ctx, { flags: flagsOf(opts), file });
      });
  },
};
