// `subs completion`: its declaration; the run code is ./run.ts beside it, loaded when it runs.
import { examples, type CommandDeclaration } from "../options.ts";

export const completion: CommandDeclaration = {
  name: "completion",
  declare(command, { ctx }) {
    command
      .description("Print a shell completion script: commands, flags, connection ids and agent names.")
      .argument("<shell>", "bash, zsh or fish")
      .addHelpText(
        "after",
        examples([
          "subs completion bash > ~/.local/share/bash-completion/completions/subs",
          "subs completion zsh > \"${fpath[1]}/_subs\"",
          "subs completion fish > ~/.config/fish/completions/subs.fish",
        ]),
      )
      .action(async (shell: string) => {
        const { completionCommand } = await import("./run.ts");
        await completionCommand(ctx, { shell });
      });
  },
};
