// `subs mcp login` with [remote]: declare the connection, start the consent on the deployment,
// send the person to its authorization URL, and poll until the deployment reports authorized,
// failed or expired (docs/deployment-protocol.md, "Authorizing"). The credential stays there.
// A connection whose headers name variables is authorized by handing their values over instead
// (section 3.12): no consent is started.
import type { Loopback } from "../auth/loopback.ts";
import { HEADER_VALUE_CONTROL, headerVariables, MAX_HEADER_VALUE_BYTES } from "../config/templates.ts";
import type { RemoteConnection as ConnectionConfig } from "../config/types.ts";
import type { Context } from "../context.ts";
import { failed, SubsError, usage } from "../errors.ts";
import { DeploymentError, sleep, type DeploymentClient } from "./client.ts";
import { connectionBody, connectionChanges, type ConnectionField } from "./plan.ts";
import { notHeld, type RemoteConnection } from "./protocol.ts";

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
  await declareAsFile(client, connection);
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

/**
 * Declared there already as the file says, nothing is sent: only the consent (or the values) is
 * asked for, which a `use` token may give (docs/deployment-server.md, "Roles"), and declaring it
 * again would change nothing. Else it is declared first, as `subs apply` would; a changed url drops
 * the old credential and the values held there, as it must (both are bound to the url).
 */
async function declareAsFile(client: DeploymentClient, connection: ConnectionConfig): Promise<void> {
  const body = connectionBody(connection);
  const declared = (await client.listConnections()).find((c) => c.id === connection.id);
  const changed = declared ? connectionChanges(declared, body) : undefined;
  if (changed !== undefined && changed.length === 0) return;
  await client.putConnection(connection.id, body).catch((error: unknown) => {
    if (error instanceof DeploymentError && error.status === 403 && error.body?.error === "forbidden") throw cannotDeclare(connection.id, changed);
    throw error;
  });
}

/** One variable the connection's headers name, with the value to hand over. Never printed. */
export type HeaderValue = { name: string; value: string };

/**
 * The value of each variable `connection`'s headers name, in the order they first appear, from
 * `ask` (the command asks the person, or reads this machine's variable of that name). Each is
 * learnt by the run's secrets as soon as it is known, so nothing printed afterwards can show it.
 * All are had before any request: a refusal here sends nothing.
 */
export async function headerValues(
  ctx: Pick<Context, "secrets">,
  connection: ConnectionConfig,
  ask: (name: string) => Promise<string>,
): Promise<HeaderValue[]> {
  const values: HeaderValue[] = [];
  for (const name of headerVariables(connection.headers ?? {})) {
    const value = await ask(name);
    ctx.secrets?.add(value);
    const problem =
      value === ""
        ? "is empty"
        : Buffer.byteLength(value, "utf8") > MAX_HEADER_VALUE_BYTES
          ? `is longer than ${MAX_HEADER_VALUE_BYTES / 1024} KiB`
          : HEADER_VALUE_CONTROL.test(value)
            ? "holds a line break or another control character, which a header value cannot carry"
            : undefined;
    // The message names the variable, never the value.
    if (problem) throw usage(`${connection.id}: the value given for ${name} ${problem}; nothing was sent`, { hint: `give ${name} the value ${connection.id} expects in its headers, then run \`subs mcp login ${connection.id}\` again` });
    values.push({ name, value });
  }
  return values;
}

/**
 * `subs mcp login` of a connection whose headers name variables (docs/deployment-protocol.md
 * sections 3.12 and 8): declared as the file says (as for a consent), then one PUT per value; no
 * consent is started. Resolves with the deployment's view once it reports the connection
 * authorized; throws otherwise.
 */
export async function handOverOnDeployment(options: { client: DeploymentClient; connection: ConnectionConfig; values: readonly HeaderValue[] }): Promise<RemoteConnection> {
  const { client, connection, values } = options;
  const id = connection.id;
  await declareAsFile(client, connection);
  for (const { name, value } of values) {
    await client.putSecret(id, name, value).catch((error: unknown) => {
      throw handOverError(error, id, name);
    });
  }
  const now = (await client.listConnections()).find((c) => c.id === id);
  if (!now || now.status !== "authorized") {
    const missing = notHeld(now?.secrets);
    throw new SubsError("needs_login", `${id}: the deployment took the values but does not report it authorized${missing.length ? ` (it holds none for ${missing.join(", ")})` : ""}`, {
      code: "needs_login",
      hint: `run \`subs apply\` (the deployment's declaration of ${id} may differ from the file's), then \`subs mcp login ${id}\` again`,
    });
  }
  return now;
}

/**
 * A refused hand-over in the words of what to do: the deployment's declaration differs from the
 * file's (another apply since the declaration was read), or it has none. The deployment's message
 * is kept; the value it may quote is scrubbed by the run's secrets.
 */
function handOverError(error: unknown, id: string, name: string): unknown {
  if (!(error instanceof DeploymentError)) return error;
  const said = error.body?.message ? ` (${error.body.message})` : "";
  if (error.status === 400 && error.code === "unknown_variable") {
    return new SubsError("failed", `${id}: the deployment's declaration of ${id} does not name \${${name}} in its headers${said}; nothing more was sent`, {
      code: "unknown_variable",
      hint: `the deployment's connection differs from the file: run \`subs apply\`, then \`subs mcp login ${id}\` again`,
    });
  }
  if (error.status === 404 && error.code === "not_found") {
    return new SubsError("failed", `${id}: not declared on the deployment${said}; nothing more was sent`, {
      code: "not_applied",
      hint: `run \`subs apply\`, then \`subs mcp login ${id}\` again`,
    });
  }
  return error;
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
