// substructure.lock: the connector tools a person reviewed, beside substructure.toml and committed
// with it (docs/file.md, "Reviewing tools"). A server can change its tools at any time (a
// description rewritten to steer the model, a schema that now takes a path, a new tool); with a
// lock, a tool is served only as it was locked (src/agents/resolve.ts). This module is the file's
// format: what of a tool is locked and its digest, the text `subs lock` writes (deterministic, so a
// change is a readable diff: schemas are pretty-printed JSON with sorted keys, one property a
// line), and its text read from disk; tool-lock-parse.ts checks it like substructure.toml is checked
// (every problem at file:line:col) and refuses an entry whose digest its fields do not give.
import { createHash } from "node:crypto";
import { readFileSync } from "node:fs";
import path from "node:path";
import { failed } from "../errors.ts";
import { UNSAFE, UNSAFE_IN_LINES } from "../text/unsafe.ts";
import { displayPathOf } from "./parse.ts";

export const LOCK_FILE = "substructure.lock";
export const LOCK_VERSION = 1;

/** The fields of a tool the model sees (MCP "Tools": name, title, description, schemas, annotations): what is locked. */
export type ToolFace = {
  name: string;
  title?: string;
  description?: string;
  inputSchema?: unknown;
  outputSchema?: unknown;
  annotations?: Record<string, unknown>;
};

export type LockedTool = ToolFace & { digest: string };

export type ToolLock = {
  /** Absolute path of substructure.lock. */
  path: string;
  /** By connection id, then by the tool's name on the connection. */
  connections: ReadonlyMap<string, ReadonlyMap<string, LockedTool>>;
};

export const FACE_FIELDS = ["title", "description", "inputSchema", "outputSchema", "annotations"] as const;
export type FaceField = (typeof FACE_FIELDS)[number];

/** A served tool's face: only the locked fields (a `null` is absent: the deployment's JSON carries nulls). Anything else (`_meta`, unknown keys) is not locked, so not served. */
export function faceOf(tool: { name: string; title?: unknown; description?: unknown; inputSchema?: unknown; outputSchema?: unknown; annotations?: unknown }): ToolFace {
  const face: ToolFace = { name: tool.name };
  if (typeof tool.title === "string") face.title = tool.title;
  if (typeof tool.description === "string") face.description = tool.description;
  if (tool.inputSchema !== undefined && tool.inputSchema !== null) face.inputSchema = tool.inputSchema;
  if (tool.outputSchema !== undefined && tool.outputSchema !== null) face.outputSchema = tool.outputSchema;
  if (tool.annotations !== undefined && tool.annotations !== null && typeof tool.annotations === "object") face.annotations = tool.annotations as Record<string, unknown>;
  return face;
}

/** One entry of the lock as the deployment protocol carries it (docs/deployment-protocol.md section 3.10, "The lock"). */
export type LockEntryFields = {
  connection: string;
  name: string;
  digest: string;
  title?: string | undefined;
  description?: string | undefined;
  input_schema?: unknown;
  output_schema?: unknown;
  annotations?: Record<string, unknown> | undefined;
};

/** A tool's face as an entry gives it (the fields the digest covers). */
export function faceOfEntry(e: LockEntryFields): ToolFace {
  const face: ToolFace = { name: e.name };
  if (e.title !== undefined) face.title = e.title;
  if (e.description !== undefined) face.description = e.description;
  if (e.input_schema !== undefined) face.inputSchema = e.input_schema;
  if (e.output_schema !== undefined) face.outputSchema = e.output_schema;
  if (e.annotations !== undefined) face.annotations = e.annotations;
  return face;
}

/** The lock the protocol's entries make, as the resolver reads one (src/agents/resolve.ts's `lock`). */
export function lockOfEntries(entries: readonly LockEntryFields[]): ToolLock {
  const connections = new Map<string, Map<string, LockedTool>>();
  for (const e of entries) {
    let byName = connections.get(e.connection);
    if (!byName) connections.set(e.connection, (byName = new Map()));
    byName.set(e.name, { ...faceOfEntry(e), digest: e.digest });
  }
  return { path: LOCK_FILE, connections };
}

/** JSON with every object's keys sorted and undefined left out: one text per value, whatever order a server sent its keys in. */
export function canonicalJson(value: unknown, indent?: number): string {
  return JSON.stringify(sortKeys(value), null, indent);
}

function sortKeys(value: unknown): unknown {
  if (Array.isArray(value)) return value.map(sortKeys);
  if (value === null || typeof value !== "object") return value;
  const out: Record<string, unknown> = {};
  for (const key of Object.keys(value).sort()) {
    const v = (value as Record<string, unknown>)[key];
    if (v !== undefined) out[key] = sortKeys(v);
  }
  return out;
}

/** What digestOf writes: a digest any other way is refused where a lock is read. */
export const DIGEST_PATTERN = /^sha256:[0-9a-f]{64}$/;

