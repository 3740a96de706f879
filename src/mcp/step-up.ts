// Runs MCP work on a connection, re-authorizing once when the server answers 403
// insufficient_scope (MCP authorization 2026-07-28, "Step-Up Authorization Flow"): the new request
// asks for the union of the scopes held and the scopes challenged, and the work is retried. A
// second 403 is a permanent failure: no loop.
import type { Client } from "@modelcontextprotocol/sdk/client/index.js";
import type { Config, ConnectionConfig } from "../config/types.ts";
import type { Context } from "../context.ts";
import { failed, interrupted } from "../errors.ts";
import type { Reporter } from "../report.ts";
import { assertSameAuthorizationServer, InsufficientScopeError, mcpError, openConnection, type AuthChallenge } from "./open.ts";

/** Re-authorizations per command (the spec asks for a retry limit). */
export const MAX_STEP_UPS = 1;

export type StepUpOptions = {
  ctx: Context;
  config: Config;
  connection: ConnectionConfig;
  reporter: Reporter;
  /** How a re-authorization waits for consent (as `subs mcp login`). */
  login: { timeoutMs: number; openBrowser: boolean; port?: number };
  /** How long one MCP request may go unanswered (`--request-timeout`); `work` applies it to its own requests. */
  requestTimeoutMs?: number;
};

export async function withConnection<T>(options: StepUpOptions, work: (client: Client, signal: AbortSignal) => Promise<T>): Promise<T> {
  const { ctx, config, connection, reporter } = options;
  let rejectedAt: number | undefined;
  let stepUps = 0;
  for (;;) {
    let last: AuthChallenge | undefined;
    let client: Client | undefined;
    try {
      client = await openConnection({
        ctx,
        config,
        connection,
        signal: ctx.signal,
        reporter,
        onChallenge: (c) => (last = c),
        ...(rejectedAt !== undefined ? { tokenRejectedAt: rejectedAt } : {}),
        ...(options.requestTimeoutMs !== undefined ? { requestTimeoutMs: options.requestTimeoutMs } : {}),
      });
      return await work(client, ctx.signal);
    } catch (error) {
      // Ctrl-C aborted the connection: that is the outcome, not "cannot reach" (exit 130).
      if (ctx.signal.aborted) throw interrupted();
      const problem = mcpError(connection, error, last);
      // A 401 after connecting (the token died mid-command): one refresh and one retry.
      // (openConnection already retried a 401 while connecting.)
      if (problem.code === "token_rejected" && client !== undefined && rejectedAt === undefined && !connection.auth) {
        rejectedAt = ctx.now();
        await assertSameAuthorizationServer({ ctx, config, connection }, last);
        continue;
      }
      if (!(problem instanceof InsufficientScopeError) || connection.auth) throw problem;
      if (stepUps >= MAX_STEP_UPS) {
        throw failed(`${connection.id}: the server still refuses for lack of scope after re-authorization${problem.scope ? ` (needs: ${problem.scope})` : ""}`, {
          code: "insufficient_scope",
          hint: "the account may not be allowed these permissions; ask the server's operator",
        });
      }
      stepUps++;
      await stepUp(options, problem.scope);
    } finally {
      await client?.close().catch(() => {});
    }
  }
}

async function stepUp(options: StepUpOptions, challenged: string | undefined): Promise<void> {
  const { ctx, config, connection, reporter } = options;
  const [{ openEnvironmentStore }, { login }] = await Promise.all([import("../store/environment.ts"), import("../auth/login.ts")]);
  const opened = await openEnvironmentStore(config, { create: true, reporter });
  try {
    const held = opened!.store.getCredential(connection.id)?.scopes.split(" ").filter(Boolean) ?? [];
    const scopes = [...new Set([...held, ...(challenged ?? "").split(" ").filter(Boolean)])];
    reporter.info(`${connection.id} needs more permissions (${challenged ?? "unspecified"}); authorizing again for: ${scopes.join(" ")}`);
    await login({
      ctx,
      connection,
      store: opened!.store,
      reporter,
      timeoutMs: options.login.timeoutMs,
      openBrowser: options.login.openBrowser,
      ...(options.login.port !== undefined ? { port: options.login.port } : {}),
      scopes,
    });
  } finally {
    opened?.store.close();
  }
}
