// Loading and validating substructure.toml in full: every rule, every problem reported at once as
// file:line:col (zod's schema, reserved names, nesting, secrets, unsafe characters, references,
// `db`). A file check.ts's walk accepts needs none of it past parse.ts; commands that can wait use
// readConfig (read-config.ts), and load this module only for a file the walk does not accept.
import path from "node:path";
import type * as z from "zod/mini";
import { ConfigError, type Diagnostic } from "../errors.ts";
import { escaped, firstUnsafe } from "../text/unsafe.ts";
import { checkedFile } from "./check.ts";
import { closest } from "./closest.ts";
import { findConfigPath } from "./find.ts";
import { configOf, MAX_DEPTH, parseToml, type LoadOptions, type Parsed, type Where } from "./parse.ts";
import type { KeyPath } from "./positions.ts";
import { readConfigFile } from "./read.ts";
import { assertSecretDestinations } from "./secret-pins.ts";
import { fileSchema, isSecretKey, RESERVED_NAMES, SECRET_KEYS, type FileShape } from "./schema.ts";
import { envNameFor, literalSecretProblem, reservedHeaderProblem } from "./templates.ts";
import type { Config } from "./types.ts";

export { displayPathOf, MAX_DEPTH, type LoadOptions } from "./parse.ts";

const KNOWN_KEYS: Array<[pattern: (p: KeyPath) => boolean, keys: string[]]> = [
  [(p) => p.length === 0, ["db", "remote", "mcp", "agent"]],
  [(p) => p.length === 1 && p[0] === "remote", ["url", "token_env"]],
  [(p) => p.length === 2 && p[0] === "mcp", ["url", "command", "args", "env", "cwd", "headers", "auth", "oauth", "credential", "prefix_tools"]],
  [(p) => p.length === 3 && p[0] === "mcp" && p[2] === "auth", ["token_env"]],
  [(p) => p.length === 3 && p[0] === "mcp" && p[2] === "oauth", ["client_id", "client_secret_env", "client_metadata_url", "scopes"]],
  [(p) => p.length === 2 && p[0] === "agent", ["mcp", "tools", "agents"]],
  [(p) => p.length === 4 && p[0] === "agent" && p[2] === "mcp", ["id", "tools"]],
  [(p) => p.length === 5 && p[0] === "agent" && p[4] === "tools", ["include", "exclude", "read_only", "non_destructive", "idempotent"]],
];

export function loadConfig(options: LoadOptions): Config {
  const file = findConfigPath({ explicit: options.configPath, env: options.env, cwd: options.cwd });
  return loadConfigText(file, readConfigFile(file), options);
}

/** The config `source` (the text of the file at `file`) declares, checked as loadConfig checks it. */
export function loadConfigText(file: string, source: string, options: Pick<LoadOptions, "env" | "cwd">): Config {
  const config = parseConfig(source, { path: file, cwd: options.cwd });
  // Where environment secrets may go, when CI pins it (SUBS_ALLOWED_REMOTE, SUBS_ALLOWED_TOKEN_HOSTS).
  assertSecretDestinations(config, options.env);
  return config;
}

/** Parses and validates a substructure.toml; every problem is reported at once as file:line:col. */
export function parseConfig(source: string, where: Where): Config {
  const parsed = parseToml(source, where);
  // Nearly every file is valid: one walk says so (check.ts). Any other goes through every check
  // below, which says what is wrong.
  const data = checkedFile(parsed.raw, parsed.dir);
  return data ? configOf(data, parsed, where) : fullyCheckedConfig(parsed, where);
}

/** The Config of a parsed file check.ts's walk did not accept: every check below, which throws what is wrong. */
export function fullyCheckedConfig(parsed: Parsed, where: Where): Config {
  const data = fullCheck(parsed.raw, parsed.dir, (keyPath, message, hint) => {
    const { line, col } = parsed.locate(keyPath);
    return parsed.diagnostic(line, col, message, hint);
  });
  return configOf(data, parsed, where);
}

