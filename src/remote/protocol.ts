// The wire shapes of the deployment protocol (docs/deployment-protocol.md). Every answer is
// validated here before anything else reads it (GUIDE "Validate with zod at every boundary").
// Objects are not strict: a newer deployment may add fields, and clients ignore them (docs,
// "Compatibility").
import { z } from "zod";

// Answers may spell an absent optional field as null; both read the same.
export const ConnectionOAuthSchema = z.object({
  client_id: z.string().min(1).nullish(),
  client_metadata_url: z.string().min(1).nullish(),
  scopes: z.array(z.string()).nullish(),
});
export type ConnectionOAuth = z.output<typeof ConnectionOAuthSchema>;

const timestamp = z.iso.datetime({ offset: true });

export const ConnectionSchema = z.object({
  id: z.string().min(1),
  url: z.string().min(1),
  prefix_tools: z.boolean(),
  oauth: ConnectionOAuthSchema.nullish(),
  status: z.enum(["declared", "authorized"]),
  authorized_at: timestamp.nullish(),
  expires_at: timestamp.nullish(),
});
export type RemoteConnection = z.output<typeof ConnectionSchema>;

export const ConnectionListSchema = z.object({ connections: z.array(ConnectionSchema) });

/** PUT /v1/mcp/{id}. Never carries `auth` or a client secret: the deployment rejects one that does. */
export type ConnectionBody = { url: string; prefix_tools: boolean; oauth?: OAuthSettingsBody };
/** The non-secret OAuth settings as subs sends them: only the keys that are set. */
export type OAuthSettingsBody = { client_id?: string; client_metadata_url?: string; scopes?: string[] };

export const ToolFilterSchema = z.object({
  include: z.array(z.string()).nullish(),
  exclude: z.array(z.string()).nullish(),
  read_only: z.boolean().nullish(),
  non_destructive: z.boolean().nullish(),
  idempotent: z.boolean().nullish(),
});
export type RemoteToolFilter = z.output<typeof ToolFilterSchema>;
/** A filter as subs sends it: only the keys that are set. */
export type ToolFilter = { include?: string[]; exclude?: string[]; read_only?: boolean; non_destructive?: boolean; idempotent?: boolean };

export const AgentSchema = z.object({
  name: z.string().min(1),
  mcp: z.array(z.object({ id: z.string().min(1), tools: ToolFilterSchema.nullish() })),
  tools: z
    .array(z.string())
    .nullish()
    .transform((v) => v ?? []),
  agents: z
    .array(z.string())
    .nullish()
    .transform((v) => v ?? []),
});
export type RemoteAgent = z.output<typeof AgentSchema>;

export const AgentListSchema = z.object({ agents: z.array(AgentSchema) });

/** PUT /v1/agents/{name}. */
export type AgentBody = { mcp: Array<{ id: string; tools?: ToolFilter }>; tools: string[]; agents: string[] };

export const AuthorizationSchema = z.object({
  authorization_url: z.string().min(1),
  poll_url: z.string().min(1),
  interval: z
    .number()
    .positive()
    .nullish()
    .transform((v) => v ?? 5),
  expires_in: z.number().positive(),
});
export type RemoteAuthorization = z.output<typeof AuthorizationSchema>;

export const AuthorizationStatusSchema = z.object({
  status: z.enum(["pending", "authorized", "failed", "expired"]),
  error: z.string().nullish(),
  message: z.string().nullish(),
});
export type AuthorizationStatus = z.output<typeof AuthorizationStatusSchema>;

export const ToolSchema = z
  .object({
    name: z.string().min(1),
    title: z.string().nullish(),
    description: z.string().nullish(),
    inputSchema: z.record(z.string(), z.unknown()).optional(),
    annotations: z
      .object({
        title: z.string().nullish(),
        readOnlyHint: z.boolean().nullish(),
        destructiveHint: z.boolean().nullish(),
        idempotentHint: z.boolean().nullish(),
        openWorldHint: z.boolean().nullish(),
      })
      .loose()
      .nullish(),
  })
  .loose();
export type RemoteTool = z.output<typeof ToolSchema>;

export const ToolListSchema = z.object({ tools: z.array(ToolSchema) });

export const ErrorBodySchema = z.object({
  error: z.string().min(1),
  message: z.string().nullish(),
  catalog: z.array(z.string()).nullish(),
});
export type ErrorBody = z.output<typeof ErrorBodySchema>;
