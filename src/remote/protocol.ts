// The wire shapes of the deployment protocol (docs/deployment-protocol.md). Every answer is
// validated here before anything else reads it (GUIDE "Validate with zod at every boundary").
// Objects are not strict: a newer deployment may add fields, and clients ignore them (docs,
// "Compatibility").
// zod/mini, like the rest of subs: classic zod would make its whole core shared start-up code
// for every command.
import * as z from "zod/mini";

const text = () => z.string().check(z.minLength(1));
const orNull = <T extends z.core.SomeType>(schema: T) => z.nullish(schema);
const listOrEmpty = z.pipe(
  z.nullish(z.array(z.string())),
  z.transform((v: string[] | null | undefined) => v ?? []),
);

// Answers may spell an absent optional field as null; both read the same.
export const ConnectionOAuthSchema = z.object({
  client_id: orNull(text()),
  client_metadata_url: orNull(text()),
  scopes: orNull(z.array(z.string())),
});
export type ConnectionOAuth = z.output<typeof ConnectionOAuthSchema>;

const timestamp = z.iso.datetime({ offset: true });

/** Section 2, `refused`: why the deployment will not use a declared connection (`url_not_in_catalog`). */
export const RefusedSchema = z.object({ error: text(), message: orNull(z.string()) });

/**
 * Section 2, `secrets`: a variable the connection's `headers` name and whether the deployment holds
 * a value for it (section 3.12). Never the value.
 */
export const HeldSecretSchema = z.object({ name: text(), held: z.boolean(), set_at: orNull(timestamp), set_by: orNull(text()) });
export type HeldSecret = z.output<typeof HeldSecretSchema>;
/** The variables of `secrets` the deployment holds no value for, in its order. */
export const notHeld = (secrets: readonly HeldSecret[] | null | undefined): string[] => (secrets ?? []).filter((s) => !s.held).map((s) => s.name);

/**
 * Section 2, `lost`: the deployment lost the connection's credential for good (section 5) and says
 * why: `reason` (`refresh_rejected`, `no_refresh_token`, `server_moved`, `refused_after_refresh`,
 * or a later one: any word), a line made visible by the deployment, and when. Shown, never
 * interpreted (SECURITY.md, "What subs shows of server text").
 */
export const LostSchema = z.object({ reason: text(), message: orNull(z.string()), lost_at: orNull(timestamp) });
export type RemoteLoss = z.output<typeof LostSchema>;

export const ConnectionSchema = z.object({
  id: text(),
  url: text(),
  prefix_tools: z.boolean(),
  oauth: orNull(ConnectionOAuthSchema),
  /** Section 3.2: the header templates as last PUT (not secret: the values are held apart). */
  headers: orNull(z.record(z.string(), z.string())),
  secrets: orNull(z.array(HeldSecretSchema)),
  /** Section 2: `personal`, one credential per person, `status` and the times being the caller's own; absent, `shared`. */
  credential: orNull(z.enum(["shared", "personal"])),
  status: z.enum(["declared", "authorized"]),
  authorized_at: orNull(timestamp),
  authorized_by: orNull(text()),
  expires_at: orNull(timestamp),
  /** When the refresh token (the grant) of the held credential expires, where its server said. */
  refresh_expires_at: orNull(timestamp),
  lost: orNull(LostSchema),
  refused: orNull(RefusedSchema),
});
export type RemoteConnection = z.output<typeof ConnectionSchema>;

/**
 * `revision` (section 3.10): the declarations' revision, from a deployment that has PUT /v1/state.
 * `catalog` (section 3.1): every allowed URL, when a connection is refused for being outside it.
 */
export const ConnectionListSchema = z.object({ connections: z.array(ConnectionSchema), revision: orNull(text()), catalog: orNull(z.array(z.string())) });

/**
 * PUT /v1/mcp/{id}. Never carries `auth` or a client secret: the deployment rejects one that does.
 * `headers` only when the file has some, `credential` only when personal (section 9: a deployment
 * without them refuses the field).
 */
