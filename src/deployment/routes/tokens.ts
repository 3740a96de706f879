// The API tokens' routes (docs/deployment-protocol.md section 3.11), for admin tokens only: a
// token made over the API is shown in its 201 answer and nowhere else; a listing never carries a
// token nor its hash; the last admin token that has not expired is never revoked.
import type { DeploymentStore } from "../store/types.ts";
import { createToken } from "../access.ts";
import { CreateTokenBody, LAST_ADMIN, MAX_TOKENS, NAME_TAKEN, TOO_MANY, tokenJson } from "../tokens.ts";
import { fail, issueText, readJson, type Route } from "./answer.ts";

/** `now`: the clock a revocation tells expired admin tokens by. */
export function tokenRoutes(o: { store: DeploymentStore; now: () => number }): Route[] {
  const { store } = o;
  return [
    {
      pattern: /^\/v1\/tokens\/?$/,
      route: "/v1/tokens",
      need: "admin",
      methods: ["GET", "POST"],
      run: async (method, req) => {
        if (method === "GET") return { status: 200, body: { tokens: (await store.listTokens()).map(tokenJson) } };
        const parsed = CreateTokenBody.safeParse(await readJson(req));
        if (!parsed.success) return fail(400, "invalid_request", issueText(parsed.error));
        const { name, role, expires_in } = parsed.data;
        const made = await createToken(store, { name, role, lifetimeMs: expires_in === undefined ? null : expires_in * 1000 }, MAX_TOKENS);
        if (made.outcome === "name_taken") return fail(409, "name_taken", NAME_TAKEN(name));
        if (made.outcome === "too_many") return fail(409, "too_many_tokens", TOO_MANY(made.max));
        const { last_used_at: _, ...created } = tokenJson(made.record);
        return { status: 201, body: { ...created, token: made.token } };
      },
    },
    {
      pattern: /^\/v1\/tokens\/([^/]+)\/?$/,
      route: "/v1/tokens/{id}",
      need: "admin",
      methods: ["DELETE"],
      run: async (_m, _req, [id]) => {
        const gone = await store.revokeToken(id!, o.now());
        if (gone.outcome === "absent") return fail(404, "not_found", `no token has the id ${id}`);
        if (gone.outcome === "last_admin") return fail(409, "last_admin", LAST_ADMIN);
        return { status: 204 };
      },
    },
  ];
}
