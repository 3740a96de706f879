// `subs deployment`: the team deployment `[remote]` talks to (src/deployment/, docs/deployment-server.md).
import type { CommandDeclaration } from "../options.ts";
import { rotateKey } from "./rotate-key/command.ts";
import { deploymentServe } from "./serve/command.ts";
import { token } from "./token/command.ts";

export const deployment: CommandDeclaration = {
  name: "deployment",
  declare(command) {
    command.description("Run the team deployment `[remote]` talks to: serve it, manage its API tokens, rotate its key.");
  },
  commands: [deploymentServe, token, rotateKey],
};
