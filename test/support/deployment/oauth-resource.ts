// An OAuth-protected MCP server for the deployment's tests: an authorization server built from the
// SDK's server pieces (mcpAuthRouter, with an in-memory provider that consents at once, or denies)
// and a real MCP server that accepts only the access tokens it issued. Written here because the
// login branch's test/support/oauth-server.ts did not exist when this fixture was needed.
import { randomUUID } from "node:crypto";
import type { Server as HttpServer } from "node:http";
import type { AddressInfo } from "node:net";
import express from "express";
import { mcpAuthRouter } from "@modelcontextprotocol/sdk/server/auth/router.js";
import type { AuthorizationParams, OAuthServerProvider } from "@modelcontextprotocol/sdk/server/auth/provider.js";
import type { OAuthClientInformationFull, OAuthTokens } from "@modelcontextprotocol/sdk/shared/auth.js";
import type { AuthInfo } from "@modelcontextprotocol/sdk/server/auth/types.js";
import type { Response } from "express";
import { startMcpServer, type TestTool } from "../mcp-server.ts";

type IssuedToken = { clientId: string; scopes: string[]; expiresAt: number; resource?: string };

class ConsentingProvider implements OAuthServerProvider {
  /** When set, the next consents are refused with this OAuth error (e.g. access_denied). */
  denyWith: string | undefined;
  readonly issued = new Map<string, IssuedToken>();
  readonly refreshTokens = new Map<string, IssuedToken>();
  private readonly clients = new Map<string, OAuthClientInformationFull>();
  private readonly codes = new Map<string, { client: OAuthClientInformationFull; params: AuthorizationParams }>();

  get clientsStore() {
    return {
      getClient: (id: string) => this.clients.get(id),
      registerClient: (client: Omit<OAuthClientInformationFull, "client_id" | "client_id_issued_at">) => {
        const full = { ...client, client_id: randomUUID(), client_id_issued_at: Math.floor(Date.now() / 1000) } as OAuthClientInformationFull;
        this.clients.set(full.client_id, full);
        return full;
      },
    };
  }

  async authorize(client: OAuthClientInformationFull, params: AuthorizationParams, res: Response): Promise<void> {
    const target = new URL(params.redirectUri);
    if (params.state !== undefined) target.searchParams.set("state", params.state);
    if (this.denyWith) {
      target.searchParams.set("error", this.denyWith);
    } else {
      const code = randomUUID();
      this.codes.set(code, { client, params });
      target.searchParams.set("code", code);
    }
    res.redirect(target.href);
  }

  async challengeForAuthorizationCode(_client: OAuthClientInformationFull, code: string): Promise<string> {
    const entry = this.codes.get(code);
    if (!entry) throw new Error("unknown authorization code");
    return entry.params.codeChallenge;
  }

  async exchangeAuthorizationCode(client: OAuthClientInformationFull, code: string): Promise<OAuthTokens> {
    const entry = this.codes.get(code);
    if (!entry || entry.client.client_id !== client.client_id) throw new Error("authorization code not issued to this client");
    this.codes.delete(code);
    return this.issue(client.client_id, entry.params.scopes ?? [], entry.params.resource?.href);
  }

  async exchangeRefreshToken(client: OAuthClientInformationFull, refreshToken: string): Promise<OAuthTokens> {
    const entry = this.refreshTokens.get(refreshToken);
    if (!entry || entry.clientId !== client.client_id) throw new Error("unknown refresh token");
    this.refreshTokens.delete(refreshToken);
    return this.issue(client.client_id, entry.scopes, entry.resource);
  }

  async verifyAccessToken(token: string): Promise<AuthInfo> {
    const entry = this.issued.get(token);
    if (!entry || entry.expiresAt < Date.now()) throw new Error("invalid or expired token");
    return { token, clientId: entry.clientId, scopes: entry.scopes, expiresAt: Math.floor(entry.expiresAt / 1000) };
  }

  private issue(clientId: string, scopes: string[], resource: string | undefined): OAuthTokens {
    const token: IssuedToken = { clientId, scopes, expiresAt: Date.now() + 3600_000, ...(resource ? { resource } : {}) };
    const access = `at-${randomUUID()}`;
    const refresh = `rt-${randomUUID()}`;
    this.issued.set(access, token);
    this.refreshTokens.set(refresh, token);
    return { access_token: access, token_type: "bearer", expires_in: 3600, refresh_token: refresh, ...(scopes.length ? { scope: scopes.join(" ") } : {}) };
  }
}

export type ProtectedMcp = {
  /** The MCP endpoint, protected by bearer tokens from `issuer`. */
  url: string;
  issuer: string;
  /** Every access and refresh token the authorization server issued (tests look for leaks). */
  issuedSecrets(): string[];
  /** Refuse the next consents with an OAuth error, or consent again (undefined). */
  denyWith(error: string | undefined): void;
  close(): Promise<void>;
};

export async function startProtectedMcp(options: { tools: TestTool[] }): Promise<ProtectedMcp> {
  const provider = new ConsentingProvider();
  const app = express();
  const http: HttpServer = await new Promise((resolve) => {
    const server = app.listen(0, "127.0.0.1", () => resolve(server));
  });
  const issuer = new URL(`http://127.0.0.1:${(http.address() as AddressInfo).port}/`);
  app.use(
    mcpAuthRouter({
      provider,
      issuerUrl: issuer,
      scopesSupported: ["mcp:tools"],
      authorizationOptions: { rateLimit: false },
      clientRegistrationOptions: { rateLimit: false },
      tokenOptions: { rateLimit: false },
    }),
  );

  let mcpUrl = "";
  const mcp = await startMcpServer({
    tools: options.tools,
    gate: async (req, res) => {
      const path = new URL(req.url ?? "/", "http://x").pathname;
      // RFC 9728: protected resource metadata, path-aware first.
      if (path.startsWith("/.well-known/oauth-protected-resource")) {
        res.writeHead(200, { "content-type": "application/json" }).end(JSON.stringify({ resource: mcpUrl, authorization_servers: [issuer.href] }));
        return true;
      }
      const bearer = /^Bearer (.+)$/i.exec(req.headers.authorization ?? "")?.[1];
      const ok = bearer ? await provider.verifyAccessToken(bearer).then(() => true, () => false) : false;
      if (ok) return false;
      const metadata = new URL("/.well-known/oauth-protected-resource/mcp", mcpUrl).href;
      res.writeHead(401, { "www-authenticate": `Bearer resource_metadata="${metadata}"`, "content-type": "application/json" });
      res.end(JSON.stringify({ error: "invalid_token" }));
      return true;
    },
  });
  mcpUrl = mcp.url;
  return {
    url: mcp.url,
    issuer: issuer.href,
    issuedSecrets: () => [...provider.issued.keys(), ...provider.refreshTokens.keys()],
    denyWith: (error) => {
      provider.denyWith = error;
    },
    close: async () => {
      await mcp.close();
      await new Promise<void>((resolve) => {
        http.closeAllConnections();
        http.close(() => resolve());
      });
    },
  };
}
