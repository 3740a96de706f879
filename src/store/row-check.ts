// The row schemas' rules (schema.ts) by hand, for the rows every listing reads: z.object takes any
// object but an array, requires every key (a nullable one too), and outputs a new object of its
// keys only, in its order. test/store.test.ts holds these checks to the schemas.
import type { CredentialRow, LostCredentialRow, OpenConnectionRow } from "./schema.ts";

const isText = (v: unknown, min = 1): v is string => typeof v === "string" && v.length >= min;
/** z.int(): a number that is a safe integer. */
const isInt = (v: unknown): v is number => typeof v === "number" && Number.isSafeInteger(v);
const isRecord = (v: unknown): v is Record<string, unknown> => typeof v === "object" && v !== null && !Array.isArray(v);

/** What credentialRowSchema() outputs for `row`, or undefined when it would refuse it. */
export function checkedCredentialRow(row: unknown): CredentialRow | undefined {
  if (!isRecord(row)) return undefined;
  const { id, url, issuer, resource, client_json, access_token, token_type, refresh_token, expires_at, refresh_expires_at, scopes, created_at, updated_at } = row;
  if (!isText(id) || !isText(url) || !isText(issuer) || !(resource === null || typeof resource === "string") || !isText(client_json, 2)) return undefined;
  if (!isText(access_token) || !isText(token_type) || !(refresh_token === null || isText(refresh_token)) || !(expires_at === null || isInt(expires_at))) return undefined;
  if (!(refresh_expires_at === null || isInt(refresh_expires_at))) return undefined;
  if (typeof scopes !== "string" || !isInt(created_at) || !isInt(updated_at)) return undefined;
  return { id, url, issuer, resource, client_json, access_token, token_type, refresh_token, expires_at, refresh_expires_at, scopes, created_at, updated_at };
}

/** What lostCredentialRowSchema() outputs for `row`, or undefined when it would refuse it. */
export function checkedLostCredentialRow(row: unknown): LostCredentialRow | undefined {
  if (!isRecord(row)) return undefined;
  const { id, url, reason, message, lost_at } = row;
  return isText(id) && isText(url) && isText(reason) && typeof message === "string" && isInt(lost_at) ? { id, url, reason, message, lost_at } : undefined;
}

/** What openConnectionRowSchema() outputs for `row`, or undefined when it would refuse it. */
export function checkedOpenConnectionRow(row: unknown): OpenConnectionRow | undefined {
  if (!isRecord(row)) return undefined;
  const { id, url, checked_at } = row;
  return isText(id) && isText(url) && isInt(checked_at) ? { id, url, checked_at } : undefined;
}

