import type { Context } from "../context.ts";
import type { Flags } from "./config.ts";
export async function deploymentServeCommand(_ctx: Context, _options: { flags: Flags }): Promise<void> {}
