// What /metrics says of the credentials (src/deployment/ops.ts, credentialMetrics), from the store's
// clear columns: a gauge per connection whose refresh token's expiry is known, and a count per
// reason of the connections whose credential was lost for good, every reason listed (0 included)
// so that an alert on it has a series from the start. test/deployment/grant-expiry.e2e.test.ts
// reads them from a served deployment.
import assert from "node:assert/strict";
import { test } from "node:test";
import { credentialMetrics } from "../../src/deployment/ops.ts";

test("one gauge per credential with a known refresh expiry, in seconds from now (negative once past); a count per reason, zeros included", () => {
  const now = 1_000_000_000;
  const summary = (id: string, refreshExpiresAt: number | null, person = "") => ({ id, person, url: `https://${id}.example/mcp`, issuer: "https://as.example/", authorizedAt: 0, authorizedBy: null, expiresAt: null, refreshExpiresAt, version: 1 });
  const text = credentialMetrics(
    [
      summary("gh", now + 3 * 86_400_000),
      summary("kc", now - 5000),
      summary("plain", null),
      // A personal connection: one series, the soonest of its people's, naming none of them.
      summary("jira", now + 10_000, "alice@example.com"),
      summary("jira", now + 4000, "bob@example.com"),
    ],
    [
      { id: "old", person: "", url: "https://old.example/mcp", reason: "refresh_rejected", message: "invalid_grant", lostAt: 1 },
      { id: "jira", person: "carol@example.com", url: "https://jira.example/mcp", reason: "refresh_rejected", message: "invalid_grant", lostAt: 1 },
    ],
    now,
  );
  const series = text.split("\n").filter((l) => l && !l.startsWith("#"));
  assert.deepEqual(series, [
    'subs_deployment_credential_refresh_expiry_seconds{connection="gh",kind="shared"} 259200',
    'subs_deployment_credential_refresh_expiry_seconds{connection="jira",kind="personal"} 4',
    'subs_deployment_credential_refresh_expiry_seconds{connection="kc",kind="shared"} -5',
    'subs_deployment_credentials_needing_login{kind="shared",reason="refresh_rejected"} 1',
    'subs_deployment_credentials_needing_login{kind="shared",reason="no_refresh_token"} 0',
    'subs_deployment_credentials_needing_login{kind="shared",reason="server_moved"} 0',
    'subs_deployment_credentials_needing_login{kind="shared",reason="refused_after_refresh"} 0',
    'subs_deployment_credentials_needing_login{kind="personal",reason="refresh_rejected"} 1',
    'subs_deployment_credentials_needing_login{kind="personal",reason="no_refresh_token"} 0',
    'subs_deployment_credentials_needing_login{kind="personal",reason="server_moved"} 0',
    'subs_deployment_credentials_needing_login{kind="personal",reason="refused_after_refresh"} 0',
  ]);
  assert.doesNotMatch(text, /alice|bob|carol/, "no person in a series");
  assert.match(text, /^# TYPE subs_deployment_credential_refresh_expiry_seconds gauge$/m);
  assert.match(text, /^# TYPE subs_deployment_credentials_needing_login gauge$/m);
  assert.ok(text.endsWith("\n"));
});
