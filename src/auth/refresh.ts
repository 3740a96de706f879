// A usable access token for a connection: the stored one, refreshed first when it has expired or
// expires within a minute. Refresh tokens may rotate (OAuth 2.1 §4.3.1), so when several subs
// processes race, exactly one refreshes: the one holding the credential's refresh lease in the db
// (Store.withRefreshLease); the others wait for it and then find the new token. The refresh itself
// holds no lock on the db, and what it stores it stores only over the credential it refreshed:
// a login or an apply meanwhile wins.
import { refreshAuthorization } from "@modelcontextprotocol/sdk/client/auth.js";
import type { OAuthTokens } from "@modelcontextprotocol/sdk/shared/auth.js";
import type { ConnectionConfig } from "../config/types.ts";
import type { Context } from "../context.ts";
import { failed, needsLogin, SubsError } from "../errors.ts";
import type { CredentialRow } from "../store/schema.ts";
import type { Store } from "../store/store.ts";
import { clientRejected, credentialClient, dropRegistration, presentedClient, type CredentialClient } from "./client.ts";
import { authorizationServerMetadata } from "./discovery.ts";
import { grantRejected, oauthProblem } from "./errors.ts";
import { grantLifetimeRecorder, refreshExpiryAfter } from "./grant-expiry.ts";
import { Secrets } from "../secrets.ts";
import { cut } from "../text/cut.ts";
import { escaped } from "../text/unsafe.ts";
import { checkedTokens } from "./tokens.ts";
import { authFetch } from "../http/guarded-fetch.ts";

/** Refresh this long before the expiry, so a token never expires in flight. */
export const REFRESH_MARGIN_MS = 60_000;
/** How long the recorded reason of a lost credential may be: a line, never a page a server chose. */
const LOSS_MESSAGE_MAX = 300;

/** `signal` (Ctrl-C) ends a wait for another process's refresh. */
export type RefreshContext = Pick<Context, "env" | "fetch" | "now"> & { signal?: AbortSignal };

export function urlChanged(id: string): SubsError {
  return new SubsError("needs_login", `${id}: url changed since login; the stored credential is never sent to the new url`, {
    hint: `run \`subs mcp login ${id}\``,
    code: "url_changed",
  });
}

/** The stored credential of `connection`, checked against the file: bound to this id and url. */
export function storedCredential(store: Store, connection: ConnectionConfig): CredentialRow {
  const row = store.getCredential(connection.id);
  if (!row) throw needsLogin(connection.id, "not logged in");
  if (row.url !== connection.url) throw urlChanged(connection.id);
  return row;
}

/** Fresh: not expired and not within the margin of it. The margin is a minute, or half the
 * token's lifetime when that is shorter, so a 30-second token is not refreshed at once. */
export function isFresh(row: CredentialRow, now: number): boolean {
  if (row.expires_at === null) return true;
  const lifetime = Math.max(0, row.expires_at - row.updated_at);
  return row.expires_at - Math.min(REFRESH_MARGIN_MS, lifetime / 2) > now;
}

/**
 * The credential to send now: fresh as stored, or refreshed (once, across processes). A refresh
 * the server rejects deletes the dead credential and ends in "run `subs mcp login <id>`" (exit 4);
 * nothing retries it.
 */
