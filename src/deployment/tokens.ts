// The deployment's API tokens, managed in two places with one set of rules: over its API
// (POST/GET/DELETE /v1/tokens, docs/deployment-protocol.md section 3.11), from anywhere with an
// admin token, and in its store, on its host (`--store`). `subs deployment token` is written once
// against `TokenPlace`; the deployment's routes (routes/tokens.ts) apply the same rules.
import { z } from "zod";
import type { RemoteConfig } from "../config/types.ts";
import type { Context } from "../context.ts";
import { failed, refused, SubsError, usage } from "../errors.ts";
import type { Reporter } from "../report.ts";
import { TOKEN_REFUSAL_HINTS, type RemoteApiToken } from "../remote/protocol.ts";
import { createToken } from "./access.ts";
import { changeEntry, type Change } from "./audit.ts";
import { deploymentConfig, isLoopbackHost, type Flags } from "./config.ts";
import { ROLES, type ApiTokenRecord, type CredentialRecord, type DeploymentStore, type PersonRecord, type Role } from "./store/types.ts";

/** How many tokens a deployment holds at most: a small team's people, laptops and CI jobs, with room to spare. */
export const MAX_TOKENS = 1000;
/** How many people it keeps (each token's, and those whose tokens were all revoked but who were not removed). */
export const MAX_PEOPLE = 1000;
const LIMITS = { tokens: MAX_TOKENS, people: MAX_PEOPLE };
/** The longest life a token may be given: ten years, in seconds. */
export const MAX_EXPIRES_IN = 10 * 366 * 24 * 3600;
const NAME = /^[A-Za-z0-9][A-Za-z0-9 ._@-]{0,63}$/;
export const NAME_RULE = "1-64 letters, digits, spaces and . _ @ -, starting with a letter or digit";
/** A person's name: an email address, a login, or a token's name from before people were kept. */
const PERSON = /^[A-Za-z0-9][A-Za-z0-9 ._@+-]{0,127}$/;
export const PERSON_RULE = "1-128 letters, digits, spaces and . _ @ + -, starting with a letter or digit";
export const PersonName = z.string().regex(PERSON, PERSON_RULE);

/** `POST /v1/tokens`'s body (section 3.11). */
export const CreateTokenBody = z.strictObject({
  name: z.string().regex(NAME, NAME_RULE),
  role: z.enum(ROLES as [Role, ...Role[]]),
  /** Whose it is (section 3.13); absent, the person named as the token is. */
  person: PersonName.optional(),
  expires_in: z.number().int().min(1).max(MAX_EXPIRES_IN).optional(),
});
export type CreateTokenRequest = z.output<typeof CreateTokenBody>;

/** A token as section 3.11 lists it: never its value, nor its hash. */
export type TokenJson = { id: string; name: string; role: string; person: string; created_at: string; expires_at: string | null; last_used_at: string | null };
/** A person as section 3.13 lists them. */
export type PersonJson = { name: string; created_at: string; tokens: number };
/**
 * What removing a person did (section 3.13): the tokens revoked with them, and each personal
 * credential of theirs the deployment deleted, with what its authorization server said of the
 * revocation of its grant (RFC 7009): `revoked`, `not_offered` (it offers none), `failed`, or
 * `not_attempted` (removed on the host, which holds no key to read the credential with).
 */
export type GrantJson = { connection: string; issuer: string; revocation: "revoked" | "not_offered" | "failed" | "not_attempted" };
export type RemovedPersonJson = { person: PersonJson; tokens: TokenJson[]; grants: GrantJson[] };
/** A new token, its value shown this once. */
export type CreatedTokenJson = Omit<TokenJson, "last_used_at"> & { token: string };

const iso = (ms: number | null) => (ms === null ? null : new Date(ms).toISOString());
export const tokenJson = (t: ApiTokenRecord): TokenJson => ({ id: t.id, name: t.name, role: t.role, person: t.person, created_at: iso(t.createdAt)!, expires_at: iso(t.expiresAt), last_used_at: iso(t.lastUsedAt) });

