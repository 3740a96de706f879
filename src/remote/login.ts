// `subs mcp login` with [remote]: declare the connection, start the consent on the deployment,
// send the person to its authorization URL, and poll until the deployment reports authorized,
// failed or expired (docs/deployment-protocol.md, "Authorizing"). The credential stays there.
import type { Loopback } from "../auth/loopback.ts";
import type { RemoteConnection as ConnectionConfig } from "../config/types.ts";
import type { Context } from "../context.ts";
import { failed, SubsError } from "../errors.ts";
import { DeploymentError, sleep, type DeploymentClient } from "./client.ts";
import { connectionBody, connectionChanges, type ConnectionField } from "./plan.ts";
import type { RemoteConnection } from "./protocol.ts";

export type RemoteLoginEvents = {
  /**
   * The URL to open, whether a browser was started for it (or why not), and how long the wait for
   * consent may last (--timeout or the deployment's expiry, the sooner). Print it either way.
   */
  onAuthorizationUrl(url: string, browserOpened: boolean, browserError: unknown, waitMs: number): void;
  /** After each poll that is still pending. */
  onWaiting?(elapsedMs: number, remainingMs: number): void;
};

export type RemoteLoginOptions = {
  ctx: Pick<Context, "now" | "signal" | "openBrowser">;
  client: DeploymentClient;
  connection: ConnectionConfig;
  openBrowser: boolean;
  timeoutMs: number;
  events: RemoteLoginEvents;
};

/** Resolves with the deployment's view of the connection once authorized; throws otherwise. */
export async function loginOnDeployment(options: RemoteLoginOptions): Promise<RemoteConnection> {
  const { ctx, client, connection, events } = options;
  // Declared there already as the file says, only the consent is asked for, which a `use` token
  // may start (docs/deployment-server.md, "Roles"): declaring it again would change nothing. Else
  // it is declared first, as `subs apply` would; a changed url drops the old credential there, as
  // it must (a credential is bound to its url).
  const body = connectionBody(connection);
  const declared = (await client.listConnections()).find((c) => c.id === connection.id);
  const changed = declared ? connectionChanges(declared, body) : undefined;
  if (changed === undefined || changed.length > 0) {
    await client.putConnection(connection.id, body).catch((error: unknown) => {
      if (error instanceof DeploymentError && error.status === 403 && error.body?.error === "forbidden") throw cannotDeclare(connection.id, changed);
      throw error;
    });
  }
  const started = ctx.now();
  const authorization = await client.startAuthorization(connection.id);
  const url = authorization.authorizationUrl.href;
  const waitMs = Math.min(authorization.expires_in * 1000, options.timeoutMs);
  // The browser gets a one-time loopback link to the deployment's authorization URL, so its
  // `state` is in no process's argv, which every local user can read. Opened twice, someone else
  // may have used it first.
  let link: Loopback | undefined;
  let replayed = false;
  try {
    if (options.openBrowser) {
      try {
        const { startLoopback } = await import("../auth/loopback.ts");
        link = await startLoopback({});
        await ctx.openBrowser(link.openUrl(url, () => (replayed = true)));
        events.onAuthorizationUrl(url, true, undefined, waitMs);
      } catch (error) {
        events.onAuthorizationUrl(url, false, error, waitMs);
      }
    } else {
      events.onAuthorizationUrl(url, false, undefined, waitMs);
    }
    return await poll(options, authorization, started, () => replayed);
  } finally {
    await link?.close();
  }
}

/** The token may consent but not declare, and the deployment does not hold the file's section yet. */
function cannotDeclare(id: string, changed: ConnectionField[] | undefined): SubsError {
  const what = changed === undefined ? "not declared on the deployment" : `declared on the deployment with another ${changed.join(", ")} than the file's`;
  return failed(`${id}: ${what}, and this token's role may not declare it`, {
    code: "forbidden",
    hint: `ask someone with an apply token to run \`subs apply\`, then run \`subs mcp login ${id}\` again`,
  });
}

async function poll(
  options: RemoteLoginOptions,
  authorization: Awaited<ReturnType<DeploymentClient["startAuthorization"]>>,
  started: number,
  replayed: () => boolean,
): Promise<RemoteConnection> {
  const { ctx, client, connection, events } = options;
  const deadline = started + Math.min(authorization.expires_in * 1000, options.timeoutMs);
  const intervalMs = Math.max(authorization.interval * 1000, 50);
  for (;;) {
    const remaining = deadline - ctx.now();
    if (remaining <= 0) {
      const byUs = options.timeoutMs < authorization.expires_in * 1000;
      throw failed(`${connection.id}: no consent within ${Math.round((deadline - started) / 1000)}s${byUs ? " (--timeout)" : " (the deployment's authorization expired)"}`, {
        code: byUs ? "timeout" : "authorization_expired",
        hint: `run \`subs mcp login ${connection.id}\` again${byUs ? " (or raise --timeout)" : ""}`,
      });
    }
    await sleep(Math.min(intervalMs, remaining), ctx.signal);
    if (replayed()) {
      throw failed(`${connection.id}: the one-time link to the authorization page was opened twice; another program on this machine may have opened it first, so the login was stopped`, {
        code: "link_replayed",
        hint: `run \`subs mcp login ${connection.id}\` again; if it happens again, use --no-browser and open the printed URL yourself`,
      });
    }
    const status = await client.pollAuthorization(authorization.pollUrl);
    if (status.status === "authorized") break;
    if (status.status === "pending") {
      events.onWaiting?.(ctx.now() - started, deadline - ctx.now());
      continue;
    }
    const detail = [status.error, status.message].filter(Boolean).join(": ");
    if (status.status === "expired") {
      throw failed(`${connection.id}: the authorization expired on the deployment${detail ? ` (${detail})` : ""}`, {
        code: "authorization_expired",
        hint: `run \`subs mcp login ${connection.id}\` again and consent within ${Math.round(authorization.expires_in / 60)} minutes`,
      });
    }
    throw failed(`${connection.id}: the authorization failed on the deployment${detail ? ` (${detail})` : ""}`, {
      code: status.error === "access_denied" ? "access_denied" : "authorization_failed",
      hint: `run \`subs mcp login ${connection.id}\` to try again`,
    });
  }
  const connections = await client.listConnections();
  const now = connections.find((c) => c.id === connection.id);
  if (!now || now.status !== "authorized") {
    throw new SubsError("needs_login", `${connection.id}: the deployment reported the consent done but holds no credential for it`, {
      code: "needs_login",
      hint: `run \`subs mcp login ${connection.id}\` again`,
    });
  }
  return now;
}
