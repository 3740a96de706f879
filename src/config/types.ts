import type { KeyPath, Position } from "./positions.ts";
import type { McpToolsFilter } from "./schema.ts";

export type { McpToolsFilter };

export type OAuthSettings = {
  clientId?: string;
  clientSecretEnv?: string;
  clientMetadataUrl?: string;
  scopes?: string[];
};

export type ConnectionConfig = {
  id: string;
  url: string;
  prefixTools: boolean;
  /** Static credential read from $tokenEnv at call time (local only). */
  auth?: { tokenEnv: string };
  oauth?: OAuthSettings;
};

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
