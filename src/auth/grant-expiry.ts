// When the refresh token (and with it the grant) dies, where the authorization server says so.
// RFC 6749 section 5.1 lets a token response carry parameters of the server's own, and servers
// that state the refresh token's lifetime do it in seconds, in one of two names:
// - `refresh_token_expires_in`: GitHub Apps' user access tokens ("Refreshing user access tokens",
//   https://docs.github.com/en/apps/creating-github-apps/authenticating-with-a-github-app/refreshing-user-access-tokens:
//   eight-hour access tokens, six-month refresh tokens, a new one of each with every refresh, its
//   lifetime sent each time, in older versions of the page as a string "15811200"), and Microsoft's
//   LinkedIn and AD FS token endpoints (learn.microsoft.com, "Programmatic refresh tokens");
// - `refresh_expires_in`: Keycloak, whose value is the SSO session's idle timeout, renewed by
//   every refresh, and `0` for an offline token (one with no idle expiry).
// The SDK's token schema strips both (OAuthTokensSchema is `.strip()`), so the token request's
// answer is read beside it, from a copy of the response, and checked here.
import * as z from "zod/mini";
import { MAX_EXPIRES_IN_SECONDS } from "./tokens.ts";

/** Seconds, as a number or a string of digits (GitHub's older answers); anything else is not a lifetime. */
const Seconds = z.union([z.number(), z.string().check(z.regex(/^\d{1,12}$/))]);
const GrantLifetimeSchema = z.looseObject({ refresh_token_expires_in: z.optional(z.unknown()), refresh_expires_in: z.optional(z.unknown()) });

/**
 * The refresh token's lifetime in seconds that a token response states, or null when it states
 * none that can be used: absent, `0` (Keycloak's "no idle expiry"), negative, past ten years (as
 * tokens.ts bounds `expires_in`), or not a number. Such a value is informational: ignoring it
 * leaves the expiry unknown, as for a server that says nothing, and fails no login.
 */
export function grantLifetimeOf(body: unknown): number | null {
  const parsed = GrantLifetimeSchema.safeParse(body);
  if (!parsed.success) return null;
  for (const value of [parsed.data.refresh_token_expires_in, parsed.data.refresh_expires_in]) {
    const seconds = Seconds.safeParse(value);
    if (!seconds.success) continue;
    const n = Number(seconds.data);
    if (Number.isFinite(n) && n > 0 && n <= MAX_EXPIRES_IN_SECONDS) return n;
  }
  return null;
}

/**
 * A fetch for one token request (a code exchange or a refresh) that notes what the answer says of
 * the refresh token's lifetime. `lifetime()`: seconds, null when the answer stated none, undefined
 * before a token answer came.
 */
export function grantLifetimeRecorder(fetch: typeof globalThis.fetch): { fetch: typeof globalThis.fetch; lifetime(): number | null | undefined } {
  let seen: number | null | undefined;
  const recording: typeof globalThis.fetch = async (input, init) => {
    const response = await fetch(input, init);
    const body = init?.body;
    // The SDK's token requests (executeTokenRequest) are form bodies with a grant_type.
    if (response.ok && body instanceof URLSearchParams && body.has("grant_type")) {
      try {
        seen = grantLifetimeOf(await response.clone().json());
      } catch {
        seen = null; // not JSON: the SDK refuses the answer itself
      }
    }
    return response;
  };
  return { fetch: recording, lifetime: () => seen };
}

/**
 * When the refresh token held after a token answer expires (ms since the epoch), or null when
 * unknown. The lifetime belongs to the refresh token it came with:
 * - the answer states one: it holds from now (a rotation's new token, or Keycloak's renewed idle
 *   timeout);
 * - the answer issued a new refresh token and stated nothing: that token's lifetime is unknown
 *   (the old one's said nothing of it);
 * - the answer issued none (no rotation, RFC 6749 section 6): the same refresh token is kept, and
 *   so is what was known of its expiry.
 */
export function refreshExpiryAfter(options: { lifetimeSeconds: number | null | undefined; rotated: boolean; previous: number | null; now: number }): number | null {
  const { lifetimeSeconds, rotated, previous, now } = options;
  if (lifetimeSeconds != null) return now + Math.round(lifetimeSeconds * 1000);
  return rotated ? null : previous;
}
