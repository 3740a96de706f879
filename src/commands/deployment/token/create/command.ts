// `subs deployment token create`: its declaration; the run code is ./run.ts beside it.
import { examples, jsonOption, type CommandDeclaration } from "../../../options.ts";
import { parseDuration } from "../../../flags.ts";
import { targetOf, targetOptions, type TargetFlags } from "../../target.ts";

export const tokenCreate: CommandDeclaration = {
  name: "create",
  declare(command, { ctx, setJson, configOf, ownRedaction }) {
    targetOptions(command)
      .description("Make a token and print it once on stdout; only its SHA-256 is kept. Names are unique.")
      .requiredOption("--name <name>", "who or what holds it, e.g. ci or \"alice laptop\" (1-64 letters, digits, spaces and . _ @ -)")
      .requiredOption("--role <role>", "admin (everything, tokens too), apply (declare, delete, authorize), use (agents' MCP endpoints) or read (list)")
      .option("--person <name>", "whose it is, e.g. alice@example.com: a person's tokens share their own credentials for personal connections (default: a person named as the token)")
      .option("--expires-in <duration>", "refuse it from then on: seconds, or a number with s, m, h or d (e.g. 90d); default never")
      .addOption(jsonOption())
      .addHelpText(
        "after",
        examples([
          "subs deployment token create --name ci --role apply --url https://subs.example.com",
          "subs deployment token create --name \"alice laptop\" --person alice@example.com --role use --expires-in 90d --json | jq -r .token",
          "subs deployment token create --name admin --role admin --store /var/lib/subs   # on the host",
        ]),
      )
      .action(async (opts: TargetFlags & { name: string; role: string; person?: string; expiresIn?: string; json?: boolean }) => {
        setJson(Boolean(opts.json));
        const expiresIn = opts.expiresIn === undefined ? undefined : parseDuration(opts.expiresIn, "--expires-in");
        const { tokenCreateCommand } = await import("./run.ts");
        // The new token is this command's answer: written past the run's scrub, which learnt it
        // from the deployment's answer; everything else goes through ctx, scrubbed of it.
        const answer = (ownRedaction?.() ?? ctx).stdout;
        await tokenCreateCommand(ctx, { target: targetOf(opts, configOf), name: opts.name, role: opts.role, ...(opts.person !== undefined ? { person: opts.person } : {}), ...(expiresIn !== undefined ? { expiresIn } : {}), json: Boolean(opts.json), answer });
      });
  },
};
