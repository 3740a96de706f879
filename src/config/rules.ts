// The rules of substructure.toml's names, variables and urls, without zod: the schema (schema.ts)
// and the walk every run makes of a valid file (check.ts) both apply them, and commands that write
// the file check a new id or url with them before writing.
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
