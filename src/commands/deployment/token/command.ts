// `subs deployment token`: the deployment's API tokens, one command each in its own folder.
import { examples, type CommandDeclaration } from "../../options.ts";
import { tokenCreate } from "./create/command.ts";
import { tokenList } from "./list/command.ts";
import { tokenRevoke } from "./revoke/command.ts";

export const token: CommandDeclaration = {
  name: "token",
  declare(command) {
    command
      .description("The deployment's API tokens: admin, apply (CI), use (MCP clients), read. Over its API (--url, or the project's [remote]) with an admin token, or on its host (--store).")
      .addHelpText(
        "after",
        examples(["subs deployment token create --name ci --role apply --url https://subs.example.com", "subs deployment token list   # in a project with [remote]", "subs deployment token revoke ci --store /var/lib/subs"]),
      );
  },
  commands: [tokenCreate, tokenList, tokenRevoke],
};