const NAME_TAKEN = (name: string) => `a token named ${JSON.stringify(name)} exists; names are unique`;
export const LAST_ADMIN = "this is the last admin token that has not expired: revoking it would leave nobody able to manage tokens";
export const LAST_ADMIN_PERSON = (name: string) => `${JSON.stringify(name)} holds the last admin token that has not expired: removing them would leave nobody able to manage tokens`;
const TOO_MANY = (max: number) => `the deployment holds ${max} tokens, the most it keeps`;
const TOO_MANY_PEOPLE = (max: number) => `the deployment keeps ${max} people, the most it keeps`;
export const NO_PERSON = (name: string) => `no person is named ${JSON.stringify(name)}`;
export const personJson = (p: PersonRecord): PersonJson => ({ name: p.name, created_at: iso(p.createdAt)!, tokens: p.tokens });

/**
 * Removes a person by section 3.13's rules, wherever it is asked for: what went, or the refusal
 * (`not_found`, `last_admin`) with its message.
 */
export async function removePersonFrom(
  store: DeploymentStore,
  name: string,
  now: number,
  revoke?: (credential: CredentialRecord) => Promise<GrantJson["revocation"]>,
): Promise<{ removed: RemovedPersonJson } | { refused: "not_found" | "last_admin"; message: string }> {
  const gone = await store.removePerson(name, now);
  if (gone.outcome === "absent") return { refused: "not_found", message: NO_PERSON(name) };
  if (gone.outcome === "last_admin") return { refused: "last_admin", message: LAST_ADMIN_PERSON(name) };
  const grants = await Promise.all(
    gone.held.map(async (h): Promise<GrantJson> => {
      const credential = gone.credentials.find((c) => c.id === h.id);
      return { connection: h.id, issuer: h.issuer, revocation: credential && revoke ? await revoke(credential) : "not_attempted" };
    }),
  );
  return { removed: { person: personJson(gone.person), tokens: gone.tokens.map(tokenJson), grants } };
}

/**
 * Makes a token by section 3.11's rules, wherever it is asked for (the API's route, the store on
 * the host): its 201 body, or the refusal (`name_taken`, `too_many_tokens`) with its message.
 */
export async function makeToken(store: DeploymentStore, request: CreateTokenRequest): Promise<{ created: CreatedTokenJson } | { refused: "name_taken" | "too_many_tokens" | "too_many_people"; message: string }> {
  const lifetimeMs = request.expires_in === undefined ? null : request.expires_in * 1000;
  const made = await createToken(store, { name: request.name, role: request.role, ...(request.person !== undefined ? { person: request.person } : {}), lifetimeMs }, LIMITS);
  if (made.outcome === "name_taken") return { refused: "name_taken", message: NAME_TAKEN(request.name) };
  if (made.outcome === "too_many") return { refused: "too_many_tokens", message: TOO_MANY(made.max) };
  if (made.outcome === "too_many_people") return { refused: "too_many_people", message: TOO_MANY_PEOPLE(made.max) };
  const { last_used_at: _, ...json } = tokenJson(made.record);
  return { created: { ...json, token: made.token } };
}

/** What the record says of a token made or revoked (audit.ts): never its value. */
export const createdDetail = (t: Pick<CreatedTokenJson, "id" | "name" | "role" | "person" | "expires_at">) => ({ token_id: t.id, name: t.name, role: t.role, person: t.person, expires_at: t.expires_at });
export const revokedDetail = (t: Pick<ApiTokenRecord, "id" | "name" | "role" | "person">) => ({ token_id: t.id, name: t.name, role: t.role, person: t.person });
/** What the record says of a person removed: who, and the tokens that went with them (ids and names). */
export const removedDetail = (r: RemovedPersonJson) => ({ removed: r.person.name, tokens: r.tokens.map((t) => ({ token_id: t.id, name: t.name, role: t.role })), grants: r.grants });

/** Where the tokens are managed: the deployment's API, or its store on this host. */
export interface TokenPlace {
  /** The deployment's URL or the store, as messages name it. */
  readonly where: string;
  create(request: CreateTokenRequest): Promise<CreatedTokenJson>;
  list(): Promise<TokenJson[]>;
  /** By id. */
  revoke(id: string): Promise<void>;
  people(): Promise<PersonJson[]>;
  /** The person and every token of theirs (section 3.13). */
  removePerson(name: string): Promise<RemovedPersonJson>;
  close(): Promise<void>;
}

