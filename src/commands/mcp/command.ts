// `subs mcp`: the group of declared connections; each command declares itself in its own folder.
import { examples, type CommandDeclaration } from "../options.ts";
import { mcpAdd } from "./add/command.ts";
import { mcpCall } from "./call/command.ts";
import { mcpConnect } from "./connect/command.ts";
import { mcpImport } from "./import/command.ts";
import { mcpList } from "./list/command.ts";
import { mcpLogin } from "./login/command.ts";
import { mcpProxy } from "./proxy/command.ts";
import { mcpRemove } from "./remove/command.ts";
import { mcpTools } from "./tools/command.ts";

export const mcp: CommandDeclaration = {
  name: "mcp",
  declare(command) {
    command
      .description("Declared MCP connections: add, import, log in, list, inspect, call, proxy, connect to a client, remove.")
      .addHelpText(
        "after",
        examples([
          "subs mcp add sentry https://mcp.sentry.dev/mcp",
          "subs mcp import --dry-run",
          "subs mcp login sentry",
          "subs mcp list",
          "subs mcp tools sentry",
          `subs mcp call sentry whoami --args '{}'`,
          "subs mcp connect sentry --to claude",
          "subs mcp remove sentry",
        ]),
      );
  },
  commands: [mcpList, mcpLogin, mcpTools, mcpCall, mcpProxy, mcpConnect, mcpAdd, mcpRemove, mcpImport],
};
