// How `subs deployment …` is configured: each setting by flag or by the environment variable of
// the same name (a container or a service unit sets variables; a person types flags). Checked
// whole at start, before the store is opened or a port bound, and every problem is reported with
// where its value came from, so a wrong unit file names its own line.
import { readFileSync } from "node:fs";
import path from "node:path";
import { z } from "zod";
import { usage, type SubsError } from "../errors.ts";
import { parseAllowList, type Allowed } from "../http/address-policy.ts";
import { pgpassPassword } from "./pgpass.ts";
import { IF_LEAKED, KEY_FILE_BYTES, readPrivateFile } from "./private-file.ts";

/** A setting's flag and variable; the flag wins when both are given. */
export const SETTINGS = {
  listen: { flag: "--listen", env: "SUBS_DEPLOYMENT_LISTEN" },
  publicUrl: { flag: "--public-url", env: "SUBS_DEPLOYMENT_PUBLIC_URL" },
  store: { flag: "--store", env: "SUBS_DEPLOYMENT_STORE" },
  storePasswordFile: { flag: "--store-password-file", env: "SUBS_DEPLOYMENT_STORE_PASSWORD_FILE" },
  keyFile: { flag: "--key-file", env: "SUBS_DEPLOYMENT_KEY_FILE" },
  catalog: { flag: "--catalog", env: "SUBS_DEPLOYMENT_CATALOG" },
  clientSecrets: { flag: "--client-secrets", env: "SUBS_DEPLOYMENT_CLIENT_SECRETS" },
  allowPrivate: { flag: "--allow-private", env: "SUBS_DEPLOYMENT_ALLOW_PRIVATE" },
  auditRetention: { flag: "--audit-retention", env: "SUBS_DEPLOYMENT_AUDIT_RETENTION" },
} as const;
/** The key itself, base64 (a secret manager's variable), for when no key file is given. */
export const KEY_ENV = "SUBS_DEPLOYMENT_KEY";
export const DEFAULT_LISTEN = "127.0.0.1:8080";
export const DEFAULT_STORE = "subs-deployment";
export const DB_FILE = "deployment.db";
/** How long the record keeps an entry unless the operator says otherwise (docs/deployment-server.md, "The record"). */
export const DEFAULT_AUDIT_RETENTION = "90d";

export type Setting = keyof typeof SETTINGS;
export type Flags = Partial<Record<Setting, string>>;

export type KeySource = { file: string; from: string } | { value: string; from: string };

export type DeploymentConfig = {
  listen: { host: string; port: number };
  /**
   * Where browsers and clients reach the deployment (origin and path, no trailing `/`). Absent
   * only with a loopback --listen: then it is the address actually bound (port 0 included).
   */
  publicUrl: URL | undefined;
  /** The data directory (0700) holding the SQLite file; unused with `postgres`. */
  storeDir: string;
  dbPath: string;
  /** Set when the store is a Postgres database (several replicas share it) rather than the SQLite file. */
  postgres: PostgresTarget | undefined;
  key: KeySource | undefined;
  catalog: string[] | undefined;
  /** Secrets of confidential pre-registered OAuth clients, by client_id (docs/deployment-protocol.md section 3.2). */
  clientSecrets: ReadonlyMap<string, ClientSecret>;
  /**
   * The loopback, private and special-use addresses the deployment may send requests to, beyond
   * public ones: the operator's list, else all of them when the public URL is loopback (a
   * deployment on a laptop, serving servers on that laptop) and none otherwise.
   */
  allowed: Allowed;
  /** How long the record keeps an entry, in milliseconds (docs/deployment-server.md, "The record"). */
  auditRetentionMs: number;
  /** What the operator should hear at start (stderr), e.g. a password given on the command line. */
  warnings: string[];
};

/**
 * A confidential client's secret and the authorization server it was issued by: it is sent to that
 * server alone (its issuer, or exactly this token endpoint), never to another that a declaration
 * names with the same client_id.
 */
export type ClientSecret = { secret: string; issuer: string | undefined; tokenEndpoint: string | undefined };

const LOOPBACK = new Set(["127.0.0.1", "::1", "[::1]", "localhost"]);
export const isLoopbackHost = (host: string) => LOOPBACK.has(host.toLowerCase());

