// What `subs agent connect` / `subs mcp connect` writes into each MCP client's configuration, in that
// client's own documented format, so that the server starts wherever the client starts it (another
// working directory, a GUI's PATH) and every variable the served connections read reaches subs.
import { existsSync } from "node:fs";
import path from "node:path";
import { possessive } from "../text/possessive.ts";
import {
  CLAUDE_DESKTOP_FILE,
  claudeDesktopDirs,
  claudeProjectFile,
  claudeProjectKey,
  claudeUserFile,
  codexProjectFile,
  codexUserFile,
  cursorProjectFile,
  cursorUserFile,
  geminiProjectFile,
  geminiUserFile,
  vscodeProjectFile,
  vscodeUserDirs,
  type Env,
} from "../clients/where.ts";

export const CONNECT_CLIENTS = ["claude", "codex", "gemini", "cursor", "vscode", "claude-desktop"] as const;
export type ConnectClient = (typeof CONNECT_CLIENTS)[number];
export const CONNECT_SCOPES = ["local", "user", "project"] as const;
export type ConnectScope = (typeof CONNECT_SCOPES)[number];

/** What the client must start: node, subs, its arguments; and the variables subs will read. */
export type Launch = { command: string; args: string[]; variables: string[] };

/**
 * With [remote]: the agent's endpoint on the deployment (docs/deployment-server.md, "MCP clients")
 * and the variable the client reads the deployment's API token from. The entry names the
 * variable in the client's own reference syntax, so the token is never written in the file.
 */
export type Endpoint = { url: string; tokenEnv: string };

/** Where the entry goes: the file, and the keys from its top to the object holding the entries. */
export type Place = { file: string; container: string[] };

export type ClientSpec = {
  title: string;
  format: "json" | "toml";
  scopes: readonly ConnectScope[];
  /** The scope the client's own `mcp add` writes to. */
  defaultScope: ConnectScope;
  /** The file for `scope`, or why it cannot be told (no home directory, the client's directory not found). */
  place: (scope: ConnectScope, where: { env: Env; cwd: string }) => Place | { problem: string; hint: string };
  /** The entry's name in the file, from the agent's name or the connection's id. */
  entryName: (name: string) => string;
  /** The entry, in the client's format, key order as the client writes it. */
  entry: (launch: Launch) => Record<string, unknown>;
  /** The entry for a deployment's endpoint (Streamable HTTP, a header from a variable); absent: the client cannot read one from a variable. */
  remoteEntry?: (endpoint: Endpoint) => Record<string, unknown>;
  /**
   * Text the client would expand as a variable reference in a string of its entry (below, per
   * client, where it does and where that was read). Nothing subs writes may hold it but the
   * references to the variables it means to pass (`reference`): a path holding it is refused,
   * and so is a deployment url (src/connect/connect.ts).
   */
  expands?: RegExp;
  /** The client's reference to variable `name`, as subs writes it in `env` or a header; absent: the client names variables by name only. */
  reference?: (name: string) => string;
  /** A new file is made 0600, as the client makes its own (it holds the client's secrets). */
  privateFile?: true;
  /** Said after connecting: what the client needs besides the entry. */
  notes?: (scope: ConnectScope, launch: Launch) => string[];
};

/** `Bearer <reference>`: the Authorization header with the client's reference to the variable. */
const bearer = (reference: string) => ({ Authorization: `Bearer ${reference}` });

const home = (env: Env, file: string | undefined) =>
  file === undefined ? { problem: "no home directory: HOME is not set", hint: "set HOME, or use --scope project" } : undefined;

/** The first of `dirs` that exists: a client installed on this platform has made it. */
function installedDir(dirs: readonly string[], title: string): { dir: string } | { problem: string; hint: string } {
  const dir = dirs.find((d) => existsSync(d));
  if (dir !== undefined) return { dir };
  return { problem: `${possessive(title)} configuration directory was not found (looked in ${dirs.join(", ") || "no place: HOME is not set"})`, hint: `start ${title} once so it creates it, then run this again` };
}

/** `${env:NAME}`: Cursor's and VS Code's reference to a variable ("Variable substitution" in their MCP docs). */
const envReference = (name: string) => `\${env:${name}}`;
const envReferences = (variables: readonly string[]) => Object.fromEntries(variables.map((v) => [v, envReference(v)]));

const sharedFileNote = "this file is shared with the project: it holds this machine's absolute paths, so each person runs connect for their own";

