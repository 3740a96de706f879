// `subs agent`: the group of declared agents; each command declares itself in its own folder.
import { examples, type CommandDeclaration } from "../options.ts";
import { agentConnect } from "./connect/command.ts";
import { agentList } from "./list/command.ts";
import { agentServe } from "./serve/command.ts";
import { agentTools } from "./tools/command.ts";

export const agent: CommandDeclaration = {
  name: "agent",
  declare(command) {
    command
      .description("Declared agents: what each one's model can call, and serving those tools to any MCP client.")
      .addHelpText("after", examples(["subs agent list", "subs agent tools triage", "subs agent connect triage --to claude"]));
  },
  commands: [agentList, agentTools, agentServe, agentConnect],
};
