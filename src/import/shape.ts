// The server entry most clients share (`mcpServers` / `servers`: a name to an object with either
// `command` for a local process or a URL and `headers` for a remote server). Each client's reader
// says which keys it documents; the parsing and checking (zod: these files are a boundary) is here.
import * as z from "zod/mini";
import type { FoundServer, Header } from "./types.ts";

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
  const parsed = z.safeParse(ServerMap, map);
  if (!parsed.success) return [];
  return Object.entries(parsed.data).map(([name, raw]) => entryToServer(name, raw, rules));
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