export const CLIENTS: Record<ConnectClient, ClientSpec> = {
  // https://code.claude.com/docs/en/mcp ("MCP installation scopes"). A stdio server gets Claude
  // Code's whole environment, so nothing is needed for the variables; `${VAR}` in args would be
  // expanded into argv, so none is written there. What it expands: `${NAME}` and
  // `${NAME:-default}` in command, args, env, url and headers (same page, "Environment variable
  // expansion in .mcp.json"; in 2.1.332, tools/clients, the regex
  // /\$\{([A-Za-z_][A-Za-z0-9_]*(?::-[^}]*)?)\}/g); a `$NAME` without braces is left as written.
  claude: {
    title: "Claude Code",
    format: "json",
    scopes: ["local", "user", "project"],
    defaultScope: "local",
    place: (scope, { env, cwd }) => {
      if (scope === "project") return { file: claudeProjectFile(cwd), container: ["mcpServers"] };
      const file = claudeUserFile(env);
      return home(env, file) ?? { file: file!, container: scope === "user" ? ["mcpServers"] : ["projects", claudeProjectKey(cwd), "mcpServers"] };
    },
    entryName: (name) => name,
    entry: ({ command, args }) => ({ type: "stdio", command, args, env: {} }),
    // Same page, "Environment variable expansion in .mcp.json": `${VAR}` in `url` and `headers`.
    remoteEntry: ({ url, tokenEnv }) => ({ type: "http", url, headers: bearer(`\${${tokenEnv}}`) }),
    expands: /\$\{/,
    reference: (name) => `\${${name}}`,
    privateFile: true,
    notes: (scope) => (scope === "project" ? [sharedFileNote, "Claude Code asks each person to approve a project's servers on first use"] : []),
  },
  // openai/codex docs/config.md ("MCP servers"): a stdio server gets only a fixed list of
  // variables (HOME, PATH, …) plus those named in `env_vars`; values in `env` are not expanded.
  // Nothing is: `url` is a plain string (codex-rs/core/src/config/types.rs, `StreamableHttp { url:
  // String, bearer_token_env_var, … }`), and variables are named by name only.
  codex: {
    title: "Codex",
    format: "toml",
    scopes: ["user", "project"],
    defaultScope: "user",
    place: (scope, { env, cwd }) => {
      if (scope === "project") return { file: codexProjectFile(cwd), container: ["mcp_servers"] };
      const file = codexUserFile(env);
      return home(env, file) ?? { file: file!, container: ["mcp_servers"] };
    },
    entryName: (name) => name,
    entry: ({ command, args, variables }) => ({ command, args, ...(variables.length > 0 ? { env_vars: variables } : {}) }),
    // Same document, "Streamable HTTP": `bearer_token_env_var` names the variable Codex reads the bearer token from.
    remoteEntry: ({ url, tokenEnv }) => ({ url, bearer_token_env_var: tokenEnv }),
    privateFile: true,
    notes: (scope) => (scope === "project" ? [sharedFileNote, "Codex reads .codex/config.toml only in a trusted project (`trust_level = \"trusted\"` for it in ~/.codex/config.toml)"] : []),
  },
  // google-gemini/gemini-cli docs/tools/mcp-server.md. Gemini CLI drops every variable whose name
  // looks secret (TOKEN, KEY, SECRET, …) from a server's environment, but passes what the entry's
  // `env` names, `$VAR` expanded from its own. It parses `mcp_<server>_<tool>` at the first `_`,
  // so the entry's name has none. What it expands (0.61.0, tools/clients): every string value of
  // settings.json, `httpUrl` and `url` included, when it loads the file: `$NAME` (\w+), `${NAME}`
  // and `${NAME:-default}` (packages/cli/src/utils/envVarResolver.ts); then `headers` and `env`
  // again with dotenv-expand (packages/core/src/utils/envExpansion.ts; also `%NAME%` on Windows).
  // It has no escape for "$".
  gemini: {
    title: "Gemini CLI",
    format: "json",
    scopes: ["user", "project"],
    defaultScope: "project",
    place: (scope, { env, cwd }) => {
      if (scope === "project") return { file: geminiProjectFile(cwd), container: ["mcpServers"] };
      const file = geminiUserFile(env);
      return home(env, file) ?? { file: file!, container: ["mcpServers"] };
    },
    entryName: (name) => name.replace(/_/g, "-"),
    entry: ({ command, args, variables }) => ({ command, args, ...(variables.length > 0 ? { env: Object.fromEntries(variables.map((v) => [v, `$${v}`])) } : {}) }),
    // `httpUrl` is its Streamable HTTP transport; settings.json expands `$VAR` in every string value.
    remoteEntry: ({ url, tokenEnv }) => ({ httpUrl: url, headers: bearer(`$${tokenEnv}`) }),
    expands: /\$/,
    reference: (name) => `$${name}`,
    notes: (scope) => [...(scope === "project" ? [sharedFileNote] : []), "Gemini CLI starts local servers only in a trusted folder"],
  },
  // https://cursor.com/docs/context/mcp: `${env:NAME}` in `env` is read from Cursor's environment.
  // Same page: `${env:NAME}`, `${userHome}`, `${workspaceFolder}`… are filled in in command, args,
  // env, url and headers.
  cursor: {
    title: "Cursor",
    format: "json",
    scopes: ["user", "project"],
    defaultScope: "user",
    place: (scope, { env, cwd }) => {
      if (scope === "project") return { file: cursorProjectFile(cwd), container: ["mcpServers"] };
      const file = cursorUserFile(env);
      return home(env, file) ?? { file: file!, container: ["mcpServers"] };
    },
    entryName: (name) => name,
    entry: ({ command, args, variables }) => ({ command, args, ...(variables.length > 0 ? { env: envReferences(variables) } : {}) }),
    // `${env:NAME}` is also interpolated in `url` and `headers` of a remote server.
    remoteEntry: ({ url, tokenEnv }) => ({ url, headers: bearer(envReference(tokenEnv)) }),
    expands: /\$\{/,
    reference: envReference,
    notes: (scope, { variables }) => [...(scope === "project" ? [sharedFileNote] : []), ...(variables.length > 0 ? [guiEnvironmentNote("Cursor", variables)] : [])],
  },
  // https://code.visualstudio.com/docs/copilot/reference/mcp-configuration: top key `servers`,
  // `type: "stdio"`, `${env:NAME}` in `env`. `code --add-mcp` writes the user profile's mcp.json.
  // Same page: `${input:id}` (asks the person for a value) and the `${…}` variables of
  // https://code.visualstudio.com/docs/reference/variables-reference (`${env:NAME}`,
  // `${workspaceFolder}`…) are substituted in the entry's strings, url and headers included.
  vscode: {
    title: "VS Code",
    format: "json",
    scopes: ["user", "project"],
    defaultScope: "user",
    place: (scope, { env, cwd }) => {
      if (scope === "project") return { file: vscodeProjectFile(cwd), container: ["servers"] };
      const found = installedDir(vscodeUserDirs(env), "VS Code");
      return "dir" in found ? { file: path.join(found.dir, "mcp.json"), container: ["servers"] } : found;
    },
    entryName: (name) => name,
    entry: ({ command, args, variables }) => ({ type: "stdio", command, args, ...(variables.length > 0 ? { env: envReferences(variables) } : {}) }),
    // `type: "http"` with `headers`; `${env:NAME}` is substituted there as in `env`.
    remoteEntry: ({ url, tokenEnv }) => ({ type: "http", url, headers: bearer(envReference(tokenEnv)) }),
    expands: /\$\{/,
    reference: envReference,
    notes: (scope, { variables }) => [...(scope === "project" ? [sharedFileNote] : []), ...(variables.length > 0 ? [guiEnvironmentNote("VS Code", variables)] : [])],
  },
  // modelcontextprotocol.io, "Connect to local MCP servers": `mcpServers` in
  // claude_desktop_config.json, `command`, `args`, `env`. Its servers "inherit only a subset of
  // environment variables automatically, like USER, HOME, and PATH", and no reference syntax is
  // documented: a variable can reach subs only as a value written in the file, which subs never does.
  "claude-desktop": {
    title: "Claude Desktop",
    format: "json",
    scopes: ["user"],
    defaultScope: "user",
    place: (_scope, { env }) => {
      const found = installedDir(claudeDesktopDirs(env), "Claude Desktop");
      return "dir" in found ? { file: path.join(found.dir, CLAUDE_DESKTOP_FILE), container: ["mcpServers"] } : found;
    },
    entryName: (name) => name,
    entry: ({ command, args }) => ({ command, args }),
    notes: (_scope, { variables }) =>
      variables.length > 0
        ? [
            `Claude Desktop passes its servers only a few variables (HOME, PATH, USER…): ${variables.join(", ")} will not reach subs, and the connections reading ${variables.length === 1 ? "it" : "them"} will be left out; use OAuth for them (\`subs mcp login\`), or serve with --http and reach it through mcp-remote`,
          ]
        : [],
  },
};

function guiEnvironmentNote(title: string, variables: readonly string[]): string {
  return `${title} reads ${variables.join(", ")} from its own environment: start it from a shell where ${variables.length === 1 ? "it is" : "they are"} set (an app started from the desktop may not have your shell's variables)`;
}

/**
 * Whether `entry` is one subs wrote for `serves` (`agent serve <name>` or `mcp proxy <id>`),
 * known by what it runs: a node, with subs's entry script and those words first. Clients rewrite
 * their files and drop comments, so no marker could be trusted to survive.
 */
export function servedBy(entry: unknown): { words: [string, string]; name: string; remote?: true } | undefined {
  if (typeof entry !== "object" || entry === null) return undefined;
  const { command, args, url, httpUrl } = entry as { command?: unknown; args?: unknown; url?: unknown; httpUrl?: unknown };
  // A deployment's agent endpoint is known by its path (docs/deployment-server.md, "MCP clients").
  const endpoint = typeof (url ?? httpUrl) === "string" ? /\/v1\/agents\/([a-z0-9_-]+)\/mcp$/.exec(String(url ?? httpUrl)) : null;
  if (endpoint && command === undefined) return { words: ["agent", "serve"], name: endpoint[1]!, remote: true };
  if (typeof command !== "string" || !/^node(js)?(\.exe)?$/i.test(path.basename(command))) return undefined;
  if (!Array.isArray(args) || !args.every((a) => typeof a === "string")) return undefined;
  const [script, first, second, name] = args as string[];
  if (script === undefined || !/^subs(\.c?js)?$/.test(path.basename(script))) return undefined;
  if (!((first === "agent" && second === "serve") || (first === "mcp" && second === "proxy")) || name === undefined) return undefined;
  return { words: [first, second], name };
}
