// A JSON Schema of substructure.toml, generated from the zod schema so the two never disagree
// (issue 8). Editors that validate TOML against JSON Schema (Taplo / Even Better TOML) use it via
// the `#:schema ./substructure.schema.json` directive at the top of the file.
import * as z from "zod/mini";
import { fileSchema, ID_PATTERN } from "./schema.ts";

type JsonObject = { [key: string]: unknown };

const DESCRIPTIONS: Record<string, string> = {
  db: "The local engine's SQLite database, relative to this file and inside its directory (no `..` out of it, no absolute path elsewhere). It holds credentials: add *.db* to .gitignore.",
  remote: "A deployment that holds declarations and credentials. `subs apply` pushes this file to it.",
  mcp: "MCP connections, by id (lowercase letters, digits, '-' and '_'; never '__').",
  agent: "Agents, by name, and the connections they use.",
};

export function substructureJsonSchema(): JsonObject {
  const schema = z.toJSONSchema(fileSchema(), { unrepresentable: "any", io: "input" }) as JsonObject;
  const properties = schema.properties as Record<string, JsonObject>;
  for (const [key, description] of Object.entries(DESCRIPTIONS)) properties[key]!.description = description;
  const urls = [
    (properties.remote!.properties as Record<string, JsonObject>).url!,
    ((properties.mcp!.additionalProperties as JsonObject).properties as Record<string, JsonObject>).url!,
  ];
  for (const url of urls) Object.assign(url, { format: "uri", pattern: "^https?://" });
  // schema.ts checks table names in a check of its own (so a bad name hides nothing inside its
  // table), which JSON Schema cannot see: say it here.
  for (const table of ["mcp", "agent"]) properties[table]!.propertyNames = { type: "string", pattern: ID_PATTERN.source };
  // The shorthand `mcp = ["sentry"]` is expanded before zod sees the file; editors see the file.
  const agentMcp = ((properties.agent!.additionalProperties as JsonObject).properties as Record<string, JsonObject>).mcp!;
  agentMcp.items = { anyOf: [{ type: "string", description: "a connection id: every tool it offers" }, agentMcp.items] };
  return {
    $schema: schema.$schema,
    title: "substructure.toml",
    description: "Connections to MCP servers and the agents that use them. Secrets are never written here: name an environment variable (*_env).",
    ...Object.fromEntries(Object.entries(schema).filter(([k]) => k !== "$schema")),
  };
}
