// The lock a deployment holds (docs/deployment-protocol.md section 3.10, "The lock"): the entries
// of substructure.lock as `subs apply` sends them, checked as the file is (each digest recomputed
// from its fields with the function that wrote it, src/config/tool-lock.ts), bounded, and kept in
// one canonical text so that the same lock sent again is no change. Its agents' sessions withhold
// what it does not allow, as `subs agent serve` does (src/agents/resolve.ts).
import { z } from "zod";
import { canonicalJson, DIGEST_PATTERN, digestOf, faceOfEntry } from "../config/tool-lock.ts";
import { IdSchema } from "./routes/answer.ts";
import type { LockRecord } from "./store/types.ts";

/** The most entries a lock may hold, and the most bytes of its canonical text (section 3.10): past either, `lock_too_large`. */
export const MAX_LOCK_TOOLS = 1000;
export const MAX_LOCK_BYTES = 768 * 1024;

const Json = z.unknown().refine((v) => v !== null && v !== undefined, "expected a JSON value, not null");
export const LockEntrySchema = z.strictObject({
  connection: IdSchema,
  name: z.string().min(1).max(1000),
  digest: z.string().regex(DIGEST_PATTERN, "expected sha256:<64 hex digits>"),
  title: z.string().optional(),
  description: z.string().optional(),
  input_schema: Json.optional(),
  output_schema: Json.optional(),
  annotations: z.record(z.string(), z.unknown()).optional(),
});
export type LockEntry = z.output<typeof LockEntrySchema>;
export const LockSchema = z
  .strictObject({ tools: z.array(LockEntrySchema) })
  .refine((l) => new Set(l.tools.map((t) => `${t.connection}\n${t.name}`)).size === l.tools.length, "the lock names a connection's tool twice");
export type DeployedLock = z.output<typeof LockSchema>;

/** The entries whose digest their fields do not give (edited by hand, or sent wrong), as `connection/name`. */
export function tamperedEntries(lock: LockRecord): string[] {
  return lock.tools.filter((e) => digestOf(faceOfEntry(e)) !== e.digest).map((e) => `${e.connection}/${e.name}`);
}

/** The lock's one text: entries sorted by connection then name, keys sorted. What the store keeps and compares. */
export function lockText(lock: LockRecord): string {
  const tools = [...lock.tools].sort((a, b) => (a.connection === b.connection ? cmp(a.name, b.name) : cmp(a.connection, b.connection)));
  return canonicalJson({ tools });
}
const cmp = (a: string, b: string) => (a < b ? -1 : a > b ? 1 : 0);

/** Why the lock is too large to hold (a message), or undefined. */
export function lockTooLarge(lock: LockRecord): string | undefined {
  if (lock.tools.length > MAX_LOCK_TOOLS) return `the lock holds ${lock.tools.length} tools; a deployment holds at most ${MAX_LOCK_TOOLS}`;
  const bytes = Buffer.byteLength(lockText(lock));
  if (bytes > MAX_LOCK_BYTES) return `the lock is ${bytes} bytes; a deployment holds at most ${MAX_LOCK_BYTES}`;
  return undefined;
}