/** sha256 of the face's canonical JSON, `sha256:<hex>`. */
export function digestOf(face: ToolFace): string {
  const { name, title, description, inputSchema, outputSchema, annotations } = face;
  return `sha256:${createHash("sha256").update(canonicalJson({ name, title, description, inputSchema, outputSchema, annotations })).digest("hex")}`;
}

export const lockPathOf = (configPath: string) => path.join(path.dirname(configPath), LOCK_FILE);

/** The fields in which two faces of one tool differ (by their canonical JSON). */
export function changedFields(locked: ToolFace, now: ToolFace): FaceField[] {
  return FACE_FIELDS.filter((f) => canonicalJson(locked[f]) !== canonicalJson(now[f]));
}

// ---- Writing -------------------------------------------------------------------------------

const HEADER = [
  "# substructure.lock: the MCP tools each agent's connections may serve, as they were reviewed.",
  "# Written by `subs lock`; commit it beside substructure.toml. A tool that is not here, or whose",
  "# fields differ from these, is withheld from every agent (docs/file.md, \"Reviewing tools\").",
  "# `subs lock --check` (for CI) says what changed. Do not edit by hand: each digest is checked.",
];

/** The lock's text for `tools` (by connection, then name); the same tools always give the same bytes. */
export function renderLock(tools: ReadonlyMap<string, ReadonlyMap<string, ToolFace>>): string {
  const lines = [...HEADER, `version = ${LOCK_VERSION}`];
  for (const connection of [...tools.keys()].sort()) {
    const byName = tools.get(connection)!;
    for (const name of [...byName.keys()].sort()) {
      const face = byName.get(name)!;
      lines.push("", `[mcp.${tomlKey(connection)}.tools.${tomlKey(name)}]`, `digest = ${tomlString(digestOf(face))}`);
      if (face.title !== undefined) lines.push(`title = ${tomlString(face.title)}`);
      if (face.description !== undefined) lines.push(`description = ${tomlString(face.description)}`);
      if (face.annotations !== undefined) lines.push(`annotations = ${jsonLine(canonicalJson(face.annotations))}`);
      if (face.inputSchema !== undefined) lines.push(`input_schema = ${tomlString(canonicalJson(face.inputSchema, 2))}`);
      if (face.outputSchema !== undefined) lines.push(`output_schema = ${tomlString(canonicalJson(face.outputSchema, 2))}`);
    }
  }
  return lines.join("\n") + "\n";
}

/** One line of JSON: a literal string, read as written, where TOML allows it (no `'`, nothing unsafe), so its quotes need no escapes. */
function jsonLine(json: string): string {
  return json.includes("'") || UNSAFE.test(json) ? basicString(json) : `'${json}'`;
}

const BARE_KEY = /^[A-Za-z0-9_-]+$/;
export const tomlKey = (key: string) => (BARE_KEY.test(key) ? key : basicString(key));

const LONE_SURROGATE = /[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/;

/**
 * A TOML string that parses back to exactly `text`. Text of several lines goes in a multi-line
 * literal string, read as written, when TOML allows it there unchanged (TOML v1.0.0, "String": no
 * `'''`, no control character but tab and LF; a CR would be a line ending a parser may normalize;
 * a trailing `'` would run into the closing delimiter) and it holds nothing a reviewer's terminal
 * or diff view would act on or hide (src/text/unsafe.ts: C0 and C1 controls, bidi overrides, as
 * in Trojan Source). Anything else is a basic string with each of those escaped, so a reviewed
 * diff shows every character. A lone surrogate has no TOML form: refused.
 */
export function tomlString(text: string): string {
  // A lone surrogate matches UNSAFE_IN_LINES: basicString refuses it.
  if (text.includes("\n") && !text.includes("'''") && !UNSAFE_IN_LINES.test(text) && !text.endsWith("'")) return `'''\n${text}'''`;
  return basicString(text);
}

function basicString(text: string): string {
  if (LONE_SURROGATE.test(text)) throw failed("a tool's name or text is not valid Unicode (a lone surrogate), which substructure.lock cannot hold");
  let out = '"';
  for (const char of text) {
    const code = char.codePointAt(0)!;
    if (char === '"') out += '\\"';
    else if (char === "\\") out += "\\\\";
    else if (char === "\n") out += "\\n";
    else if (char === "\t") out += "\\t";
    else if (UNSAFE.test(char)) out += `\\u${code.toString(16).toUpperCase().padStart(4, "0")}`;
    else out += char;
  }
  return out + '"';
}

// ---- Reading -------------------------------------------------------------------------------

/** The text of the lock at `file`, undefined when there is none. */
export function readLockSource(file: string, cwd: string): string | undefined {
  try {
    return readFileSync(file, "utf8");
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === "ENOENT") return undefined;
    throw failed(`cannot read ${displayPathOf(file, cwd)}: ${(error as NodeJS.ErrnoException).code ?? String(error)}`);
  }
}

