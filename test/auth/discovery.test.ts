// Discovery against servers of the 2025-03-26 revision and servers that need no credential
// (docs/conformance.md): what a well-known URL that serves no metadata means, where a
// server without resource metadata keeps its authorization server metadata, and which mix-up
// checks still hold there. Real loopback HTTP servers, the real guarded fetch.
import assert from "node:assert/strict";
import { createServer, type IncomingMessage, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { after, describe, it } from "node:test";
import { authorizationServerMetadata, discover, type Discovery } from "../../src/auth/discovery.ts";
import { SubsError } from "../../src/errors.ts";
import { guardedFetch } from "../../src/http/guarded-fetch.ts";
import { within } from "../support/wait.ts";

type Handler = (req: IncomingMessage, res: ServerResponse, origin: string) => void;
type Served = { origin: string; gets: string[]; close: () => Promise<void> };

const servers: Served[] = [];
after(() => Promise.all(servers.map((s) => s.close())));

async function serve(handler: Handler): Promise<Served> {
  const gets: string[] = [];
  const open = new Set<ServerResponse>();
  const server = createServer((req, res) => {
    open.add(res);
    res.on("close", () => open.delete(res));
    if (req.method === "GET") gets.push(req.url ?? "");
    req.resume();
    req.on("end", () => handler(req, res, origin));
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const origin = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  const served: Served = {
    origin,
    gets,
    close: () => {
      for (const res of open) res.destroy();
      return new Promise((resolve) => server.close(() => resolve()));
    },
  };
  servers.push(served);
  return served;
}

const json = (res: ServerResponse, status: number, body: unknown) => res.writeHead(status, { "content-type": "application/json" }).end(JSON.stringify(body));
const initializeResult = { jsonrpc: "2.0", id: 1, result: { protocolVersion: "2025-06-18", capabilities: {}, serverInfo: { name: "t", version: "1" } } };
const asMetadata = (issuer: string, base: string) => ({
  issuer,
  authorization_endpoint: `${base}/authorize`,
  token_endpoint: `${base}/token`,
  registration_endpoint: `${base}/register`,
  response_types_supported: ["code"],
  code_challenge_methods_supported: ["S256"],
});

/** An MCP server at /mcp: `post` answers the unauthenticated initialize, `get` every GET. */
function mcpServer(options: { post: "answer" | "401"; get: Handler }): Promise<Served> {
  return serve((req, res, origin) => {
    if (req.method === "POST") {
      if (options.post === "answer") json(res, 200, initializeResult);
      else res.writeHead(401, { "www-authenticate": "Bearer" }).end();
      return;
    }
    options.get(req, res, origin);
  });
}

const fetch = guardedFetch(globalThis.fetch, { timeoutMs: 5_000 });
const authorized = (result: Discovery | { open: true }): Discovery => {
  assert.ok(!("open" in result), "expected an authorization server, not an open server");
  return result;
};

describe("discovery: well-known URLs that serve no metadata", () => {
  it("a server that answers MCP and says 400 at every well-known URL needs no credential", async () => {
    const server = await mcpServer({ post: "answer", get: (_req, res) => json(res, 400, { error: "parse error" }) });
    assert.deepEqual(await discover({ serverUrl: `${server.origin}/mcp`, fetch }), { open: true });
    assert.ok(server.gets.includes("/.well-known/oauth-protected-resource/mcp"));
    assert.ok(server.gets.includes("/.well-known/oauth-authorization-server"));
  });

  it("an event stream that never ends at a well-known URL is no metadata, and is not waited on", async () => {
    const server = await mcpServer({
      post: "answer",
      get: (_req, res) => res.writeHead(200, { "content-type": "text/event-stream" }).write("id: 1\nretry: 500\ndata: \n\n"),
    });
    // The stream never ends: discovery that waited on it would never end either.
    assert.deepEqual(await within(discover({ serverUrl: server.origin, fetch }), "discovery to leave the endless stream"), { open: true });
  });

  it("a 5xx at a well-known URL is an error, not 'no metadata'", async () => {
    const server = await mcpServer({ post: "401", get: (_req, res) => json(res, 503, {}) });
    await assert.rejects(discover({ serverUrl: `${server.origin}/mcp`, fetch }), (error: SubsError) => {
      assert.equal(error.kind, "failed");
      assert.match(error.message, /cannot read the protected resource metadata .*HTTP 503/);
      return true;
    });
  });
});

describe("discovery: 2025-03-26 servers (no protected resource metadata)", () => {
  it("metadata at the origin's root may state an issuer with a path on that origin; it is found there again for a refresh", async () => {
    const server = await mcpServer({
      post: "401",
      get: (req, res, origin) => {
        if (req.url === "/.well-known/oauth-authorization-server") json(res, 200, asMetadata(`${origin}/oauth`, `${origin}/oauth`));
        else json(res, 404, {});
      },
    });
    const found = authorized(await discover({ serverUrl: `${server.origin}/mcp`, fetch }));
    assert.equal(found.issuer, `${server.origin}/oauth`);
    assert.equal(found.metadata.authorization_endpoint, `${server.origin}/oauth/authorize`);
    assert.equal(found.resource, `${server.origin}/mcp`);
    assert.equal(found.resourceMetadata, undefined);
    // What refresh and revocation do with the stored issuer: RFC 8414's path-aware URL has nothing,
    // the 2025-03-26 location has a document stating exactly this issuer.
    const again = await authorizationServerMetadata(found.issuer, { fetch, requirePkce: false });
    assert.equal(again.token_endpoint, `${server.origin}/oauth/token`);
    assert.ok(server.gets.includes("/.well-known/oauth-authorization-server/oauth"));
  });

  it("the root document is not taken for another issuer on the same origin", async () => {
    const server = await mcpServer({
      post: "401",
      get: (req, res, origin) => {
        if (req.url === "/.well-known/oauth-authorization-server") json(res, 200, asMetadata(`${origin}/oauth`, origin));
        else json(res, 404, {});
      },
    });
    await assert.rejects(authorizationServerMetadata(`${server.origin}/tenant`, { fetch }), /publishes no authorization server metadata/);
  });

  it("metadata at the root stating an issuer on another origin is refused before anything is sent", async () => {
    const server = await mcpServer({
      post: "401",
      get: (req, res) => {
        if (req.url === "/.well-known/oauth-authorization-server") json(res, 200, asMetadata("https://accounts.example.com", "https://accounts.example.com"));
        else json(res, 404, {});
      },
    });
    await assert.rejects(discover({ serverUrl: `${server.origin}/mcp`, fetch }), (error: SubsError) => {
      assert.equal(error.kind, "refused");
      assert.equal(error.code, "issuer_mismatch");
      return true;
    });
  });

  it("metadata at the root still must list S256", async () => {
    const server = await mcpServer({
      post: "401",
      get: (req, res, origin) => {
        if (req.url === "/.well-known/oauth-authorization-server") json(res, 200, { ...asMetadata(origin, origin), code_challenge_methods_supported: ["plain"] });
        else json(res, 404, {});
      },
    });
    await assert.rejects(discover({ serverUrl: `${server.origin}/mcp`, fetch }), /does not list PKCE S256/);
  });

  it("without any metadata: the default endpoints /authorize, /token and /register at the origin, at login and at refresh", async () => {
    const server = await mcpServer({ post: "401", get: (_req, res) => json(res, 404, {}) });
    const found = authorized(await discover({ serverUrl: `${server.origin}/some/mcp`, fetch }));
    assert.equal(found.issuer, `${server.origin}/`);
    assert.equal(found.metadata.authorization_endpoint, `${server.origin}/authorize`);
    assert.equal(found.metadata.token_endpoint, `${server.origin}/token`);
    assert.equal(found.metadata.registration_endpoint, `${server.origin}/register`);
    const again = await authorizationServerMetadata(found.issuer, { fetch, requirePkce: false });
    assert.equal(again.token_endpoint, `${server.origin}/token`);
  });

  it("an authorization server named by resource metadata must publish metadata: no default endpoints for it", async () => {
    const as = await serve((_req, res) => json(res, 404, {}));
    const server = await mcpServer({
      post: "401",
      get: (req, res, origin) => {
        if (req.url === "/.well-known/oauth-protected-resource/mcp") json(res, 200, { resource: `${origin}/mcp`, authorization_servers: [`${as.origin}/`] });
        else json(res, 404, {});
      },
    });
    await assert.rejects(discover({ serverUrl: `${server.origin}/mcp`, fetch }), /publishes no authorization server metadata/);
    await assert.rejects(authorizationServerMetadata(`${as.origin}/`, { fetch, backCompat: false }), /publishes no authorization server metadata/);
  });

  it("nor the origin's root document for a path issuer named by resource metadata (RFC 8414 §3.1 only)", async () => {
    const as = await serve((req, res, origin) => {
      if (req.url === "/.well-known/oauth-authorization-server") json(res, 200, asMetadata(`${origin}/tenant1`, `${origin}/tenant1`));
      else json(res, 404, {});
    });
    const server = await mcpServer({
      post: "401",
      get: (req, res, origin) => {
        if (req.url === "/.well-known/oauth-protected-resource/mcp") json(res, 200, { resource: `${origin}/mcp`, authorization_servers: [`${as.origin}/tenant1`] });
        else json(res, 404, {});
      },
    });
    await assert.rejects(discover({ serverUrl: `${server.origin}/mcp`, fetch }), /publishes no authorization server metadata/);
    assert.ok(!as.gets.includes("/.well-known/oauth-authorization-server"), "asked the root for a path issuer's metadata");
  });
});
