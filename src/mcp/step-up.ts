// Runs MCP work on a connection, re-authorizing once when the server answers 403
// insufficient_scope (MCP authorization 2026-07-28, "Step-Up Authorization Flow"): the new request
// asks for the union of the scopes held and the scopes challenged, and the work is retried. A
// second 403 is a permanent failure: no loop.
import type { Client } from "@modelcontextprotocol/sdk/client/index.js";
import type { Config, ConnectionConfig } from "../config/types.ts";
import type { Context } from "../context.ts";
import { failed, interrupted, refused, SubsError } from "../errors.ts";
import type { LoginStep } from "../auth/login.ts";
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
  login: { timeoutMs: number; openBrowser: boolean; port?: number; /** Its steps, worded by the command (output/login-words.ts). */ steps: (step: LoginStep) => void };
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

const words = (scopes: string | undefined) => (scopes ?? "").split(" ").filter(Boolean);
const tomlList = (scopes: readonly string[]) => `[${scopes.map((s) => JSON.stringify(s)).join(", ")}]`;

/**
 * Someone can answer a consent page: stderr (where the URL and the wait are shown) is a terminal
 * and this is not CI, or the environment names its own opener in $BROWSER (an automated consent, as
 * the conformance suite's adapter has; not under --no-browser, which opens nothing). Elsewhere no
 * browser will ever come back, so a step-up fails at once rather than wait out --timeout. stdin is
 * not asked: `--args -` pipes it on a terminal.
 */
export function consentPossible(ctx: Pick<Context, "stderrIsTTY" | "env">, openBrowser: boolean): boolean {
  if (openBrowser && ctx.env.BROWSER?.trim()) return true;
  return ctx.stderrIsTTY && !ctx.env.CI;
}

/**
 * The scopes a step-up asks for: the union of those held and those challenged. When the file pins
 * `oauth.scopes`, the union stays within them (the person chose them; login asks for exactly
 * those, src/auth/login.ts selectScopes), and a challenged scope outside them is refused: the file
 * must say it first.
 */
export function stepUpScopes(connection: ConnectionConfig, held: readonly string[], challenged: string | undefined): string[] {
  const pinned = connection.oauth?.scopes ?? [];
  const wanted = words(challenged);
  if (pinned.length === 0) return [...new Set([...held, ...wanted])];
  const outside = wanted.filter((s) => !pinned.includes(s));
  if (outside.length > 0) {
    throw refused(`${connection.id}: the server needs ${outside.join(" ")}, which the file's oauth.scopes does not include; not asking for it`, {
      code: "scope_not_in_file",
      hint: `add it to [mcp.${connection.id}] in the file: oauth.scopes = ${tomlList([...pinned, ...outside])}, then run \`subs mcp login ${connection.id}\``,
    });
  }
  return [...new Set([...held.filter((s) => pinned.includes(s)), ...wanted])];
}

async function stepUp(options: StepUpOptions, challenged: string | undefined): Promise<void> {
  const { ctx, config, reporter } = options;
  const connection = options.connection;
  // A 403 insufficient_scope comes over HTTP only (mcpError): a local server never asks for one.
  if (connection.url === undefined) throw failed(`${connection.id}: a local server cannot be re-authorized`);
  const [{ openEnvironmentStore }, { login }] = await Promise.all([import("../store/environment.ts"), import("../auth/login.ts")]);
  const opened = await openEnvironmentStore(config, { create: true, reporter });
  try {
    const held = opened!.store.getCredential(connection.id)?.scopes.split(" ").filter(Boolean) ?? [];
    const scopes = stepUpScopes(connection, held, challenged);
    if (!consentPossible(ctx, options.login.openBrowser)) {
      const pinned = (connection.oauth?.scopes ?? []).length > 0;
      throw new SubsError("needs_login", `${connection.id}: the server needs more permissions (${challenged ?? "unspecified"}); authorizing them needs a person at a browser, and there is no terminal here${ctx.env.CI ? " (CI is set)" : ""}`, {
        code: "needs_step_up",
        hint: pinned
          ? `run \`subs mcp login ${connection.id}\` on a machine with a browser (it asks for the file's oauth.scopes)`
          : `on a machine with a browser, run this command on a terminal, or pin the scopes in the file (oauth.scopes = ${tomlList(scopes)} under [mcp.${connection.id}]) and run \`subs mcp login ${connection.id}\``,
      });
    }
    reporter.info(`${connection.id} needs more permissions (${challenged ?? "unspecified"}); authorizing again for: ${scopes.join(" ")}`);
    await login({
      ctx,
      connection,
      store: opened!.store,
      steps: options.login.steps,
      timeoutMs: options.login.timeoutMs,
      openBrowser: options.login.openBrowser,
      ...(options.login.port !== undefined ? { port: options.login.port } : {}),
      scopes,
    });
  } finally {
    opened?.store.close();
  }
}
