// The API tokens' routes (docs/deployment-protocol.md section 3.11), for admin tokens only: a
// token made over the API is shown in its 201 answer and nowhere else; a listing never carries a
// token nor its hash; the last admin token that has not expired is never revoked.
import type { RevocationOutcome } from "../oauth.ts";
import type { CredentialRecord, DeploymentStore } from "../store/types.ts";
import { CreateTokenBody, createdDetail, LAST_ADMIN, makeToken, PERSON_RULE, PersonName, personJson, removedDetail, removePersonFrom, revokedDetail, tokenJson } from "../tokens.ts";
import { record, requestIdOf, type AuditSink } from "../audit.ts";
import { fail, issueText, readJson, type Route } from "./answer.ts";

/**
 * `now`: the clock a revocation tells expired admin tokens by; `revoke`: a removed person's grants
 * at their authorization servers (RFC 7009; oauth.ts).
 */
export function tokenRoutes(o: { store: DeploymentStore; now: () => number; revoke: (credential: CredentialRecord) => Promise<RevocationOutcome>; audit?: AuditSink }): Route[] {
  const { store } = o;
  return [
    {
      pattern: /^\/v1\/tokens\/?$/,
      route: "/v1/tokens",
      need: "admin",
      methods: ["GET", "POST"],
      run: async (method, req, _params, token) => {
        if (method === "GET") return { status: 200, body: { tokens: (await store.listTokens()).map(tokenJson) } };
        const parsed = CreateTokenBody.safeParse(await readJson(req));
        if (!parsed.success) return fail(400, "invalid_request", issueText(parsed.error));
        const made = await makeToken(store, parsed.data);
        if ("refused" in made) return fail(409, made.refused, made.message);
        await record(o.audit, { kind: "token.create", actor: token, requestId: requestIdOf(req), detail: createdDetail(made.created) });
        return { status: 201, body: made.created };
      },
    },
    {
      pattern: /^\/v1\/tokens\/([^/]+)\/?$/,
      route: "/v1/tokens/{id}",
      need: "admin",
      methods: ["DELETE"],
      run: async (_m, req, [id], token) => {
        const gone = await store.revokeToken(id!, o.now());
        if (gone.outcome === "absent") return fail(404, "not_found", `no token has the id ${id}`);
        if (gone.outcome === "last_admin") return fail(409, "last_admin", LAST_ADMIN);
        await record(o.audit, { kind: "token.revoke", actor: token, requestId: requestIdOf(req), detail: revokedDetail(gone.token) });
        return { status: 204 };
      },
    },
    // People (section 3.13): the tokens' holders, admin only as the tokens are.
    {
      pattern: /^\/v1\/people\/?$/,
      route: "/v1/people",
      need: "admin",
      methods: ["GET"],
      run: async () => ({ status: 200, body: { people: (await store.listPeople()).map(personJson) } }),
    },
    {
      pattern: /^\/v1\/people\/([^/]+)\/?$/,
      route: "/v1/people/{name}",
      need: "admin",
      methods: ["DELETE"],
      checkParams: ([name]) => (name !== undefined && PersonName.safeParse(name).success ? undefined : `a person's name is ${PERSON_RULE}`),
      run: async (_m, req, [name], token) => {
        const gone = await removePersonFrom(store, name!, o.now(), o.revoke);
        if ("refused" in gone) return fail(gone.refused === "not_found" ? 404 : 409, gone.refused, gone.message);
        await record(o.audit, { kind: "person.remove", actor: token, requestId: requestIdOf(req), detail: removedDetail(gone.removed) });
        return { status: 200, body: gone.removed };
      },
    },
  ];
}
