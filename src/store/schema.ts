// Rows read back from the db are validated like any other input: a corrupt row is an error the
// user must see, never a silent "logged out" (DEVELOPERS.md, "How the code should look" 5).
import { z } from "zod";

export const CredentialRowSchema = z.object({
  id: z.string().min(1),
  url: z.string().min(1),
  issuer: z.string().min(1),
  resource: z.string().nullable(),
  client_json: z.string().min(2),
  access_token: z.string().min(1),
  token_type: z.string().min(1),
  refresh_token: z.string().nullable(),
  expires_at: z.number().int().nullable(),
  scopes: z.string(),
  created_at: z.number().int(),
  updated_at: z.number().int(),
});
export type CredentialRow = z.output<typeof CredentialRowSchema>;

export const ClientRowSchema = z.object({
  issuer: z.string().min(1),
  client_json: z.string().min(2),
  created_at: z.number().int(),
});
export type ClientRow = z.output<typeof ClientRowSchema>;

/** What the store keeps of an OAuth client (RFC 7591 client information, as registered or configured). */
export const StoredClientSchema = z
  .object({
    client_id: z.string().min(1),
    client_secret: z.string().optional(),
    client_id_issued_at: z.number().optional(),
    client_secret_expires_at: z.number().optional(),
    redirect_uris: z.array(z.string()).optional(),
    token_endpoint_auth_method: z.string().optional(),
  })
  .passthrough();
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
];
