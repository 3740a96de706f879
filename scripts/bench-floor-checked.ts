// A second reference row of `npm run bench` (issue 6), not part of subs: scripts/bench-floor.cjs
// plus the one check of the file that CONTRIBUTING.md, rule 5 requires, done by subs's own
// parseConfig (smol-toml, the secret-key walk, zod's check of the file, cross-references). Rows
// are still read without zod, and there is no CLI and no statuses. The gap between this row and
// the plain reference is what validating the file costs; bench.ts runs both the same way.
import { readFileSync, writeSync } from "node:fs";
import Database from "better-sqlite3";
import { parseConfig } from "../src/config/load.ts";

const file = parseConfig(readFileSync("substructure.toml", "utf8"), { path: `${process.cwd()}/substructure.toml`, cwd: process.cwd() });
const db = new Database("substructure.db", { readonly: true });
const rows = new Map((db.prepare("SELECT * FROM subs_credentials").all() as Array<{ id: string; expires_at: unknown }>).map((row) => [row.id, row]));
db.close();
const list = file.connections.map((c) => ({ id: c.id, url: c.url, expires_at: rows.get(c.id)?.expires_at ?? null }));
writeSync(1, `${JSON.stringify(list, null, 2)}\n`);
