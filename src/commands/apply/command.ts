// `subs apply`: its declaration; the run code is ./run.ts beside it, loaded when it runs.
import { configOption, examples, jsonOption, type CommandDeclaration } from "../options.ts";

export const apply: CommandDeclaration = {
  name: "apply",
  declare(command, { ctx, setJson, configOf }) {
    command
      .description("Make the target match the file: the deployment named by [remote], else the local db (deletes credentials of connections no longer declared).")
      .addOption(configOption())
      .addOption(jsonOption())
      .option("--dry-run", "print the plan; change nothing")
      .option("-y, --yes", "apply a plan that removes without asking (on a terminal, subs asks first)")
      .addHelpText("after", examples(["subs apply --dry-run", "subs apply", "subs apply --json   # in CI"]))
      .action(async (opts: { config?: string; json?: boolean; dryRun?: boolean; yes?: boolean }) => {
        setJson(Boolean(opts.json));
        const { applyCommand } = await import("./run.ts");
        await applyCommand(ctx, { ...configOf(opts), json: Boolean(opts.json), dryRun: Boolean(opts.dryRun), yes: Boolean(opts.yes) });
      });
  },
};
