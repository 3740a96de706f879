// The db's tables: every command that opens the db checks its version against these, and a listing
// loads no more than this of what the store writes (schema.ts, zod's row schemas).
/** Migrations, in order; entry N takes the schema from version N to N+1. Tables are prefixed
 *  `subs_` because the db is shared with the local engine, which owns the rest. */
export const MIGRATIONS: readonly string[] = [
  `CREATE TABLE subs_credentials (
     id TEXT PRIMARY KEY,
     url TEXT NOT NULL,
     issuer TEXT NOT NULL,
     resource TEXT,
     client_json TEXT NOT NULL,
     access_token TEXT NOT NULL,
     token_type TEXT NOT NULL,
     refresh_token TEXT,
     expires_at INTEGER,
     scopes TEXT NOT NULL DEFAULT '',
     created_at INTEGER NOT NULL,
     updated_at INTEGER NOT NULL
   ) STRICT;
   CREATE TABLE subs_clients (
     issuer TEXT PRIMARY KEY,
     client_json TEXT NOT NULL,
     created_at INTEGER NOT NULL
   ) STRICT;`,
  `CREATE TABLE subs_open_connections (
     id TEXT PRIMARY KEY,
     url TEXT NOT NULL,
     checked_at INTEGER NOT NULL
   ) STRICT;`,
  // When a refresh token expires, where its server said (src/auth/grant-expiry.ts), and the record
  // a credential the authorization server rejected for good leaves: why and when, never a token.
  `ALTER TABLE subs_credentials ADD COLUMN refresh_expires_at INTEGER;
   CREATE TABLE subs_lost_credentials (
     id TEXT PRIMARY KEY,
     url TEXT NOT NULL,
     reason TEXT NOT NULL,
     message TEXT NOT NULL,
     lost_at INTEGER NOT NULL
   ) STRICT;`,
  // Who is refreshing a credential, until when (src/auth/refresh.ts): the refresh runs over the
  // network without holding the db's write lock, so other commands never wait on a slow server.
  // A lease is deleted when released and ignored once expired (its holder died).
  `CREATE TABLE subs_refresh_leases (
     id TEXT PRIMARY KEY,
     holder TEXT NOT NULL,
     until INTEGER NOT NULL
   ) STRICT;`,
];
