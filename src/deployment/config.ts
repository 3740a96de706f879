// How `subs deployment …` is configured: each setting by flag or by the environment variable of
// the same name (a container or a service unit sets variables; a person types flags). Checked
// whole at start, before the store is opened or a port bound, and every problem is reported with
// where its value came from, so a wrong unit file names its own line.
import { readFileSync } from "node:fs";
import path from "node:path";
import { z } from "zod";
import { usage, type SubsError } from "../errors.ts";
import { IF_LEAKED, KEY_FILE_BYTES, readPrivateFile } from "./private-file.ts";

/** A setting's flag and variable; the flag wins when both are given. */
export const SETTINGS = {
  listen: { flag: "--listen", env: "SUBS_DEPLOYMENT_LISTEN" },
  publicUrl: { flag: "--public-url", env: "SUBS_DEPLOYMENT_PUBLIC_URL" },
  store: { flag: "--store", env: "SUBS_DEPLOYMENT_STORE" },
  keyFile: { flag: "--key-file", env: "SUBS_DEPLOYMENT_KEY_FILE" },
  catalog: { flag: "--catalog", env: "SUBS_DEPLOYMENT_CATALOG" },
  clientSecrets: { flag: "--client-secrets", env: "SUBS_DEPLOYMENT_CLIENT_SECRETS" },
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
  clientSecrets: ReadonlyMap<string, string>;
};

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

const ClientSecretsSchema = z.record(z.string().min(1), z.string().min(1, "an empty secret"));

/**
 * The operator's secrets of confidential pre-registered clients: a JSON object from client_id to
 * secret, in a file only its owner may read (it holds secrets, as the key file does: the same
 * rule, private-file.ts). `subs` never sends a client secret (section 3.2); the deployment is
 * where it lives.
 */
function readClientSecrets(located: Located, cwd: string): Map<string, string> {
  const file = path.resolve(cwd, located.value);
  const text = readPrivateFile({ from: located.where, shown: located.value, file, maxBytes: 1024 * 1024, ifLeaked: IF_LEAKED.clientSecrets });
  if (text === undefined) throw usage(`${located.where} ${located.value}: cannot read it (ENOENT)`);
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch {
    throw usage(`${located.where} ${located.value}: not JSON`, { hint: '{"<client_id>": "<client secret>", …}' });
  }
  const parsed = ClientSecretsSchema.safeParse(json);
  if (!parsed.success) {
    const issue = parsed.error.issues[0]!;
    throw usage(`${located.where} ${located.value}${issue.path.length ? ` (${JSON.stringify(String(issue.path[0]))})` : ""}: ${issue.path.length ? issue.message : "must be an object"}`, {
      hint: '{"<client_id>": "<client secret>", …}',
    });
  }
  return new Map(Object.entries(parsed.data));
}

/**
 * Every setting, checked; every problem at once in one usage error (exit 2), each naming the flag
 * or variable it came from. `need` says which settings this command uses.
 */
export function deploymentConfig(flags: Flags, ctx: { env: Readonly<Record<string, string | undefined>>; cwd: string }, need: { serve: boolean }): DeploymentConfig {
  const problems: string[] = [];
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
  let clientSecrets = new Map<string, string>();
  const secretsAt = need.serve ? pick(flags, ctx.env, "clientSecrets") : undefined;
  if (secretsAt) {
    try {
      clientSecrets = readClientSecrets(secretsAt, ctx.cwd);
    } catch (error) {
      fail(error);
    }
  }
  if (problems.length) {
    const general = "`subs deployment serve --help` lists every setting and its variable";
    if (problems.length === 1) throw usage(problems[0]!, { hint: hints.get(problems[0]!) ?? general });
    const listed = problems.map((p) => (hints.has(p) ? `${p} (${hints.get(p)})` : p));
    throw usage(`the deployment's settings have ${problems.length} problems:\n  ${listed.join("\n  ")}`, { hint: general });
  }
  return { listen: listen!, publicUrl, storeDir, dbPath: path.join(storeDir, DB_FILE), postgres, key, catalog, clientSecrets };
}
