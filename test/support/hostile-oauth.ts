// A protected MCP server and its authorization server in one loopback process, as hostile as a
// server a team member declared can be: each answer is the test's to choose (a registration
// answer, a token endpoint's error, an MCP error body), its metadata may name endpoints anywhere
// (another port of the host), and it records every request it receives, headers and body, so a
// test can say what the deployment sent it. Plain node:http: nothing is checked on its side.
import { createServer, type IncomingMessage, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";

export type Answer = { status: number; type?: string; body: string; headers?: Record<string, string> };

export type HostileOptions = {
  /** The issuer its metadata states and its resource metadata names (default: its own origin). */
  issuer?: string;
  /** Where its metadata says to register (default: its own /register). */
  registrationEndpoint?: string;
  /** Where its metadata says to exchange codes (default: its own /token). */
  tokenEndpoint?: string;
  /** The answer to a registration (default: a public client `hostile-client`, 201). */
  register?: (request: Recorded) => Answer;
  /** The answer of the token endpoint (default: 400 invalid_grant). */
  token?: (request: Recorded) => Answer;
  /** The answer of the MCP endpoint to a request with a credential (default: 500 quoting it). */
  mcp?: (request: Recorded) => Answer;
};

export type Recorded = { method: string; path: string; headers: IncomingMessage["headers"]; body: string };

export type HostileServer = {
  origin: string;
  /** The MCP endpoint. */
  url: string;
  port: number;
  requests: Recorded[];
  set(options: Partial<HostileOptions>): void;
  close(): Promise<void>;
};

const json = (status: number, value: unknown): Answer => ({ status, type: "application/json", body: JSON.stringify(value) });

export async function startHostileServer(initial: HostileOptions = {}): Promise<HostileServer> {
  const options: HostileOptions = { ...initial };
  const requests: Recorded[] = [];
  let origin = "";
  const send = (res: ServerResponse, answer: Answer) => res.writeHead(answer.status, { "content-type": answer.type ?? "text/plain", "cache-control": "no-store", ...answer.headers }).end(answer.body);
  const server = createServer(async (req, res) => {
    const chunks: Buffer[] = [];
    for await (const chunk of req) chunks.push(chunk as Buffer);
    const request: Recorded = { method: req.method ?? "GET", path: req.url ?? "/", headers: req.headers, body: Buffer.concat(chunks).toString("utf8") };
    requests.push(request);
    const path = request.path.split("?")[0]!;
    const issuer = options.issuer ?? origin;
    if (path === "/mcp") {
      if (!req.headers.authorization) {
        res.writeHead(401, { "www-authenticate": `Bearer resource_metadata="${origin}/.well-known/oauth-protected-resource/mcp"` }).end();
        return;
      }
      return send(res, (options.mcp ?? ((r) => ({ status: 500, body: `upstream failed for ${r.headers.authorization}` })))(request));
    }
    if (path === "/.well-known/oauth-protected-resource/mcp" || path === "/.well-known/oauth-protected-resource") {
      return send(res, json(200, { resource: `${origin}/mcp`, authorization_servers: [issuer] }));
    }
    if (path.startsWith("/.well-known/oauth-authorization-server") || path.startsWith("/.well-known/openid-configuration")) {
      return send(
        res,
        json(200, {
          issuer,
          authorization_endpoint: `${origin}/authorize`,
          token_endpoint: options.tokenEndpoint ?? `${origin}/token`,
          registration_endpoint: options.registrationEndpoint ?? `${origin}/register`,
          response_types_supported: ["code"],
          grant_types_supported: ["authorization_code", "refresh_token"],
          code_challenge_methods_supported: ["S256"],
          token_endpoint_auth_methods_supported: ["client_secret_basic", "client_secret_post", "none"],
        }),
      );
    }
    if (path === "/register") return send(res, (options.register ?? (() => json(201, { client_id: "hostile-client", redirect_uris: [] })))(request));
    if (path === "/token") return send(res, (options.token ?? (() => json(400, { error: "invalid_grant" })))(request));
    send(res, { status: 404, body: "no" });
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const port = (server.address() as AddressInfo).port;
  origin = `http://127.0.0.1:${port}`;
  return {
    origin,
    url: `${origin}/mcp`,
    port,
    requests,
    set: (changes) => Object.assign(options, changes),
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

/** A service on the deployment's own host that must never be reached: it answers everything with what it guards. */
export async function startInternalService(page: string): Promise<{ url: string; port: number; requests: number; close(): Promise<void> }> {
  const state = { requests: 0 };
  const server = createServer((req, res) => {
    state.requests++;
    req.resume();
    // As an admin page answers a request it did not expect: its own page, password and all.
    res.writeHead(403, { "content-type": "text/html" }).end(`<html><body>${page}</body></html>`);
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const port = (server.address() as AddressInfo).port;
  return {
    url: `http://127.0.0.1:${port}`,
    port,
    get requests() {
      return state.requests;
    },
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}
