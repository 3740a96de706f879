// The floor row of `npm run bench`: `subs mcp list --json`'s answer with no CLI framework, no
// Context, no checks of the db's files and no lazy loading. It reads substructure.toml and parses
// it with smol-toml, checks every rule of the file with the same one walk subs runs
// (src/config/check.ts), reads every stored row with better-sqlite3 (read-only) and checks it
// with subs's row checks (src/store/row-check.ts), derives each connection's status
// (src/status/status.ts) and prints the same JSON, key for key (bench.ts compares the two outputs
// before timing). bench.ts bundles it and runs it from a V8 code cache exactly as bin/subs.cjs runs
// subs, so the gap between this row and subs's is what subs itself adds: its loader's bundle, the
// CLI, the Context, the db's safety checks, what it loads to run any command.
import { readFileSync, writeSync } from "node:fs";
import path from "node:path";
import Database from "better-sqlite3";
import { parse } from "smol-toml";
import { checkedFile } from "../src/config/check.ts";
import type { Config } from "../src/config/types.ts";
import { checkedCredentialRow, checkedLostCredentialRow, checkedOpenConnectionRow } from "../src/store/row-check.ts";
import type { CredentialRow, LostCredentialRow, OpenConnectionRow } from "../src/store/schema.ts";
import { localStatuses, storedState } from "../src/status/status.ts";

const fail = (message: string, code: number): never => {
  writeSync(2, `${message}\n`);
  process.exit(code);
};

const file = path.resolve("substructure.toml");
const dir = path.dirname(file);
const data = checkedFile(parse(readFileSync(file, "utf8"), { maxDepth: 64 }), dir) ?? fail("substructure.toml: invalid", 2);
const config = {
  connections: Object.keys(data.mcp).map((id) => {
    const c = data.mcp[id]!;
    return c.auth ? { id, url: c.url, prefixTools: c.prefix_tools, auth: { tokenEnv: c.auth.token_env } } : { id, url: c.url, prefixTools: c.prefix_tools };
  }),
  agents: Object.keys(data.agent).map((name) => ({ name, mcp: data.agent[name]!.mcp, tools: [], agents: [] })),
} as unknown as Config;

let credentials: CredentialRow[] = [];
let open: OpenConnectionRow[] = [];
let lost: LostCredentialRow[] = [];
let db: Database.Database | undefined;
try {
  db = new Database(path.resolve(dir, data.db), { readonly: true, fileMustExist: true });
} catch {}
if (db) {
  credentials = db.prepare("SELECT * FROM subs_credentials ORDER BY id").all().map((row) => checkedCredentialRow(row) ?? fail("a stored credential is corrupt", 1));
  open = db.prepare("SELECT * FROM subs_open_connections ORDER BY id").all().map((row) => checkedOpenConnectionRow(row) ?? fail("a stored row is corrupt", 1));
  lost = db.prepare("SELECT * FROM subs_lost_credentials ORDER BY id").all().map((row) => checkedLostCredentialRow(row) ?? fail("a stored row is corrupt", 1));
  db.close();
}

const iso = (ms: number | null) => (ms === null ? null : new Date(ms).toISOString());
const declared = new Set(config.connections.map((c) => c.id));
const list = [
  ...localStatuses(config, storedState({ credentials, open, lost }), process.env, Date.now()).map((s) => ({
    id: s.id,
    url: s.url,
    auth: s.auth,
    status: s.status,
    usable: s.usable,
    issuer: s.issuer,
    scopes: s.scopes,
    expires_at: iso(s.expiresAt),
    refreshable: s.refreshable,
    token_env: s.tokenEnv,
    logged_in_url: s.loggedInUrl,
    agents: s.agents,
    refresh_expires_at: iso(s.refreshExpiresAt),
    lost: s.lost ? { reason: s.lost.reason, message: s.lost.message, lost_at: iso(s.lost.lostAt) } : null,
    credential: s.credential,
  })),
  ...credentials
    .filter((row) => !declared.has(row.id))
    .map((row) => ({
      id: row.id,
      url: row.url,
      auth: "oauth",
      status: "undeclared",
      usable: false,
      issuer: row.issuer,
      scopes: row.scopes ? row.scopes.split(" ") : [],
      expires_at: iso(row.expires_at),
      refreshable: row.refresh_token !== null,
      token_env: null,
      logged_in_url: null,
      agents: [],
      refresh_expires_at: row.refresh_token !== null ? iso(row.refresh_expires_at) : null,
      lost: null,
      credential: null,
    })),
];
writeSync(1, `${JSON.stringify(list, null, 2)}\n`);
