// Credentials that warn before they die: where an authorization server said when a refresh token
// expires (src/auth/grant-expiry.ts), `subs mcp list` says so, and within a window warns with the
// login to run, the same for a local db and a deployment (each listing gives its connections'
// expiries; this decides which to warn of).

/** How long before a refresh token's expiry `subs mcp list` warns, unless `--warn-within` or `$SUBS_WARN_WITHIN` says otherwise. */
export const DEFAULT_WARN_WITHIN_SECONDS = 7 * 86_400;

/** A connection whose refresh token expires within the window (or has expired): its id and when. */
export type GrantWarning = { id: string; refreshExpiresAt: number };

/**
 * Whether a refresh token expiring at `refreshExpiresAt` is within the window at `now` (an expiry
 * already past counts: the next refresh will be refused). A window of 0 warns of nothing.
 */
export const expiresWithin = (refreshExpiresAt: number | null, now: number, windowMs: number): boolean =>
  refreshExpiresAt !== null && windowMs > 0 && refreshExpiresAt - now <= windowMs;

/** The connections to warn of, in the order given: those usable now whose refresh token expires within the window. */
export function grantWarnings(items: ReadonlyArray<{ id: string; usable: boolean; refreshExpiresAt: number | null }>, now: number, windowMs: number): GrantWarning[] {
  return items.flatMap((i) => (i.usable && expiresWithin(i.refreshExpiresAt, now, windowMs) ? [{ id: i.id, refreshExpiresAt: i.refreshExpiresAt! }] : []));
}
