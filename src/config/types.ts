import type { KeyPath, Position } from "./positions.ts";
import type { McpToolsFilter } from "./schema.ts";

export type { McpToolsFilter };

export type OAuthSettings = {
  clientId?: string;
  clientSecretEnv?: string;
  clientMetadataUrl?: string;
  scopes?: string[];
};

/**
 * A local (stdio) server: a program subs starts on this machine and speaks MCP with over its stdin
 * and stdout (MCP "Transports: stdio"). `args` and `env` values may hold `${NAME}` templates
 * (src/config/templates.ts), read from this machine's environment when it starts.
 */
export type LocalProcess = {
  command: string;
  args: string[];
  /** Its own variables, as written; it gets these and a few of the machine's (src/mcp/local-server.ts), no other. */
  env: Record<string, string>;
  /** Absolute: `cwd` of the file resolved against the file's directory, else that directory. */
  cwd: string;
};

type ConnectionBase = {
  id: string;
  prefixTools: boolean;
};

/** A server reached over HTTP at `url` (Streamable HTTP, or HTTP+SSE for 2024-11-05 servers). */
export type RemoteConnection = ConnectionBase & {
  url: string;
  /** Static credential read from $tokenEnv at call time (local only). */
  auth?: { tokenEnv: string };
  oauth?: OAuthSettings;
  /** Headers sent with every MCP request to `url`, as written: literals and `${NAME}` templates (templates.ts). */
  headers?: Record<string, string>;
  /**
   * `personal`: a deployment holds one credential per person, and each person's agents call with
   * theirs (docs/file.md); absent, one for the connection (`shared`). Locally there is one person.
   */
  credential?: "personal";
  process?: undefined;
};

/** A server subs starts on this machine (`command` in the file); local only, never under [remote]. */
export type LocalConnection = ConnectionBase & {
  process: LocalProcess;
  url?: undefined;
  auth?: undefined;
  oauth?: undefined;
  headers?: undefined;
  credential?: undefined;
};

export type ConnectionConfig = RemoteConnection | LocalConnection;

export const isLocalServer = (connection: ConnectionConfig): connection is LocalConnection => connection.process !== undefined;

/** Where `connection`'s server is, as messages name it: its url's origin, or the program subs starts. */
export function whereIs(connection: ConnectionConfig): string {
  return connection.process ? `the local server (\`${connection.process.command}\`)` : new URL(connection.url).origin;
}

/**
 * The connections a deployment can hold: all but local servers, which `subs apply` and `subs mcp
 * login` refuse under [remote] (remote-rules.ts) and `subs mcp list` warns of.
 */
export const remoteConnectionsOf = (config: Pick<Config, "connections">): RemoteConnection[] => config.connections.filter((c): c is RemoteConnection => !isLocalServer(c));

export type AgentMcpEntry = { id: string; tools?: McpToolsFilter };

export type AgentConfig = {
  name: string;
  mcp: AgentMcpEntry[];
  /** Tools the worker declares itself; they keep their names. */
  tools: string[];
  /** Sub-agent names; they keep their names. */
  agents: string[];
};

export type RemoteConfig = { url: string; tokenEnv: string };

export type Config = {
  /** Absolute path of substructure.toml. */
  path: string;
  /** The path as shown in messages (relative to the working directory when shorter). */
  displayPath: string;
  /** Absolute path of the local db (`db`, relative to the file's directory). */
  dbPath: string;
  remote?: RemoteConfig;
  /** In file order. */
  connections: ConnectionConfig[];
  agents: AgentConfig[];
  /** Where a key was written, for errors found after loading (e.g. refusals under [remote]). */
  locate: (path: KeyPath) => Position;
};
