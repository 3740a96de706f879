// The check every run makes of the parsed file: every rule of substructure.toml in one walk that
// builds what zod's FileSchema outputs, without zod. zod's schema (schema.ts) stays the source of
// truth: a file this walk does not accept goes through the full check in load.ts (checkShape,
// scanFile, FileSchema, cross-references, `db`), which reports every problem at file:line:col or,
// should the two ever disagree, accepts the file itself. test/config-check.test.ts holds the walk
// to zod's answer on the fuzz corpus and every fixture.
//
// The rules, as the full check applies them (load.ts, schema.ts), and where this walk applies each:
// - a table is what zod's strict object takes (any object but an array, a TOML date too), with no
//   key but its own; `mcp` and `agent` are records (plain objects) whose names pass isValidName and
//   are neither reserved (RESERVED_NAMES) nor the name of a secret (SECRET_KEYS);
// - every string a valid file can hold that no pattern restricts (urls, `db`, `client_id`, tools,
//   filters) holds no control or bidi character (hasUnsafe); ids, names, variable names and scopes
//   are patterns of safe characters, and entries naming connections or agents must name declared ones;
// - no reserved or secret key, and no nesting past 64: a file of known keys only can hold neither;
// - cross-references (crossReferenceDiagnostics) and `db` inside the file's directory (dbPathDiagnostics).
import path from "node:path";
import { hasUnsafe } from "../text/unsafe.ts";
import { ENV_NAME_PATTERN, isSecretKey, isValidName, RESERVED_NAMES, SCOPE_PATTERN, urlProblem } from "./rules.ts";
import type { FileShape } from "./schema.ts";
import { HEADER_NAME_PATTERN, literalSecretProblem, reservedHeaderProblem, templateProblem } from "./templates.ts";

type Table = Record<string, unknown>;
type Connection = FileShape["mcp"][string];
type Agent = FileShape["agent"][string];
type Filter = NonNullable<Agent["mcp"][number]["tools"]>;

/** zod's object check (util.isObject): a TOML date passes it, and has no keys. */
const isObject = (v: unknown): v is Table => typeof v === "object" && v !== null && !Array.isArray(v);
/** load.ts's isTable, which the cross-references use: a date is not one. */
const isTable = (v: unknown): v is Table => isObject(v) && !(v instanceof Date);

/** zod's record check (util.isPlainObject): smol-toml's tables have no prototype; a date is refused. */
function isPlainObject(v: unknown): v is Table {
  if (!isObject(v)) return false;
  const ctor = (v as { constructor?: unknown }).constructor;
  if (ctor === undefined || typeof ctor !== "function") return true;
  const prototype = (ctor as { prototype?: unknown }).prototype;
  return isObject(prototype) && Object.prototype.hasOwnProperty.call(prototype, "isPrototypeOf");
}

/** Every key of `table` is one of `known` (zod's strict object walks them with for…in). */
function onlyKeys(table: Table, known: readonly string[]): boolean {
  for (const key in table) if (!known.includes(key)) return false;
  return true;
}

const FILE_KEYS = ["db", "remote", "mcp", "agent"];
const REMOTE_KEYS = ["url", "token_env"];
const CONNECTION_KEYS = ["url", "command", "args", "env", "cwd", "headers", "auth", "oauth", "credential", "prefix_tools"];
const AUTH_KEYS = ["token_env"];
const OAUTH_KEYS = ["client_id", "client_secret_env", "client_metadata_url", "scopes"];
const AGENT_KEYS = ["mcp", "tools", "agents"];
const ENTRY_KEYS = ["id", "tools"];
const FILTER_KEYS = ["include", "exclude", "read_only", "non_destructive", "idempotent"];

/** A name of [mcp.<id>] or [agent.<name>] the file accepts. */
const isName = (name: string) => isValidName(name) && !RESERVED_NAMES.has(name) && !isSecretKey(name);
const isUrl = (v: unknown, httpsOnly = false): v is string => typeof v === "string" && urlProblem(v, { httpsOnly }) === undefined && !hasUnsafe(v);
const isEnvName = (v: unknown): v is string => typeof v === "string" && ENV_NAME_PATTERN.test(v);
/** A free string: non-empty, no control or bidi character. */
const isText = (v: unknown): v is string => typeof v === "string" && v.length > 0 && !hasUnsafe(v);

/** A copy of `v` when it is an array of which every element passes `ok`, else undefined. */
function arrayOf<T>(v: unknown, ok: (item: unknown) => item is T): T[] | undefined {
  if (!Array.isArray(v)) return undefined;
  const out: T[] = new Array(v.length);
  for (let n = 0; n < v.length; n++) {
    const item: unknown = v[n];
    if (!ok(item)) return undefined;
    out[n] = item;
  }
  return out;
}