/**
 * The tokens in a store, as the deployment's routes manage them. Each change goes into the record
 * too (audit.ts), made by nobody's token (`detail.via`: "store"); `warn` is told when that write
 * fails, which fails nothing.
 */
export function storeTokens(store: DeploymentStore, now: () => number, warn: (text: string) => void = () => {}): TokenPlace {
  const recorded = async (change: Change) => {
    try {
      await store.appendAudit([changeEntry(change, now())]);
    } catch (error) {
      warn(`the change was made, but not written to the deployment's record: ${error instanceof Error ? error.message : String(error)}`);
    }
  };
  return {
    where: store.path,
    async create(request) {
      const made = await makeToken(store, request);
      if ("refused" in made) throw refused(made.message, { code: made.refused, hint: TOKEN_REFUSAL_HINTS[made.refused] });
      await recorded({ kind: "token.create", actor: undefined, detail: { ...createdDetail(made.created), via: "store" } });
      return made.created;
    },
    list: async () => (await store.listTokens()).map(tokenJson),
    async revoke(id) {
      const gone = await store.revokeToken(id, now());
      if (gone.outcome === "absent") throw failed(`no token has the id ${JSON.stringify(id)}`, { code: "not_found", hint: "`subs deployment token list` shows them" });
      if (gone.outcome === "last_admin") throw refused(LAST_ADMIN, { code: "last_admin", hint: TOKEN_REFUSAL_HINTS.last_admin });
      await recorded({ kind: "token.revoke", actor: undefined, detail: { ...revokedDetail(gone.token), via: "store" } });
    },
    people: async () => (await store.listPeople()).map(personJson),
    async removePerson(name) {
      const gone = await removePersonFrom(store, name, now());
      if ("removed" in gone) {
        await recorded({ kind: "person.remove", actor: undefined, detail: { ...removedDetail(gone.removed), via: "store" } });
        return gone.removed;
      }
      if (gone.refused === "not_found") throw failed(gone.message, { code: "not_found", hint: "`subs deployment person list` shows them" });
      throw refused(gone.message, { code: "last_admin", hint: TOKEN_REFUSAL_HINTS.last_admin });
    },
    close: () => store.close(),
  };
}

/** The tokens of a deployment, over its API (section 3.11), with the admin token the client sends. */
async function apiTokens(ctx: TokenCtx, remote: RemoteConfig, reporter: Reporter): Promise<TokenPlace> {
  const { DeploymentClient } = await import("../remote/client.ts");
  const client = new DeploymentClient({ remote, ctx, reporter });
  return {
    where: client.base.href.replace(/\/$/, ""),
    create: async (request) => {
      const made = await client.createToken(request);
      // One from before people were kept sends no `person`; it refuses one in the request as an unknown field.
      return { ...made, person: made.person ?? request.person ?? made.name, expires_at: made.expires_at ?? null };
    },
    // An absent optional field and null mean the same (section 1).
    list: async () => (await client.listTokens()).map(apiTokenJson),
    revoke: (id) => client.revokeToken(id),
    people: async () => (await client.listPeople()).map((p) => ({ name: p.name, created_at: p.created_at, tokens: p.tokens })),
    removePerson: async (name) => {
      const gone = await client.removePerson(name);
      return { person: { name: gone.person.name, created_at: gone.person.created_at, tokens: gone.person.tokens }, tokens: gone.tokens.map(apiTokenJson), grants: (gone.grants ?? []).map((g) => ({ connection: g.connection, issuer: g.issuer, revocation: g.revocation })) };
    },
    close: async () => {},
  };
}

/**
 * A token as the API listed it. An absent optional field and null mean the same (section 1); a
 * deployment from before people were kept sends no `person`: each token was then its own person,
 * named as it is (section 3.13).
 */
const apiTokenJson = (t: RemoteApiToken): TokenJson => ({
  id: t.id,
  name: t.name,
  role: t.role,
  person: t.person ?? t.name,
  created_at: t.created_at,
  expires_at: t.expires_at ?? null,
  last_used_at: t.last_used_at ?? null,
});

export type TokenCtx = Pick<Context, "env" | "cwd" | "fetch" | "signal" | "now">;

/** Which deployment's tokens: `--url`, `--store` (on its host), else the project's `[remote]`. */
export type TokenTarget = { url?: string; config?: string; flags: Flags };