export type ConnectionBody = { url: string; prefix_tools: boolean; oauth?: OAuthSettingsBody; headers?: Record<string, string>; credential?: "personal" };
/** The non-secret OAuth settings as subs sends them: only the keys that are set. */
export type OAuthSettingsBody = { client_id?: string; client_metadata_url?: string; scopes?: string[] };

export const ToolFilterSchema = z.object({
  include: orNull(z.array(z.string())),
  exclude: orNull(z.array(z.string())),
  read_only: orNull(z.boolean()),
  non_destructive: orNull(z.boolean()),
  idempotent: orNull(z.boolean()),
});
export type RemoteToolFilter = z.output<typeof ToolFilterSchema>;
/** A filter as subs sends it: only the keys that are set. */
export type ToolFilter = { include?: string[]; exclude?: string[]; read_only?: boolean; non_destructive?: boolean; idempotent?: boolean };

export const AgentSchema = z.object({
  name: text(),
  mcp: z.array(z.object({ id: text(), tools: orNull(ToolFilterSchema) })),
  tools: listOrEmpty,
  agents: listOrEmpty,
});
export type RemoteAgent = z.output<typeof AgentSchema>;

/**
 * One tool of substructure.lock as a deployment holds it (section 3.10, "The lock"). Checked for
 * its shape only: what `subs` does with it is compare it and resolve tools against it, and the
 * deployment checked each digest.
 */
export const LockEntrySchema = z.object({
  connection: text(),
  name: text(),
  digest: text(),
  title: z.optional(z.string()),
  description: z.optional(z.string()),
  input_schema: z.optional(z.unknown()),
  output_schema: z.optional(z.unknown()),
  annotations: z.optional(z.record(z.string(), z.unknown())),
});
export type LockEntry = z.output<typeof LockEntrySchema>;
export const LockBodySchema = z.object({ tools: z.array(LockEntrySchema) });
export type LockBody = z.output<typeof LockBodySchema>;

/**
 * `lock`: absent from a deployment that does not hold locks (section 9), null when it holds none.
 * Kept apart from `undefined` on purpose: that is what tells `subs apply` whether to send one.
 */
export const AgentListSchema = z.object({ agents: z.array(AgentSchema), revision: orNull(text()), lock: z.optional(z.nullable(LockBodySchema)) });

/** PUT /v1/agents/{name}. */
export type AgentBody = { mcp: Array<{ id: string; tools?: ToolFilter }>; tools: string[]; agents: string[] };

/** PUT /v1/state: the whole declared state; with `prune`, whatever it does not name is deleted. */
export type StateBody = {
  connections: Array<ConnectionBody & { id: string }>;
  agents: Array<AgentBody & { name: string }>;
  prune: boolean;
  /** The revision the plan was made from: refused with 409 revision_changed when it moved on. */
  revision?: string;
  /** The lock, to a deployment that holds locks (section 3.10): null for none. Absent keeps the one it holds. */
  lock?: LockBody | null;
};

export const StateAnswerSchema = z.object({
  revision: orNull(text()),
  connections: z.array(ConnectionSchema),
  agents: z.array(AgentSchema),
  changes: z.array(
    z.object({
      kind: z.enum(["connection", "agent", "lock"]),
      id: text(),
      action: z.enum(["add", "change", "remove"]),
      credential_dropped: orNull(z.boolean()),
    }),
  ),
});
export type StateAnswer = z.output<typeof StateAnswerSchema>;

const positive = () => z.number().check(z.positive());

export const AuthorizationSchema = z.object({
  authorization_url: text(),
  poll_url: text(),
  interval: z.pipe(
    z.nullish(positive()),
    z.transform((v: number | null | undefined) => v ?? 5),
  ),
  expires_in: positive(),
});
export type RemoteAuthorization = z.output<typeof AuthorizationSchema>;

export const AuthorizationStatusSchema = z.object({
  status: z.enum(["pending", "authorized", "failed", "expired"]),
  error: orNull(z.string()),
  message: orNull(z.string()),
});
export type AuthorizationStatus = z.output<typeof AuthorizationStatusSchema>;