/** An `args` or `env` value: literal text and `${NAME}` templates, possibly empty. */
const isTemplated = (v: unknown): v is string => typeof v === "string" && !hasUnsafe(v) && templateProblem(v) === undefined;
const isScope = (v: unknown): v is string => typeof v === "string" && SCOPE_PATTERN.test(v);
const isString = (v: unknown): v is string => typeof v === "string";
const isBoolean = (v: unknown): v is boolean => typeof v === "boolean";
const NO = Symbol("invalid");

/**
 * What FileSchema outputs for the parsed file `raw`, when the whole file is valid: every rule
 * load.ts applies holds. Undefined when any does not; load.ts then runs the full check, which says
 * what is wrong. `dir` is the absolute directory of the file (`db` must stay inside it).
 */
export function checkedFile(raw: unknown, dir: string): FileShape | undefined {
  if (!isObject(raw) || !onlyKeys(raw, FILE_KEYS)) return undefined;
  let db = "substructure.db";
  if (raw.db !== undefined) {
    if (!isText(raw.db) || !dbInside(dir, raw.db)) return undefined;
    db = raw.db;
  }
  let remote: FileShape["remote"];
  if (raw.remote !== undefined) {
    const r = raw.remote;
    if (!isObject(r) || !onlyKeys(r, REMOTE_KEYS) || !isUrl(r.url)) return undefined;
    if (r.token_env !== undefined && !isEnvName(r.token_env)) return undefined;
    remote = { url: r.url, token_env: r.token_env === undefined ? "SUBSTRUCTURE_TOKEN" : r.token_env };
  }
  const mcp: Record<string, Connection> = {};
  if (raw.mcp !== undefined) {
    if (!isPlainObject(raw.mcp)) return undefined;
    const tables = raw.mcp;
    for (const id of Object.keys(tables)) {
      if (!isName(id)) return undefined;
      const connection = checkedConnection(tables[id]);
      if (connection === NO) return undefined;
      mcp[id] = connection;
    }
  }
  const agent: Record<string, Agent> = {};
  if (raw.agent !== undefined) {
    if (!isPlainObject(raw.agent)) return undefined;
    const tables = raw.agent;
    for (const name of Object.keys(tables)) {
      if (!isName(name)) return undefined;
      const checked = checkedAgent(name, tables[name], mcp, tables);
      if (checked === NO) return undefined;
      agent[name] = checked;
    }
  }
  // FileSchema's keys in its order; `remote` only when the file has one.
  return remote === undefined ? { db, mcp, agent } : { db, remote, mcp, agent };
}

function checkedConnection(c: unknown): Connection | typeof NO {
  if (!isObject(c) || !onlyKeys(c, CONNECTION_KEYS)) return NO;
  if (c.prefix_tools !== undefined && !isBoolean(c.prefix_tools)) return NO;
  const prefix_tools = c.prefix_tools ?? true;
  if (c.command !== undefined) return checkedLocal(c, prefix_tools);
  if (!isUrl(c.url) || c.args !== undefined || c.env !== undefined || c.cwd !== undefined) return NO;
  let headers: Connection["headers"];
  if (c.headers !== undefined) {
    if (!isPlainObject(c.headers)) return NO;
    headers = {};
    for (const name of Object.keys(c.headers)) {
      const value = c.headers[name];
      if (!HEADER_NAME_PATTERN.test(name) || RESERVED_NAMES.has(name) || isSecretKey(name) || reservedHeaderProblem(name) || !isTemplated(value) || literalSecretProblem(name, value) !== undefined) return NO;
      headers[name] = value;
    }
  }
  let auth: Connection["auth"];
  if (c.auth !== undefined) {
    const a = c.auth;
    if (!isObject(a) || !onlyKeys(a, AUTH_KEYS) || !isEnvName(a.token_env)) return NO;
    auth = { token_env: a.token_env };
  }
  let oauth: Connection["oauth"];
  if (c.oauth !== undefined) {
    const o = c.oauth;
    if (!isObject(o) || !onlyKeys(o, OAUTH_KEYS)) return NO;
    oauth = {};
    if (o.client_id !== undefined) {
      if (!isText(o.client_id)) return NO;
      oauth.client_id = o.client_id;
    }
    if (o.client_secret_env !== undefined) {
      if (!isEnvName(o.client_secret_env)) return NO;
      oauth.client_secret_env = o.client_secret_env;
    }
    if (o.client_metadata_url !== undefined) {
      if (!isUrl(o.client_metadata_url, true)) return NO;
      oauth.client_metadata_url = o.client_metadata_url;
    }
    if (o.scopes !== undefined) {
      const scopes = arrayOf(o.scopes, isScope);
      if (!scopes) return NO;
      oauth.scopes = scopes;
    }
    // The cross-references, on the table as written (a date is no table, and names no client).
    if (isTable(o)) {
      if (auth !== undefined) return NO;
      if (o.client_secret_env !== undefined && o.client_id === undefined) return NO;
      if (o.client_id !== undefined && o.client_metadata_url !== undefined) return NO;
    }
  }
  if (c.credential !== undefined && c.credential !== "shared" && c.credential !== "personal") return NO;
  // The schema's key order: url, headers, auth, oauth, credential, prefix_tools.
  const out = { url: c.url } as Connection;
  if (headers !== undefined) out.headers = headers;
  if (auth !== undefined) out.auth = auth;
  if (oauth !== undefined) out.oauth = oauth;
  if (c.credential !== undefined) out.credential = c.credential;
  out.prefix_tools = prefix_tools;
  return out;
}

