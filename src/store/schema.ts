// Rows read back from the db are validated like any other input: a corrupt row is an error the
// user must see, never a silent "logged out" (CONTRIBUTING.md, rule 5). These zod schemas are the
// rules; every listing reads every row, so the rows it reads are checked by hand-written checks of
// the same rules (row-check.ts), which test/store.test.ts holds to the schemas, and a row they
// refuse goes to the schema. The schemas are built on first use (a write, a refused row):
// building them cost about 1 ms of every command that opens the db.
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
    /** When the refresh token expires, where the authorization server said (null: unknown). */
    refresh_expires_at: z.nullable(z.int()),
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

/**
 * A credential the authorization server rejected for good (its refresh `invalid_grant`): the
 * credential is deleted, and this says why until a new login for the id (`message`: one line,
 * made visible and scrubbed of the credential's tokens before it was stored).
 */
const buildLostCredentialRowSchema = () =>
  z.object({
    id: text(),
    url: text(),
    reason: text(),
    message: z.string(),
    lost_at: z.int(),
  });
export const lostCredentialRowSchema = lazily(buildLostCredentialRowSchema);
export type LostCredentialRow = z.output<ReturnType<typeof buildLostCredentialRowSchema>>;

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

// The db's tables, for whoever imports them from here.
export { MIGRATIONS } from "./migrations.ts";
