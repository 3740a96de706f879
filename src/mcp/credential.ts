// The credential a connection's first MCP request carries (src/mcp/open.ts): a static token from
// `$token_env`, or the OAuth access token stored for the id, refreshed first when it is about to
// expire. Loads no MCP SDK: `subs mcp proxy` sends its upstream's initialize with it before the
// SDK is loaded (src/serve/upstream-handshake.ts).
import { tokenHostNotAllowed } from "../config/secret-pins.ts";
import type { Config, ConnectionConfig } from "../config/types.ts";
import type { Context } from "../context.ts";
import { needsLogin, refused, SubsError } from "../errors.ts";
import { expandTemplates, hasTemplate } from "../config/templates.ts";
import { silentReporter, type Reporter } from "../report.ts";

export type CredentialOptions = {
  ctx: Pick<Context, "env" | "fetch" | "now">;
  config: Config;
  connection: ConnectionConfig;
  reporter?: Reporter;
};

/** The Authorization header of a connection with a static token (`auth.token_env`). */
export function staticAuthorization(ctx: Pick<Context, "env">, connection: ConnectionConfig): string {
  const auth = connection.auth!;
  // Also checked when the file is loaded; here too, where the token is attached (SECURITY.md, "Where environment secrets may go: pinning in CI").
  const notAllowed = tokenHostNotAllowed(ctx.env, connection);
  if (notAllowed) throw refused(notAllowed.message, { code: "token_host_not_allowed", hint: notAllowed.hint });
  const token = ctx.env[auth.tokenEnv];
  if (!token) {
    throw new SubsError("needs_login", `${connection.id}: $${auth.tokenEnv} is not set`, {
      hint: `export ${auth.tokenEnv}=… (the token ${connection.id} authenticates with)`,
      code: "token_env_unset",
    });
  }
  return `Bearer ${token}`;
}

/**
 * The file's `headers` of `connection`, their templates read from the environment now: sent with
 * every MCP request to its url, beside the credential. Their values are secrets of the run
 * (`secrets` learns them). An unset variable is a usage error naming it (exit 2).
 */
export function fileHeaders(ctx: Pick<Context, "env"> & { secrets?: { add(value: string | null | undefined): void } }, connection: ConnectionConfig): Record<string, string> {
  const written = connection.headers;
  if (!written) return {};
  const notAllowed = tokenHostNotAllowed(ctx.env, connection);
  if (notAllowed) throw refused(notAllowed.message, { code: "token_host_not_allowed", hint: notAllowed.hint });
  const missing = new Set<string>();
  const out: Record<string, string> = {};
  for (const [name, value] of Object.entries(written)) {
    out[name] = expandTemplates(value, ctx.env, missing);
    if (hasTemplate(value)) ctx.secrets?.add(out[name]);
  }
  if (missing.size > 0) {
    const names = [...missing];
    throw new SubsError("usage", `${connection.id}: ${names.map((n) => `$${n}`).join(", ")} ${names.length === 1 ? "is" : "are"} not set; [mcp.${connection.id}] sends ${names.length === 1 ? "it" : "them"} in its headers`, {
      hint: `export ${names[0]}=… and run again`,
      code: "variable_unset",
    });
  }
  return out;
}

/**
 * What openConnection (src/mcp/open.ts) sends its first request with: the static token, the stored OAuth access
 * token (refreshed first when it is about to expire), nothing for a server found open (an empty
 * object). Undefined when its first request is not simply that: a server never tried, which it
 * tries and records, or a static token it refuses to send (with the error it throws then).
 */
export async function firstCredential(options: CredentialOptions): Promise<{ authorization?: string } | undefined> {
  const { ctx, connection } = options;
  if (connection.auth) {
    try {
      return { authorization: staticAuthorization(ctx, connection) };
    } catch {
      return undefined;
    }
  }
  const token = await oauthAccessToken(options);
  if (token === UNTRIED) return undefined;
  return token === OPEN ? {} : { authorization: `Bearer ${token}` };
}

export const OPEN = Symbol("no credential needed");
export const UNTRIED = Symbol("no credential stored, none found needed");

/**
 * The stored OAuth access token of `connection`, refreshed when it is about to expire (or was
 * rejected at `rejectedAt`); OPEN when none is stored and the server was found to need none;
 * UNTRIED when nothing at all is stored for this id and url, so a request without a credential
 * decides. A credential for another url is never UNTRIED: it is url_changed, and nothing is sent.
 */
export async function oauthAccessToken(options: CredentialOptions, rejectedAt?: number): Promise<string | typeof OPEN | typeof UNTRIED> {
  const { ctx, config, connection } = options;
  const [{ openEnvironmentStore }, { freshCredential }] = await Promise.all([import("../store/environment.ts"), import("../auth/refresh.ts")]);
  const opened = await openEnvironmentStore(config, { create: false, reporter: options.reporter ?? silentReporter });
  if (!opened) {
    if (rejectedAt === undefined) return UNTRIED;
    throw needsLogin(connection.id, "not logged in");
  }
  try {
    // The store keeps a finding and a credential for one id exclusive (store.ts): the findings are
    // read only when no credential is stored, so a logged-in connection costs two reads, this one
    // and freshCredential's, as it did before findings existed.
    if (rejectedAt === undefined && opened.store.getCredential(connection.id) === undefined) {
      return opened.store.getOpenConnection(connection.id)?.url === connection.url ? OPEN : UNTRIED;
    }
    const row = await freshCredential({ ctx, store: opened.store, connection, ...(rejectedAt !== undefined ? { rejectedAt } : {}) });
    return row.access_token;
  } finally {
    opened.store.close();
  }
}
