// Where a run may send the secrets of its environment (SECURITY.md, "Where environment secrets may
// go"). The file says where the deployment token ([remote].url) and each static token (a
// connection's url with `auth.token_env`) go, and the file is whatever a pull request made it: CI
// running `subs apply` or `subs mcp tools` on a pull request would send its secret to the pull
// request's host. The job, not the file, can pin the destinations:
// - SUBS_ALLOWED_REMOTE: the deployment url(s) the deployment token may go to, each an origin and a
//   path under which the deployment's requests must stay (a plain origin: any path of it);
// - SUBS_ALLOWED_TOKEN_HOSTS: the hosts a static token may go to (a host, or host:port).
// Set, they are checked when the file is loaded (every command refuses a file that disagrees,
// before it sends anything) and again where each secret is attached. Set but empty allows nothing.
import { ConfigError, usage, type Diagnostic } from "../errors.ts";
import type { Config, ConnectionConfig, RemoteConfig } from "./types.ts";
import { headerVariables } from "./templates.ts";

export const ALLOWED_REMOTE = "SUBS_ALLOWED_REMOTE";
export const ALLOWED_TOKEN_HOSTS = "SUBS_ALLOWED_TOKEN_HOSTS";

type Env = Readonly<Record<string, string | undefined>>;

const entries = (value: string) => value.split(/[\s,]+/).filter(Boolean);
const shown = (list: readonly string[]) => (list.length > 0 ? list.join(", ") : "nothing: it is empty");

/** One entry of SUBS_ALLOWED_REMOTE: its origin, and the path (ending in "/") every request must stay under. */
type AllowedRemote = { origin: string; path: string; shown: string };

/** The deployments SUBS_ALLOWED_REMOTE allows; undefined when it is not set. */
function allowedRemotes(env: Env): AllowedRemote[] | undefined {
  const value = env[ALLOWED_REMOTE];
  if (value === undefined) return undefined;
  return entries(value).map((entry) => {
    let url: URL | undefined;
    try {
      url = new URL(entry);
    } catch {}
    if (!url || (url.protocol !== "https:" && url.protocol !== "http:")) {
      throw usage(`${ALLOWED_REMOTE} must list deployment urls (e.g. https://deploy.example.com), not ${JSON.stringify(entry)}`);
    }
    // The path as written, as a directory: `https://d.example/team` allows `/team/…`, not `/teams`.
    const path = url.pathname.endsWith("/") ? url.pathname : `${url.pathname}/`;
    return { origin: url.origin, path, shown: path === "/" ? url.origin : `${url.origin}${path}` };
  });
}

/**
 * The directory the deployment's requests resolve under: `[remote].url` read as a directory, as
 * src/remote/client.ts (deploymentBase) reads it, so `https://d.example/team` holds
 * `https://d.example/team/v1/mcp`. Query and fragment never reach a request, and a query cuts the
 * last segment off (`/team?x` resolves `v1/mcp` to `/v1/mcp`): what is compared is where requests
 * really go.
 */
function requestDirectory(url: string): URL {
  return new URL(".", new URL(url.endsWith("/") ? url : `${url}/`));
}

/**
 * Whether `url` (a request's, or the directory requests resolve under) is within `allowed`: the
 * same origin, and a path under the entry's. Under a path other than "/", percent-encoded dots,
 * slashes and backslashes are refused: `%2E` is `.` to a normalizing server (RFC 3986 §6.2.2.2)
 * and servers and proxies differ on decoding `%2F` and `%5C` before routing, so `..%2f` could
 * climb out of the directory the text seems to stay in.
 */
function withinAllowed(url: URL, allowed: AllowedRemote): boolean {
  if (url.origin !== allowed.origin || !url.pathname.startsWith(allowed.path)) return false;
  return allowed.path === "/" || !/%(2e|2f|5c)/i.test(url.pathname);
}

