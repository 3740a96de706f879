// `subs deployment token create`: its declaration; the run code is src/deployment/commands.ts.
import { examples, jsonOption, type CommandDeclaration } from "../../../options.ts";
import { flagsOf, settings, type DeploymentFlags } from "../../options.ts";

export const tokenCreate: CommandDeclaration = {
  name: "create",
  declare(command, { ctx, setJson }) {
    settings(command)
      .description("Make a token and print it once on stdout; only its SHA-256 is kept.")
      .requiredOption("--name <name>", "who or what holds it, e.g. ci")
      .requiredOption("--role <role>", "admin, apply (declare, delete, authorize), use (agents' MCP endpoints) or read (list)")
      .addOption(jsonOption())
      .addHelpText("after", examples(["subs deployment token create --name ci --role apply", "subs deployment token create --name alice --role use --json | jq -r .token"]))
      .action(async (opts: DeploymentFlags & { name: string; role: string; json?: boolean }) => {
        setJson(Boolean(opts.json));
        const { tokenCreateCommand, parseRole } = await import("../../../../deployment/commands.ts");
        await tokenCreateCommand(ctx, { flags: flagsOf(opts), name: opts.name, role: parseRole(opts.role), json: Boolean(opts.json) });
      });
  },
};
