import { completionScripts, SHELLS, type Shell } from "../../completion/scripts.ts";
import type { Context } from "../../context.ts";
import { usage } from "../../errors.ts";

export async function completionCommand(ctx: Context, options: { shell: string }): Promise<void> {
  if (!(SHELLS as readonly string[]).includes(options.shell)) {
    throw usage(`no completion for shell '${options.shell}'`, { hint: `choose one of: ${SHELLS.join(", ")}` });
  }
  ctx.stdout.write(completionScripts[options.shell as Shell]);
}