/**
 * Which deployment a host-or-API command works on: `--store` (or $SUBS_DEPLOYMENT_STORE) is the
 * store on this host, opened, refused when there is none yet; `--url` the API of the deployment
 * there, with the token in $SUBSTRUCTURE_TOKEN; neither, the API of the project's `[remote]`, with
 * its token_env. Both is a usage error. `role`: the token the API needs, as the refusal names it.
 */
export async function deploymentPlace(
  ctx: TokenCtx,
  target: TokenTarget,
  reporter: Reporter,
  role: string,
): Promise<{ store: DeploymentStore } | { remote: RemoteConfig }> {
  const storeGiven = target.flags.store !== undefined || Boolean(ctx.env.SUBS_DEPLOYMENT_STORE);
  if (storeGiven && target.url !== undefined) {
    throw usage("--url and --store name two places; give one", { hint: "--url for the deployment's API (from anywhere), --store for its store (on its host)" });
  }
  if (storeGiven) {
    const config = deploymentConfig(target.flags, ctx, { serve: false });
    for (const warning of config.warnings) reporter.warn(warning);
    const { openStore } = await import("./commands.ts");
    return { store: await openStore(config, undefined, { mustExist: true }) };
  }
  if (target.url !== undefined) return { remote: { url: checkedUrl(target.url), tokenEnv: "SUBSTRUCTURE_TOKEN" } };
  const remote = await projectRemote(ctx, target.config);
  if (!remote) {
    throw usage("which deployment? no --url, no --store, and no substructure.toml with [remote] here", {
      hint: `give --url https://subs.example.com (${role} token in $SUBSTRUCTURE_TOKEN), or --store DIR|URL on the deployment's host`,
    });
  }
  return { remote };
}

/** The tokens where deploymentPlace says. */
export async function tokenPlace(ctx: TokenCtx, target: TokenTarget, reporter: Reporter): Promise<TokenPlace> {
  const place = await deploymentPlace(ctx, target, reporter, "an admin");
  return "store" in place ? storeTokens(place.store, ctx.now, (text) => reporter.warn(text)) : apiTokens(ctx, place.remote, reporter);
}

/** `--url`: https, or plain http to a loopback host only (the protocol's rule for `[remote].url`). */
function checkedUrl(text: string): string {
  let url: URL;
  try {
    url = new URL(text);
  } catch {
    throw usage(`--url ${JSON.stringify(text)}: not a URL`, { hint: "e.g. --url https://subs.example.com" });
  }
  if (url.protocol !== "https:" && !(url.protocol === "http:" && isLoopbackHost(url.hostname))) {
    throw usage(`--url ${JSON.stringify(text)}: must be https (plain http only to a loopback host)`, { hint: "the admin token goes with every request: never over plain http" });
  }
  if (url.search || url.hash || url.username || url.password) throw usage(`--url ${JSON.stringify(text)}: give the deployment's base URL, without a query, a fragment or credentials`);
  return url.href;
}

/** The `[remote]` of the file `--config` or $SUBS_CONFIG names, else of the nearest substructure.toml upward, if any. */
async function projectRemote(ctx: TokenCtx, config: string | undefined): Promise<RemoteConfig | undefined> {
  const { findConfigPath } = await import("../config/find.ts");
  let file: string;
  try {
    file = findConfigPath({ explicit: config, env: ctx.env, cwd: ctx.cwd });
  } catch (error) {
    // No file anywhere upward (a file named and missing is an error of its own).
    if (error instanceof SubsError && error.kind === "usage" && config === undefined && !ctx.env.SUBS_CONFIG) return undefined;
    throw error;
  }
  const { loadConfig } = await import("../config/load.ts");
  return loadConfig({ configPath: file, env: ctx.env, cwd: ctx.cwd }).remote;
}

/** A token named by its id, or by its exact name; never two tokens: an id of one that is another's name is refused. */
export function pickToken(tokens: readonly TokenJson[], idOrName: string): TokenJson {
  const byId = tokens.filter((t) => t.id === idOrName);
  const byName = tokens.filter((t) => t.name === idOrName);
  const matches = [...new Set([...byId, ...byName])];
  if (matches.length === 0) throw failed(`no token has the id or name ${JSON.stringify(idOrName)}`, { code: "not_found", hint: "`subs deployment token list` shows them" });
  if (matches.length > 1) {
    throw refused(`${JSON.stringify(idOrName)} names ${matches.length} tokens (${matches.map((t) => t.id).join(", ")}); nothing was revoked`, { code: "ambiguous_token", hint: "revoke by id, as `subs deployment token list` shows it" });
  }
  return matches[0]!;
}

