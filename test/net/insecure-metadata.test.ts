// Authorization server metadata is fetched over https only, loopback aside, like
// the endpoints it names. A plain-http issuer off loopback (from protected resource metadata or a
// stored credential) or a plain-http `resource_metadata` URL in a 401 is refused (exit 2, code
// insecure_metadata) before any request is sent to it. Real loopback servers; the context's fetch
// records every URL asked for.
import assert from "node:assert/strict";
import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
import { afterEach, beforeEach, describe, it } from "node:test";
import { authorizationServerMetadata, discover, insecureMetadataUrl } from "../../src/auth/discovery.ts";
import { SubsError } from "../../src/errors.ts";
import { runInProcess } from "../support/cli.ts";
import { environment, type Env } from "../auth/harness.ts";

/** globalThis.fetch, recording each URL asked for. */
function recordingFetch() {
  const urls: string[] = [];
  const fetch: typeof globalThis.fetch = (input, init) => {
    urls.push(input instanceof Request ? input.url : String(input));
    return globalThis.fetch(input, init);
  };
  return { urls, fetch };
}

describe("authorization metadata over plain http off loopback", () => {
  let env: Env;
  beforeEach(async () => {
    env = await environment();
  });
  afterEach(() => env.close());

  it("mcp login: resource metadata naming http://auth.example/ is refused (exit 2) and nothing is sent to it", async () => {
    env.protect.authServer = { issuer: "http://auth.example/", verifier: env.as.verifier };
    const { urls, fetch } = recordingFetch();
    const opened: string[] = [];
    const r = await runInProcess(["mcp", "login", "demo"], { cwd: env.dir, fetch, openBrowser: async (url) => void opened.push(url) });
    assert.equal(r.code, 2, r.stderr);
    assert.match(r.stderr, /the authorization server is plain http off loopback \(http:\/\/auth\.example\/\); refusing to fetch metadata from it/);
    assert.match(r.stderr, /https/);
    assert.ok(urls.length > 0, "the MCP server was asked first");
    assert.deepEqual(urls.filter((u) => new URL(u).hostname === "auth.example"), []);
    assert.deepEqual(opened, []);
  });

  it("the same with --json: code insecure_metadata", async () => {
    env.protect.authServer = { issuer: "http://auth.example/", verifier: env.as.verifier };
    const r = await runInProcess(["mcp", "login", "demo", "--json"], { cwd: env.dir, openBrowser: async () => {} });
    assert.equal(r.code, 2, r.stderr);
    assert.equal(JSON.parse(r.stdout).error.code, "insecure_metadata");
  });

  it("the loopback authorization server over plain http is still used", async () => {
    const r = await runInProcess(["mcp", "login", "demo"], { cwd: env.dir, openBrowser: (await import("../support/browser.ts")).consentingBrowser() });
    assert.equal(r.code, 0, r.stderr);
  });
});

describe("discovery refuses plain-http metadata URLs before fetching them", () => {
  it("a 401 whose resource_metadata is http off loopback: refused, never fetched", async () => {
    const server = createServer((req, res) => {
      req.resume();
      res.writeHead(401, { "www-authenticate": 'Bearer resource_metadata="http://evil.example/.well-known/oauth-protected-resource"' }).end();
    });
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
    try {
      const { urls, fetch } = recordingFetch();
      const serverUrl = `http://127.0.0.1:${(server.address() as AddressInfo).port}/mcp`;
      await assert.rejects(discover({ serverUrl, fetch }), (error: unknown) => {
        assert.ok(error instanceof SubsError);
        assert.equal(error.kind, "refused");
        assert.equal(error.code, "insecure_metadata");
        assert.match(error.message, /resource metadata URL in the 401 of http:\/\/127\.0\.0\.1:\d+ is plain http off loopback \(http:\/\/evil\.example\//);
        return true;
      });
      assert.deepEqual(urls, [serverUrl]);
    } finally {
      server.close();
    }
  });

  it("a stored credential's plain-http issuer (refresh, revocation) is refused without a request", async () => {
    const { urls, fetch } = recordingFetch();
    await assert.rejects(authorizationServerMetadata("http://auth.example/tenant", { fetch }), (error: unknown) => {
      assert.ok(error instanceof SubsError);
      assert.equal(error.code, "insecure_metadata");
      return true;
    });
    assert.deepEqual(urls, []);
  });

  it("https anywhere and http on loopback pass; other schemes do not", () => {
    assert.equal(insecureMetadataUrl("x", "https://auth.example/"), undefined);
    assert.equal(insecureMetadataUrl("x", "http://127.0.0.1:8080/"), undefined);
    assert.equal(insecureMetadataUrl("x", "http://localhost/"), undefined);
    assert.equal(insecureMetadataUrl("x", "http://[::1]:9/"), undefined);
    assert.match(insecureMetadataUrl("x", "ftp://auth.example/")!.message, /x is not https/);
    assert.match(insecureMetadataUrl("x", "http://127.0.0.1.example/")!.message, /plain http off loopback/);
  });
});
