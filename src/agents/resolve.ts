// What an agent's model can call, from the tool lists its connections returned: the rules of
// connectors.md ("Give it to an agent", "Filtering", "Names", "When tools are fetched") as one
// pure function. No I/O here: fetching is fetch.ts, printing is the command's.
import picomatch from "picomatch";
import { changedFields, digestOf, faceOf, type FaceField, type ToolLock } from "../config/tool-lock.ts";
import type { AgentConfig, ConnectionConfig, McpToolsFilter } from "../config/types.ts";

/**
 * The MCP annotations the capability keys read (MCP spec, "Tools: Tool annotations"). `null` is
 * accepted because the deployment's JSON may carry it (src/remote/protocol.ts); like an absent
 * hint, it fails the key.
 */
export type ToolAnnotations = {
  title?: string | null;
  readOnlyHint?: boolean | null;
  destructiveHint?: boolean | null;
  idempotentHint?: boolean | null;
  openWorldHint?: boolean | null;
};

/** One tool as a connection lists it (the MCP `Tool`, or the deployment's copy of it). */
export type ConnectorTool = {
  name: string;
  title?: string | null;
  description?: string | null;
  inputSchema?: unknown;
  outputSchema?: unknown;
  annotations?: ToolAnnotations | null;
};

/** Why a connection's tools are missing: its fetch failed, so a turn runs without them. */
export type Unavailable = {
  connection: string;
  /** Machine-readable, e.g. "needs_login", "token_env_unset", "timeout", "failed". */
  code: string;
  message: string;
  hint?: string;
  /** The fetch failed because the connection has no usable credential (exit code 4). */
  needsLogin: boolean;
};

export type FetchOutcome = { ok: true; tools: readonly ConnectorTool[] } | { ok: false; error: Omit<Unavailable, "connection"> };

export type ResolveInput = {
  agent: AgentConfig;
  /** The declared connections (at least those the agent names), for `prefix_tools`. */
  connections: ReadonlyArray<Pick<ConnectionConfig, "id" | "prefixTools">>;
  /** One outcome per connection the agent names, by id. */
  outcomes: ReadonlyMap<string, FetchOutcome>;
  /**
   * substructure.lock, when there is one: a connector tool is kept only when its connection and
   * name are in it with the same digest, and then with only its locked fields (docs/file.md,
   * "Reviewing tools"). Absent: nothing is withheld.
   */
  lock?: ToolLock | undefined;
};

/** A tool the agent's filter kept but the lock does not allow: a new tool, or one that changed since it was locked. */
export type WithheldTool = { connection: string; tool: string; name: string; reason: "not_locked" } | { connection: string; tool: string; name: string; reason: "changed"; fields: FaceField[] };

export type ModelTool =
  | { name: string; kind: "connector"; connection: string; tool: ConnectorTool }
  | { name: string; kind: "declared" }
  | { name: string; kind: "sub_agent" };

export const CAPABILITY_KEYS = [
  // MCP defaults are readOnlyHint=false, destructiveHint=true, idempotentHint=false; the seed is
  // stricter still: "A tool with no annotation fails them", so only an explicit value passes.
  { key: "read_only", annotation: "readOnlyHint", passes: true },
  { key: "non_destructive", annotation: "destructiveHint", passes: false },
  { key: "idempotent", annotation: "idempotentHint", passes: true },
] as const;

export type CapabilityKey = (typeof CAPABILITY_KEYS)[number]["key"];
export type CapabilityAnnotation = (typeof CAPABILITY_KEYS)[number]["annotation"];

/** A tool the agent's own filter removed: the user's choice, reported so a missing tool is explained. */
export type FilteredTool =
  | {
      connection: string;
      tool: string;
      step: CapabilityKey;
      annotation: CapabilityAnnotation;
      /** The annotation's value on the tool; null when the tool does not carry it. */
      value: boolean | null;
    }
  | { connection: string; tool: string; step: "include"; patterns: string[] }
  | { connection: string; tool: string; step: "exclude"; pattern: string };

/** What else claims a name. */
export type Claimant =
  | { kind: "declared"; name: string }
  | { kind: "sub_agent"; name: string }
  | { kind: "connector"; connection: string; tool: string };

