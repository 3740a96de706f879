// What `subs mcp import` reads from another client's file, before any decision about it: one
// entry per server, in the client's own words reduced to what subs can use (issue 15).

export const CLIENTS = ["claude", "codex", "cursor", "vscode", "gemini"] as const;
export type ClientName = (typeof CLIENTS)[number];

/** Project files are shared with a repository; user files are the person's own. */
export type Scope = "project" | "user";

/**
 * A header as the client sends it: a value written in the file, or one read from a variable:
 * the whole value (codex `env_http_headers`), or, with `bearer`, a bearer token (codex
 * `bearer_token_env_var`: `Authorization: Bearer <$VAR>`).
 */
export type Header = { name: string; value: string } | { name: string; fromEnv: string; bearer?: true };

export type FoundServer = { name: string } & (
  | { kind: "remote"; url: string; transport: "http" | "sse" | undefined; headers: Header[]; disabled: boolean }
  | { kind: "stdio" }
  | { kind: "unrecognized"; why: string }
);

/** One file a client reads, where subs looks for it. */
export type ClientFile = {
  client: ClientName;
  scope: Scope;
  /** Absolute path. */
  file: string;
  format: "json" | "toml";
  /** The servers in the parsed file. */
  servers: (parsed: unknown) => FoundServer[];
};

/** Where the files are looked for: the project's directories (the config file's, the working one) and the home directory. */
export type Places = {
  projectDirs: readonly string[];
  home: string | undefined;
  env: Readonly<Record<string, string | undefined>>;
};

/** The most servers one client file may declare (docs/commands.md); more is refused, not cut. */
export const MAX_SERVERS_PER_FILE = 10_000;

/** Thrown by a client's reader for a file declaring more than MAX_SERVERS_PER_FILE servers. */
export class TooManyServers extends Error {
  constructor() {
    super(`declares more than ${MAX_SERVERS_PER_FILE.toLocaleString("en-US")} MCP servers, the most subs reads from one file`);
  }
}
