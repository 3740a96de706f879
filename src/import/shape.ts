// The server entry most clients share (`mcpServers` / `servers`: a name to an object with either
// `command` for a local process or a URL and `headers` for a remote server). Each client's reader
// says which keys it documents; the parsing and checking (zod: these files are a boundary) is here.
import * as z from "zod/mini";
import { MAX_SERVERS_PER_FILE, TooManyServers, type FoundServer, type Header } from "./types.ts";

const Entry = z.looseObject({
  type: z.optional(z.string()),
  url: z.optional(z.string()),
  httpUrl: z.optional(z.string()),
  headers: z.optional(z.record(z.string(), z.string())),
  command: z.optional(z.unknown()),
  disabled: z.optional(z.boolean()),
});
type EntryShape = z.output<typeof Entry>;

export const ServerMap = z.record(z.string(), z.unknown());

export type EntryRules = {
  /** The URL of a remote entry, and its transport as this client documents it. */
  remote: (entry: EntryShape) => { url: string; transport: "http" | "sse" | undefined } | undefined;
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
  if (entry.command !== undefined || entry.type === "stdio") return { name, kind: "stdio" };
  const remote = rules.remote(entry);
  if (!remote) return { name, kind: "unrecognized", why: "it has neither a command nor a url" };
  const headers: Header[] = Object.entries(entry.headers ?? {}).map(([headerName, value]) => ({ name: headerName, value }));
  return { name, kind: "remote", ...remote, headers, disabled: entry.disabled === true };
}

/** `type` as Claude Code and VS Code write it: "http" (streamable HTTP) or "sse". */
export function typedTransport(type: string | undefined): "http" | "sse" | undefined {
  return type === "http" || type === "streamable-http" ? "http" : type === "sse" ? "sse" : undefined;
}