/** Makes a token where `target` says; its value is in the answer only. */
export async function createApiToken(ctx: TokenCtx, target: TokenTarget, request: { name: string; role: string; person?: string; expires_in?: number }, reporter: Reporter): Promise<{ where: string; created: CreatedTokenJson }> {
  const checked = CreateTokenBody.safeParse(request);
  if (!checked.success) throw usage(issueText(checked.error, request));
  const place = await tokenPlace(ctx, target, reporter);
  try {
    return { where: place.where, created: await place.create(checked.data) };
  } finally {
    await place.close();
  }
}

export async function listApiTokens(ctx: TokenCtx, target: TokenTarget, reporter: Reporter): Promise<{ where: string; tokens: TokenJson[] }> {
  const place = await tokenPlace(ctx, target, reporter);
  try {
    return { where: place.where, tokens: await place.list() };
  } finally {
    await place.close();
  }
}

/**
 * Revokes the one token `idOrName` names (pickToken). With `removePerson`, its person goes with it
 * (section 3.13) — only when it is their last token: a person who still holds others is refused,
 * nothing revoked, so that one word never takes more tokens than the person asked about.
 */
export async function revokeApiToken(
  ctx: TokenCtx,
  target: TokenTarget,
  idOrName: string,
  reporter: Reporter,
  options: { removePerson?: boolean } = {},
): Promise<{ where: string; revoked: TokenJson; removedPerson?: RemovedPersonJson }> {
  const place = await tokenPlace(ctx, target, reporter);
  try {
    const tokens = await place.list();
    const token = pickToken(tokens, idOrName);
    if (options.removePerson) {
      const others = tokens.filter((t) => t.person === token.person && t.id !== token.id);
      if (others.length > 0) {
        throw refused(`${JSON.stringify(token.person)} holds ${others.length} other token${others.length === 1 ? "" : "s"} (${others.map((t) => t.id).join(", ")}); nothing was revoked`, {
          code: "person_has_tokens",
          hint: `revoke without --remove-person, or remove the person and every token of theirs: \`subs deployment person remove ${JSON.stringify(token.person)}\``,
        });
      }
      const removedPerson = await place.removePerson(token.person);
      return { where: place.where, revoked: token, removedPerson };
    }
    await place.revoke(token.id);
    return { where: place.where, revoked: token };
  } finally {
    await place.close();
  }
}

export async function listPeople(ctx: TokenCtx, target: TokenTarget, reporter: Reporter): Promise<{ where: string; people: PersonJson[] }> {
  const place = await tokenPlace(ctx, target, reporter);
  try {
    return { where: place.where, people: await place.people() };
  } finally {
    await place.close();
  }
}

/** Removes a person and every token of theirs (section 3.13). */
export async function removePerson(ctx: TokenCtx, target: TokenTarget, name: string, reporter: Reporter): Promise<{ where: string; removed: RemovedPersonJson }> {
  const checked = PersonName.safeParse(name);
  if (!checked.success) throw usage(`${JSON.stringify(name)}: a person's name is ${PERSON_RULE}`);
  const place = await tokenPlace(ctx, target, reporter);
  try {
    return { where: place.where, removed: await place.removePerson(name) };
  } finally {
    await place.close();
  }
}

const FLAG_OF: Record<string, string> = { name: "--name", role: "--role", person: "--person", expires_in: "--expires-in" };

/** A refused request in the words of the command's flags. */
function issueText(error: z.ZodError, request: Record<string, unknown>): string {
  const field = String(error.issues[0]?.path[0] ?? "name");
  const rule = field === "role" ? `must be one of ${ROLES.join(", ")}` : field === "expires_in" ? `from 1 second to ${MAX_EXPIRES_IN / (366 * 86400)} years` : field === "person" ? PERSON_RULE : NAME_RULE;
  return `${FLAG_OF[field] ?? field} ${JSON.stringify(request[field])}: ${rule}`;
}
