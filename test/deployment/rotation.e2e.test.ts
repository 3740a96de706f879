// `subs deployment rotate-key` while a deployment serves the store: refused, naming the process
// (each says in the store that it serves it); forced, the process still holds the old key, and says
// so where an operator looks, its /readyz (503, naming both keys and what to do) and one log line,
// and a request that meets a value sealed under the new key fails with a log line naming the
// error, never a bare "Error".
import assert from "node:assert/strict";
import { test } from "node:test";
import { runCli } from "../support/cli.ts";
import { callServed, startServedDeployment } from "../support/deployment-serve.ts";
import { waitFor } from "../support/wait.ts";

test("rotate-key while it serves: refused, naming it, unless --force; then /readyz 503 names the keys and the restart, the log says it once, a failed request's log line names the error; stopped, it no longer counts", async () => {
  const d = await startServedDeployment({ store: "sqlite" });
  try {
    assert.equal((await callServed(d, "PUT", "/v1/mcp/tracker", { url: "https://tracker.example/mcp", prefix_tools: false })).status, 201);
    d.credentials.set("tracker", { url: "https://tracker.example/mcp", tokens: { access_token: "ACCESS-rotation-SECRET", token_type: "Bearer" }, authorizedAt: Date.now(), expiresAt: null });
    await d.settled();
    assert.equal((await fetch(`${d.direct}/readyz`)).status, 200);

    // Refused while it serves: it said so in the store when it started listening.
    const refused = await runCli(["deployment", "rotate-key", "--store", d.storeArg, "--key-file", d.keyFile, "--new-key-file", "new.key"], { cwd: d.dir });
    assert.equal(refused.code, 2, refused.stderr);
    assert.match(refused.stderr, new RegExp(`a process serves this store: ${new URL(d.direct).host.replace(/\./g, "\\.")} \\(last said so \\d+ s ago\\); nothing was re-encrypted`));
    assert.match(refused.stderr, /stop it first .*--force rotates anyway/);
    assert.equal((await runCli(["deployment", "check-key", "--store", d.storeArg, "--key-file", d.keyFile], { cwd: d.dir })).code, 0, "the old key still opens the store");

    const rotated = await runCli(["deployment", "rotate-key", "--store", d.storeArg, "--key-file", d.keyFile, "--new-key-file", "new.key", "--force"], { cwd: d.dir });
    assert.equal(rotated.code, 0, rotated.stderr);

    for (let n = 0; n < 2; n++) {
      const probe = await fetch(`${d.direct}/readyz`);
      const body = (await probe.json()) as { error: string; message: string };
      assert.equal(probe.status, 503);
      assert.equal(body.error, "unavailable");
      assert.match(body.message, /the encryption key \(id \w+\) does not open .*: its values are sealed under key \w+; start with the key the store was written with/);
    }
    const said = d.logs.filter((l) => l.msg === "key rotated away");
    assert.equal(said.length, 1, "said once, not at every probe");
    assert.equal(said[0]!.level, "error");

    const listed = await callServed(d, "GET", "/v1/mcp/tracker/tools");
    assert.equal(listed.status, 500, JSON.stringify(listed.body));
    const failed = await waitFor(() => d.logs.find((l) => l.msg === "handler failed"), "the failure's log line");
    assert.match(String(failed.error), /^KeyMismatch: sealed under key \w+, not \w+$/);
    assert.ok(!JSON.stringify(d.logs).includes("ACCESS-rotation-SECRET"));

    // Stopped cleanly, it takes its word back: the next rotation needs no --force.
    assert.equal(await d.stop(), 0);
    const again = await runCli(["deployment", "rotate-key", "--store", d.storeArg, "--key-file", "new.key", "--new-key-file", "newer.key"], { cwd: d.dir });
    assert.equal(again.code, 0, again.stderr);
  } finally {
    await d.close();
  }
});
