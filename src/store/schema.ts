// Rows read back from the db are validated like any other input: a corrupt row is an error the
// user must see, never a silent "logged out" (CONTRIBUTING.md, rule 5).
import * as z from "zod/mini";

const text = (min = 1) => z.string().check(z.minLength(min));

export const CredentialRowSchema = z.object({
  id: text(),
  url: text(),
  issuer: text(),
  resource: z.nullable(z.string()),
  client_json: text(2),
  access_token: text(),
  token_type: text(),
  refresh_token: z.nullable(text()),
  expires_at: z.nullable(z.int()),
  scopes: z.string(),
  created_at: z.int(),
  updated_at: z.int(),
});
export type CredentialRow = z.output<typeof CredentialRowSchema>;

/**
 * A connection whose server answered `subs mcp login` without asking for a credential (MCP
 * authorization is optional for a server): calls to it carry none, for as long as it is declared
 * with this url and no credential is stored for it.
 */
export const OpenConnectionRowSchema = z.object({
  id: text(),
  url: text(),
  checked_at: z.int(),
});
export type OpenConnectionRow = z.output<typeof OpenConnectionRowSchema>;

export const ClientRowSchema = z.object({
  issuer: text(),
  client_json: text(2),
  created_at: z.int(),
});
export type ClientRow = z.output<typeof ClientRowSchema>;

/** What the store keeps of an OAuth client (RFC 7591 client information, as registered or configured). */
export const StoredClientSchema = z.looseObject({
  client_id: text(),
  client_secret: z.optional(z.string()),
  client_id_issued_at: z.optional(z.number()),
  client_secret_expires_at: z.optional(z.number()),
  redirect_uris: z.optional(z.array(z.string())),
  token_endpoint_auth_method: z.optional(z.string()),
});
export type StoredClient = z.output<typeof StoredClientSchema>;

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
];