type Env = Readonly<Record<string, string | undefined>>;

/** Where a value came from, as an operator would look for it. */
type Located = { value: string; where: string };

function pick(flags: Flags, env: Env, setting: Setting): Located | undefined {
  const { flag, env: name } = SETTINGS[setting];
  const given = flags[setting];
  if (given !== undefined) return { value: given, where: flag };
  const fromEnv = env[name];
  if (fromEnv !== undefined && fromEnv !== "") return { value: fromEnv, where: `$${name}` };
  return undefined;
}

const ListenSchema = z.string().transform((text, ctx) => {
  const bracketed = /^\[([^\]]+)\]:(\d{1,5})$/.exec(text);
  const plain = /^([^:[\]]*):(\d{1,5})$/.exec(text);
  const portOnly = /^(\d{1,5})$/.exec(text);
  const [host, port] = bracketed ? [bracketed[1]!, bracketed[2]!] : plain ? [plain[1] || "0.0.0.0", plain[2]!] : portOnly ? ["127.0.0.1", portOnly[1]!] : [undefined, undefined];
  const n = Number(port);
  if (host === undefined || !Number.isInteger(n) || n > 65535) {
    ctx.addIssue({ code: "custom", message: "must be PORT, HOST:PORT or [IPv6]:PORT (e.g. 127.0.0.1:8080, 0.0.0.0:8080)" });
    return z.NEVER;
  }
  return { host, port: n };
});

const UNIT_MS = { s: 1000, m: 60_000, h: 3_600_000, d: 86_400_000 } as const;
/** A duration: a whole number and a unit (s, m, h, d), at most ten years. */
export const RetentionSchema = z.string().transform((text, ctx) => {
  const match = /^([1-9][0-9]{0,8})([smhd])$/.exec(text.trim());
  const ms = match ? Number(match[1]) * UNIT_MS[match[2] as keyof typeof UNIT_MS] : NaN;
  if (!(ms <= 3660 * UNIT_MS.d)) {
    ctx.addIssue({ code: "custom", message: "must be a whole number and a unit: s, m, h or d (e.g. 90d, 12h), at most 3660d" });
    return z.NEVER;
  }
  return ms;
});

const PublicUrlSchema = z.string().transform((text, ctx) => {
  if (!URL.canParse(text)) {
    ctx.addIssue({ code: "custom", message: "must be an absolute URL, e.g. https://subs.example.com" });
    return z.NEVER;
  }
  const url = new URL(text);
  // The consent redirect and every token clients send go to this URL: in clear only where no
  // network sees it (RFC 8252 section 8.3 allows http for loopback redirects only).
  if (url.protocol !== "https:" && !(url.protocol === "http:" && isLoopbackHost(url.hostname))) {
    ctx.addIssue({ code: "custom", message: "must be https (plain http only for a loopback host such as 127.0.0.1); put the deployment behind a TLS reverse proxy" });
    return z.NEVER;
  }
  if (url.search || url.hash || url.username || url.password) {
    ctx.addIssue({ code: "custom", message: "must have no query, fragment or user info" });
    return z.NEVER;
  }
  url.pathname = url.pathname.replace(/\/+$/, "");
  return url;
});

export type PostgresTarget = {
  /** The connection URL as given (it may hold the password): given to the store and nowhere else. */
  url: string;
  /** The password, from the URL or the first of the other places that has one (postgresPassword). */
  password: string | undefined;
  /** Where the password came from, for an operator: `--store`, `$PGPASSWORD`, `--store-password-file FILE`… */
  passwordFrom: string | undefined;
  /** The same URL with the password replaced by `***`: for logs, errors and the `listening` line. */
  redacted: string;
};

/** A store value naming a Postgres database rather than a directory. */
export const isPostgresUrl = (text: string) => /^postgres(ql)?:\/\//i.test(text);

/** Query parameters that carry a password (libpq's `password`, `sslpassword`), shown as `***`. */
const PASSWORD_PARAM = /pass/i;

/**
 * Whether an `@` comes after the authority: the password held an unencoded `/`, `?` or `#`, which
 * ended the authority early (WHATWG URL, "authority state"), so the rest of the password is in
 * the path or query, and nothing there can be shown.
 */
