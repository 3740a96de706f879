// Opens an MCP client for one declared connection with the credential the file says it uses:
// a static token from `$token_env`, or the OAuth credential stored for this id (issue 3).
import type { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { UnauthorizedError } from "@modelcontextprotocol/sdk/client/auth.js";
import type { Config, ConnectionConfig } from "../config/types.ts";
import type { Context } from "../context.ts";
import { failed, needsLogin, SubsError } from "../errors.ts";
import { connectMcp } from "./connect.ts";

export type OpenConnectionOptions = {
  ctx: Pick<Context, "env" | "fetch" | "now">;
  config: Config;
  connection: ConnectionConfig;
  signal?: AbortSignal;
};

export async function openConnection(options: OpenConnectionOptions): Promise<Client> {
  const { ctx, connection } = options;
  const headers: Record<string, string> = {};
  if (connection.auth) {
    const token = ctx.env[connection.auth.tokenEnv];
    if (!token) {
      throw new SubsError("needs_login", `${connection.id}: $${connection.auth.tokenEnv} is not set`, {
        hint: `export ${connection.auth.tokenEnv}=… (the token ${connection.id} authenticates with)`,
        code: "token_env_unset",
      });
    }
    headers.authorization = `Bearer ${token}`;
  }
  try {
    return await connectMcp({ url: connection.url, fetch: ctx.fetch, headers, ...(options.signal ? { signal: options.signal } : {}) });
  } catch (error) {
    if (error instanceof UnauthorizedError || (error as { code?: unknown }).code === 401) {
      if (connection.auth) throw failed(`${connection.id}: the server rejected the token in $${connection.auth.tokenEnv}`, { hint: "check the token's value and scopes" });
      throw needsLogin(connection.id, "the server requires authorization");
    }
    throw connectionError(connection, error);
  }
}

export function connectionError(connection: ConnectionConfig, error: unknown): SubsError {
  if (error instanceof SubsError) return error;
  const reason = error instanceof Error ? error.message : String(error);
  return failed(`${connection.id}: cannot reach ${new URL(connection.url).origin} (${reason})`, { cause: error });
}