/**
 * Every rule of the file, each problem as a diagnostic (`at` places it): reserved names, nesting,
 * secrets and unsafe characters anywhere, zod's schema, cross-references, `db`. Throws them all at
 * once; returns what the schema outputs when there are none.
 */
export function fullCheck(raw: unknown, dir: string, at: (keyPath: KeyPath, message: string, hint?: string) => Diagnostic): FileShape {
  // Dotted keys and table headers nest without recursion in the parser, so depth is checked on the
  // result too, before anything recursive walks it.
  const shape = checkShape(raw);
  if (shape.tooDeep) throw new ConfigError([at(shape.tooDeep, `nested deeper than ${MAX_DEPTH} levels`, "substructure.toml needs at most 6")]);
  const diagnostics: Diagnostic[] = shape.reserved.map((keyPath) =>
    at(keyPath, `\`${String(keyPath[keyPath.length - 1])}\` is a reserved name`, "JavaScript gives it a meaning of its own; choose another name"),
  );
  const { secretPaths, unsafe } = scanFile(raw);
  for (const keyPath of secretPaths) {
    const key = String(keyPath[keyPath.length - 1]);
    diagnostics.push(
      at(keyPath, `\`${key}\` would put a secret in the file`, `name an environment variable instead, e.g. ${SECRET_KEYS[key]} = "MY_${key.toUpperCase()}"`),
    );
  }

  for (const { keyPath, form, inKey } of unsafe) {
    diagnostics.push(
      at(
        keyPath,
        `${describePath(keyPath.map((p) => (typeof p === "string" ? escaped(p) : p)))} has a control or bidi character (${form}) in its ${inKey ? "key" : "value"}`,
        "remove it: a terminal could show another text than the one subs uses (a url shown as one host, connected to as another)",
      ),
    );
  }

  const parsed = fileSchema().safeParse(expandShorthands(raw));
  if (!parsed.success) {
    for (const issue of parsed.error.issues) diagnostics.push(...issueDiagnostics(issue, at, secretPaths, raw));
  }
  diagnostics.push(...crossReferenceDiagnostics(raw, at));
  diagnostics.push(...dbPathDiagnostics(raw, dir, at));

  if (diagnostics.length > 0) {
    diagnostics.sort((a, b) => a.line - b.line || a.col - b.col);
    throw new ConfigError(diagnostics);
  }
  return parsed.data!;
}

/**
 * One iterative pass over the parsed file: the first path deeper than MAX_DEPTH, and every reserved
 * key, which is removed so the checks that follow see an ordinary object.
 */
function checkShape(raw: unknown): { tooDeep?: KeyPath; reserved: KeyPath[] } {
  const reserved: KeyPath[] = [];
  const stack: Array<{ value: unknown; path: (string | number)[] }> = [{ value: raw, path: [] }];
  while (stack.length > 0) {
    const { value, path: keyPath } = stack.pop()!;
    if (value === null || typeof value !== "object" || value instanceof Date) continue;
    if (keyPath.length > MAX_DEPTH) return { tooDeep: keyPath, reserved };
    if (Array.isArray(value)) {
      for (let n = value.length - 1; n >= 0; n--) stack.push({ value: value[n], path: [...keyPath, n] });
      continue;
    }
    const table = value as Record<string, unknown>;
    for (const key of Object.keys(table)) {
      if (RESERVED_NAMES.has(key)) {
        reserved.push([...keyPath, key]);
        delete table[key];
      } else stack.push({ value: table[key], path: [...keyPath, key] });
    }
  }
  return { reserved };
}

export type FileScan = {
  /** Paths of every secret-named key (`token`, `client_secret`, …). */
  secretPaths: (string | number)[][];
  /**
   * Every key and string value holding a character `shown` would escape: C0 and C1 controls, DEL,
   * bidi overrides and isolates (SECURITY.md, "What subs shows of server text"). No field of the
   * file is free text, so none needs one, and each could make what a terminal shows differ from
   * what subs uses.
   */
  unsafe: { keyPath: (string | number)[]; form: string; inKey: boolean }[];
};

/** One walk over the parsed file for both checks. A path is built per finding, none per node
 *  visited: the walk touches every value of the file on every command. */
