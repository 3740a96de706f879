// The one schema of substructure.toml (product.md, "The file"). Cross-references between
// sections (agents naming connections) are checked in load.ts, where every section is known.
// zod/mini: the same validation as classic zod for a fraction of its start-up cost. Every command
// loads this file, and a valid file is accepted by check.ts's walk without zod, so the schema is
// built only when a file needs the full check (fileSchema()): building it cost about 1 ms of every
// start-up.
import * as z from "zod/mini";
import { lazily } from "../lazy.ts";
import { ENV_NAME_PATTERN, ID_PATTERN, isValidName, SCOPE_PATTERN, urlProblem } from "./rules.ts";
import { HEADER_NAME_PATTERN, templateProblem } from "./templates.ts";

// The rules themselves, for whoever imports them from here.
export * from "./rules.ts";

const id = (what: string) =>
  z.string().check(
    z.regex(ID_PATTERN, { error: `${what} may contain only lowercase letters, digits, '-' and '_'` }),
    // "__" separates the connection id from the tool name the model sees (id__tool). A plain
    // check pushing the issue z.refine would: refine runs a whole schema per key.
    z.check<string>((payload) => {
      if (payload.value.includes("__")) {
        payload.issues.push({
          code: "custom",
          message: `${what} must not contain "__" (it separates the id from the tool name, as in sentry__search)`,
          input: payload.value,
          continue: true,
        });
      }
    }),
  );


const envName = () =>
  z.string().check(z.regex(ENV_NAME_PATTERN, { error: "must name an environment variable (letters, digits and '_', not starting with a digit)" }));

// z.check, not z.superRefine: the same issue pushed on the same payload, without the wrapper
// superRefine adds around it on every call (this runs for every connection).
const httpUrl = (opts: { httpsOnly?: boolean } = {}) =>
  z.string().check(
    z.check<string>((payload) => {
      const problem = urlProblem(payload.value, opts);
      if (problem) payload.issues.push({ code: "custom", message: problem, input: payload.value });
    }),
  );

const nonEmpty = () => z.string().check(z.minLength(1));

const headerName = () => z.string().check(z.regex(HEADER_NAME_PATTERN, { error: "is not a header name (RFC 9110: letters, digits and !#$%&'*+.^_`|~-)" }));

/** Literal text and `${NAME}` templates (templates.ts). */
const templated = () =>
  z.string().check(
    z.check<string>((payload) => {
      const problem = templateProblem(payload.value);
      if (problem) payload.issues.push({ code: "custom", message: problem, input: payload.value });
    }),
  );

const mcpToolsFilterSchema = () =>
  z.strictObject({
    include: z.optional(z.array(nonEmpty())),
    exclude: z.optional(z.array(nonEmpty())),
    read_only: z.optional(z.boolean()),
    non_destructive: z.optional(z.boolean()),
    idempotent: z.optional(z.boolean()),
  });

// `url` (a remote server) or `command` (a local one), never both: load.ts's cross-references say
// which is missing or extra, at the table.
const connectionSchema = () =>
  z.strictObject({
    url: z.optional(httpUrl()),
    command: z.optional(nonEmpty()),
    args: z.optional(z.array(templated())),
    env: z.optional(z.record(envName(), templated())),
    cwd: z.optional(nonEmpty()),
    headers: z.optional(z.record(headerName(), templated())),
    auth: z.optional(z.strictObject({ token_env: envName() })),
    oauth: z.optional(
      z.strictObject({
        client_id: z.optional(nonEmpty()),
        client_secret_env: z.optional(envName()),
        client_metadata_url: z.optional(httpUrl({ httpsOnly: true })),
        scopes: z.optional(z.array(z.string().check(z.regex(SCOPE_PATTERN, { error: "is not a valid OAuth scope" })))),
      }),
    ),
    credential: z.optional(z.enum(["shared", "personal"], { error: 'must be "shared" (one credential for everyone) or "personal" (one per person)' })),
    prefix_tools: z._default(z.boolean(), true),
  });

/** `mcp = ["sentry"]` is shorthand for `mcp = [{ id = "sentry" }]`; load.ts expands it first. */
const agentSchema = () =>
  z.strictObject({
    mcp: z._default(z.array(z.strictObject({ id: z.string(), tools: z.optional(mcpToolsFilterSchema()) })), []),
    tools: z._default(z.array(nonEmpty()), []),
    agents: z._default(z.array(z.string()), []),
  });

const remoteSchema = () =>
  z.strictObject({
    url: httpUrl(),
    token_env: z._default(envName(), "SUBSTRUCTURE_TOKEN"),
  });

/**
 * The `[<section>.<name>]` tables: names checked by `id`, each value by `value`. A record whose key
 * schema rejects a name skips that name's value, so `[mcp.Bad]` with a bad url would report only
 * the name; here every value is checked whatever its name, and every mistake in the file is
 * reported at once (product.md, "The file"). A bad name is the same `invalid_key` issue the
 * record would have made.
 */
function namedTables<V extends z.ZodMiniType>(what: string, value: V) {
  const name = id(what);
  return z.record(z.string(), value).check(
    z.check<Record<string, z.output<V>>>(
      (payload) => {
        // Not a table at all (`mcp = "x"`): the record has said so already.
        if (typeof payload.value !== "object" || payload.value === null || Array.isArray(payload.value)) return;
        for (const key of Object.keys(payload.value)) {
          // Nearly every name is fine: the same two rules as `id`, without zod's result objects for
          // each of 1000 names. Only a bad name goes to `id` for its exact issues.
          if (isValidName(key)) continue;
          const parsed = z.safeParse(name, key);
          if (!parsed.success) payload.issues.push({ code: "invalid_key", origin: "record", issues: parsed.error.issues, input: key, path: [key], continue: true });
        }
      },
      // Also when a value already failed: that is the point.
      { when: () => true },
    ),
  );
}

const buildFileSchema = () =>
  z.strictObject({
    db: z._default(nonEmpty(), "substructure.db"),
    remote: z.optional(remoteSchema()),
    mcp: z._default(namedTables("a connection id", connectionSchema()), {}),
    agent: z._default(namedTables("an agent name", agentSchema()), {}),
  });

/** The schema of the whole file, built on first use (see the top of this file). */
export const fileSchema = lazily(buildFileSchema);

export type FileShape = z.output<ReturnType<typeof buildFileSchema>>;
export type McpToolsFilter = z.output<ReturnType<typeof mcpToolsFilterSchema>>;
