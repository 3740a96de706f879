// A reference row of `npm run bench` (issue 6), not part of subs: the least `subs mcp list --json`
// has to do with the pinned stack. Parse substructure.toml with smol-toml, read every stored row
// with better-sqlite3, print one JSON entry per connection; no validation, no CLI parser, no
// statuses. bench.ts bundles it and runs it from a V8 code cache exactly as bin/subs.cjs runs
// subs, so the gap between this row and subs's is what subs itself adds.
"use strict";
const { readFileSync, writeSync } = require("node:fs");
const { parse } = require("smol-toml");
const Database = require("better-sqlite3");

const file = parse(readFileSync("substructure.toml", "utf8"));
const db = new Database("substructure.db", { readonly: true });
const rows = new Map(db.prepare("SELECT * FROM subs_credentials").all().map((row) => [row.id, row]));
db.close();
const list = Object.entries(file.mcp ?? {}).map(([id, c]) => ({ id, url: c.url, expires_at: rows.get(id)?.expires_at ?? null }));
writeSync(1, `${JSON.stringify(list, null, 2)}\n`);
