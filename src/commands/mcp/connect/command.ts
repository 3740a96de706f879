// `subs mcp connect`: its declaration; the run code is ../../connect.ts (shared with
// `subs agent connect`), loaded when it runs.
import { connectFlags, connectOptions, examples, type CommandDeclaration, type ConnectFlags } from "../../options.ts";

export const mcpConnect: CommandDeclaration = {
  name: "connect",
  declare(command, scope) {
    connectFlags(
      command
        .summary("Register `subs mcp proxy <id>` in an MCP client's own config (Claude Code, Codex, Gemini CLI, Cursor, VS Code).")
        .description(
          "Register one connection in an MCP client's own configuration, as that client documents it: an entry named <id> that runs `subs mcp proxy <id>` with absolute paths " +
            "(this node, this subs, --config of this file), so it starts wherever the client starts it, and passes the variable its token or client secret is read from " +
            "(names only, never a value). The rest of the client's file is left byte for byte; running it again updates the entry in place; --remove takes it out.",
        )
        .argument("<id>", "connection id"),
    )
      .addHelpText(
        "after",
        examples([
          "subs mcp connect sentry --to claude",
          "subs mcp connect sentry --to codex --dry-run",
          "subs mcp connect github --to gemini --scope user",
          "subs mcp connect sentry --to claude --remove",
        ]),
      )
      .action(async (id: string, opts: ConnectFlags) => {
        scope.setJson(Boolean(opts.json));
        const { connectCommand } = await import("../../connect.ts");
        await connectCommand(scope.ctx, connectOptions("mcp", id, opts, scope));
      });
  },
};