export const ToolSchema = z.looseObject({
  name: text(),
  title: orNull(z.string()),
  description: orNull(z.string()),
  inputSchema: z.optional(z.record(z.string(), z.unknown())),
  annotations: orNull(
    z.looseObject({
      title: orNull(z.string()),
      readOnlyHint: orNull(z.boolean()),
      destructiveHint: orNull(z.boolean()),
      idempotentHint: orNull(z.boolean()),
      openWorldHint: orNull(z.boolean()),
    }),
  ),
});
export type RemoteTool = z.output<typeof ToolSchema>;

export const ToolListSchema = z.object({ tools: z.array(ToolSchema) });

export const ErrorBodySchema = z.object({
  error: text(),
  message: orNull(z.string()),
  catalog: orNull(z.array(z.string())),
});
export type ErrorBody = z.output<typeof ErrorBodySchema>;

/** Section 3.11: an API token as `GET /v1/tokens` lists it (never its value nor its hash). */
export const ApiTokenSchema = z.object({
  id: text(),
  name: text(),
  role: text(),
  /** Section 3.13; absent from a deployment from before people were kept. */
  person: orNull(text()),
  created_at: timestamp,
  expires_at: orNull(timestamp),
  last_used_at: orNull(timestamp),
});
export type RemoteApiToken = z.output<typeof ApiTokenSchema>;
export const ApiTokenListSchema = z.object({ tokens: z.array(ApiTokenSchema) });

/** `POST /v1/tokens`: the new token, its value in this answer only. */
export const CreatedApiTokenSchema = z.object({
  id: text(),
  name: text(),
  role: text(),
  person: orNull(text()),
  token: text(),
  created_at: timestamp,
  expires_at: orNull(timestamp),
});
export type CreatedApiToken = z.output<typeof CreatedApiTokenSchema>;
/** `POST /v1/tokens`'s body; `expires_in` in seconds. */
export type ApiTokenBody = { name: string; role: string; person?: string; expires_in?: number };

/** Section 3.13: a person as `GET /v1/people` lists them. */
export const PersonSchema = z.object({ name: text(), created_at: timestamp, tokens: z.int().check(z.nonnegative()) });
export const PersonListSchema = z.object({ people: z.array(PersonSchema) });
/** `DELETE /v1/people/{name}`: who went, with every token of theirs. */
export const RemovedPersonSchema = z.object({
  person: PersonSchema,
  tokens: z.array(ApiTokenSchema),
  /** Absent from a deployment without personal credentials. */
  grants: orNull(z.array(z.object({ connection: text(), issuer: text(), revocation: z.enum(["revoked", "not_offered", "failed", "not_attempted"]) }))),
});
export type RemotePerson = z.output<typeof PersonSchema>;
export type RemovedPerson = z.output<typeof RemovedPersonSchema>;

/**
 * What to do about each refusal of section 3.11 (a name in use, the last admin token, the most
 * tokens a deployment keeps), in the words of `subs deployment token`: the same whether the
 * refusal came over the API or from the store on the host.
 */
export const TOKEN_REFUSAL_HINTS = {
  name_taken: "choose another --name (`subs deployment token list` shows those in use)",
  last_admin: "make another admin token first (`subs deployment token create --role admin`), held by someone else when removing a person",
  too_many_tokens: "revoke tokens no longer used first",
  too_many_people: "remove people who left first (`subs deployment person list` shows them)",
} as const;

/** Section 3.14: one entry of the record (ids, names, codes and counts: never a call's arguments or result). */
export const AuditEntrySchema = z.object({
  cursor: text(),
  at: timestamp,
  kind: text(),
  person: orNull(z.string()),
  token_id: orNull(z.string()),
  agent: orNull(z.string()),
  connection: orNull(z.string()),
  tool: orNull(z.string()),
  outcome: orNull(z.string()),
  duration_ms: orNull(z.number()),
  request_id: orNull(z.string()),
  detail: orNull(z.record(z.string(), z.unknown())),
});
export type RemoteAuditEntry = z.output<typeof AuditEntrySchema>;
/** `GET /v1/audit`: a page, oldest first; `next` the cursor to continue after it. */
export const AuditPageSchema = z.object({ entries: z.array(AuditEntrySchema), next: orNull(z.string()), has_more: z.boolean() });
export type RemoteAuditPage = z.output<typeof AuditPageSchema>;
