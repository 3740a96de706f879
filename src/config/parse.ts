// The file as every run reads it: TOML parsed, every rule checked by one walk (check.ts), the
// Config built, all without zod. Only a file that walk does not accept needs load.ts, which checks
// it in full with zod's schema and says what is wrong; readConfig (read-config.ts) loads that
// module then, so a valid file costs a run nothing of zod (about 1.5 ms of `subs mcp list`,
// docs/speed.md).
import path from "node:path";
import { parse, TomlError } from "smol-toml";
import { ConfigError, type Diagnostic } from "../errors.ts";
import { indexPositions, type KeyPath, type PositionIndex } from "./positions.ts";
import type { FileShape } from "./schema.ts";
import type { AgentConfig, Config, ConnectionConfig, RemoteConnection } from "./types.ts";

/** How deep tables and arrays may nest: the deepest real path, [agent.x.mcp[0].tools.include[0]], has 6. */
export const MAX_DEPTH = 64;

export type LoadOptions = {
  /** --config */
  configPath?: string | undefined;
  env: Readonly<Record<string, string | undefined>>;
  cwd: string;
};

/** Where a file is, as parseConfig takes it: its absolute path and the working directory. */
export type Where = { path: string; cwd: string };

/** The config file's path as messages show it: relative to the working directory when inside it and shorter. */
export function displayPathOf(file: string, cwd: string): string {
  const relative = path.relative(cwd, file);
  return relative && !relative.startsWith("..") && relative.length < file.length ? relative : file;
}

/** A parsed file, before and after its check. */
export type Parsed = {
  raw: unknown;
  displayPath: string;
  /** The absolute directory of the file: `db` must name a file inside it. */
  dir: string;
  /** Where a key was written (the positions are indexed on first use: only errors need them). */
  locate: (keyPath: KeyPath) => { line: number; col: number };
  diagnostic: (line: number, col: number, message: string, hint?: string) => Diagnostic;
};

/** `source` as TOML; a syntax error is a ConfigError at its line and column. */
export function parseToml(source: string, where: Where): Parsed {
  const displayPath = displayPathOf(where.path, where.cwd);
  const diagnostic = (line: number, col: number, message: string, hint?: string): Diagnostic =>
    hint === undefined ? { file: displayPath, line, col, message } : { file: displayPath, line, col, message, hint };

  let raw: unknown;
  try {
    // smol-toml recurses into arrays and inline tables; the bound keeps that (and every walk of the
    // result after it) far from the stack's limit (10,000 levels overflowed it).
    raw = parse(source, { maxDepth: MAX_DEPTH });
  } catch (error) {
    if (error instanceof TomlError) {
      const first = (error.message.split("\n")[0] ?? "").replace(/^Invalid TOML document:\s*/, "");
      // smol-toml meets the line break of a string left open as a control character in it.
      const lineEnd = /control characters are not allowed in strings/.test(first) && /^\r?\n/.test(source.split("\n")[error.line - 1]?.slice(error.column - 1) + "\n");
      if (lineEnd) {
        throw new ConfigError([diagnostic(error.line, error.column, "invalid TOML: this string is not closed before the end of the line", 'close it with the quote it opens with (a string of several lines opens and closes with """)')]);
      }
      const reason = /excessively nested/.test(first) ? `nested deeper than ${MAX_DEPTH} levels` : first;
      throw new ConfigError([diagnostic(error.line, error.column, `invalid TOML: ${reason}`)]);
    }
    throw error;
  }
  let positions: PositionIndex | undefined;
  const locate = (keyPath: KeyPath) => (positions ??= indexPositions(source)).locate(keyPath);
  return { raw, displayPath, dir: path.dirname(path.resolve(where.path)), locate, diagnostic };
}

/**
 * The Config of a checked file: `data` is what FileSchema outputs for it. One object per connection,
 * its keys set in one order, and no spreads: every run builds one per declared connection.
 */
export function configOf(data: FileShape, parsed: Parsed, where: Where): Config {
  const connections: ConnectionConfig[] = [];
  for (const id of Object.keys(data.mcp)) {
    const c = data.mcp[id]!;
    if (c.command !== undefined) {
      const cwd = path.resolve(path.dirname(where.path), c.cwd ?? ".");
      connections.push({ id, prefixTools: c.prefix_tools, process: { command: c.command, args: c.args ?? [], env: c.env ?? {}, cwd } });
      continue;
    }
    const connection: RemoteConnection = { id, url: c.url!, prefixTools: c.prefix_tools };
    if (c.headers) connection.headers = c.headers;
    if (c.credential === "personal") connection.credential = "personal";
    if (c.auth) connection.auth = { tokenEnv: c.auth.token_env };
    if (c.oauth) {
      const oauth: NonNullable<RemoteConnection["oauth"]> = {};
      if (c.oauth.client_id !== undefined) oauth.clientId = c.oauth.client_id;
      if (c.oauth.client_secret_env !== undefined) oauth.clientSecretEnv = c.oauth.client_secret_env;
      if (c.oauth.client_metadata_url !== undefined) oauth.clientMetadataUrl = c.oauth.client_metadata_url;
      if (c.oauth.scopes !== undefined) oauth.scopes = c.oauth.scopes;
      connection.oauth = oauth;
    }
    connections.push(connection);
  }
  const agents: AgentConfig[] = [];
  for (const name of Object.keys(data.agent)) {
    const a = data.agent[name]!;
    agents.push({ name, mcp: a.mcp.map((entry) => (entry.tools ? { id: entry.id, tools: entry.tools } : { id: entry.id })), tools: a.tools, agents: a.agents });
  }
  const dbPath = path.resolve(path.dirname(where.path), data.db);
  const { displayPath, locate } = parsed;
  if (!data.remote) return { path: where.path, displayPath, dbPath, connections, agents, locate };
  return { path: where.path, displayPath, dbPath, remote: { url: data.remote.url, tokenEnv: data.remote.token_env }, connections, agents, locate };
}
