// `subs mcp tools`: its declaration; the run code is ./run.ts beside it, loaded when it runs.
import { Option } from "commander";
import { parseSeconds } from "../../flags.ts";
import { configOption, examples, jsonOption, requestTimeoutOption, type CommandDeclaration } from "../../options.ts";

type ToolsFlags = { config?: string; json?: boolean; browser: boolean; timeout: string; requestTimeout: string };

export const mcpTools: CommandDeclaration = {
  name: "tools",
  declare(command, { ctx, setJson, configOf }) {
    command
      .description("Connect to a connection's server with its credential and list its tools with their annotations.")
      .argument("<id>", "connection id")
      .addOption(configOption())
      .addOption(jsonOption())
      .option("--no-browser", "if the server asks for more scopes, print the URL instead of opening a browser")
      .addOption(new Option("--timeout <seconds>", "how long a re-authorization waits for consent").default("300", "300"))
      .addOption(requestTimeoutOption("give the server this long to answer each request"))
      .addHelpText("after", examples(["subs mcp tools sentry", "subs mcp tools sentry --json | jq '.tools[].name'"]))
      .action(async (id: string, opts: ToolsFlags) => {
        setJson(Boolean(opts.json));
        const { mcpToolsCommand } = await import("./run.ts");
        await mcpToolsCommand(ctx, {
          ...configOf(opts),
          id,
          json: Boolean(opts.json),
          browser: opts.browser,
          timeoutSeconds: parseSeconds(opts.timeout),
          requestTimeoutSeconds: parseSeconds(opts.requestTimeout, "--request-timeout"),
        });
      });
  },
};
