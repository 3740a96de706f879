// Where `subs` and docs/deployment-protocol.md disagree. Each test asserts what the
// document says; a failure here is a recorded disagreement (see the report), not a flaky test.
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { startHarness } from "./harness.ts";

describe("subs vs docs/deployment-protocol.md", () => {
  it("section 8: oauth scopes are compared as a set (duplicates do not make a change)", async () => {
    const h = await startHarness();
    try {
      h.write(`[mcp.sentry]\nurl = "${h.mcp.url}"\noauth = { scopes = ["read", "read", "write"] }\n`);
      // The deployment holds the same set of scopes, without the duplicate.
      assert.equal((await h.api("PUT", "/v1/mcp/sentry", { url: h.mcp.url, prefix_tools: true, oauth: { scopes: ["write", "read"] } })).status, 201);
      const result = await h.run(["apply", "--dry-run", "--json"]);
      assert.equal(result.code, 0, result.stderr);
      const sentry = JSON.parse(result.stdout).connections.find((c: any) => c.id === "sentry");
      assert.equal(
        sentry.action,
        "unchanged",
        'DISAGREEMENT (section 8: "scopes compared as a set"): subs plans a change for ["read","read","write"] vs ["write","read"]; it compares scopes as a sorted list (a multiset), not a set',
      );
    } finally {
      await h.close();
    }
  });
});
