// Where a run may send the secrets of its environment (SECURITY.md, "Where environment secrets may
// go"). The file says where the deployment token ([remote].url) and each static token (a
// connection's url with `auth.token_env`) go, and the file is whatever a pull request made it: CI
// running `subs apply` or `subs mcp tools` on a pull request would send its secret to the pull
// request's host. The job, not the file, can pin the destinations:
// - SUBS_ALLOWED_REMOTE: the deployment url(s) the deployment token may go to (compared by origin:
//   scheme, host and port; the token never leaves the deployment's origin, src/remote/client.ts);
// - SUBS_ALLOWED_TOKEN_HOSTS: the hosts a static token may go to (a host, or host:port).
// Set, they are checked when the file is loaded (every command refuses a file that disagrees,
// before it sends anything) and again where each secret is attached. Set but empty allows nothing.
import { ConfigError, usage, type Diagnostic } from "../errors.ts";
import type { Config, ConnectionConfig, RemoteConfig } from "./types.ts";

export const ALLOWED_REMOTE = "SUBS_ALLOWED_REMOTE";
export const ALLOWED_TOKEN_HOSTS = "SUBS_ALLOWED_TOKEN_HOSTS";

type Env = Readonly<Record<string, string | undefined>>;

const entries = (value: string) => value.split(/[\s,]+/).filter(Boolean);
const shown = (list: readonly string[]) => (list.length > 0 ? list.join(", ") : "nothing: it is empty");

/** The origins SUBS_ALLOWED_REMOTE allows; undefined when it is not set. */
function allowedRemoteOrigins(env: Env): string[] | undefined {
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
    return url.origin;
  });
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

/** Why the deployment token may not go to `remote`, or undefined. */
export function remoteNotAllowed(env: Env, remote: RemoteConfig): { message: string; hint: string } | undefined {
  const allowed = allowedRemoteOrigins(env);
  if (allowed === undefined) return undefined;
  const origin = new URL(remote.url).origin;
  if (allowed.includes(origin)) return undefined;
  return {
    message: `[remote].url is ${origin}, which $${ALLOWED_REMOTE} does not allow (${shown(allowed)}); refusing to send $${remote.tokenEnv} there`,
    hint: `${ALLOWED_REMOTE} pins where the deployment token may go; if the file's url is meant, change the variable where the job is set up`,
  };
}

/** Why `connection`'s static token may not go to its url, or undefined (OAuth connections: always). */
export function tokenHostNotAllowed(env: Env, connection: ConnectionConfig): { message: string; hint: string } | undefined {
  if (!connection.auth) return undefined;
  const allowed = allowedTokenHosts(env);
  if (allowed === undefined) return undefined;
  const url = new URL(connection.url);
  if (hostAllowed(url, allowed)) return undefined;
  return {
    message: `[mcp.${connection.id}] would send $${connection.auth.tokenEnv} to ${url.host}, which $${ALLOWED_TOKEN_HOSTS} does not list (${shown(allowed)}); refusing`,
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
