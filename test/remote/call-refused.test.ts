// `subs mcp call` under [remote]: the credential never leaves the deployment and the protocol has
// no call endpoint, so it refuses clearly, before any request.
import assert from "node:assert/strict";
import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { test } from "node:test";
import { runInProcess } from "../support/cli.ts";

test("mcp call with [remote] is refused with exit 2, a reason and the next command; nothing is sent", async () => {
  const dir = mkdtempSync(path.join(tmpdir(), "subs-call-remote-"));
  writeFileSync(path.join(dir, "substructure.toml"), '[remote]\nurl = "http://127.0.0.1:9"\n\n[mcp.sentry]\nurl = "https://mcp.sentry.dev/mcp"\n');
  const sent: string[] = [];
  const fetch = (async (input: string | URL | Request) => {
    sent.push(String(input));
    throw new Error("no request may be sent");
  }) as typeof globalThis.fetch;
  const result = await runInProcess(["mcp", "call", "sentry", "search", "--json"], { cwd: dir, env: { SUBSTRUCTURE_TOKEN: "t" }, fetch });
  assert.equal(result.code, 2, result.stderr);
  assert.match(result.stderr, /subs mcp call works only without \[remote\]/);
  assert.match(result.stderr, /subs mcp tools <id>/);
  assert.equal(JSON.parse(result.stdout).error.code, "remote_unsupported");
  assert.deepEqual(sent, []);
});