export function scanFile(value: unknown): FileScan {
  const scan: FileScan = { secretPaths: [], unsafe: [] };
  const at: (string | number)[] = [];
  const walk = (v: unknown) => {
    if (typeof v === "string") {
      const bad = firstUnsafe(v);
      if (bad) scan.unsafe.push({ keyPath: [...at], form: bad.form, inKey: false });
      return;
    }
    if (v === null || typeof v !== "object" || v instanceof Date) return;
    if (Array.isArray(v)) {
      for (let n = 0; n < v.length; n++) {
        at.push(n);
        walk(v[n]);
        at.pop();
      }
      return;
    }
    const keys = Object.keys(v);
    for (let n = 0; n < keys.length; n++) {
      const key = keys[n]!;
      at.push(key);
      if (isSecretKey(key)) scan.secretPaths.push([...at]);
      const bad = firstUnsafe(key);
      if (bad) scan.unsafe.push({ keyPath: [...at], form: bad.form, inKey: true });
      walk((v as Record<string, unknown>)[key]);
      at.pop();
    }
  };
  walk(value);
  return scan;
}

const describePath = (keyPath: KeyPath) => {
  if (keyPath.length === 0) return "the top level";
  return `[${keyPath.map((p, n) => (typeof p === "number" ? `[${p}]` : n === 0 ? p : `.${p}`)).join("")}]`;
};

function issueDiagnostics(
  issue: z.core.$ZodIssue,
  at: (keyPath: KeyPath, message: string, hint?: string) => Diagnostic,
  secretPaths: (string | number)[][],
  raw: unknown,
): Diagnostic[] {
  const keyPath = issue.path as (string | number)[];
  const last = keyPath[keyPath.length - 1];
  const name =
    last === undefined ? "the file" : typeof last === "number" ? `entry ${last + 1} of \`${String(keyPath[keyPath.length - 2])}\`` : `\`${last}\``;
  switch (issue.code) {
    case "unrecognized_keys":
      return issue.keys
        .filter((key) => !secretPaths.some((p) => p.length === keyPath.length + 1 && p[keyPath.length] === key && keyPath.every((k, n) => p[n] === k)))
        .map((key) => {
          const known = KNOWN_KEYS.find(([matches]) => matches(keyPath))?.[1] ?? [];
          const suggestion = closest(key, known);
          return at(
            [...keyPath, key],
            `unknown key \`${key}\` in ${describePath(keyPath)}`,
            suggestion ? `did you mean \`${suggestion}\`?` : known.length ? `expected one of: ${known.join(", ")}` : undefined,
          );
        });
    case "invalid_key": {
      const inner = issue.issues[0];
      return [at(keyPath, `${describePath(keyPath)}: ${inner?.message ?? "invalid name"}`)];
    }
    case "invalid_type": {
      if (valueAt(raw, keyPath) === undefined) {
        const table = keyPath.slice(0, -1);
        // `auth = { token = "…" }` is already reported as a secret, with token_env as the fix.
        const holdsSecret = secretPaths.some((p) => p.length === keyPath.length && table.every((k, n) => p[n] === k));
        if (holdsSecret) return [];
        return [at(table, `${describePath(table)} is missing ${name}`)];
      }
      if (keyPath[0] === "agent" && keyPath[2] === "mcp" && typeof keyPath[3] === "number" && keyPath.length === 4) {
        return [at(keyPath, `each entry of \`mcp\` must be a connection id or { id = "...", tools = { ... } }`)];
      }
      const expected = issue.expected === "object" ? "a table" : issue.expected === "array" ? "an array" : `a ${issue.expected}`;
      return [at(keyPath, `${name} must be ${expected}`)];
    }
    case "too_small":
      return [at(keyPath, `${name} must not be empty`)];
    default:
      // Our own checks carry a message written for users; zod/mini's generic ones do not.
      return [at(keyPath, issue.message && issue.message !== "Invalid input" ? `${name} ${issue.message}` : `${name} is not valid here`)];
  }
}

