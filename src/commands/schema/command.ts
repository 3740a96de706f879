// `subs schema`: its declaration; the run code is ./run.ts beside it, loaded when it runs.
import { examples, type CommandDeclaration } from "../options.ts";

export const schema: CommandDeclaration = {
  name: "schema",
  declare(command, { ctx }) {
    command
      .description("Print the JSON Schema of substructure.toml (for editors such as Taplo / Even Better TOML).")
      .addHelpText("after", examples(["subs schema > substructure.schema.json"]))
      .action(async () => {
        const { schemaCommand } = await import("./run.ts");
        await schemaCommand(ctx);
      });
  },
};
