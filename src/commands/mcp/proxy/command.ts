// `subs mcp proxy`: its declaration; the run code is ./run.ts beside it, loaded when it runs.
import { debugFromEnv } from "../../flags.ts";
import { configOption, examples, httpOptions, httpTransportOptions, type CommandDeclaration, type HttpFlags } from "../../options.ts";

export const mcpProxy: CommandDeclaration = {
  name: "proxy",
  declare(command, { ctx, setExitCode, servesUntilStopped, configOf }) {
    httpOptions(
      command
        .summary("Serve one connection to an MCP client over stdio, with its stored credential.")
        .description(
          "Serve one connection as an MCP server on stdin/stdout, for any MCP client (Claude Code, Codex, Cursor, VS Code): everything is forwarded to the connection's server with its stored credential, refreshed as needed; the client never sees a token. Never opens a browser: log in first with `subs mcp login <id>`. Human messages go to stderr.",
        )
        .argument("<id>", "connection id")
        .addOption(configOption()),
    )
      .addHelpText(
        "after",
        examples([
          "subs mcp proxy sentry                # what an MCP client runs; it speaks MCP on stdin/stdout",
          "subs mcp proxy sentry --http 8931    # Streamable HTTP at http://127.0.0.1:8931/mcp; the bearer token on stderr",
          "subs mcp proxy sentry --config ~/work/substructure.toml",
          "subs mcp connect sentry --to codex    # registers this line, with absolute paths, in Codex",
        ]),
      )
      .action(async (id: string, opts: { config?: string } & HttpFlags) => {
        const transport = await httpTransportOptions(opts);
        servesUntilStopped?.();
        const { mcpProxyCommand } = await import("./run.ts");
        const debug = Boolean(command.optsWithGlobals().debug) || debugFromEnv(ctx.env);
        setExitCode(await mcpProxyCommand(ctx, { ...configOf(opts), id, ...transport, debug }));
      });
  },
};
