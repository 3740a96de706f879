// `subs deployment person`: the people the deployment's tokens belong to, one command each in its own folder.
import { examples, type CommandDeclaration } from "../../options.ts";
import { personList } from "./list/command.ts";
import { personRemove } from "./remove/command.ts";

export const person: CommandDeclaration = {
  name: "person",
  declare(command) {
    command
      .description("The people the deployment's tokens belong to (`token create --person`): list them, or remove one with every token of theirs. Admin token, as for `token`.")
      .addHelpText("after", examples(["subs deployment person list", "subs deployment person remove bob@example.com --url https://subs.example.com"]));
  },
  commands: [personList, personRemove],
};
