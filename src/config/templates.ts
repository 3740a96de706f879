// `${NAME}` templates in the values of a local server's `args` and `env` (and, for remote servers,
// header values): read from the environment of the machine that opens the connection, when it
// opens it, as Claude Code, Codex and Gemini CLI read theirs. A value is literal text and
// templates; `$` not followed by `{` is literal. The file never holds a secret, so a variable
// whose name says it holds one (SECRET_NAME) must be given as a template.
import { ENV_NAME_PATTERN } from "./rules.ts";

const TEMPLATE = /\$\{([^}]*)\}/g;

/** Why `value` is not a valid template string, or undefined. */
export function templateProblem(value: string): string | undefined {
  for (const match of value.matchAll(TEMPLATE)) {
    if (!ENV_NAME_PATTERN.test(match[1]!)) return `has \`\${${match[1]}}\`, which names no environment variable (letters, digits and '_', not starting with a digit)`;
  }
  // An opening `${` left without its `}`.
  if (value.replace(TEMPLATE, "").includes("${")) return "has a `${` that is not closed with `}`";
  return undefined;
}

/** The variables `value` names, in order, each once. */
export function templateNames(value: string): string[] {
  const names = new Set<string>();
  for (const match of value.matchAll(TEMPLATE)) names.add(match[1]!);
  return [...names];
}

/** Whether `value` holds at least one template. */
export const hasTemplate = (value: string): boolean => templateNames(value).length > 0;

/**
 * `value` with each template replaced by its variable's value; `missing` gets the names of unset
 * variables (an empty value counts as set). The caller decides what an unset one means.
 */
export function expandTemplates(value: string, env: Readonly<Record<string, string | undefined>>, missing: Set<string>): string {
  return value.replace(TEMPLATE, (_, name: string) => {
    // Own keys only: `${constructor}` names a variable, not something every object inherits.
    const found = Object.hasOwn(env, name) ? env[name] : undefined;
    if (found === undefined) {
      missing.add(name);
      return "";
    }
    return found;
  });
}

/**
 * A variable or header name that says its value is a credential: such a value is a secret of the
 * run, and a literal one in the file is refused (the file is committed; connectors.md: "A `token`
 * written in the file is a parse error").
 */
export const SECRET_NAME = /authorization|cookie|key|token|secret|password|passwd|credential/i;

/** Why the literal `value` may not be written for variable or header `name`, or undefined. */
export function literalSecretProblem(name: string, value: string): string | undefined {
  if (!SECRET_NAME.test(name) || hasTemplate(value) || value === "") return undefined;
  return `\`${name}\` would put a secret in the file`;
}

/** The variables a connection's `headers` values name, in order, each once. */
export function headerVariables(headers: Readonly<Record<string, string>>): string[] {
  return [...new Set(Object.values(headers).flatMap(templateNames))];
}

/** The variables a local server's `args` and `env` name, in order, each once. */
export function localVariables(process: { args: readonly string[]; env: Readonly<Record<string, string>> }): string[] {
  const names = new Set<string>();
  for (const value of [...process.args, ...Object.values(process.env)]) for (const name of templateNames(value)) names.add(name);
  return [...names];
}

/**
 * The most variables a declaration's headers may name on a deployment: each holds up to
 * MAX_HEADER_VALUE_BYTES, and a `use` token may hand over every one (docs/deployment-protocol.md section 3.2).
 */
export const MAX_HEADER_VARIABLES = 16;
/** The longest header value a deployment holds or is declared with (docs/deployment-protocol.md sections 3.2, 3.12). */
export const MAX_HEADER_VALUE_BYTES = 8192;
/** RFC 9110 section 5.5: a field value holds no control character but a tab. */
export const HEADER_VALUE_CONTROL = /[\u0000-\u0008\u000a-\u001f\u007f]/;

/** RFC 9110 §5.1: field-name = token. */
export const HEADER_NAME_PATTERN = /^[!#$%&'*+.^_`|~0-9A-Za-z-]+$/;

/**
 * Headers a connection may not set: the credential (`auth` or OAuth sets Authorization) and what
 * the MCP transport itself sends (MCP "Streamable HTTP"), which a second value would corrupt.
 */
export function reservedHeaderProblem(name: string): { message: string; hint: string } | undefined {
  const lower = name.toLowerCase();
  if (lower === "authorization" || lower === "proxy-authorization") {
    return { message: `\`${name}\` is the credential's header: subs sets it`, hint: 'for "Bearer <token>", write auth = { token_env = "MY_TOKEN" }; without it subs uses OAuth' };
  }
  if (["host", "content-length", "content-type", "accept", "connection", "transfer-encoding", "te", "upgrade", "mcp-session-id", "mcp-protocol-version", "last-event-id"].includes(lower)) {
    return { message: `\`${name}\` is set by the MCP transport itself`, hint: "remove it" };
  }
  return undefined;
}

/** A variable name for a header's value, for a hint or an import: `X-API-Key` → `X_API_KEY`. */
export const envNameFor = (header: string): string => header.toUpperCase().replace(/[^A-Z0-9_]/g, "_").replace(/^([0-9])/, "_$1");
