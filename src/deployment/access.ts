// API tokens and what each role may do. A token is shown once, when it is made; the store keeps
// its SHA-256 only (a 256-bit random token needs no slow hash: nothing guessable to brute-force),
// and a presented token is hashed and compared with timingSafeEqual so the comparison's time says
// nothing about how much of it matched.
import { createHash, randomBytes, timingSafeEqual } from "node:crypto";
import { expired, type AddToken, type ApiTokenRecord, type DeploymentStore, type Role, type TokenLimits } from "./store/types.ts";

/** A recognisable prefix, so secret scanners (and people) can tell a leaked token for what it is. */
export const TOKEN_PREFIX = "subsd_";

export const hashToken = (token: string) => createHash("sha256").update(token, "utf8").digest();

/**
 * Makes a token and stores its hash; the token is in the answer only (shown once, never stored).
 * It belongs to `person`, or without one to the person named as the token is (a CI job's token is
 * its own person, as a token from before people were kept is).
 */
export async function createToken(
  store: DeploymentStore,
  request: { name: string; role: Role; person?: string; lifetimeMs?: number | null },
  max?: TokenLimits,
): Promise<{ outcome: "created"; token: string; record: ApiTokenRecord } | Exclude<AddToken, { outcome: "added" }>> {
  const id = randomBytes(6).toString("hex");
  const token = `${TOKEN_PREFIX}${randomBytes(32).toString("base64url")}`;
  const added = await store.addToken({ id, name: request.name, role: request.role, person: request.person ?? request.name, hash: hashToken(token), lifetimeMs: request.lifetimeMs ?? null }, max);
  return added.outcome === "added" ? { outcome: "created", token, record: added.token } : added;
}

/** The token a bearer value names, or undefined (an expired one too); never logs or returns the value. */
export async function authenticate(store: DeploymentStore, bearer: string | undefined, now: number): Promise<ApiTokenRecord | undefined> {
  if (bearer === undefined || !bearer.startsWith(TOKEN_PREFIX) || bearer.length > 200) return undefined;
  const hash = hashToken(bearer);
  const found = await store.findToken(hash);
  if (!found || found.hash.length !== hash.length || !timingSafeEqual(found.hash, hash)) return undefined;
  const { hash: _, ...record } = found;
  return expired(record, now) ? undefined : record;
}

/**
 * What a request needs: `read` lists, `consent` starts a consent for a connection already declared,
 * `apply` changes the declarations, `use` calls agents' MCP endpoints, `admin` manages API tokens.
 * A teammate's one `use` token covers their day (list, `subs mcp login`, their MCP client) without
 * the power to change or delete a declaration; CI's `apply` token consents but calls no tool.
 * `audit` reads the record of who called and changed what (section 3.14): `read` and `admin` only,
 * so a teammate's `use` token does not see the others' calls.
 */
export type Need = "read" | "consent" | "apply" | "use" | "admin" | "audit";

export function allows(role: Role, need: Need): boolean {
  switch (role) {
    case "admin":
      return true;
    case "apply":
      return need === "read" || need === "consent" || need === "apply";
    case "use":
      return need === "read" || need === "consent" || need === "use";
    case "read":
      return need === "read" || need === "audit";
  }
}

/** What a request of each need does, as a 403 says it. */
export const DOING: Record<Need, string> = {
  read: "reading the deployment",
  consent: "authorizing a connection",
  apply: "changing the deployment",
  use: "using agents' MCP endpoints",
  admin: "managing API tokens",
  audit: "reading the record of calls and changes",
};

/**
 * A 403's message: what was refused, the roles that may do it (from `allows`, so the two never
 * disagree) and the role the token has, so its holder knows which token to ask the operator for.
 */
export function forbidden(doing: string, need: Need, role: Role): string {
  const may = ROLE_ORDER.filter((r) => allows(r, need));
  const roles = may.length === 1 ? `the ${may[0]} role` : `the role ${may.slice(0, -1).join(", ")} or ${may.at(-1)}`;
  return `${doing} needs a token with ${roles}; this one's role is ${role}`;
}
const ROLE_ORDER: readonly Role[] = ["read", "use", "apply", "admin"];

/** `Authorization: Bearer <token>` (RFC 6750 section 2.1: the scheme is case-insensitive). */
export function bearerOf(header: string | undefined): string | undefined {
  const match = header === undefined ? null : /^Bearer +(\S+) *$/i.exec(header);
  return match?.[1];
}
