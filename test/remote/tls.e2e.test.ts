// A deployment behind a certificate this machine does not trust (a team's own CA, a self-signed
// one): the built CLI says so at once, naming NODE_EXTRA_CA_CERTS, and does not retry (a retry
// meets the same certificate); with NODE_EXTRA_CA_CERTS naming it, the same commands work.
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { request as httpRequest } from "node:http";
import { createServer as createHttpsServer, type Server } from "node:https";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import path from "node:path";
import { after, before, test } from "node:test";
import { runCli } from "../support/cli.ts";
import { startServedDeployment, type ServedDeployment } from "../support/deployment-serve.ts";

let dir: string;
let d: ServedDeployment;
let tls: Server;
let certFile: string;
let url: string;
/** TLS handshakes the front refused (each a connection subs tried). */
let refusedHandshakes = 0;

before(async () => {
  dir = mkdtempSync(path.join(tmpdir(), "subs-remote-tls-"));
  certFile = path.join(dir, "cert.pem");
  const keyFile = path.join(dir, "key.pem");
  // A self-signed certificate for 127.0.0.1 (an IP SAN), made for this run only.
  execFileSync("openssl", ["req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", keyFile, "-out", certFile, "-days", "1", "-subj", "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1"], { stdio: "ignore" });
  d = await startServedDeployment({ store: "sqlite" });
  const target = new URL(d.direct);
  tls = createHttpsServer({ key: readFileSync(keyFile), cert: readFileSync(certFile) }, (req, res) => {
    const forward = httpRequest({ host: target.hostname, port: target.port, path: req.url, method: req.method, headers: { ...req.headers, host: target.host } }, (answer) => {
      res.writeHead(answer.statusCode ?? 502, answer.headers);
      answer.pipe(res);
    });
    forward.on("error", () => res.destroy());
    req.pipe(forward);
  });
  tls.on("tlsClientError", () => refusedHandshakes++);
  await new Promise<void>((resolve) => tls.listen(0, "127.0.0.1", resolve));
  url = `https://127.0.0.1:${(tls.address() as AddressInfo).port}`;
  writeFileSync(path.join(dir, "substructure.toml"), `[remote]\nurl = "${url}"\n\n[mcp.tracker]\nurl = "https://tracker.example/mcp"\n`);
});
after(async () => {
  await new Promise((resolve) => tls?.close(resolve));
  await d?.close();
  rmSync(dir, { recursive: true, force: true });
});

test("an untrusted certificate: exit 1 at the first try, the code and NODE_EXTRA_CA_CERTS said, nothing retried; trusted through NODE_EXTRA_CA_CERTS, it works", async () => {
  const refused = await runCli(["mcp", "list"], { cwd: dir, env: { SUBSTRUCTURE_TOKEN: d.token } });
  assert.equal(refused.code, 1, refused.stderr);
  assert.match(refused.stderr, new RegExp(`the certificate of the deployment at ${url.replace(/\./g, "\\.")} is not trusted \\(DEPTH_ZERO_SELF_SIGNED_CERT\\); nothing was sent`));
  assert.match(refused.stderr, /NODE_EXTRA_CA_CERTS/);
  assert.doesNotMatch(refused.stderr, /retrying|attempt/i);
  assert.equal(refusedHandshakes, 1, "tried once, not retried");

  const trusted = await runCli(["mcp", "list", "--json"], { cwd: dir, env: { SUBSTRUCTURE_TOKEN: d.token, NODE_EXTRA_CA_CERTS: certFile } });
  assert.equal(trusted.code, 0, trusted.stderr);
  assert.deepEqual(JSON.parse(trusted.stdout).map((c: { id: string; status: string }) => [c.id, c.status]), [["tracker", "not_applied"]]);
});

test("the deployment meeting an MCP server whose certificate it does not trust: the consent is refused at once, saying so and naming NODE_EXTRA_CA_CERTS", async () => {
  const { callServed } = await import("../support/deployment-serve.ts");
  assert.equal((await callServed(d, "PUT", "/v1/mcp/secure", { url: `${url}/mcp`, prefix_tools: false })).status, 201);
  const before = refusedHandshakes;
  const started = await callServed(d, "POST", "/v1/mcp/secure/authorizations", {});
  assert.equal(started.status, 502, JSON.stringify(started.body));
  assert.match(started.body.message, /the certificate of https:\/\/127\.0\.0\.1:\d+ is not trusted \(DEPTH_ZERO_SELF_SIGNED_CERT\); nothing was sent\. The deployment's operator can point NODE_EXTRA_CA_CERTS at/);
  assert.equal(refusedHandshakes - before, 1, "one handshake, not retried");
});
