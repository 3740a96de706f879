// `subs lock`: what substructure.lock would hold now, and how that differs from what it holds.
// The tools are those each agent's filter keeps (resolve.ts's filterTools: capability keys,
// include, exclude), of every connection an agent names, fetched once each through the backend's
// ToolSource (the servers, or with [remote] the deployment), keyed by connection id and the
// tool's name on the connection: one entry per tool, whichever agents keep it. Returns values;
// writing and asking are the command's.
import { ConfigError, SubsError } from "../errors.ts";
import {
  canonicalJson,
  changedFields,
  digestOf,
  faceOf,
  lockPathOf,
  readLockSource,
  renderLock,
  type FaceField,
  type ToolFace,
  type ToolLock,
} from "../config/tool-lock.ts";
import type { Config, ConnectionConfig } from "../config/types.ts";
import { fetchConnectionTools, type ToolSource } from "./fetch.ts";
import { filterTools } from "./resolve.ts";

export type FieldChange = { field: FaceField; before: string | null; after: string | null };

export type LockChange =
  | { connection: string; tool: string; change: "added" | "removed" }
  | { connection: string; tool: string; change: "changed"; fields: FieldChange[] };

export type LockPlan = {
  /** Absolute path of substructure.lock. */
  path: string;
  /** The file's text now, undefined when there is none. */
  current: string | undefined;
  /** The problems of a lock that cannot be read (then every tool is new); empty otherwise. */
  invalid: ConfigError | undefined;
  /** What `subs lock` writes. */
  text: string;
  /** Sorted by connection, then tool. */
  changes: LockChange[];
  /** How many tools the new lock holds. */
  count: number;
};

export type PlanLockOptions = {
  config: Config;
  source: ToolSource;
  /** Per connection. */
  timeoutMs: number;
  signal: AbortSignal;
  cwd: string;
  /** Refuse a lock that cannot be read (`--check`), instead of planning to write it anew. */
  strict: boolean;
};

export async function planLock(options: PlanLockOptions): Promise<LockPlan> {
  const { config } = options;
  const lockPath = lockPathOf(config.path);
  // Read first: a broken lock under --check is the answer, whatever the servers say.
  let before: ToolLock | undefined;
  let invalid: ConfigError | undefined;
  const current = readLockSource(lockPath, options.cwd);
  try {
    before = current === undefined ? undefined : (await import("../config/tool-lock-parse.ts")).parseToolLock(current, { path: lockPath, cwd: options.cwd });
  } catch (error) {
    if (options.strict || !(error instanceof ConfigError)) throw error;
    invalid = error;
  }
  const named = new Map<string, ConnectionConfig>();
  for (const agent of config.agents) {
    for (const entry of agent.mcp) {
      const connection = config.connections.find((c) => c.id === entry.id);
      if (connection) named.set(connection.id, connection);
    }
  }
  const outcomes = await fetchConnectionTools({ connections: [...named.values()], source: options.source, timeoutMs: options.timeoutMs, signal: options.signal });
  // A lock made without one connection's tools would withhold every one of them: nothing is written.
  for (const [id, outcome] of outcomes) {
    if (outcome.ok) continue;
    const { error } = outcome;
    throw new SubsError(error.needsLogin ? "needs_login" : "failed", error.message.startsWith(`${id}:`) ? error.message : `${id}: ${error.message}`, {
      code: error.code,
      ...(error.hint ? { hint: error.hint } : {}),
    });
  }

  const after = new Map<string, Map<string, ToolFace>>();
  for (const agent of config.agents) {
    for (const entry of agent.mcp) {
      const outcome = outcomes.get(entry.id);
      if (!outcome?.ok) continue;
      const byName = after.get(entry.id) ?? new Map<string, ToolFace>();
      after.set(entry.id, byName);
      // A server that lists a name twice: the first is the tool (as a client that looks it up by name finds it).
      for (const tool of filterTools(entry.id, outcome.tools, entry.tools).kept) if (!byName.has(tool.name)) byName.set(tool.name, faceOf(tool));
    }
  }
  for (const [id, byName] of after) if (byName.size === 0) after.delete(id);

  const text = renderLock(after);
  return { path: lockPath, current, invalid, text, changes: diffLock(before, after), count: [...after.values()].reduce((n, m) => n + m.size, 0) };
}

/** What changes from the lock `before` (none: every tool is added) to the tools `after`. */
export function diffLock(before: ToolLock | undefined, after: ReadonlyMap<string, ReadonlyMap<string, ToolFace>>): LockChange[] {
  const changes: LockChange[] = [];
  const connections = new Set([...(before?.connections.keys() ?? []), ...after.keys()]);
  for (const connection of [...connections].sort()) {
    const was = before?.connections.get(connection);
    const now = after.get(connection);
    const names = new Set([...(was?.keys() ?? []), ...(now?.keys() ?? [])]);
    for (const tool of [...names].sort()) {
      const locked = was?.get(tool);
      const face = now?.get(tool);
      if (!locked) changes.push({ connection, tool, change: "added" });
      else if (!face) changes.push({ connection, tool, change: "removed" });
      else if (locked.digest !== digestOf(face)) {
        changes.push({ connection, tool, change: "changed", fields: changedFields(locked, face).map((field) => ({ field, before: fieldText(locked, field), after: fieldText(face, field) })) });
      }
    }
  }
  return changes;
}

/** A field as the lock writes it: text as it is, annotations as JSON, schemas as pretty-printed JSON (one property a line). */
function fieldText(face: ToolFace, field: FaceField): string | null {
  const value = face[field];
  if (value === undefined) return null;
  if (field === "title" || field === "description") return value as string;
  return canonicalJson(value, field === "annotations" ? undefined : 2);
}
