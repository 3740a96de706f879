// The server entry most clients share (`mcpServers` / `servers`: a name to an object with either
// `command` for a local process or a URL and `headers` for a remote server). Each client's reader
// says which keys it documents; the parsing and checking (zod: these files are a boundary) is here.
import * as z from "zod/mini";
import { MAX_SERVERS_PER_FILE, TooManyServers, type FoundOAuth, type FoundServer, type Header, type LeftOut, type TurnedOff } from "./types.ts";

const Entry = z.looseObject({
  type: z.optional(z.string()),
  url: z.optional(z.string()),
  httpUrl: z.optional(z.string()),
  headers: z.optional(z.record(z.string(), z.string())),
  command: z.optional(z.unknown()),
  disabled: z.optional(z.boolean()),
});
type EntryShape = z.output<typeof Entry>;

/** A local server's entry, as every JSON client writes it: `command`, `args`, `env`, `cwd`. */
const LocalEntry = z.looseObject({
  command: z.string().check(z.minLength(1)),
  args: z.optional(z.array(z.string())),
  env: z.optional(z.record(z.string(), z.string())),
  cwd: z.optional(z.string()),
});

export const ServerMap = z.record(z.string(), z.unknown());

export type EntryRules = {
  /** The URL of a remote entry, and its transport as this client documents it. */
  remote: (entry: EntryShape) => { url: string; transport: "http" | "sse" | undefined } | undefined;
  /** What else this client's remote entry says that subs reads or must name: a pre-registered OAuth client, settings it has no key for. */
  details?: (entry: Record<string, unknown>) => { oauth?: FoundOAuth; leftOut?: LeftOut[]; disabled?: TurnedOff };
};

/** The servers of a `name -> entry` map; `map` not being an object yields none. */
export function serversOf(map: unknown, rules: EntryRules): FoundServer[] {
  return serverEntries(map).map(([name, raw]) => entryToServer(name, raw, rules));
}

/**
 * The entries of a `name -> entry` map (none when `map` is not an object). Counted before anything
 * else is done with them: past MAX_SERVERS_PER_FILE the file is refused (TooManyServers).
 */
export function serverEntries(map: unknown): Array<[string, unknown]> {
  if (typeof map === "object" && map !== null && Object.keys(map).length > MAX_SERVERS_PER_FILE) throw new TooManyServers();
  // The entries of the object read, not of zod's copy: assigning `__proto__` to the copy would
  // drop that server without a word, where it must be reported (renamed) like any other.
  return z.safeParse(ServerMap, map).success ? Object.entries(map as Record<string, unknown>) : [];
}

function entryToServer(name: string, raw: unknown, rules: EntryRules): FoundServer {
  // The issues are never shown: they would quote the entry, headers included.
  const parsed = z.safeParse(Entry, raw);
  if (!parsed.success) return { name, kind: "unrecognized", why: "its entry is not in the documented shape" };
  const entry = parsed.data;
  if (entry.command !== undefined || entry.type === "stdio") {
    const local = z.safeParse(LocalEntry, raw);
    if (!local.success) return { name, kind: "unrecognized", why: "its command, args, env or cwd is not in the documented shape" };
    const { command, args, env, cwd } = local.data;
    const disabled = entry.disabled === true ? { setting: '"disabled": true' } : undefined;
    return { name, kind: "stdio", command, args: args ?? [], env: env ?? {}, ...(cwd !== undefined ? { cwd } : {}), ...(disabled ? { disabled } : {}) };
  }
  if (entry.type !== undefined && !KNOWN_TYPES.has(entry.type)) return { name, kind: "unsupported", transport: entry.type };
  const remote = rules.remote(entry);
  if (!remote) return { name, kind: "unrecognized", why: "it has neither a command nor a url" };
  const headers: Header[] = Object.entries(entry.headers ?? {}).map(([headerName, value]) => ({ name: headerName, value }));
  const details = rules.details?.(raw as Record<string, unknown>) ?? {};
  // `"disabled": true` in the entry itself, honoured for every JSON client.
  const disabled = details.disabled ?? (entry.disabled === true ? { setting: '"disabled": true' } : undefined);
  return { name, kind: "remote", ...remote, headers, ...details, ...(disabled ? { disabled } : {}) };
}

/**
 * The `type` values the clients write for the transports subs speaks: stdio (not imported), "http"
 * (streamable HTTP; Claude Code also reads "streamable-http") and "sse". Anything else (Claude
 * Code's "ws", its IDE and SDK types) is a transport subs cannot connect over.
 */
const KNOWN_TYPES = new Set(["stdio", "http", "streamable-http", "sse"]);

/** `type` as Claude Code and VS Code write it: "http" (streamable HTTP) or "sse". */
export function typedTransport(type: string | undefined): "http" | "sse" | undefined {
  return type === "http" || type === "streamable-http" ? "http" : type === "sse" ? "sse" : undefined;
}

/** `value` when it is a string, else undefined: a client's own field read without trusting its type. */
export const str = (value: unknown): string | undefined => (typeof value === "string" ? value : undefined);

/** `value` as an object, else undefined. */
export const obj = (value: unknown): Record<string, unknown> | undefined =>
  typeof value === "object" && value !== null && !Array.isArray(value) ? (value as Record<string, unknown>) : undefined;

/** The strings of `value` when it is an array of strings, else undefined. */
export const strings = (value: unknown): string[] | undefined =>
  Array.isArray(value) && value.every((v) => typeof v === "string") ? (value as string[]) : undefined;

/** `{ setting, kind: "setting" }` for each of `keys` present in `entry` (under `prefix`, e.g. "oauth."). */
export function presentSettings(entry: Record<string, unknown> | undefined, keys: readonly string[], prefix = ""): LeftOut[] {
  if (!entry) return [];
  return keys.filter((key) => Object.hasOwn(entry, key) && entry[key] !== undefined && entry[key] !== null).map((key) => ({ setting: `${prefix}${key}`, kind: "setting" }));
}

/** The port of a loopback redirect URI (`http://127.0.0.1:8765/callback`), undefined when it names none or does not parse. */
export function redirectPort(uri: string | undefined): number | undefined {
  if (uri === undefined || !URL.canParse(uri)) return undefined;
  const port = new URL(uri).port;
  return port === "" ? undefined : Number(port);
}
