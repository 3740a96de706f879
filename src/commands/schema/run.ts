import { substructureJsonSchema } from "../../config/json-schema.ts";
import type { Context } from "../../context.ts";
import { writeJson } from "../../output/json.ts";

export async function schemaCommand(ctx: Context): Promise<void> {
  writeJson(ctx.stdout, substructureJsonSchema());
}
