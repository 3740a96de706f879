// Rows read back from the db are validated like any other input: a corrupt row is an error the
// user must see, never a silent "logged out" (CONTRIBUTING.md, rule 5). The zod schemas are the
// rules; every listing reads every row, so the rows it reads are checked by hand-written checks of
// the same rules (checkedCredentialRow, checkedOpenConnectionRow), which test/store.test.ts holds
// to the schemas, and a row they refuse goes to the schema. The schemas are built on first use
// (a write, a refused row): building them cost about 1 ms of every command that opens the db.
import * as z from "zod/mini";
import { lazily } from "../lazy.ts";

const text = (min = 1) => z.string().check(z.minLength(min));

const buildCredentialRowSchema = () =>
  z.object({
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
export const credentialRowSchema = lazily(buildCredentialRowSchema);
export type CredentialRow = z.output<ReturnType<typeof buildCredentialRowSchema>>;

/**
 * A connection whose server answered `subs mcp login` without asking for a credential (MCP
 * authorization is optional for a server): calls to it carry none, for as long as it is declared
 * with this url and no credential is stored for it.
 */
const buildOpenConnectionRowSchema = () =>
  z.object({
    id: text(),
    url: text(),
    checked_at: z.int(),
  });
export const openConnectionRowSchema = lazily(buildOpenConnectionRowSchema);
export type OpenConnectionRow = z.output<ReturnType<typeof buildOpenConnectionRowSchema>>;

const buildClientRowSchema = () =>
  z.object({
    issuer: text(),
    client_json: text(2),
    created_at: z.int(),
  });
export const clientRowSchema = lazily(buildClientRowSchema);
export type ClientRow = z.output<ReturnType<typeof buildClientRowSchema>>;

/** What the store keeps of an OAuth client (RFC 7591 client information, as registered or configured). */
const buildStoredClientSchema = () =>
  z.looseObject({
    client_id: text(),
    client_secret: z.optional(z.string()),
    client_id_issued_at: z.optional(z.number()),
    client_secret_expires_at: z.optional(z.number()),
    redirect_uris: z.optional(z.array(z.string())),
    token_endpoint_auth_method: z.optional(z.string()),
  });
export const storedClientSchema = lazily(buildStoredClientSchema);
export type StoredClient = z.output<ReturnType<typeof buildStoredClientSchema>>;

// The schemas' rules by hand. z.object takes any object but an array, requires every key (a
// nullable one too), and outputs a new object of its keys only, in its order.
const isText = (v: unknown, min = 1): v is string => typeof v === "string" && v.length >= min;
/** z.int(): a number that is a safe integer. */
const isInt = (v: unknown): v is number => typeof v === "number" && Number.isSafeInteger(v);
const isRecord = (v: unknown): v is Record<string, unknown> => typeof v === "object" && v !== null && !Array.isArray(v);

/** What credentialRowSchema() outputs for `row`, or undefined when it would refuse it. */
export function checkedCredentialRow(row: unknown): CredentialRow | undefined {
  if (!isRecord(row)) return undefined;
  const { id, url, issuer, resource, client_json, access_token, token_type, refresh_token, expires_at, scopes, created_at, updated_at } = row;
  if (!isText(id) || !isText(url) || !isText(issuer) || !(resource === null || typeof resource === "string") || !isText(client_json, 2)) return undefined;
  if (!isText(access_token) || !isText(token_type) || !(refresh_token === null || isText(refresh_token)) || !(expires_at === null || isInt(expires_at))) return undefined;
  if (typeof scopes !== "string" || !isInt(created_at) || !isInt(updated_at)) return undefined;
  return { id, url, issuer, resource, client_json, access_token, token_type, refresh_token, expires_at, scopes, created_at, updated_at };
}

/** What openConnectionRowSchema() outputs for `row`, or undefined when it would refuse it. */
export function checkedOpenConnectionRow(row: unknown): OpenConnectionRow | undefined {
  if (!isRecord(row)) return undefined;
  const { id, url, checked_at } = row;
  return isText(id) && isText(url) && isInt(checked_at) ? { id, url, checked_at } : undefined;
}

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
