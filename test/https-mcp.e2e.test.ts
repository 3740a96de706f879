// MCP over https, through the built CLI: the path every real server takes. The MCP requests go
// through src/http/mcp-fetch.ts (node:https), so this checks what undici's fetch gave for free: the
// certificate is verified (a self-signed one is refused unless NODE_EXTRA_CA_CERTS names it), and
// a verified server works for `mcp tools` and `mcp call`.
import assert from "node:assert/strict";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { after, before, it } from "node:test";
import { runCli } from "./support/cli.ts";
import { annotatedTool, startMcpServer, type RunningMcpServer } from "./support/mcp-server.ts";
import { startTlsFront, type TlsFront } from "./support/tls-front.ts";

let dir: string;
let upstream: RunningMcpServer;
let front: TlsFront;
let httpsUrl: string;
let certFile: string;

before(async () => {
  dir = mkdtempSync(path.join(tmpdir(), "subs-https-"));
  upstream = await startMcpServer({ tools: [annotatedTool("search", { readOnlyHint: true })] });
  front = await startTlsFront(new URL(upstream.url));
  certFile = front.certFile;
  httpsUrl = `${front.url}/mcp`;
  writeFileSync(path.join(dir, "substructure.toml"), `[mcp.docs]\nurl = "${httpsUrl}"\nauth = { token_env = "DOCS_TOKEN" }\n`);
});

after(async () => {
  await front.close();
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
