// `subs mcp list`: its declaration. Its action (action.ts) also serves run.ts's reading of the
// everyday spellings without commander, so both take the same flags to the same run code.
import { Option } from "commander";
import { mcpListAction } from "./action.ts";
import { configOption, examples, jsonOption, type CommandDeclaration } from "../../options.ts";

export const mcpList: CommandDeclaration = {
  name: "list",
  declare(command, { ctx, setJson, setExitCode, configOf }) {
    command
      .description(
        "List every declared connection, its auth and status, and the agents that use it. Reads only the file, the environment and the local db; --check also asks every server, all at once.",
      )
      .addOption(configOption())
      .addOption(jsonOption())
      .option("--check", "also probe every server: reachable, authorized, how many tools (exit 1 when one fails, 4 when the only problems need a login)")
      .addOption(new Option("--timeout <seconds>", "with --check: give each server this long").default("10", "10"))
      .option("--warn-within <duration>", "warn of a refresh token that expires within this long (e.g. 7d, 12h; 0: never; default $SUBS_WARN_WITHIN, else 7d)")
      .addHelpText(
        "after",
        examples([
          "subs mcp list",
          "subs mcp list --json",
          "subs mcp list --check",
          "subs mcp list --warn-within 30d",
          "subs mcp list --check --json | jq '.[] | select(.check.authorized | not) | .id'",
          "subs mcp list --config ./deploy/substructure.toml",
        ]),
      )
      .action((opts: { config?: string; json?: boolean; check?: boolean; timeout: string; warnWithin?: string }) => mcpListAction(ctx, { setJson, setExitCode }, { ...opts, ...configOf(opts) }));
  },
};