export async function freshCredential(options: {
  ctx: RefreshContext;
  store: Store;
  connection: ConnectionConfig;
  /**
   * The server answered 401 to a token stored at or before this time (ms): refresh even if the
   * stored expiry says it is valid, unless another process has stored a newer one since.
   */
  rejectedAt?: number;
}): Promise<CredentialRow> {
  const { ctx, store, connection, rejectedAt } = options;
  const row = storedCredential(store, connection);
  const superseded = (r: CredentialRow) => rejectedAt !== undefined && r.updated_at > rejectedAt;
  if (rejectedAt === undefined ? isFresh(row, ctx.now()) : superseded(row)) return row;
  if (row.refresh_token === null) throw needsLogin(connection.id, "the access token expired and the server issued no refresh token");

  type Outcome = { row: CredentialRow } | { rejected: string };
  /** The credential as another process left it, when that is the answer: no refresh of ours. */
  const settled = (): Outcome | undefined => {
    const current = storedCredential(store, connection);
    if (rejectedAt === undefined ? isFresh(current, ctx.now()) : superseded(current)) return { row: current };
    // Another process refreshed meanwhile: use its token while it is valid at all, even when the
    // server issues lifetimes shorter than the refresh margin (else each waiter would refresh again).
    if (rejectedAt === undefined && current.access_token !== row.access_token && (current.expires_at === null || current.expires_at > ctx.now())) return { row: current };
    return undefined;
  };
  const outcome = await store.withRefreshLease(connection.id, settled, async (): Promise<Outcome> => {
    const current = storedCredential(store, connection);
    if (current.refresh_token === null) return { rejected: "the access token expired and the server issued no refresh token" };
    /** Writes `write` only over the credential this refresh started from; else the row as it is now (a login or an apply came meanwhile). */
    const overCurrent = (write: () => Outcome): Outcome =>
      store.exclusive(() => {
        const now = store.getCredential(connection.id);
        if (now && now.access_token === current.access_token && now.refresh_token === current.refresh_token && now.updated_at === current.updated_at) return write();
        return { row: storedCredential(store, connection) };
      });
    const fetch = authFetch(ctx);
    const metadata = await authorizationServerMetadata(current.issuer, { fetch, requirePkce: false });
    const client = credentialClient(current, store.path);
    const presented = presentedClient(client, connection, ctx.env);
    const grant = grantLifetimeRecorder(fetch);
    let tokens: OAuthTokens;
    try {
      tokens = await refreshAuthorization(current.issuer, {
        metadata,
        clientInformation: presented,
        refreshToken: current.refresh_token,
        ...(current.resource !== null ? { resource: current.resource } : {}),
        fetchFn: grant.fetch,
      });
    } catch (error) {
      if (grantRejected(error)) {
        // The grant is dead; keeping it would only make every later command fail the same way.
        // What stays is why, for `subs mcp list` to say until the next login: the server's words
        // made visible, cut to a line, and scrubbed of what this credential held (a server may
        // echo the refresh token it was sent).
        const secrets = new Secrets();
        for (const value of [current.refresh_token, current.access_token, presented.client_secret]) secrets.add(value);
        const lost = overCurrent(() => {
          store.loseCredential({
            id: current.id,
            url: current.url,
            reason: "refresh_rejected",
            message: secrets.scrub(cut(escaped(oauthProblem(error).replace(/\s+/g, " ").trim()), LOSS_MESSAGE_MAX)),
            lost_at: ctx.now(),
          });
          return { rejected: "" };
        });
        // A login meanwhile: its credential is the answer, the rejected grant is gone anyway.
        if ("row" in lost) return lost;
        // A client the server no longer knows: its registration is dropped too, so the
        // login that follows registers anew instead of failing the same way.
        if (clientRejected(error) && dropRegistration(store, current.issuer, client)) {
          return { rejected: `the authorization server no longer accepts subs' registration (${oauthProblem(error)}); it was dropped, and the next login registers anew` };
        }
        return { rejected: `the authorization server rejected the refresh token (${oauthProblem(error)})` };
      }
      throw failed(`${connection.id}: refreshing the access token at ${current.issuer} failed (${oauthProblem(error)})`, { cause: error, code: "refresh_failed" });
    }
    tokens = checkedTokens(tokens, connection.id, current.issuer);
    const now = ctx.now();
    const next: CredentialRow = {
      ...current,
      access_token: tokens.access_token,
      token_type: tokens.token_type,
      // The SDK keeps the old refresh token when the server sends none (no rotation).
      refresh_token: tokens.refresh_token ?? current.refresh_token,
      expires_at: tokens.expires_in !== undefined ? now + Math.round(tokens.expires_in * 1000) : null,
      // The refresh token's expiry goes with it (grant-expiry.ts).
      refresh_expires_at: refreshExpiryAfter({
        lifetimeSeconds: grant.lifetime(),
        rotated: tokens.refresh_token !== undefined && tokens.refresh_token !== current.refresh_token,
        previous: current.refresh_expires_at,
        now,
      }),
      scopes: tokens.scope !== undefined ? tokens.scope : current.scopes,
      updated_at: now,
    };
    return overCurrent(() => {
      store.putCredential(next);
      return { row: next };
    });
  }, ctx.signal);
  if ("rejected" in outcome) throw needsLogin(connection.id, outcome.rejected);
  return outcome.row;
}
