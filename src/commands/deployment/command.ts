// `subs deployment`: the team deployment `[remote]` talks to (src/deployment/, docs/deployment-server.md).
import { examples, type CommandDeclaration } from "../options.ts";
import { audit } from "./audit/command.ts";
import { backup } from "./backup/command.ts";
import { checkKey } from "./check-key/command.ts";
import { rotateKey } from "./rotate-key/command.ts";
import { deploymentServe } from "./serve/command.ts";
import { person } from "./person/command.ts";
import { token } from "./token/command.ts";

export const deployment: CommandDeclaration = {
  name: "deployment",
  declare(command) {
    command
      .description("Run the team deployment `[remote]` talks to: serve it, manage its API tokens and people, read its record, rotate and check its key, back it up.")
      .addHelpText(
        "after",
        examples([
          "subs deployment token create --name admin --role admin --store ./subs-deployment",
          "subs deployment serve --public-url https://subs.example.com --listen 127.0.0.1:8080",
          "subs deployment audit --since 1d",
          "subs deployment rotate-key --new-key-file ./deployment.key.new",
          "subs deployment backup ./backup.db",
        ]),
      );
  },
  commands: [deploymentServe, token, person, audit, rotateKey, backup, checkKey],
};
