// `subs mcp import`: its declaration; the run code is ./run.ts beside it, loaded when it runs.
import { Option } from "commander";
import { configOption, examples, jsonOption, pick, type CommandDeclaration } from "../../options.ts";

export const mcpImport: CommandDeclaration = {
  name: "import",
  declare(command, { ctx, setJson, configOf }) {
    command
      .summary("Declare the remote MCP servers Claude Code, Codex, Cursor, VS Code or Gemini CLI already use.")
      .description(
        "Declare the remote MCP servers other clients already use: reads their project and user config files, prints what it adds, then appends the sections " +
          "(comments and layout elsewhere kept), checked before it is written. `Authorization: Bearer ${VAR}` becomes auth.token_env; a token written in a file is never " +
          "copied (the report names the variable to set); local (stdio) servers are listed as skipped. Without a substructure.toml, writes one as `subs init` does.",
      )
      .addOption(new Option("--from <client|path>", "read only this client (claude, codex, cursor, vscode, gemini) or this config file (default: every client whose files exist)"))
      .option("--dry-run", "print what would be added; write nothing")
      .addOption(configOption())
      .addOption(jsonOption())
      .addHelpText(
        "after",
        examples([
          "subs mcp import --dry-run",
          "subs mcp import --from claude",
          "subs mcp import --from ~/.cursor/mcp.json",
          "subs mcp import --from vscode --json | jq '.added[].id'",
        ]),
      )
      .action(async (opts: { from?: string; dryRun?: boolean; config?: string; json?: boolean }) => {
        setJson(Boolean(opts.json));
        const { mcpImportCommand } = await import("./run.ts");
        await mcpImportCommand(ctx, { ...configOf(opts), ...pick(opts, "from"), dryRun: Boolean(opts.dryRun), json: Boolean(opts.json) });
      });
  },
};
