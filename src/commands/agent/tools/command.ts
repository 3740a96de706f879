// `subs agent tools`: its declaration; the run code is ./run.ts beside it, loaded when it runs.
import { Option } from "commander";
import { parseSeconds } from "../../flags.ts";
import { configOption, examples, jsonOption, type CommandDeclaration } from "../../options.ts";

export const agentTools: CommandDeclaration = {
  name: "tools",
  declare(command, { ctx, setJson, setExitCode, configOf }) {
    command
      .summary("Show exactly what an agent's model sees: names, dropped names, unavailable connections.")
      .description(
        "Show exactly what an agent's model sees: each connection's tools fetched once (in parallel), filtered (capability keys, then include, then exclude), " +
          "named (id__tool unless prefix_tools = false), collisions resolved; dropped names, filtered tools and unavailable connections go to stderr. " +
          "Exit 0 when every connection answered, 4 when the only failures need a login, 1 otherwise (the list is printed in every case).",
      )
      .argument("<name>", "the agent, as in [agent.<name>]")
      .addOption(configOption())
      .addOption(jsonOption())
      .addOption(new Option("--timeout <seconds>", "give each connection this long to list its tools").default("10", "10"))
      .option("-v, --verbose", "list every tool the agent's filter removed, with the reason")
      .addHelpText(
        "after",
        examples([
          "subs agent tools triage",
          "subs agent tools triage -v          # also every filtered tool and why",
          "subs agent tools triage --json | jq -r '.tools[].name'",
          "subs agent tools triage --json | jq '.dropped[] | {name, reason}'",
          "subs agent tools triage --timeout 30",
        ]),
      )
      .action(async (name: string, opts: { config?: string; json?: boolean; timeout: string; verbose?: boolean }) => {
        setJson(Boolean(opts.json));
        const timeoutSeconds = parseSeconds(opts.timeout);
        const { agentToolsCommand } = await import("./run.ts");
        setExitCode(await agentToolsCommand(ctx, { agent: name, ...configOf(opts), json: Boolean(opts.json), timeoutSeconds, verbose: Boolean(opts.verbose) }));
      });
  },
};
