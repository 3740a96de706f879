// `subs lock`: its declaration; the run code is ./run.ts beside it, loaded when it runs.
import { Option } from "commander";
import { parseSeconds } from "../flags.ts";
import { configOption, examples, jsonOption, type CommandDeclaration } from "../options.ts";

export const lock: CommandDeclaration = {
  name: "lock",
  declare(command, { ctx, setJson, setExitCode, configOf }) {
    command
      .summary("Write substructure.lock: the tools each agent's connections may serve, for review in version control.")
      .description(
        "Write substructure.lock beside substructure.toml: every tool the agents' filters keep, of every connection an agent names, with what the model sees of it " +
          "(title, description, schemas, annotations) and a digest. Commit it: once it exists, a tool that is not in it as locked is withheld from every agent. " +
          "Run again, it shows what changed (added, changed with the changed lines, removed) and asks on a terminal before writing. " +
          "--check writes nothing and exits 1 when anything changed (for CI). If a connection cannot list its tools, nothing is written.",
      )
      .addOption(configOption())
      .addOption(jsonOption())
      .option("--check", "write nothing; exit 1 when the servers' tools differ from the lock")
      .option("-y, --yes", "write without asking (needed when stdin is not a terminal)")
      .addOption(new Option("--timeout <seconds>", "give each connection this long to list its tools").default("10", "10"))
      .addHelpText(
        "after",
        examples(["subs lock", "subs lock --yes            # in a script", "subs lock --check          # in CI: exit 1 on any change", "subs lock --check --json | jq '.changes[]'"]),
      )
      .action(async (opts: { config?: string; json?: boolean; check?: boolean; yes?: boolean; timeout: string }) => {
        setJson(Boolean(opts.json));
        const timeoutSeconds = parseSeconds(opts.timeout);
        const { lockCommand } = await import("./run.ts");
        setExitCode(await lockCommand(ctx, { ...configOf(opts), json: Boolean(opts.json), check: Boolean(opts.check), yes: Boolean(opts.yes), timeoutSeconds }));
      });
  },
};