/** A connector tool that lost its name in a collision (connectors.md, "Names"). */
export type DroppedTool = {
  /** The name it would have had. */
  name: string;
  connection: string;
  tool: string;
  /** What it lost to: a declared tool or sub-agent id keeps its name; two connector tools both lose it. */
  reason: "declared_tool" | "sub_agent" | "connector_tool";
  /** Everything else that claims the name. */
  with: Claimant[];
};

export const TOOL_LIMIT = 40;

export type Warning =
  | { code: "too_many_tools"; count: number; fromConnections: number; limit: number }
  | { code: "filter_keeps_nothing"; connection: string; offered: number }
  | { code: "glob_matches_nothing"; connection: string; key: "include" | "exclude"; pattern: string }
  | { code: "name_declared_twice"; name: string; as: Array<"declared" | "sub_agent"> };

export type ResolvedTools = {
  agent: string;
  /** Everything the model can call, each name once: declared tools, sub-agents, then connector tools in `mcp` order. */
  tools: ModelTool[];
  filtered: FilteredTool[];
  dropped: DroppedTool[];
  /** Kept by the filter, left out by substructure.lock; empty without one. */
  withheld: WithheldTool[];
  unavailable: Unavailable[];
  warnings: Warning[];
};

export function prefixedName(connection: Pick<ConnectionConfig, "id" | "prefixTools">, tool: string): string {
  return connection.prefixTools ? `${connection.id}__${tool}` : tool;
}

type Candidate = { name: string; connection: string; tool: ConnectorTool };

export function resolveAgentTools(input: ResolveInput): ResolvedTools {
  const { agent } = input;
  const warnings: Warning[] = [];
  const filtered: FilteredTool[] = [];
  const unavailable: Unavailable[] = [];
  const withheld: WithheldTool[] = [];

  // Declared tools and sub-agent ids keep their names; they are what connector tools collide with.
  const reserved = new Map<string, Claimant[]>();
  const own: ModelTool[] = [];
  const claim = (name: string, kind: "declared" | "sub_agent") => {
    const claims = reserved.get(name) ?? [];
    if (claims.length === 0) own.push({ name, kind });
    claims.push({ kind, name });
    reserved.set(name, claims);
  };
  for (const name of agent.tools) claim(name, "declared");
  for (const name of agent.agents) claim(name, "sub_agent");
  for (const [name, claims] of reserved) {
    if (claims.length > 1) warnings.push({ code: "name_declared_twice", name, as: claims.map((c) => c.kind as "declared" | "sub_agent") });
  }

  const candidates: Candidate[] = [];
  for (const entry of agent.mcp) {
    const outcome = input.outcomes.get(entry.id);
    const connection = input.connections.find((c) => c.id === entry.id);
    if (!connection) throw new Error(`agent ${agent.name} names connection ${entry.id}, which is not declared`);
    if (!outcome) throw new Error(`no fetch outcome for connection ${entry.id}`);
    if (!outcome.ok) {
      unavailable.push({ connection: entry.id, ...outcome.error });
      continue;
    }
    const { kept, removed, unmatched } = filterTools(entry.id, outcome.tools, entry.tools);
    filtered.push(...removed);
    for (const [key, pattern] of unmatched) warnings.push({ code: "glob_matches_nothing", connection: entry.id, key, pattern });
    if (entry.tools && kept.length === 0 && outcome.tools.length > 0) {
      warnings.push({ code: "filter_keeps_nothing", connection: entry.id, offered: outcome.tools.length });
    }
    for (const tool of kept) {
      const name = prefixedName(connection, tool.name);
      if (!input.lock) {
        candidates.push({ name, connection: entry.id, tool });
        continue;
      }
      // Withheld before names are given: a tool that is not served claims no name.
      const verdict = lockVerdict(input.lock, entry.id, tool);
      if (verdict.ok) candidates.push({ name, connection: entry.id, tool: verdict.tool });
      else withheld.push({ connection: entry.id, tool: tool.name, name, ...verdict.why });
    }
  }

  const byName = new Map<string, Candidate[]>();
  for (const c of candidates) byName.set(c.name, [...(byName.get(c.name) ?? []), c]);

  const connectorTools: ModelTool[] = [];
  const dropped: DroppedTool[] = [];
  for (const c of candidates) {
    const claims = reserved.get(c.name) ?? [];
    const rivals = byName.get(c.name)!.filter((other) => other !== c);
    if (claims.length === 0 && rivals.length === 0) {
      connectorTools.push({ name: c.name, kind: "connector", connection: c.connection, tool: c.tool });
      continue;
    }
    const first = claims[0];
    dropped.push({
      name: c.name,
      connection: c.connection,
      tool: c.tool.name,
      reason: first === undefined ? "connector_tool" : first.kind === "declared" ? "declared_tool" : "sub_agent",
      with: [...claims, ...rivals.map((r): Claimant => ({ kind: "connector", connection: r.connection, tool: r.tool.name }))],
    });
  }

  const tools = [...own, ...connectorTools];
  if (tools.length > TOOL_LIMIT) {
    warnings.push({ code: "too_many_tools", count: tools.length, fromConnections: connectorTools.length, limit: TOOL_LIMIT });
  }
  return { agent: agent.name, tools, filtered, dropped, withheld, unavailable, warnings };
}

