// `subs mcp add <id> <url>` and `subs mcp add <id> -- <command> [args...]`: declares a connection
// by appending its section to the file, every other byte kept; checked as every command checks the
// file, then written atomically. The second form is how Claude Code's and Codex's `mcp add` take a
// local server, so a person moving theirs types what they know.
import { appendConnections, editConfig, type NewConnection } from "../../../config/edit.ts";
import { ENV_NAME_PATTERN, idProblem, newUrlProblem } from "../../../config/schema.ts";
import { envNameFor, HEADER_NAME_PATTERN, headerVariables, literalSecretProblem, localVariables, reservedHeaderProblem, templateProblem } from "../../../config/templates.ts";
import type { Context } from "../../../context.ts";
import { refused, usage } from "../../../errors.ts";
import { stderrReporter } from "../../../output/reporter.ts";
import type { Reporter } from "../../../report.ts";
import { shellWord } from "../../../output/shell-word.ts";
import { MARK, styleFor } from "../../../output/style.ts";

export type McpAddOptions = {
  id: string;
  /** A url, or a local server's command and arguments (given after `--`). */
  target: readonly string[];
  config?: string;
  tokenEnv?: string;
  clientId?: string;
  clientSecretEnv?: string;
  scopes?: readonly string[];
  /** `--header "Name: value"`, as given. */
  header?: readonly string[];
  /** `--env NAME=value`, as given. */
  env?: readonly string[];
  cwd?: string;
};

export async function mcpAddCommand(ctx: Context, options: McpAddOptions): Promise<void> {
  const connection = newConnection(options);
  const added = await addConnection(ctx, connection, options.config, stderrReporter(ctx));
  const style = styleFor(ctx.stderrColor);
  ctx.stderr.write(`${style.green(MARK.success)} Added [mcp.${connection.id}] to ${added.displayPath}.\n`);
  const configArg = options.config !== undefined ? ` --config ${shellWord(options.config)}` : "";
  const tools = `\`subs mcp tools ${connection.id}${configArg}\``;
  const login = `\`subs mcp login ${connection.id}${configArg}\``;
  // With [remote] the deployment holds the headers' values: the login hands them over.
  const reads = connection.local ? localVariables(connection.local) : added.remote ? [] : headerVariables(connection.headers ?? {});
  const exports = [...(connection.tokenEnv !== undefined ? [connection.tokenEnv] : []), ...reads].filter((name) => ctx.env[name] === undefined);
  const steps = [
    ...(exports.length > 0 ? [`export ${exports.join(", ")}`] : []),
    connection.local || connection.tokenEnv !== undefined || (!added.remote && connection.headers !== undefined) ? tools : login,
  ];
  ctx.stderr.write(`Next: ${steps.join(", then ")}.\n`);
}

/** The connection the flags declare; a flag that does not fit its kind, or a secret written as a value, is a usage error. */
export function newConnection(o: McpAddOptions): NewConnection {
  const [first, ...rest] = o.target;
  if (first === undefined) throw usage("give the MCP server's url, or after `--` the command that runs it", { hint: "subs mcp add fs -- npx -y @modelcontextprotocol/server-filesystem ." });
  const isUrl = /^[a-z][a-z0-9+.-]*:\/\//i.test(first);
  if (isUrl && rest.length > 0) throw usage("a url takes no arguments", { hint: "for a local server, give its command after `--`: subs mcp add <id> -- <command> [args...]" });
  const oauth = { ...(o.clientId !== undefined ? { clientId: o.clientId } : {}), ...(o.clientSecretEnv !== undefined ? { clientSecretEnv: o.clientSecretEnv } : {}), ...(o.scopes ? { scopes: o.scopes } : {}) };
  if (isUrl) {
    for (const [flag, given] of [["--env", o.env !== undefined], ["--cwd", o.cwd !== undefined]] as const) {
      if (given) throw usage(`${flag} is for a local server; ${o.id} is a url`, { hint: "a remote server's credential is --token-env, OAuth, or --header" });
    }
    const headers = o.header ? headersOf(o.header) : undefined;
    return { id: o.id, url: first, ...(o.tokenEnv !== undefined ? { tokenEnv: o.tokenEnv } : {}), ...oauth, ...(headers ? { headers } : {}) };
  }
  for (const [flag, given] of [
    ["--token-env", o.tokenEnv !== undefined],
    ["--client-id", o.clientId !== undefined],
    ["--client-secret-env", o.clientSecretEnv !== undefined],
    ["--scopes", o.scopes !== undefined],
    ["--header", o.header !== undefined],
  ] as const) {
    if (given) throw usage(`${flag} is for a server reached by url; ${o.id} is a local server`, { hint: "give a local server its variables with --env NAME=value (a secret as --env 'NAME=${NAME}')" });
  }
  return { id: o.id, local: { command: first, args: rest, env: o.env ? envOf(o.env) : {}, ...(o.cwd !== undefined ? { cwd: o.cwd } : {}) } };
}

