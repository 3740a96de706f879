// `subs agent connect`: its declaration; the run code is ../../connect.ts (shared with
// `subs mcp connect`), loaded when it runs.
import { connectFlags, connectOptions, examples, type CommandDeclaration, type ConnectFlags } from "../../options.ts";

export const agentConnect: CommandDeclaration = {
  name: "connect",
  declare(command, scope) {
    connectFlags(
      command
        .summary("Plug an agent into an MCP client: register `subs agent serve <name>` in its own config.")
        .description(
          "Register an agent in an MCP client's own configuration (Claude Code, Codex, Gemini CLI, Cursor, VS Code, Claude Desktop), as that client documents it: " +
            "an entry named <name> that runs `subs agent serve <name>` with absolute paths (this node, this subs, --config of this file), so it starts wherever the client " +
            "starts it, and passes every variable the agent's connections read their token or client secret from (names only, never a value). The rest of the client's file " +
            "is left byte for byte; running it again updates the entry in place; an entry of that name that subs did not write is refused without --force; --remove takes it out.",
        )
        .argument("<name>", "the agent, as in [agent.<name>]"),
    )
      .addHelpText(
        "after",
        examples([
          "subs agent connect triage --to claude            # Claude Code, this project (local scope)",
          "subs agent connect triage --to codex --dry-run   # the diff of ~/.codex/config.toml",
          "subs agent connect triage --to gemini --scope user",
          "subs agent connect triage --to vscode --json | jq .file",
          "subs agent connect triage --to claude --remove",
        ]),
      )
      .action(async (name: string, opts: ConnectFlags) => {
        scope.setJson(Boolean(opts.json));
        const { connectCommand } = await import("../../connect.ts");
        await connectCommand(scope.ctx, connectOptions("agent", name, opts, scope));
      });
  },
};
