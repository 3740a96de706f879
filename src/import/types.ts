// What `subs mcp import` reads from another client's file, before any decision about it: one
// entry per server, in the client's own words reduced to what subs can use.

export const CLIENTS = ["claude", "codex", "cursor", "vscode", "gemini"] as const;
export type ClientName = (typeof CLIENTS)[number];

/** The clients' names as their makers write them. */
export const CLIENT_TITLES: Record<ClientName, string> = { claude: "Claude Code", codex: "Codex", cursor: "Cursor", vscode: "VS Code", gemini: "Gemini CLI" };

/** Project files are shared with a repository; user files are the person's own. */
export type Scope = "project" | "user";

/**
 * A header as the client sends it: a value written in the file, or one read from a variable:
 * the whole value (codex `env_http_headers`), or, with `bearer`, a bearer token (codex
 * `bearer_token_env_var`: `Authorization: Bearer <$VAR>`).
 */
export type Header = { name: string; value: string } | { name: string; fromEnv: string; bearer?: true };

/** Where a client records that a server is turned off: the setting, in its own words, and the file (absent: the server's own). */
export type TurnedOff = { setting: string; file?: string };

/**
 * A pre-registered OAuth client as the client holds it (`claude mcp add --client-id`, Codex's
 * `[mcp_servers.x.oauth]`, Gemini CLI's and Cursor's `oauth`/`auth`). The secret is a variable's
 * name, the literal (only so the run's output can scrub it: it is never written), or `stored`:
 * the client keeps it in its own credential store, which subs does not read.
 */
export type FoundOAuth = {
  clientId?: string;
  clientSecret?: { env: string } | { literal: string } | { stored: true };
  scopes?: readonly string[];
  /** The client logs in with a redirect URI of its own (a pre-registered client names it): the port it pins, if any. */
  redirect?: { port: number | undefined };
};

/** A per-server setting subs has no key for, by its name in the client's file; `headers_helper`: a command run for the headers. */
export type LeftOut = { setting: string; kind: "setting" | "headers_helper" };

export type FoundServer = { name: string } & (
  | {
      kind: "remote";
      url: string;
      transport: "http" | "sse" | undefined;
      headers: Header[];
      /** Turned off in the client (by this file, or another: see Switch). */
      disabled?: TurnedOff;
      oauth?: FoundOAuth;
      leftOut?: LeftOut[];
    }
  /** A local server: the program the client starts, as its file writes it (values unexpanded). */
  | { kind: "stdio"; command: string; args: string[]; env: Record<string, string>; cwd?: string; disabled?: TurnedOff; leftOut?: LeftOut[] }
  /** A transport subs does not speak (Claude Code's `ws`): named as the client names it. */
  | { kind: "unsupported"; transport: string }
  | { kind: "unrecognized"; why: string }
);

/** How a client file tells that a server, of this file or another of the same client, is turned off. */
export type Switch = { setting: string; off: (server: { name: string; scope: Scope; file: string }) => boolean };

/** One file a client reads, where subs looks for it. */
export type ClientFile = {
  client: ClientName;
  scope: Scope;
  /** Absolute path. */
  file: string;
  format: "json" | "toml";
  /** The servers in the parsed file. */
  servers: (parsed: unknown) => FoundServer[];
  /** What the parsed file says about servers turned off (its own, or other files' of the same client). */
  switches?: (parsed: unknown) => Switch[];
  /** Read for its switches only: its servers, if any, are not imported (a settings file). */
  switchesOnly?: true;
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