/** The hosts SUBS_ALLOWED_TOKEN_HOSTS allows, lower-case; undefined when it is not set. */
function allowedTokenHosts(env: Env): string[] | undefined {
  const value = env[ALLOWED_TOKEN_HOSTS];
  if (value === undefined) return undefined;
  return entries(value).map((entry) => {
    // A url is read as its host, so `https://api.example.com` means what it says.
    if (entry.includes("://")) {
      try {
        return new URL(entry).host.toLowerCase();
      } catch {
        throw usage(`${ALLOWED_TOKEN_HOSTS} must list hosts (e.g. api.githubcopilot.com), not ${JSON.stringify(entry)}`);
      }
    }
    return entry.toLowerCase();
  });
}

/** A host entry without a port allows any port of that host; with one, only that port. */
function hostAllowed(url: URL, allowed: readonly string[]): boolean {
  return allowed.some((entry) => {
    const hasPort = entry.startsWith("[") ? /\]:\d+$/.test(entry) : entry.includes(":");
    return hasPort ? entry === url.host.toLowerCase() : entry === url.hostname.toLowerCase();
  });
}

/**
 * Why the deployment token may not go to `remote`, or undefined. `url`: a URL under the
 * deployment that something is to be given (`subs agent connect` writes the agent's endpoint into a
 * client's file), checked as a whole; unset, the directory every request of the protocol resolves
 * under.
 */
export function remoteNotAllowed(env: Env, remote: RemoteConfig, url?: URL): { message: string; hint: string } | undefined {
  const allowed = allowedRemotes(env);
  if (allowed === undefined) return undefined;
  const target = url ?? requestDirectory(remote.url);
  if (allowed.some((entry) => withinAllowed(target, entry))) return undefined;
  return {
    message: `${url ? `[remote].url gives the endpoint ${url.href}` : `[remote].url is ${remote.url}`}, which $${ALLOWED_REMOTE} does not allow (${shown(allowed.map((a) => a.shown))}); refusing to send $${remote.tokenEnv} there`,
    hint: `${ALLOWED_REMOTE} pins where the deployment token may go (an origin, and a path its requests stay under); if the file's url is meant, change the variable where the job is set up`,
  };
}

/** Why `connection`'s static token may not go to its url, or undefined (OAuth connections: always). */
export function tokenHostNotAllowed(env: Env, connection: ConnectionConfig): { message: string; hint: string } | undefined {
  if (connection.url === undefined) return undefined;
  // What it would send of this machine's environment: the static token's variable, and those its headers' templates read.
  const sent = [...(connection.auth ? [connection.auth.tokenEnv] : []), ...headerVariables(connection.headers ?? {})];
  if (sent.length === 0) return undefined;
  const allowed = allowedTokenHosts(env);
  if (allowed === undefined) return undefined;
  const url = new URL(connection.url);
  if (hostAllowed(url, allowed)) return undefined;
  return {
    message: `[mcp.${connection.id}] would send ${[...new Set(sent)].map((name) => `$${name}`).join(", ")} to ${url.host}, which $${ALLOWED_TOKEN_HOSTS} does not list (${shown(allowed)}); refusing`,
    hint: `${ALLOWED_TOKEN_HOSTS} pins where static tokens may go; if the file's url is meant, add its host to the variable where the job is set up`,
  };
}

/**
 * Every destination in the file the pins refuse, as file:line:col refusals (exit 2). Called when
 * the file is loaded, so nothing is sent by any command while the file and the job disagree.
 */
export function assertSecretDestinations(config: Config, env: Env): void {
  if (env[ALLOWED_REMOTE] === undefined && env[ALLOWED_TOKEN_HOSTS] === undefined) return;
  const diagnostics: Diagnostic[] = [];
  let code = "token_host_not_allowed";
  const at = (keyPath: string[], problem: { message: string; hint: string }) => {
    const { line, col } = config.locate(keyPath);
    diagnostics.push({ file: config.displayPath, line, col, ...problem });
  };
  const remote = config.remote ? remoteNotAllowed(env, config.remote) : undefined;
  if (remote) {
    at(["remote", "url"], remote);
    code = "remote_not_allowed";
  }
  for (const connection of config.connections) {
    const problem = tokenHostNotAllowed(env, connection);
    if (problem) at(["mcp", connection.id, "url"], problem);
  }
  if (diagnostics.length > 0) {
    diagnostics.sort((a, b) => a.line - b.line || a.col - b.col);
    throw new ConfigError(diagnostics, { kind: "refused", code });
  }
}
