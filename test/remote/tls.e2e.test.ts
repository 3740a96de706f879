// A deployment behind a certificate this machine does not trust (a team's own CA, a self-signed
// one): the built CLI says so at once, naming NODE_EXTRA_CA_CERTS, and does not retry (a retry
// meets the same certificate); with NODE_EXTRA_CA_CERTS naming it, the same commands work.
import assert from "node:assert/strict";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { after, before, test } from "node:test";
import { runCli } from "../support/cli.ts";
import { startServedDeployment, type ServedDeployment } from "../support/deployment-serve.ts";
import { startTlsFront, type TlsFront } from "../support/tls-front.ts";
import { waitFor } from "../support/wait.ts";

let dir: string;
let d: ServedDeployment;
let front: TlsFront;
let url: string;

before(async () => {
  dir = mkdtempSync(path.join(tmpdir(), "subs-remote-tls-"));
  d = await startServedDeployment({ store: "sqlite" });
  front = await startTlsFront(new URL(d.direct));
  url = front.url;
  writeFileSync(path.join(dir, "substructure.toml"), `[remote]\nurl = "${url}"\n\n[mcp.tracker]\nurl = "https://tracker.example/mcp"\n`);
});
after(async () => {
  await front?.close();
  await d?.close();
  rmSync(dir, { recursive: true, force: true });
});

test("an untrusted certificate: exit 1 at the first try, the code and NODE_EXTRA_CA_CERTS said, nothing retried; trusted through NODE_EXTRA_CA_CERTS, it works", async () => {
  const refused = await runCli(["mcp", "list"], { cwd: dir, env: { SUBSTRUCTURE_TOKEN: d.token } });
  assert.equal(refused.code, 1, refused.stderr);
  assert.match(refused.stderr, new RegExp(`the certificate of the deployment at ${url.replace(/\./g, "\\.")} is not trusted \\(DEPTH_ZERO_SELF_SIGNED_CERT\\); nothing was sent`));
  assert.match(refused.stderr, /NODE_EXTRA_CA_CERTS/);
  assert.doesNotMatch(refused.stderr, /retrying|attempt/i);
  // The front hears of a refused handshake a moment after the client does: waited for, then counted.
  await waitFor(() => front.refusedHandshakes() >= 1, "the front to see the refused handshake");
  assert.equal(front.refusedHandshakes(), 1, "tried once, not retried");

  const trusted = await runCli(["mcp", "list", "--json"], { cwd: dir, env: { SUBSTRUCTURE_TOKEN: d.token, NODE_EXTRA_CA_CERTS: front.certFile } });
  assert.equal(trusted.code, 0, trusted.stderr);
  assert.deepEqual(JSON.parse(trusted.stdout).map((c: { id: string; status: string }) => [c.id, c.status]), [["tracker", "not_applied"]]);
});

test("the deployment meeting an MCP server whose certificate it does not trust: the consent is refused at once, saying so and naming NODE_EXTRA_CA_CERTS", async () => {
  const { callServed } = await import("../support/deployment-serve.ts");
  assert.equal((await callServed(d, "PUT", "/v1/mcp/secure", { url: `${url}/mcp`, prefix_tools: false })).status, 201);
  const before = front.refusedHandshakes();
  const started = await callServed(d, "POST", "/v1/mcp/secure/authorizations", {});
  assert.equal(started.status, 502, JSON.stringify(started.body));
  assert.match(started.body.message, /the certificate of https:\/\/127\.0\.0\.1:\d+ is not trusted \(DEPTH_ZERO_SELF_SIGNED_CERT\); nothing was sent\. The deployment's operator can point NODE_EXTRA_CA_CERTS at/);
  await waitFor(() => front.refusedHandshakes() - before >= 1, "the front to see the refused handshake");
  assert.equal(front.refusedHandshakes() - before, 1, "one handshake, not retried");
});
