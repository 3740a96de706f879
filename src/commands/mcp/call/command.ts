// `subs mcp call`: its declaration; the run code is ./run.ts beside it, loaded when it runs.
import { Option } from "commander";
import { parseSeconds } from "../../flags.ts";
import { configOption, examples, jsonOption, pick, requestTimeoutOption, type CommandDeclaration } from "../../options.ts";

type CallFlags = { config?: string; json?: boolean; args?: string; browser: boolean; timeout: string; requestTimeout: string };

export const mcpCall: CommandDeclaration = {
  name: "call",
  declare(command, { ctx, setJson, configOf }) {
    command
      .description("Call one tool on a connection and print its result.")
      .argument("<id>", "connection id")
      .argument("<tool>", "the tool's name on the connection (not the prefixed name)")
      .addOption(configOption())
      .addOption(jsonOption())
      .option("--args <json>", "the tool's arguments, a JSON object; - reads it from stdin, @FILE from a file")
      .option("--no-browser", "if the server asks for more scopes, print the URL instead of opening a browser")
      .addOption(new Option("--timeout <seconds>", "how long a re-authorization waits for consent").default("300", "300"))
      .addOption(requestTimeoutOption("give the tool this long to answer; each progress report it sends restarts the wait"))
      .addHelpText(
        "after",
        examples([
          `subs mcp call sentry search_issues --args '{"query": "is:unresolved"}'`,
          `jq -n --arg q "$QUERY" '{query: $q}' | subs mcp call sentry search_issues --args -`,
          "subs mcp call sentry whoami --json",
          "subs mcp call ci run_suite --args @suite.json --request-timeout 900",
        ]),
      )
      .action(async (id: string, tool: string, opts: CallFlags) => {
        setJson(Boolean(opts.json));
        const { mcpCallCommand } = await import("./run.ts");
        await mcpCallCommand(ctx, {
          ...configOf(opts),
          ...pick(opts, "args"),
          id,
          tool,
          json: Boolean(opts.json),
          browser: opts.browser,
          timeoutSeconds: parseSeconds(opts.timeout),
          requestTimeoutSeconds: parseSeconds(opts.requestTimeout, "--request-timeout"),
        });
      });
  },
};