function cutShort(text: string): boolean {
  const rest = text.replace(/^[a-z][a-z0-9+.-]*:\/\//i, "");
  const end = rest.search(/[/?#]/);
  return end >= 0 && rest.slice(end).includes("@");
}

/**
 * postgres://user:***@host:port/db: what may be shown of a connection URL. One that does not
 * parse, or whose password spilt past the host (an unencoded `@`, `:`, `/`, `?` or `#` in it), is
 * shown as its scheme alone: where the password ends cannot be told.
 */
export function redactPostgresUrl(text: string): string {
  const scheme = /^postgres(?:ql)?:\/\//i.exec(text)?.[0] ?? "postgres://";
  if (!URL.canParse(text) || cutShort(text)) return `${scheme}***`;
  const url = new URL(text);
  if (url.password) url.password = "***";
  for (const name of [...url.searchParams.keys()]) if (PASSWORD_PARAM.test(name)) url.searchParams.set(name, "***");
  return url.href.replaceAll("%2A%2A%2A", "***");
}

/** The password a parseable URL carries, in its user info or a `password` parameter (libpq's). */
export function passwordInUrl(url: URL): string | undefined {
  if (url.password) {
    try {
      return decodeURIComponent(url.password);
    } catch {
      return url.password;
    }
  }
  return url.searchParams.get("password") ?? undefined;
}

const PostgresSchema = z.string().transform((text, ctx): PostgresTarget => {
  const url = URL.canParse(text) ? new URL(text) : undefined;
  if (!url) {
    ctx.addIssue({ code: "custom", message: "not a URL: postgres://USER:PASSWORD@HOST:PORT/DATABASE (percent-encode special characters in the password)" });
    return z.NEVER;
  }
  if (!url.hostname) {
    ctx.addIssue({ code: "custom", message: "names no host: postgres://USER:PASSWORD@HOST:PORT/DATABASE" });
    return z.NEVER;
  }
  if (cutShort(text)) {
    ctx.addIssue({ code: "custom", message: "has an `@` after the host: percent-encode `@`, `/`, `?` and `#` in the password (%40, %2F, %3F, %23)" });
    return z.NEVER;
  }
  if (!/^\/[^/]+$/.test(url.pathname)) {
    ctx.addIssue({ code: "custom", message: "names no database: postgres://USER:PASSWORD@HOST:PORT/DATABASE (percent-encode special characters in the password)" });
    return z.NEVER;
  }
  if (url.port !== "" && !(Number(url.port) > 0)) {
    ctx.addIssue({ code: "custom", message: "has no valid port" });
    return z.NEVER;
  }
  return { url: text, password: undefined, passwordFrom: undefined, redacted: redactPostgresUrl(text) };
});

/** The most a password file (subs's own or a pgpass file) may hold. */
const PASSWORD_FILE_BYTES = 64 * 1024;

/**
 * The store's password, from the first place that has one, in libpq's order
 * (https://www.postgresql.org/docs/current/libpq-envars.html): the URL itself; subs's own
 * --store-password-file; `$PGPASSWORD`; the pgpass file (`$PGPASSFILE`, else `~/.pgpass`). Read
 * here, from ctx.env, and handed to the pg client explicitly: it never looks for one itself.
 * Problems go to `problems`, notes for the operator to `warnings`.
 */
function postgresPassword(
  target: PostgresTarget,
  storeAt: Located,
  fileAt: Located | undefined,
  ctx: { env: Env; cwd: string },
  problems: string[],
  warnings: string[],
): Pick<PostgresTarget, "password" | "passwordFrom"> {
  const url = new URL(target.url);
  const inUrl = passwordInUrl(url);
  if (inUrl !== undefined) {
    if (fileAt) problems.push(`the store's password is given twice, in ${storeAt.where} and in ${fileAt.where}: keep the file, and take the password out of the URL`);
    // The command line of a process is readable by every local user (/proc/PID/cmdline, ps) for
    // as long as it runs; its environment only by the same user (/proc/PID/environ, mode 0400).
    if (storeAt.where === SETTINGS.store.flag) {
      warnings.push(
        `${SETTINGS.store.flag} holds the database password, which every user of this machine can read in the process list (/proc/<pid>/cmdline) while subs runs: give it in ${SETTINGS.storePasswordFile.flag} FILE (mode 0600), $PGPASSWORD or a pgpass file instead, or the whole URL in $${SETTINGS.store.env}`,
      );
    }
    return { password: inUrl, passwordFrom: storeAt.where };
  }
  if (fileAt) {
    const file = path.resolve(ctx.cwd, fileAt.value);
    const text = readPrivateFile({ from: fileAt.where, shown: fileAt.value, file, maxBytes: PASSWORD_FILE_BYTES, ifLeaked: IF_LEAKED.storePassword });
    if (text === undefined) throw usage(`${fileAt.where} ${fileAt.value}: no such file`);
    // One line: the trailing newline an editor or `echo` adds is not part of the password.
    const password = text.replace(/\r?\n$/, "");
    if (!password || /[\r\n]/.test(password)) throw usage(`${fileAt.where} ${fileAt.value}: must hold the password alone, on one line`);
    return { password, passwordFrom: `${fileAt.where} ${fileAt.value}` };
  }
  const fromEnv = ctx.env.PGPASSWORD;
  if (fromEnv) return { password: fromEnv, passwordFrom: "$PGPASSWORD" };
  const named = ctx.env.PGPASSFILE;
  const pgpass = named ? { from: "$PGPASSFILE", shown: named, file: path.resolve(ctx.cwd, named) } : ctx.env.HOME ? { from: "the pgpass file", shown: path.join(ctx.env.HOME, ".pgpass"), file: path.join(ctx.env.HOME, ".pgpass") } : undefined;
  if (!pgpass) return { password: undefined, passwordFrom: undefined };
  let text: string | undefined;
  try {
    text = readPrivateFile({ ...pgpass, maxBytes: PASSWORD_FILE_BYTES, ifLeaked: IF_LEAKED.pgpass });
  } catch (error) {
    // libpq ignores a ~/.pgpass others may read, with a warning; one named by $PGPASSFILE is the
    // operator's choice, held to the rule of every file subs is given a secret in.
    if (named) throw error;
    const { message, hint } = error as SubsError;
    warnings.push(`${message}; not used${hint ? ` (${hint})` : ""}`);
    return { password: undefined, passwordFrom: undefined };
  }
  if (text === undefined) {
    if (named) throw usage(`$PGPASSFILE ${named}: no such file`);
    return { password: undefined, passwordFrom: undefined };
  }
  const host = url.searchParams.get("host") ?? url.hostname.replace(/^\[(.*)\]$/, "$1");
  const decode = (part: string) => {
    try {
      return decodeURIComponent(part);
    } catch {
      return part;
    }
  };
  const password = pgpassPassword(text, {
    // A Unix-domain socket is looked up as localhost (libpq, "The Password File").
    host: host.startsWith("/") ? "localhost" : host,
    port: url.port || ctx.env.PGPORT || "5432",
    database: decode(url.pathname.slice(1)),
    user: decode(url.username) || ctx.env.PGUSER || ctx.env.USER || "",
  });
  return password === undefined ? { password: undefined, passwordFrom: undefined } : { password, passwordFrom: `${pgpass.from} ${pgpass.shown}` };
}

const CatalogSchema = z.array(z.url({ protocol: /^https?$/ })).min(1, "names no URL");

/** Reads the catalog file: one URL per line, `#` comments and blank lines ignored. */
function readCatalog(located: Located, cwd: string): string[] {
  let text: string;
  try {
    text = readFileSync(path.resolve(cwd, located.value), "utf8");
  } catch (error) {
    throw usage(`${located.where} ${located.value}: cannot read it (${(error as NodeJS.ErrnoException).code ?? String(error)})`, { hint: "a file with one allowed MCP server URL per line" });
  }
  const lines = text.split(/\r?\n/).map((l) => l.replace(/#.*$/, "").trim());
  const urls = lines.filter(Boolean);
  const parsed = CatalogSchema.safeParse(urls);
  if (!parsed.success) {
    const issue = parsed.error.issues[0]!;
    const at = typeof issue.path[0] === "number" ? lines.indexOf(urls[issue.path[0]]!) + 1 : 0;
    throw usage(`${located.value}${at ? `:${at}` : ""}: ${at ? `${JSON.stringify(urls[issue.path[0] as number])} is not an http(s) URL` : issue.message}`, {
      hint: "one allowed MCP server URL per line",
    });
  }
  return parsed.data;
}

const ServerUrl = z.url({ protocol: /^https?$/ }).refine((u) => new URL(u).protocol === "https:" || isLoopbackHost(new URL(u).hostname), "must be https (plain http only to a loopback host)");
const ClientSecretsSchema = z.record(
  z.string().min(1),
  z
    .strictObject({ secret: z.string().min(1, "an empty secret"), issuer: ServerUrl.optional(), token_endpoint: ServerUrl.optional() }, "must be an object naming the secret and the server it was issued by")
    .refine((v) => v.issuer !== undefined || v.token_endpoint !== undefined, "names neither the issuer nor the token_endpoint the secret was issued by"),
);
const CLIENT_SECRETS_FORM = '{"<client_id>": {"issuer": "https://<authorization server>", "secret": "<client secret>"}, …}';

/**
 * The operator's secrets of confidential pre-registered clients: a JSON object from client_id to
 * the secret and the authorization server that issued it, in a file only its owner may read (it
 * holds secrets, as the key file does: the same rule, private-file.ts). `subs` never sends a
 * client secret (section 3.2); the deployment is where it lives, and it goes to its own server only.
 */
function readClientSecrets(located: Located, cwd: string): Map<string, ClientSecret> {
  const file = path.resolve(cwd, located.value);
  const text = readPrivateFile({ from: located.where, shown: located.value, file, maxBytes: 1024 * 1024, ifLeaked: IF_LEAKED.clientSecrets });
  if (text === undefined) throw usage(`${located.where} ${located.value}: cannot read it (ENOENT)`);
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch {
    throw usage(`${located.where} ${located.value}: not JSON`, { hint: CLIENT_SECRETS_FORM });
  }
  const parsed = ClientSecretsSchema.safeParse(json);
  if (!parsed.success) {
    const issue = parsed.error.issues[0]!;
    const where = issue.path.length ? ` (${issue.path.map((p) => JSON.stringify(String(p))).join(".")})` : "";
    // Never the value: a secret written in the old form (a bare string) is the secret itself.
    const message = issue.path.length === 1 && issue.code === "invalid_type" ? "must name the authorization server that issued the secret, beside it" : issue.path.length ? issue.message : "must be an object";
    throw usage(`${located.where} ${located.value}${where}: ${message}`, { hint: CLIENT_SECRETS_FORM });
  }
  return new Map(Object.entries(parsed.data).map(([id, v]) => [id, { secret: v.secret, issuer: v.issuer, tokenEndpoint: v.token_endpoint }]));
}

/**
 * Every setting, checked; every problem at once in one usage error (exit 2), each naming the flag
 * or variable it came from. `need` says which settings this command uses.
 */
export function deploymentConfig(flags: Flags, ctx: { env: Env; cwd: string }, need: { serve: boolean }): DeploymentConfig {
  const problems: string[] = [];
  const warnings: string[] = [];
  /** A problem an error describes; its hint (the fix) kept beside it. */
  const hints = new Map<string, string>();
  const fail = (error: unknown) => {
    const { message, hint } = error as SubsError;
    problems.push(message);
    if (hint) hints.set(message, hint);
  };
  const check = <T>(setting: Setting, schema: z.ZodType<T, string>, fallback: string | undefined): T | undefined => {
    const located = pick(flags, ctx.env, setting) ?? (fallback === undefined ? undefined : { value: fallback, where: `${SETTINGS[setting].flag} (default)` });
    if (!located) return undefined;
    const parsed = schema.safeParse(located.value);
    if (parsed.success) return parsed.data;
    problems.push(`${located.where} ${JSON.stringify(located.value)}: ${parsed.error.issues[0]?.message ?? "invalid"}`);
    return undefined;
  };
  const listen = check("listen", ListenSchema, DEFAULT_LISTEN);
  const publicUrl = check("publicUrl", PublicUrlSchema, undefined);
  const auditRetentionMs = need.serve ? check("auditRetention", RetentionSchema, DEFAULT_AUDIT_RETENTION) : undefined;
  const storeAt = pick(flags, ctx.env, "store");
  let postgres: PostgresTarget | undefined;
  if (storeAt && isPostgresUrl(storeAt.value)) {
    const parsed = PostgresSchema.safeParse(storeAt.value);
    if (parsed.success) postgres = parsed.data;
    // Never the value itself: it may hold the password.
    else problems.push(`${storeAt.where} ${JSON.stringify(redactPostgresUrl(storeAt.value))}: ${parsed.error.issues[0]?.message ?? "invalid"}`);
  }
  const passwordFileAt = pick(flags, ctx.env, "storePasswordFile");
  if (passwordFileAt && !(storeAt && isPostgresUrl(storeAt.value))) {
    problems.push(`${passwordFileAt.where} is the password of a Postgres store: give ${SETTINGS.store.flag} postgres://… (or $${SETTINGS.store.env}) with it`);
  }
  if (postgres && storeAt) {
    try {
      Object.assign(postgres, postgresPassword(postgres, storeAt, passwordFileAt, ctx, problems, warnings));
    } catch (error) {
      fail(error);
    }
  }
  const storeDir = path.resolve(ctx.cwd, postgres ? DEFAULT_STORE : (storeAt?.value ?? DEFAULT_STORE));
  if (need.serve && listen && !publicUrl && !isLoopbackHost(listen.host)) {
    problems.push(`--public-url is required when ${SETTINGS.listen.flag} ${listen.host}:${listen.port} is not loopback: it is the address browsers and MCP clients reach (set it or $${SETTINGS.publicUrl.env})`);
  }
  const keyFile = pick(flags, ctx.env, "keyFile");
  const keyValue = ctx.env[KEY_ENV];
  const key: KeySource | undefined = keyFile
    ? { file: path.resolve(ctx.cwd, keyFile.value), from: keyFile.where }
    : keyValue
      ? { value: keyValue, from: `$${KEY_ENV}` }
      : undefined;
  // Checked here too, with every other setting, by every command that is given one (those that
  // do not use the key included): a key file others may read is refused wherever it is named.
  if (key && "file" in key) {
    try {
      readPrivateFile({ from: key.from, shown: key.file, file: key.file, maxBytes: KEY_FILE_BYTES, ifLeaked: IF_LEAKED.key });
    } catch (error) {
      fail(error);
    }
  }
  let catalog: string[] | undefined;
  const catalogAt = pick(flags, ctx.env, "catalog");
  if (catalogAt) {
    try {
      catalog = readCatalog(catalogAt, ctx.cwd);
    } catch (error) {
      fail(error);
    }
  }
  let clientSecrets = new Map<string, ClientSecret>();
  const secretsAt = need.serve ? pick(flags, ctx.env, "clientSecrets") : undefined;
  if (secretsAt) {
    try {
      clientSecrets = readClientSecrets(secretsAt, ctx.cwd);
    } catch (error) {
      fail(error);
    }
  }
  let allowed: Allowed | undefined;
  const allowAt = pick(flags, ctx.env, "allowPrivate");
  if (allowAt) {
    try {
      allowed = parseAllowList(allowAt.value);
    } catch (error) {
      problems.push(`${allowAt.where}: ${(error as Error).message}`);
    }
  }
  allowed ??= !publicUrl || isLoopbackHost(publicUrl.hostname) ? "all" : [];
  if (problems.length) {
    const general = "`subs deployment serve --help` lists every setting and its variable";
    if (problems.length === 1) throw usage(problems[0]!, { hint: hints.get(problems[0]!) ?? general });
    const listed = problems.map((p) => (hints.has(p) ? `${p} (${hints.get(p)})` : p));
    // One line: an error's message is shown on one line, its line breaks escaped (src/run.ts).
    throw usage(`the deployment's settings have ${problems.length} problems: ${listed.map((p, i) => `(${i + 1}) ${p}`).join(" ")}`, { hint: general });
  }
  return {
    listen: listen!,
    publicUrl,
    storeDir,
    dbPath: path.join(storeDir, DB_FILE),
    postgres,
    key,
    catalog,
    clientSecrets,
    allowed,
    auditRetentionMs: auditRetentionMs ?? UNIT_MS.d * 90,
    warnings,
  };
}