function valueAt(value: unknown, keyPath: KeyPath): unknown {
  let current = value;
  for (const key of keyPath) {
    if (current === null || typeof current !== "object") return undefined;
    current = (current as Record<string | number, unknown>)[key];
  }
  return current;
}

/** `mcp = ["sentry"]` means `mcp = [{ id = "sentry" }]`; the schema sees only the long form. */
export function expandShorthands(raw: unknown): unknown {
  if (!isTable(raw) || !isTable(raw.agent)) return raw;
  const agent: Record<string, unknown> = {};
  for (const [name, a] of Object.entries(raw.agent)) {
    agent[name] = isTable(a) && Array.isArray(a.mcp) ? { ...a, mcp: a.mcp.map((e: unknown) => (typeof e === "string" ? { id: e } : e)) } : a;
  }
  return { ...raw, agent };
}

const isTable = (v: unknown): v is Record<string, unknown> => v !== null && typeof v === "object" && !Array.isArray(v) && !(v instanceof Date);

/**
 * Rules between sections. Runs on the raw parsed file, defensively, so these errors are reported
 * in the same run as schema errors ("all reported at once").
 */
export function crossReferenceDiagnostics(raw: unknown, at: (keyPath: KeyPath, message: string, hint?: string) => Diagnostic): Diagnostic[] {
  const out: Diagnostic[] = [];
  if (!isTable(raw)) return out;
  const mcp = isTable(raw.mcp) ? raw.mcp : {};
  const agent = isTable(raw.agent) ? raw.agent : {};
  const connectionIds = Object.keys(mcp);
  const agentNames = Object.keys(agent);
  const declaredConnections = new Set(connectionIds);
  const declaredAgents = new Set(agentNames);
  const suggest = suggester();
  for (const [id, c] of Object.entries(mcp)) {
    // zod's object takes a date, as a table of no keys: it then has neither `url` nor `command`.
    if (c instanceof Date) out.push(at(["mcp", id], `[mcp.${id}] needs \`url\` (a server reached over HTTP) or \`command\` (a server subs starts on this machine)`));
    if (!isTable(c)) continue;
    const oauth = isTable(c.oauth) ? c.oauth : undefined;
    if (c.url === undefined && c.command === undefined) {
      out.push(at(["mcp", id], `[mcp.${id}] needs \`url\` (a server reached over HTTP) or \`command\` (a server subs starts on this machine)`));
    }
    if (c.command !== undefined) {
      for (const key of ["url", "auth", "oauth", "headers", "credential"] as const) {
        if (c[key] === undefined) continue;
        const why =
          key === "url"
            ? "a connection is reached at `url` or started with `command`, not both"
            : key === "credential"
              ? "a local server holds no credential of subs': each person runs their own"
              : "a local server takes its credentials in `env`, e.g. env = { API_TOKEN = \"${MY_TOKEN}\" }";
        out.push(at(["mcp", id, key], `[mcp.${id}] has \`command\` and \`${key}\``, why));
      }
    } else {
      for (const key of ["args", "env", "cwd"] as const) {
        if (c[key] !== undefined) out.push(at(["mcp", id, key], `\`${key}\` belongs to a local server, started with \`command\``, `[mcp.${id}] is reached at its \`url\``));
      }
    }
    if (isTable(c.env)) {
      for (const [name, value] of Object.entries(c.env)) {
        const problem = typeof value === "string" ? literalSecretProblem(name, value) : undefined;
        if (problem) out.push(at(["mcp", id, "env", name], problem, `read it from this machine's environment instead: ${name} = "\${${name}}"`));
      }
    }
    if (isTable(c.headers)) {
      for (const [name, value] of Object.entries(c.headers)) {
        const reserved = reservedHeaderProblem(name);
        if (reserved) {
          out.push(at(["mcp", id, "headers", name], reserved.message, reserved.hint));
          continue;
        }
        const problem = typeof value === "string" ? literalSecretProblem(name, value) : undefined;
        if (problem) out.push(at(["mcp", id, "headers", name], problem, `read it from the environment instead: "${name}" = "\${${envNameFor(name)}}"`));
      }
    }
    if (c.auth !== undefined && oauth) {
      out.push(at(["mcp", id, "oauth"], `[mcp.${id}] has both \`auth\` and \`oauth\``, "a connection uses a static token (auth) or OAuth, not both"));
    }
    if (oauth?.client_secret_env !== undefined && oauth.client_id === undefined) {
      out.push(at(["mcp", id, "oauth", "client_secret_env"], "`client_secret_env` needs `client_id` (the pre-registered client it belongs to)"));
    }
    if (oauth?.client_id !== undefined && oauth.client_metadata_url !== undefined) {
      out.push(at(["mcp", id, "oauth", "client_metadata_url"], "`client_id` and `client_metadata_url` are two ways to name the client; keep one"));
    }
  }
  for (const [name, a] of Object.entries(agent)) {
    if (!isTable(a)) continue;
    const seen = new Set<string>();
    (Array.isArray(a.mcp) ? a.mcp : []).forEach((entry: unknown, n: number) => {
      const id = typeof entry === "string" ? entry : isTable(entry) && typeof entry.id === "string" ? entry.id : undefined;
      if (id === undefined) return;
      if (!declaredConnections.has(id)) {
        const suggestion = suggest(id, connectionIds);
        out.push(
          at(["agent", name, "mcp", n], `agent \`${name}\` names connection \`${id}\`, which is not declared`, suggestion ? `did you mean \`${suggestion}\`?` : `declare it with [mcp.${id}]`),
        );
      } else if (seen.has(id)) {
        out.push(at(["agent", name, "mcp", n], `agent \`${name}\` names connection \`${id}\` twice`, "merge the two entries into one"));
      }
      seen.add(id);
    });
    (Array.isArray(a.agents) ? a.agents : []).forEach((sub: unknown, n: number) => {
      if (typeof sub !== "string") return;
      if (sub === name) out.push(at(["agent", name, "agents", n], `agent \`${name}\` names itself as a sub-agent`));
      else if (!declaredAgents.has(sub)) {
        const suggestion = suggest(sub, agentNames);
        out.push(at(["agent", name, "agents", n], `agent \`${name}\` names sub-agent \`${sub}\`, which is not declared`, suggestion ? `did you mean \`${suggestion}\`?` : `declare it with [agent.${sub}]`));
      }
    });
  }
  return out;
}