/** A local server's table (`command`): none of a remote one's keys, its own checked, in the schema's key order. */
function checkedLocal(c: Table, prefix_tools: boolean): Connection | typeof NO {
  if (!isText(c.command) || c.url !== undefined || c.auth !== undefined || c.oauth !== undefined || c.headers !== undefined || c.credential !== undefined) return NO;
  const out = { command: c.command } as Connection;
  if (c.args !== undefined) {
    const args = arrayOf(c.args, isTemplated);
    if (!args) return NO;
    out.args = args;
  }
  if (c.env !== undefined) {
    if (!isPlainObject(c.env)) return NO;
    const env: Record<string, string> = {};
    for (const name of Object.keys(c.env)) {
      const value = c.env[name];
      if (!isEnvName(name) || RESERVED_NAMES.has(name) || isSecretKey(name) || !isTemplated(value) || literalSecretProblem(name, value) !== undefined) return NO;
      env[name] = value;
    }
    out.env = env;
  }
  if (c.cwd !== undefined) {
    if (!isText(c.cwd)) return NO;
    out.cwd = c.cwd;
  }
  out.prefix_tools = prefix_tools;
  return out;
}

function checkedAgent(name: string, a: unknown, connections: Record<string, Connection>, agents: Table): Agent | typeof NO {
  if (!isObject(a) || !onlyKeys(a, AGENT_KEYS)) return NO;
  const mcp: Agent["mcp"] = [];
  if (a.mcp !== undefined) {
    if (!Array.isArray(a.mcp)) return NO;
    const seen = new Set<string>();
    for (const written of a.mcp as unknown[]) {
      // `mcp = ["sentry"]` is `mcp = [{ id = "sentry" }]` (expandShorthands).
      const entry = typeof written === "string" ? { id: written } : written;
      if (!isObject(entry) || !onlyKeys(entry, ENTRY_KEYS) || typeof entry.id !== "string") return NO;
      const id = entry.id;
      // Declared once each: a declared id is a valid name, so it holds nothing unsafe.
      if (!Object.hasOwn(connections, id) || seen.has(id)) return NO;
      seen.add(id);
      if (entry.tools === undefined) {
        mcp.push({ id });
        continue;
      }
      const tools = checkedFilter(entry.tools);
      if (tools === NO) return NO;
      mcp.push({ id, tools });
    }
  }
  let tools: string[] = [];
  if (a.tools !== undefined) {
    const checked = arrayOf(a.tools, isText);
    if (!checked) return NO;
    tools = checked;
  }
  let subagents: string[] = [];
  if (a.agents !== undefined) {
    const checked = arrayOf(a.agents, isString);
    if (!checked) return NO;
    for (const sub of checked) if (sub === name || !Object.hasOwn(agents, sub)) return NO;
    subagents = checked;
  }
  return { mcp, tools, agents: subagents };
}

function checkedFilter(f: unknown): Filter | typeof NO {
  if (!isObject(f) || !onlyKeys(f, FILTER_KEYS)) return NO;
  const out: Filter = {};
  if (f.include !== undefined) {
    const include = arrayOf(f.include, isText);
    if (!include) return NO;
    out.include = include;
  }
  if (f.exclude !== undefined) {
    const exclude = arrayOf(f.exclude, isText);
    if (!exclude) return NO;
    out.exclude = exclude;
  }
  for (const key of ["read_only", "non_destructive", "idempotent"] as const) {
    const value = f[key];
    if (value === undefined) continue;
    if (!isBoolean(value)) return NO;
    out[key] = value;
  }
  return out;
}

/** dbPathDiagnostics's rule: `db` resolves to a file below `dir`. */
function dbInside(dir: string, db: string): boolean {
  const relative = path.relative(dir, path.resolve(dir, db));
  return relative !== "" && relative !== ".." && !relative.startsWith(`..${path.sep}`) && !path.isAbsolute(relative);
}