/** `Name: value` each; a value is never echoed (it may be the key itself). */
function headersOf(given: readonly string[]): Record<string, string> {
  const headers: Record<string, string> = {};
  for (const text of given) {
    const colon = text.indexOf(":");
    const name = colon < 0 ? "" : text.slice(0, colon).trim();
    if (!HEADER_NAME_PATTERN.test(name)) throw usage('--header takes "Name: value"', { hint: `e.g. --header 'X-API-Key: \${EXA_API_KEY}'` });
    const value = text.slice(colon + 1).trim();
    const reserved = reservedHeaderProblem(name);
    if (reserved) throw usage(`--header ${name}: ${reserved.message}`, { hint: reserved.hint });
    if (Object.keys(headers).some((k) => k.toLowerCase() === name.toLowerCase())) throw usage(`--header ${name} is given twice`);
    checkValue(`--header ${name}`, name, value, `--header '${name}: \${${envNameFor(name)}}'`);
    headers[name] = value;
  }
  return headers;
}

/** `NAME=value` each. */
function envOf(given: readonly string[]): Record<string, string> {
  const env: Record<string, string> = {};
  for (const text of given) {
    const equals = text.indexOf("=");
    const name = equals < 0 ? text : text.slice(0, equals);
    if (!ENV_NAME_PATTERN.test(name) || equals < 0) throw usage("--env takes NAME=value", { hint: `e.g. --env LOG_LEVEL=info, or a secret as --env 'API_TOKEN=\${API_TOKEN}'` });
    if (Object.hasOwn(env, name)) throw usage(`--env ${name} is given twice`);
    const value = text.slice(equals + 1);
    checkValue(`--env ${name}`, name, value, `--env '${name}=\${${name}}'`);
    env[name] = value;
  }
  return env;
}

/** The file's rules for a templated value (docs/file.md), said of the flag; a literal secret is refused unquoted. */
function checkValue(flag: string, name: string, value: string, template: string): void {
  const problem = templateProblem(value);
  if (problem) throw usage(`${flag} ${problem}`);
  if (literalSecretProblem(name, value)) {
    throw usage(`${flag} would write a secret in the file; nothing was written`, { hint: `name the variable that holds it: ${template}, and export it` });
  }
}

/**
 * Appends the section of `c` to the file, holding its lock from the read to the write (another
 * edit at the same time waits, src/config/lock.ts); a mistake throws before anything is written.
 */
export async function addConnection(
  ctx: Pick<Context, "env" | "cwd" | "signal">,
  c: NewConnection,
  configPath: string | undefined,
  reporter?: Pick<Reporter, "info">,
): Promise<{ displayPath: string; remote: boolean }> {
  const badId = idProblem(c.id);
  if (badId) throw usage(badId);
  if (c.url !== undefined) {
    // The url is never echoed: it may carry a secret in its query (src/config/schema.ts).
    const problem = newUrlProblem(c.url);
    if (problem) throw usage(`the url of ${c.id} ${problem}`);
  }
  for (const [flag, name] of [["--token-env", c.tokenEnv], ["--client-secret-env", c.clientSecretEnv]] as const) {
    if (name !== undefined && !ENV_NAME_PATTERN.test(name)) {
      throw usage(`${flag} takes the name of an environment variable (letters, digits and '_'), not its value`, { hint: `e.g. ${flag} MY_TOKEN` });
    }
  }
  if (c.tokenEnv !== undefined && (c.clientId !== undefined || c.clientSecretEnv !== undefined || (c.scopes?.length ?? 0) > 0)) {
    throw usage("--token-env declares a static token; --client-id, --client-secret-env and --scopes are for OAuth", { hint: "give one or the other" });
  }
  return editConfig(ctx, configPath, reporter, ({ text, config }) => {
    if (config.connections.some((existing) => existing.id === c.id)) {
      throw refused(`\`${c.id}\` is already declared in ${config.displayPath}; nothing was written`, {
        hint: `edit its section, or choose another id (one server under two ids connects two accounts)`,
        code: "already_declared",
      });
    }
    // As `subs apply` would refuse it (src/config/remote-rules.ts): said now, before it is written.
    if (c.local && config.remote) {
      throw refused(`a local server runs on the machine that starts it; the deployment in [remote] of ${config.displayPath} cannot run it; nothing was written`, {
        hint: "declare the server's url instead, or keep this connection in a file without [remote]",
        code: "local_only_auth",
      });
    }
    appendConnections(config, text, [c], { cwd: ctx.cwd, env: ctx.env }).write();
    return { displayPath: config.displayPath, remote: config.remote !== undefined };
  });
}
