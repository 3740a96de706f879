// How `subs deployment …` is configured: each setting by flag or by the environment variable of
// the same name (a container or a service unit sets variables; a person types flags). Checked
// whole at start, before the store is opened or a port bound, and every problem is reported with
// where its value came from, so a wrong unit file names its own line.
import { readFileSync, statSync } from "node:fs";
import path from "node:path";
import { z } from "zod";
import { usage } from "../errors.ts";
import { parseAllowList, type Allowed } from "../http/address-policy.ts";

/** A setting's flag and variable; the flag wins when both are given. */
export const SETTINGS = {
  listen: { flag: "--listen", env: "SUBS_DEPLOYMENT_LISTEN" },
  publicUrl: { flag: "--public-url", env: "SUBS_DEPLOYMENT_PUBLIC_URL" },
  store: { flag: "--store", env: "SUBS_DEPLOYMENT_STORE" },
  keyFile: { flag: "--key-file", env: "SUBS_DEPLOYMENT_KEY_FILE" },
  catalog: { flag: "--catalog", env: "SUBS_DEPLOYMENT_CATALOG" },
  clientSecrets: { flag: "--client-secrets", env: "SUBS_DEPLOYMENT_CLIENT_SECRETS" },
  allowPrivate: { flag: "--allow-private", env: "SUBS_DEPLOYMENT_ALLOW_PRIVATE" },
} as const;
/** The key itself, base64 (a secret manager's variable), for when no key file is given. */
export const KEY_ENV = "SUBS_DEPLOYMENT_KEY";
export const DEFAULT_LISTEN = "127.0.0.1:8080";
export const DEFAULT_STORE = "subs-deployment";
export const DB_FILE = "deployment.db";

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
};

/**
 * A confidential client's secret and the authorization server it was issued by: it is sent to that
 * server alone (its issuer, or exactly this token endpoint), never to another that a declaration
 * names with the same client_id.
 */
export type ClientSecret = { secret: string; issuer: string | undefined; tokenEndpoint: string | undefined };

const LOOPBACK = new Set(["127.0.0.1", "::1", "[::1]", "localhost"]);
export const isLoopbackHost = (host: string) => LOOPBACK.has(host.toLowerCase());

/** Where a value came from, as an operator would look for it. */
type Located = { value: string; where: string };

function pick(flags: Flags, env: Readonly<Record<string, string | undefined>>, setting: Setting): Located | undefined {
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
  /** The connection URL, password included: given to the pg client and nowhere else. */
  url: string;
  /** The same URL with the password replaced by `***`: for logs, errors and the `listening` line. */
  redacted: string;
};

/** A store value naming a Postgres database rather than a directory. */
export const isPostgresUrl = (text: string) => /^postgres(ql)?:\/\//i.test(text);

/** postgres://user:***@host:port/db: what may be shown of a connection URL. */
export function redactPostgresUrl(text: string): string {
  if (!URL.canParse(text)) return text.replace(/^(postgres(?:ql)?:\/\/[^:/@]*):[^@]*@/i, "$1:***@");
  const url = new URL(text);
  if (url.password) url.password = "***";
  for (const name of [...url.searchParams.keys()]) if (/^pass/i.test(name)) url.searchParams.set(name, "***");
  return url.href.replace("%2A%2A%2A", "***");
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
  if (!/^\/[^/]+$/.test(url.pathname)) {
    ctx.addIssue({ code: "custom", message: "names no database: postgres://USER:PASSWORD@HOST:PORT/DATABASE" });
    return z.NEVER;
  }
  if (url.port !== "" && !(Number(url.port) > 0)) {
    ctx.addIssue({ code: "custom", message: "has no valid port" });
    return z.NEVER;
  }
  return { url: text, redacted: redactPostgresUrl(text) };
});

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
 * holds secrets, as the key file does). `subs` never sends a client secret (section 3.2); the
 * deployment is where it lives, and it goes to its own server only.
 */
function readClientSecrets(located: Located, cwd: string): Map<string, ClientSecret> {
  const file = path.resolve(cwd, located.value);
  let text: string;
  let mode: number;
  try {
    mode = statSync(file).mode;
    text = readFileSync(file, "utf8");
  } catch (error) {
    throw usage(`${located.where} ${located.value}: cannot read it (${(error as NodeJS.ErrnoException).code ?? String(error)})`);
  }
  if ((mode & 0o077) !== 0) throw usage(`${located.where} ${located.value}: others may read it`, { hint: `chmod 600 ${located.value}` });
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
export function deploymentConfig(flags: Flags, ctx: { env: Readonly<Record<string, string | undefined>>; cwd: string }, need: { serve: boolean }): DeploymentConfig {
  const problems: string[] = [];
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
  const storeAt = pick(flags, ctx.env, "store");
  let postgres: PostgresTarget | undefined;
  if (storeAt && isPostgresUrl(storeAt.value)) {
    const parsed = PostgresSchema.safeParse(storeAt.value);
    if (parsed.success) postgres = parsed.data;
    // Never the value itself: it may hold the password.
    else problems.push(`${storeAt.where} ${JSON.stringify(redactPostgresUrl(storeAt.value))}: ${parsed.error.issues[0]?.message ?? "invalid"}`);
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
  let catalog: string[] | undefined;
  const catalogAt = pick(flags, ctx.env, "catalog");
  if (catalogAt) {
    try {
      catalog = readCatalog(catalogAt, ctx.cwd);
    } catch (error) {
      problems.push((error as Error).message);
    }
  }
  let clientSecrets = new Map<string, ClientSecret>();
  const secretsAt = need.serve ? pick(flags, ctx.env, "clientSecrets") : undefined;
  if (secretsAt) {
    try {
      clientSecrets = readClientSecrets(secretsAt, ctx.cwd);
    } catch (error) {
      problems.push((error as Error).message);
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
    throw usage(problems.length === 1 ? problems[0]! : `the deployment's settings have ${problems.length} problems:\n  ${problems.join("\n  ")}`, {
      hint: "`subs deployment serve --help` lists every setting and its variable",
    });
  }
  return { listen: listen!, publicUrl, storeDir, dbPath: path.join(storeDir, DB_FILE), postgres, key, catalog, clientSecrets, allowed };
}