/**
 * `db` names a file inside the file's own directory tree, `..` resolved: a
 * file from a cloned repository must not aim the credentials subs writes at
 * `~/.ssh/authorized_keys` or at another project's db. Symlinks on the way are checked when the
 * db is opened (src/store/store.ts), since the directories may not exist yet.
 */
function dbPathDiagnostics(raw: unknown, dir: string, at: (keyPath: KeyPath, message: string, hint?: string) => Diagnostic): Diagnostic[] {
  if (!isTable(raw) || typeof raw.db !== "string" || raw.db === "") return [];
  const relative = path.relative(dir, path.resolve(dir, raw.db));
  if (relative !== "" && relative !== ".." && !relative.startsWith(`..${path.sep}`) && !path.isAbsolute(relative)) return [];
  return [at(["db"], "`db` must name a file inside this file's directory: the db holds credentials", 'keep it beside the file or below it, e.g. db = "substructure.db"')];
}

/** Unknown names that get a "did you mean": beyond them the hint is the plain fix, so a file of
 *  thousands of dangling names costs linear time, not names × candidates. */
export const SUGGESTION_BUDGET = 50;

/** `closest` with a budget over one file's diagnostics, each distinct word computed once. */
function suggester(): (word: string, candidates: readonly string[]) => string | undefined {
  const caches = new Map<readonly string[], Map<string, string | undefined>>();
  let computed = 0;
  return (word, candidates) => {
    let cache = caches.get(candidates);
    if (!cache) caches.set(candidates, (cache = new Map()));
    if (cache.has(word)) return cache.get(word);
    if (computed >= SUGGESTION_BUDGET) return undefined;
    computed++;
    const found = closest(word, candidates);
    cache.set(word, found);
    return found;
  };
}

