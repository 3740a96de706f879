// `subs mcp add`: its declaration; the run code is ./run.ts beside it, loaded when it runs.
import { Option } from "commander";
import { usage } from "../../../errors.ts";
import { configOption, examples, pick, type CommandDeclaration } from "../../options.ts";

type AddFlags = {
  config?: string;
  tokenEnv?: string;
  clientId?: string;
  clientSecretEnv?: string;
  scopes?: string[];
  header?: string[];
  env?: string[];
  cwd?: string;
  token?: string;
  clientSecret?: string;
};

const collect = (value: string, previous: string[] = []) => [...previous, ...value.split(",").map((s) => s.trim()).filter(Boolean)];
const repeat = (value: string, previous: string[] = []) => [...previous, value];

export const mcpAdd: CommandDeclaration = {
  name: "add",
  declare(command, { ctx, configOf }) {
    command
      .summary("Declare a connection: append its [mcp.<id>] section, the rest of the file kept.")
      .description(
        "Declare a connection: append its [mcp.<id>] section to the file (comments and layout elsewhere kept), checked before it is written. Never writes a secret: a token is named by an environment variable.",
      )
      .argument("<id>", "the new connection's id: lowercase letters, digits, '-' and '_'")
      .argument("<url|-- command...>", "the MCP server's URL, or after `--` the command that runs a local (stdio) server and its arguments")
      .addOption(configOption())
      .option("--token-env <var>", "a static token, read from this environment variable when a call is made (auth.token_env); no OAuth")
      .option("--client-id <id>", "a client registered at the authorization server (oauth.client_id)")
      .option("--client-secret-env <var>", "that client's secret, read from this environment variable (oauth.client_secret_env)")
      .option("--scopes <scopes>", "scopes to ask for, comma-separated or repeated (oauth.scopes)", collect)
      .option("--header <header>", 'a header sent with every request, "Name: value", repeated; a secret as a ${NAME} template (headers)', repeat)
      .option("--env <NAME=value>", "a variable of a local server's environment, repeated; a secret as a ${NAME} template (env)", repeat)
      .option("--cwd <dir>", "the directory a local server starts in, relative to the file (cwd)")
      // Habits from other tools; a secret is never taken as a flag (it would end in shell history and in the file).
      .addOption(new Option("--token <value>").hideHelp())
      .addOption(new Option("--client-secret <value>").hideHelp())
      .addHelpText(
        "after",
        examples([
          "subs mcp add sentry https://mcp.sentry.dev/mcp && subs mcp login sentry",
          "subs mcp add github https://api.githubcopilot.com/mcp/ --token-env GITHUB_TOKEN",
          "subs mcp add linear https://mcp.linear.app/mcp --client-id abc123 --scopes read,write",
          "subs mcp add exa https://mcp.exa.ai/mcp --header 'X-API-Key: ${EXA_API_KEY}'",
          "subs mcp add fs -- npx -y @modelcontextprotocol/server-filesystem ./docs",
          "subs mcp add gh --env 'GITHUB_TOKEN=${GITHUB_TOKEN}' -- npx -y @modelcontextprotocol/server-github",
        ]),
      )
      .action(async (id: string, target: string[], opts: AddFlags) => {
        if (opts.token !== undefined) throw usage("subs never writes a token in the file", { hint: "export it and name the variable: --token-env GITHUB_TOKEN" });
        if (opts.clientSecret !== undefined) {
          throw usage("subs never writes a client secret in the file", { hint: "export it and name the variable: --client-secret-env MY_CLIENT_SECRET" });
        }
        const { mcpAddCommand } = await import("./run.ts");
        await mcpAddCommand(ctx, {
          ...configOf(opts),
          id,
          target,
          ...pick(opts, "tokenEnv"),
          ...pick(opts, "clientId"),
          ...pick(opts, "clientSecretEnv"),
          ...pick(opts, "scopes"),
          ...pick(opts, "header"),
          ...pick(opts, "env"),
          ...pick(opts, "cwd"),
        });
      });
  },
};
