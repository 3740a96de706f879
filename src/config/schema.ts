// The one schema of substructure.toml (product.md, "The file"). Cross-references between
// sections (agents naming connections) are checked in load.ts, where every section is known.
// zod/mini: the same validation as classic zod for a fraction of its start-up cost. Every command
// loads this file, and a valid file is accepted by check.ts's walk without zod, so the schema is
// built only when a file needs the full check (fileSchema()): building it cost about 1 ms of every
// start-up.
import * as z from "zod/mini";
import { lazily } from "../lazy.ts";
import { firstUnsafe } from "../output/untrusted.ts";

export const ID_PATTERN = /^[a-z0-9_-]+$/;
/** A connection id or agent name: ID_PATTERN, and never "__" (it separates id and tool name). */
export const isValidName = (name: string): boolean => ID_PATTERN.test(name) && !name.includes("__");
export const ENV_NAME_PATTERN = /^[A-Za-z_][A-Za-z0-9_]*$/;
/** RFC 6749 §3.3: scope-token = 1*( %x21 / %x23-5B / %x5D-7E ) */
export const SCOPE_PATTERN = /^[\x21\x23-\x5B\x5D-\x7E]+$/;

/**
 * Names that mean something to JavaScript objects: as a key they would be dropped or reach a
 * prototype (`[mcp.__proto__]` was once silently ignored), so the file refuses them wherever
 * they are written (load.ts), and nothing subs writes uses one.
 */
export const RESERVED_NAMES: ReadonlySet<string> = new Set(["__proto__", "constructor", "prototype"]);

/**
 * Keys that would hold a secret in the file, with the key that names its variable instead. Secrets
 * are only ever named by an environment variable (`*_env`), so the file can be committed
 * (connectors.md: "A `token` written in the file is a parse error"); load.ts refuses these keys
 * wherever they are written.
 */
export const SECRET_KEYS: Readonly<Record<string, string>> = {
  token: "token_env",
  client_secret: "client_secret_env",
  access_token: "token_env",
  refresh_token: "token_env",
  password: "token_env",
  secret: "token_env",
  api_key: "token_env",
};

/** Whether the file refuses `key` wherever it is (a secret's name: SECRET_KEYS), so a name made for it must avoid it. */
export const isSecretKey = (key: string) => Object.hasOwn(SECRET_KEYS, key);

/** Why `id` cannot be a new connection's id, or undefined (for `subs mcp add` and `subs init`). */
export function idProblem(id: string): string | undefined {
  if (!isValidName(id)) return `\`${id}\` is not a connection id: lowercase letters, digits, '-' and '_', never "__"`;
  if (RESERVED_NAMES.has(id)) return `\`${id}\` is a reserved name (JavaScript gives it a meaning of its own); choose another id`;
  return undefined;
}

const id = (what: string) =>
  z.string().check(
    z.regex(ID_PATTERN, { error: `${what} may contain only lowercase letters, digits, '-' and '_'` }),
    // "__" separates the connection id from the tool name the model sees (id__tool). A plain
    // check pushing the issue z.refine would: refine runs a whole schema per key (issue 6).
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


const LOOPBACK_HOSTS = new Set(["localhost", "127.0.0.1", "[::1]", "::1"]);
export function isLoopbackHost(hostname: string): boolean {
  return LOOPBACK_HOSTS.has(hostname) || /^127(\.\d{1,3}){3}$/.test(hostname);
}

/**
 * `https://` then a host of letters, digits, '.' and '-', an optional port, then the end or a
 * path, query or fragment. Such a value has no userinfo: the URL parser reads credentials only
 * from an '@' before the first '/', '\\', '?' or '#' after the slashes, and this host cannot hold
 * one, nor a further slash, tab or newline that the parser would skip or drop.
 */
const PLAIN_HTTPS = /^https:\/\/[A-Za-z0-9.-]+(?::[0-9]+)?(?:[/?#]|$)/;

/** Checks an endpoint URL. Values are never echoed: a URL may carry a secret in its query. */
export function urlProblem(value: string, { httpsOnly = false } = {}): string | undefined {
  // Nearly every url is a plain https one, and the check runs for every connection on every
  // command: URL.canParse answers it at a third of the cost of building a URL (issue 6). When it
  // parses, such a value is https without credentials, so it passes every rule below.
  if (PLAIN_HTTPS.test(value) && URL.canParse(value)) return undefined;
  return parsedUrlProblem(value, httpsOnly);
}

/**
 * Why `url` cannot be written into the file as a new connection's, or undefined: urlProblem's
 * rules, and none of the characters the file refuses in any string (load.ts: controls, DEL, C1,
 * bidi controls, lone surrogates), which TOML cannot even hold raw and would fail the edited file.
 */
export function newUrlProblem(url: string): string | undefined {
  return urlProblem(url) ?? (firstUnsafe(url) ? "holds a control or invisible character" : undefined);
}

/** The rules of urlProblem, always through `new URL` (test/url-problem.test.ts holds the fast path to them). */
export function parsedUrlProblem(value: string, httpsOnly: boolean): string | undefined {
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

const envName = () =>
  z.string().check(z.regex(ENV_NAME_PATTERN, { error: "must name an environment variable (letters, digits and '_', not starting with a digit)" }));

// z.check, not z.superRefine: the same issue pushed on the same payload, without the wrapper
// superRefine adds around it on every call (issue 6: this runs for every connection).
const httpUrl = (opts: { httpsOnly?: boolean } = {}) =>
  z.string().check(
    z.check<string>((payload) => {
      const problem = urlProblem(payload.value, opts);
      if (problem) payload.issues.push({ code: "custom", message: problem, input: payload.value });
    }),
  );

const nonEmpty = () => z.string().check(z.minLength(1));

const mcpToolsFilterSchema = () =>
  z.strictObject({
    include: z.optional(z.array(nonEmpty())),
    exclude: z.optional(z.array(nonEmpty())),
    read_only: z.optional(z.boolean()),
    non_destructive: z.optional(z.boolean()),
    idempotent: z.optional(z.boolean()),
  });

const connectionSchema = () =>
  z.strictObject({
    url: httpUrl(),
    auth: z.optional(z.strictObject({ token_env: envName() })),
    oauth: z.optional(
      z.strictObject({
        client_id: z.optional(nonEmpty()),
        client_secret_env: z.optional(envName()),
        client_metadata_url: z.optional(httpUrl({ httpsOnly: true })),
        scopes: z.optional(z.array(z.string().check(z.regex(SCOPE_PATTERN, { error: "is not a valid OAuth scope" })))),
      }),
    ),
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
          // each of 1000 names (issue 6). Only a bad name goes to `id` for its exact issues.
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
