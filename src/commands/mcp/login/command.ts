// `subs mcp login`: its declaration; the run code is ./run.ts beside it, loaded when it runs.
import { Option } from "commander";
import { parsePort, parseSeconds } from "../../flags.ts";
import { configOption, examples, jsonOption, type CommandDeclaration } from "../../options.ts";

type LoginFlags = { config?: string; json?: boolean; all?: boolean; browser: boolean; port?: string; timeout: string; fromEnv?: boolean };

export const mcpLogin: CommandDeclaration = {
  name: "login",
  declare(command, { ctx, setJson, configOf }) {
    command
      .description(
        "Authorize connections: OAuth in a browser (the credential goes into the local db). A connection with a static token (auth.token_env) needs no login.",
      )
      .argument("[id...]", "connection ids from substructure.toml")
      .addOption(configOption())
      .addOption(jsonOption())
      .option("--all", "every OAuth connection that lacks a usable credential")
      .option("--no-browser", "print the URL instead of opening a browser (on a terminal, also accept the redirected URL pasted back)")
      .option("--port <n>", "a fixed loopback port for the redirect (default: chosen by the system)")
      .addOption(new Option("--timeout <seconds>", "how long to wait for consent").default("300", "300"))
      .option(
        "--from-env",
        "with [remote], for a connection whose headers name variables: hand the deployment each value from this machine's variable of the same name, instead of asking on the terminal",
      )
      .addHelpText(
        "after",
        examples(["subs mcp login sentry", "subs mcp login sentry linear", "subs mcp login --all", "subs mcp login sentry --no-browser   # over SSH", "subs mcp login linear --port 8765", "subs mcp login exa --from-env   # [remote]: hand $EXA_API_KEY to the deployment"]),
      )
      .action(async (ids: string[], opts: LoginFlags) => {
        setJson(Boolean(opts.json));
        const { mcpLoginCommand } = await import("./run.ts");
        const port = opts.port === undefined ? undefined : parsePort(opts.port);
        await mcpLoginCommand(ctx, {
          ...configOf(opts),
          ids,
          all: Boolean(opts.all),
          ...(port !== undefined ? { port } : {}),
          browser: opts.browser,
          timeoutSeconds: parseSeconds(opts.timeout),
          json: Boolean(opts.json),
          fromEnv: Boolean(opts.fromEnv),
        });
      });
  },
};
