// Reading substructure.lock (src/config/tool-lock.ts is its format): every entry checked as
// substructure.toml is (zod's schema, each problem at file:line:col, all at once), and each
// entry's digest recomputed from its fields, so an entry edited by hand is refused. Loaded only
// when a lock exists.
import { parse, TomlError } from "smol-toml";
import { z } from "zod";
import { ConfigError, type Diagnostic } from "../errors.ts";
import { displayPathOf } from "./parse.ts";
import { indexPositions, type KeyPath, type PositionIndex } from "./positions.ts";
import { DIGEST_PATTERN, digestOf, LOCK_VERSION, type LockedTool, type ToolFace, type ToolLock } from "./tool-lock.ts";

const JsonText = z.string();
const Entry = z.strictObject({
  digest: z.string().regex(DIGEST_PATTERN, "expected sha256:<64 hex digits>"),
  title: z.string().optional(),
  description: z.string().optional(),
  annotations: JsonText.optional(),
  input_schema: JsonText.optional(),
  output_schema: JsonText.optional(),
});
const LockSchema = z.strictObject({
  version: z.literal(LOCK_VERSION, { error: `expected version = ${LOCK_VERSION}, the only version this subs reads` }),
  mcp: z.record(z.string(), z.strictObject({ tools: z.record(z.string(), Entry) })).optional(),
});

/** `source`, the text of the lock at `where.path`, checked: every problem at file:line:col, all at once. */
export function parseToolLock(source: string, where: { path: string; cwd: string }): ToolLock {
  const shownPath = displayPathOf(where.path, where.cwd);
  const at = (line: number, col: number, message: string, hint?: string): Diagnostic => ({ file: shownPath, line, col, message, ...(hint ? { hint } : {}) });
  let raw: unknown;
  try {
    raw = parse(source, { maxDepth: 16 });
  } catch (error) {
    if (error instanceof TomlError) throw new ConfigError([at(error.line, error.column, `invalid TOML: ${(error.message.split("\n")[0] ?? "").replace(/^Invalid TOML document:\s*/, "")}`)]);
    throw error;
  }
  let positions: PositionIndex | undefined;
  const locate = (keyPath: KeyPath) => (positions ??= indexPositions(source)).locate(keyPath);
  const diagnostic = (keyPath: KeyPath, message: string, hint?: string) => {
    const { line, col } = locate(keyPath);
    return at(line, col, message, hint);
  };
  const REGENERATE = "run `subs lock` to write it again from what the servers offer";

  const checked = LockSchema.safeParse(raw);
  if (!checked.success) {
    throw new ConfigError(
      checked.error.issues.map((issue) => {
        const keyPath = issue.path.filter((p): p is string | number => typeof p !== "symbol");
        if (issue.code === "unrecognized_keys") return diagnostic([...keyPath, issue.keys[0]!], `unknown key \`${issue.keys.join("`, `")}\``, REGENERATE);
        return diagnostic(keyPath, issue.message, REGENERATE);
      }),
    );
  }
  const diagnostics: Diagnostic[] = [];
  const connections = new Map<string, Map<string, LockedTool>>();
  for (const [connection, { tools }] of Object.entries(checked.data.mcp ?? {})) {
    const byName = new Map<string, LockedTool>();
    for (const [name, entry] of Object.entries(tools)) {
      const keyPath = ["mcp", connection, "tools", name];
      const face: ToolFace = { name };
      if (entry.title !== undefined) face.title = entry.title;
      if (entry.description !== undefined) face.description = entry.description;
      let jsonOk = true;
      for (const [key, field] of [["annotations", "annotations"], ["input_schema", "inputSchema"], ["output_schema", "outputSchema"]] as const) {
        const text = entry[key];
        if (text === undefined) continue;
        try {
          const value: unknown = JSON.parse(text);
          if (field === "annotations" && (value === null || typeof value !== "object" || Array.isArray(value))) throw new Error("not an object");
          (face as Record<string, unknown>)[field] = value;
        } catch {
          jsonOk = false;
          diagnostics.push(diagnostic([...keyPath, key], `\`${key}\` is not ${field === "annotations" ? "a JSON object" : "JSON"}`, REGENERATE));
        }
      }
      if (jsonOk && digestOf(face) !== entry.digest) {
        diagnostics.push(diagnostic([...keyPath, "digest"], `the digest of \`${name}\` does not match its fields: the entry was edited by hand`, `review the change, then ${REGENERATE}`));
      }
      byName.set(name, { ...face, digest: entry.digest });
    }
    connections.set(connection, byName);
  }
  if (diagnostics.length > 0) throw new ConfigError(diagnostics);
  return { path: where.path, connections };
}
