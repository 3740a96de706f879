// The one schema of substructure.toml (product.md, "The file"). Cross-references between
// sections (agents naming connections) are checked in validate.ts, where every section is known.
import { z } from "zod";

export const ID_PATTERN = /^[a-z0-9_-]+$/;
export const ENV_NAME_PATTERN = /^[A-Za-z_][A-Za-z0-9_]*$/;

const id = (what: string) =>
  z
    .string()
    .regex(ID_PATTERN, { error: `${what} may contain only lowercase letters, digits, '-' and '_'` })
    .refine((s) => !s.includes("__"), {
      // "__" separates the connection id from the tool name the model sees (id__tool).
      error: `${what} must not contain "__" (it separates the id from the tool name, as in sentry__search)`,
    });

const envName = z.string().regex(ENV_NAME_PATTERN, {
  error: "must name an environment variable (letters, digits and '_', not starting with a digit)",
});

const LOOPBACK_HOSTS = new Set(["localhost", "127.0.0.1", "[::1]", "::1"]);
export function isLoopbackHost(hostname: string): boolean {
  return LOOPBACK_HOSTS.has(hostname) || /^127(\.\d{1,3}){3}$/.test(hostname);
}

/** Checks an endpoint URL. Values are never echoed: a URL may carry a secret in its query. */
export function urlProblem(value: string, { httpsOnly = false } = {}): string | undefined {
  let url: URL;
  try {
    url = new URL(value);
  } catch {
    return "is not a valid URL";
  }
  if (url.protocol !== "https:" && url.protocol !== "http:") return "must be an http(s) URL";
  if (url.username || url.password) return "must not carry credentials (user:password@); name them with an *_env key";
  if (url.protocol === "http:" && (httpsOnly || !isLoopbackHost(url.hostname)))
    return httpsOnly ? "must use https" : "must use https (plain http is allowed only to 127.0.0.1, [::1] or localhost)";
  return undefined;
}

const httpUrl = (opts: { httpsOnly?: boolean } = {}) =>
  z.string().superRefine((value, ctx) => {
    const problem = urlProblem(value, opts);
    if (problem) ctx.addIssue({ code: "custom", message: problem });
  });

export const McpToolsFilterSchema = z.strictObject({
  include: z.array(z.string().min(1)).optional(),
  exclude: z.array(z.string().min(1)).optional(),
  read_only: z.boolean().optional(),
  non_destructive: z.boolean().optional(),
  idempotent: z.boolean().optional(),
});

export const ConnectionSchema = z.strictObject({
  url: httpUrl(),
  auth: z.strictObject({ token_env: envName }).optional(),
  oauth: z
    .strictObject({
      client_id: z.string().min(1).optional(),
      client_secret_env: envName.optional(),
      client_metadata_url: httpUrl({ httpsOnly: true }).optional(),
      scopes: z.array(z.string().regex(/^[\x21\x23-\x5B\x5D-\x7E]+$/, { error: "is not a valid OAuth scope" })).optional(),
    })
    .optional(),
  prefix_tools: z.boolean().default(true),
});

// `mcp = ["sentry"]` is shorthand for `mcp = [{ id = "sentry" }]`: every tool of the connection.
const AgentMcpEntrySchema = z.preprocess(
  (entry) => (typeof entry === "string" ? { id: entry } : entry),
  z.strictObject({ id: z.string(), tools: McpToolsFilterSchema.optional() }),
);

export const AgentSchema = z.strictObject({
  mcp: z.array(AgentMcpEntrySchema).default([]),
  tools: z.array(z.string().min(1)).default([]),
  agents: z.array(z.string()).default([]),
});

export const RemoteSchema = z.strictObject({
  url: httpUrl(),
  token_env: envName.default("SUBSTRUCTURE_TOKEN"),
});

export const FileSchema = z.strictObject({
  db: z.string().min(1).default("substructure.db"),
  remote: RemoteSchema.optional(),
  mcp: z.record(id("a connection id"), ConnectionSchema).default({}),
  agent: z.record(id("an agent name"), AgentSchema).default({}),
});

export type FileShape = z.output<typeof FileSchema>;
export type McpToolsFilter = z.output<typeof McpToolsFilterSchema>;
