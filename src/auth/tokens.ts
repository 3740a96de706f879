// A token answer is checked before anything of it is stored. The SDK's schema
// takes any number as `expires_in` (negative, 1e308) and any string as a token, empty included: an
// expiry in the past makes every command refresh, one at Infinity is stored as a token that never
// expires, an empty token is sent as `Bearer `. RFC 6749 §5.1 defines the fields.
import type { OAuthTokens } from "@modelcontextprotocol/sdk/shared/auth.js";
import * as z from "zod/mini";
import { failed } from "../errors.ts";

/** The longest lifetime taken as meant: ten years, in seconds. Longer is a broken server. */
export const MAX_EXPIRES_IN_SECONDS = 10 * 365 * 24 * 60 * 60;

const nonEmpty = z.string().check(z.minLength(1));

const TokenAnswerSchema = z.looseObject({
  access_token: nonEmpty,
  token_type: nonEmpty,
  expires_in: z.optional(z.number().check(z.gt(0), z.lte(MAX_EXPIRES_IN_SECONDS))),
  refresh_token: z.optional(nonEmpty),
  scope: z.optional(z.string()),
});

const WHAT: Record<string, string> = {
  access_token: "an empty or missing access_token",
  token_type: "an empty or missing token_type",
  expires_in: `an expires_in that is not a number of seconds between 0 and ${MAX_EXPIRES_IN_SECONDS} (ten years)`,
  refresh_token: "an empty refresh_token",
};

/**
 * `tokens` when every field can be used as is, else a one-line failure naming the field, never its
 * value (a token answer is all secrets).
 */
export function checkedTokens(tokens: OAuthTokens, id: string, issuer: string): OAuthTokens {
  const parsed = TokenAnswerSchema.safeParse(tokens);
  if (parsed.success) return tokens;
  const fields = [...new Set(parsed.error.issues.map((issue) => String(issue.path[0] ?? "")))];
  const problems = fields.map((field) => WHAT[field] ?? `an invalid ${field || "answer"}`);
  throw failed(`${id}: the authorization server ${issuer} answered with ${problems.join(" and ")}; nothing was stored`, { code: "invalid_token_response" });
}
