// MCP over https, through the built CLI: the path every real server takes. The MCP requests go
// through src/http/mcp-fetch.ts (node:https), so this checks what undici's fetch gave for free: the
// certificate is verified (a self-signed one is refused unless NODE_EXTRA_CA_CERTS names it), and
// a verified server works for `mcp tools` and `mcp call`.
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { createServer as createHttpsServer, type Server } from "node:https";
import { request as httpRequest } from "node:http";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import path from "node:path";
import { after, before, it } from "node:test";
import { runCli } from "./support/cli.ts";
import { annotatedTool, startMcpServer, type RunningMcpServer } from "./support/mcp-server.ts";

let dir: string;
let upstream: RunningMcpServer;
let tls: Server;
let httpsUrl: string;
let certFile: string;

before(async () => {
  dir = mkdtempSync(path.join(tmpdir(), "subs-https-"));
  certFile = path.join(dir, "cert.pem");
  const keyFile = path.join(dir, "key.pem");
  // A self-signed certificate for 127.0.0.1 (an IP SAN), made for this run only.
  execFileSync("openssl", ["req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", keyFile, "-out", certFile, "-days", "1", "-subj", "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1"], { stdio: "ignore" });
  upstream = await startMcpServer({ tools: [annotatedTool("search", { readOnlyHint: true })] });
  const target = new URL(upstream.url);
  // TLS in front of the plain test server: every request and answer passed through as they are.
  tls = createHttpsServer({ key: readFileSync(keyFile), cert: readFileSync(certFile) }, (req, res) => {
    const forward = httpRequest({ host: target.hostname, port: target.port, path: req.url, method: req.method, headers: { ...req.headers, host: target.host } }, (answer) => {
      res.writeHead(answer.statusCode ?? 502, answer.headers);
      answer.pipe(res);
    });
    forward.on("error", () => res.destroy());
    req.pipe(forward);
  });
  await new Promise<void>((resolve) => tls.listen(0, "127.0.0.1", resolve));
  httpsUrl = `https://127.0.0.1:${(tls.address() as AddressInfo).port}/mcp`;
  writeFileSync(path.join(dir, "substructure.toml"), `[mcp.docs]\nurl = "${httpsUrl}"\nauth = { token_env = "DOCS_TOKEN" }\n`);
});

after(async () => {
  tls.closeAllConnections();
  await new Promise((resolve) => tls.close(resolve));
  await upstream.close();
  rmSync(dir, { recursive: true, force: true });
});

it("an https server whose certificate is trusted: tools listed and a tool called", async () => {
  const env = { DOCS_TOKEN: "t", NODE_EXTRA_CA_CERTS: certFile };
  const tools = await runCli(["mcp", "tools", "docs", "--json"], { cwd: dir, env });
  assert.equal(tools.code, 0, tools.stderr);
  assert.deepEqual(JSON.parse(tools.stdout).tools.map((t: { name: string }) => t.name), ["search"]);
  const call = await runCli(["mcp", "call", "docs", "search", "--args", '{"q":"tls"}'], { cwd: dir, env });
  assert.equal(call.code, 0, call.stderr);
  assert.equal(call.stdout, '{"q":"tls"}\n');
});

it("an https server whose certificate is not trusted is refused: nothing is sent past the handshake", async () => {
  const before = upstream.requests.length;
  const tools = await runCli(["mcp", "tools", "docs", "--json"], { cwd: dir, env: { DOCS_TOKEN: "t" } });
  assert.equal(tools.code, 1, tools.stderr);
  const { error } = JSON.parse(tools.stdout);
  assert.equal(error.code, "untrusted_certificate");
  assert.match(error.message, /^docs: the certificate of https:\/\/127\.0\.0\.1:\d+ is not trusted \(DEPTH_ZERO_SELF_SIGNED_CERT\); nothing was sent$/);
  assert.match(error.hint, /NODE_EXTRA_CA_CERTS/);
  assert.equal(upstream.requests.length, before, "no request reached the server");
});