type Verdict = { ok: true; tool: ConnectorTool } | { ok: false; why: { reason: "not_locked" } | { reason: "changed"; fields: FaceField[] } };

/**
 * Whether `lock` allows `tool` of `connection`: in it under its name with the digest its fields
 * give now. An allowed tool is its locked face alone, so nothing that was not reviewed (`_meta`, a
 * field MCP adds later) reaches the model.
 */
export function lockVerdict(lock: ToolLock, connection: string, tool: ConnectorTool): Verdict {
  const locked = lock.connections.get(connection)?.get(tool.name);
  if (!locked) return { ok: false, why: { reason: "not_locked" } };
  const face = faceOf(tool);
  if (digestOf(face) !== locked.digest) return { ok: false, why: { reason: "changed", fields: changedFields(locked, face) } };
  return { ok: true, tool: face as ConnectorTool };
}

/**
 * connectors.md, "Filtering": the capability keys, then `include`, then `exclude`; each step
 * sees only what the previous one kept, so none can add a tool back. Globs (picomatch) match
 * the tool's name on the connection, not the prefixed name the model sees.
 */
export function filterTools(
  connection: string,
  tools: readonly ConnectorTool[],
  filter: McpToolsFilter | undefined,
): { kept: ConnectorTool[]; removed: FilteredTool[]; unmatched: Array<["include" | "exclude", string]> } {
  const removed: FilteredTool[] = [];
  const unmatched: Array<["include" | "exclude", string]> = [];
  if (!filter) return { kept: [...tools], removed, unmatched };

  let kept = [...tools];
  for (const { key, annotation, passes } of CAPABILITY_KEYS) {
    // `read_only = false` asks for nothing: a key can only remove tools, never select their opposite.
    if (filter[key] !== true) continue;
    kept = kept.filter((tool) => {
      const value = tool.annotations?.[annotation];
      if (value === passes) return true;
      removed.push({ connection, tool: tool.name, step: key, annotation, value: typeof value === "boolean" ? value : null });
      return false;
    });
  }

  const matcher = (pattern: string) => picomatch(pattern, { dot: true });
  const offered = (pattern: string) => {
    const matches = matcher(pattern);
    return tools.some((tool) => matches(tool.name));
  };

  if (filter.include !== undefined) {
    const patterns = filter.include;
    const matchers = patterns.map(matcher);
    for (const pattern of patterns) if (!offered(pattern)) unmatched.push(["include", pattern]);
    kept = kept.filter((tool) => {
      if (matchers.some((matches) => matches(tool.name))) return true;
      removed.push({ connection, tool: tool.name, step: "include", patterns: [...patterns] });
      return false;
    });
  }

  if (filter.exclude !== undefined) {
    const excluders = filter.exclude.map((pattern) => ({ pattern, matches: matcher(pattern) }));
    for (const { pattern } of excluders) if (!offered(pattern)) unmatched.push(["exclude", pattern]);
    kept = kept.filter((tool) => {
      const hit = excluders.find(({ matches }) => matches(tool.name));
      if (!hit) return true;
      removed.push({ connection, tool: tool.name, step: "exclude", pattern: hit.pattern });
      return false;
    });
  }
  return { kept, removed, unmatched };
}
