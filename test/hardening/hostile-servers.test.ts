// Hostile authorization servers and resources. Issuer mismatch, a wrong `iss`, no S256
// and a plain-http authorization endpoint off loopback are covered in test/auth/login.test.ts;
// this file adds what a hostile server can do beyond them: protected resource metadata naming
// another resource, redirects to other origins, oversized or malformed JSON, answers that never
// end. Each is refused with a clear message, and nothing is stored.
import assert from "node:assert/strict";
import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import path from "node:path";
import { describe, test } from "node:test";
import { credential, environment, leakedTokens, type Env } from "../auth/harness.ts";
import { runCli } from "../support/cli.ts";
import { startDeployment } from "../support/deployment/server.ts";

const NO_STACK = /\n\s+at .*:\d+:\d+\)?\n/;

type Hostile = { url: string; issuer: string; requests: string[]; close: () => Promise<void> };

/** A server on loopback that answers however `handle` says: the hostile authorization server. */
async function hostileServer(handle: (req: IncomingMessage, res: ServerResponse, origin: string) => void): Promise<Hostile> {
  const requests: string[] = [];
  let origin = "";
  const server: Server = createServer((req, res) => {
    requests.push(`${req.method} ${req.url}`);
    handle(req, res, origin);
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  origin = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  return {
    url: origin,
    issuer: `${origin}/`,
    requests,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

/** The real test authorization server's metadata, restated as `hostile`'s (issuer and some endpoints moved). */
async function metadataOf(env: Env, overrides: Record<string, unknown>): Promise<Record<string, unknown>> {
  const real = (await (await fetch(`${env.as.url}/.well-known/oauth-authorization-server`)).json()) as Record<string, unknown>;
  return { ...real, ...overrides };
}

const METADATA_PATH = "/.well-known/oauth-authorization-server";

/**
 * An environment whose MCP server names `hostile` as its authorization server. The real test
 * server still runs the consent and verifies tokens; it sends no `iss`, so that a login through
 * the hostile metadata would succeed if subs did not refuse it.
 */
async function behindHostile(handle: (req: IncomingMessage, res: ServerResponse, origin: string, env: Env) => void | Promise<void>) {
  const env = await environment({ as: { iss: "absent", advertiseIss: false } });
  const hostile = await hostileServer((req, res, origin) => void handle(req, res, origin, env));
  env.protect.authServer = { issuer: hostile.issuer, verifier: env.as.verifier };
  return {
    env,
    hostile,
    assertNothingStored() {
      assert.equal(credential(env, "demo"), undefined, "no credential stored");
      assert.equal(env.as.counters.codeExchanges, 0, "no code redeemed");
      assert.deepEqual(leakedTokens(env), []);
    },
    close: async () => {
      await hostile.close();
      await env.close();
    },
  };
}

describe("hostile authorization servers", () => {
  test("a control: the same hostile set-up answering honestly logs in (so the refusals below are the guard's)", async () => {
    const h = await behindHostile(async (req, res, origin, env) => {
      if (req.url === METADATA_PATH) res.writeHead(200, { "content-type": "application/json" }).end(JSON.stringify(await metadataOf(env, { issuer: `${origin}/` })));
      else res.writeHead(404).end();
    });
    try {
      const login = await h.env.subs(["mcp", "login", "demo"]);
      assert.equal(login.code, 0, login.stderr);
      assert.ok(credential(h.env, "demo"));
    } finally {
      await h.close();
    }
  });

  test("a token endpoint that redirects (307) to another origin is refused: the code and verifier are never re-sent there", async () => {
    const collector: string[] = [];
    const h = await behindHostile(async (req, res, origin, env) => {
      if (req.url === METADATA_PATH) {
        res.writeHead(200, { "content-type": "application/json" }).end(JSON.stringify(await metadataOf(env, { issuer: `${origin}/`, token_endpoint: `${origin}/token` })));
      } else if (req.url === "/token") {
        // 307 keeps the method and the body: a follower would POST the code and verifier to the other origin.
        res.writeHead(307, { location: `${env.as.url}/token` }).end();
      } else res.writeHead(404).end();
    });
    const before = h.env.as.counters.codeExchanges;
    try {
      const login = await h.env.subs(["mcp", "login", "demo"]);
      collector.push(...h.hostile.requests);
      assert.equal(login.code, 1, login.stderr);
      assert.match(login.stderr, /redirected to another origin \(http:\/\/127\.0\.0\.1:\d+\); refusing to follow/);
      assert.doesNotMatch(login.stderr, NO_STACK);
      assert.ok(collector.includes("POST /token"), "the token request went to the stated endpoint");
      assert.equal(h.env.as.counters.codeExchanges, before, "the other origin never received the code");
      h.assertNothingStored();
    } finally {
      await h.close();
    }
  });

  test("authorization server metadata redirected to another origin is refused", async () => {
    const h = await behindHostile((req, res, _origin, env) => {
      if (req.url === METADATA_PATH) res.writeHead(302, { location: `${env.as.url}${METADATA_PATH}` }).end();
      else res.writeHead(404).end();
    });
    try {
      const login = await h.env.subs(["mcp", "login", "demo"]);
      assert.equal(login.code, 1, login.stderr);
      assert.match(login.stderr, /cannot read the authorization server metadata .*redirected to another origin/);
      assert.equal(h.env.as.counters.authorizations, 0);
      h.assertNothingStored();
    } finally {
      await h.close();
    }
  });

  test("oversized metadata (a valid document padded to 3 MB) is refused, unread", async () => {
    const h = await behindHostile(async (req, res, origin, env) => {
      if (req.url === METADATA_PATH) {
        const body = JSON.stringify(await metadataOf(env, { issuer: `${origin}/`, padding: "x".repeat(3_000_000) }));
        // Chunked, no content-length: the cap must hold while reading, not only on a declared length.
        res.writeHead(200, { "content-type": "application/json" });
        for (let i = 0; i < body.length; i += 64_000) res.write(body.slice(i, i + 64_000));
        res.end();
      } else res.writeHead(404).end();
    });
    try {
      const login = await h.env.subs(["mcp", "login", "demo"]);
      assert.equal(login.code, 1, login.stderr);
      assert.match(login.stderr, /larger than 1000 kB; refusing it/);
      assert.equal(h.env.as.counters.authorizations, 0);
      h.assertNothingStored();
    } finally {
      await h.close();
    }
  });

  test("oversized registration and token answers (valid JSON padded to 3 MB, chunked) are refused while read; nothing stored", async () => {
    for (const where of ["register", "token"]) {
      const h = await behindHostile(async (req, res, origin, env) => {
        if (req.url === METADATA_PATH) {
          const endpoints = where === "register" ? { registration_endpoint: `${origin}/register` } : { token_endpoint: `${origin}/token` };
          res.writeHead(200, { "content-type": "application/json" }).end(JSON.stringify(await metadataOf(env, { issuer: `${origin}/`, ...endpoints })));
        } else if (req.url === `/${where}`) {
          const fields = where === "register" ? { client_id: "c", redirect_uris: ["http://127.0.0.1/callback"] } : { access_token: "a", token_type: "Bearer" };
          const body = JSON.stringify({ ...fields, padding: "x".repeat(3_000_000) });
          res.on("error", () => {});
          res.writeHead(where === "register" ? 201 : 200, { "content-type": "application/json" });
          for (let i = 0; i < body.length; i += 64_000) res.write(body.slice(i, i + 64_000));
          res.end();
        } else res.writeHead(404).end();
      });
      try {
        const login = await h.env.subs(["mcp", "login", "demo"]);
        assert.equal(login.code, 1, `${where}: ${login.stderr}`);
        assert.match(login.stderr, /larger than 1000 kB; refusing it/, where);
        assert.doesNotMatch(login.stderr, NO_STACK);
        assert.ok(h.hostile.requests.includes(`POST /${where}`), `${where}: the request went to the hostile endpoint`);
        h.assertNothingStored();
      } finally {
        await h.close();
      }
    }
  });

  test("malformed or wrongly typed JSON in metadata and token answers: a clear failure, no stack trace, nothing stored", async () => {
    const bodies: Array<[string, string, RegExp]> = [
      ["metadata", '{"issuer": "http://x", ', /cannot read the authorization server metadata/],
      ["metadata", '{"issuer": 42, "authorization_endpoint": []}', /cannot read the authorization server metadata/],
      ["metadata", "<html>not json</html>", /cannot read the authorization server metadata/],
      ["token", '{"access_token": ', /token request .* failed/],
      ["token", '{"access_token": 7, "token_type": null}', /token request .* failed \(the server's answer is not a valid OAuth response\)/],
    ];
    for (const [where, body, message] of bodies) {
      const h = await behindHostile(async (req, res, origin, env) => {
        if (req.url === METADATA_PATH) {
          if (where === "metadata") res.writeHead(200, { "content-type": "application/json" }).end(body);
          else res.writeHead(200, { "content-type": "application/json" }).end(JSON.stringify(await metadataOf(env, { issuer: `${origin}/`, token_endpoint: `${origin}/token` })));
        } else if (req.url === "/token") res.writeHead(200, { "content-type": "application/json" }).end(body);
        else res.writeHead(404).end();
      });
      try {
        const login = await h.env.subs(["mcp", "login", "demo"]);
        assert.equal(login.code, 1, `${where} ${body}: ${login.stderr}`);
        assert.match(login.stderr, message);
        assert.doesNotMatch(login.stderr, NO_STACK);
        h.assertNothingStored();
      } finally {
        await h.close();
      }
    }
  });

  test("answers that never end (headers then a byte at a time; no headers at all) time out with a clear message", { timeout: 30_000 }, async () => {
    const timers = new Set<NodeJS.Timeout>();
    for (const mode of ["trickle", "silent"] as const) {
      const h = await behindHostile((req, res) => {
        if (req.url !== METADATA_PATH) return void res.writeHead(404).end();
        if (mode === "silent") return; // never answers
        res.writeHead(200, { "content-type": "application/json" });
        res.write("{");
        const timer = setInterval(() => res.write(" "), 50);
        timers.add(timer);
        res.on("close", () => clearInterval(timer));
      });
      try {
        const login = await h.env.subs(["mcp", "login", "demo"], { env: { SUBS_HTTP_TIMEOUT: "1" } });
        assert.equal(login.code, 1, login.stderr);
        assert.match(login.stderr, /no complete answer from http:\/\/127\.0\.0\.1:\d+ within 1s/);
        h.assertNothingStored();
      } finally {
        for (const t of timers) clearInterval(t);
        await h.close();
      }
    }
  });

  test("a refresh against an authorization server that never answers times out; the credential is kept for a rerun", { timeout: 30_000 }, async () => {
    const h = await behindHostile(async (req, res, origin, env) => {
      if (req.url === METADATA_PATH) res.writeHead(200, { "content-type": "application/json" }).end(JSON.stringify(await metadataOf(env, { issuer: `${origin}/`, token_endpoint: `${origin}/token` })));
      else if (req.url === "/token" && stall) return; // the refresh never answers
      else if (req.url === "/token") {
        const proxied = await fetch(`${env.as.url}/token`, { method: "POST", headers: { "content-type": String(req.headers["content-type"]) }, body: await text(req) });
        res.writeHead(proxied.status, { "content-type": "application/json" }).end(await proxied.text());
      } else res.writeHead(404).end();
    });
    let stall = false;
    try {
      assert.equal((await h.env.subs(["mcp", "login", "demo"])).code, 0);
      const before = credential(h.env, "demo")!;
      h.env.db().prepare("UPDATE subs_credentials SET expires_at = ?").run(Date.now() - 1000);
      stall = true;
      const tools = await h.env.subs(["mcp", "tools", "demo"], { env: { SUBS_HTTP_TIMEOUT: "1" } });
      assert.equal(tools.code, 1, tools.stderr);
      assert.match(tools.stderr, /refreshing the access token .* failed \(.*no complete answer .* within 1s/);
      assert.equal(credential(h.env, "demo")!.refresh_token, before.refresh_token, "the refresh token is kept");
      stall = false;
      const rerun = await h.env.subs(["mcp", "tools", "demo"]);
      assert.equal(rerun.code, 0, rerun.stderr);
      assert.deepEqual(leakedTokens(h.env), []);
    } finally {
      await h.close();
    }
  });
});

function text(req: IncomingMessage): Promise<string> {
  return new Promise((resolve) => {
    let body = "";
    req.on("data", (d) => (body += d));
    req.on("end", () => resolve(body));
  });
}

describe("hostile resources", () => {
  test("protected resource metadata whose `resource` names another server is refused before anything is sent", async () => {
    const env = await environment({ protect: { resource: "https://other.example/mcp" } });
    try {
      const login = await env.subs(["mcp", "login", "demo"]);
      assert.equal(login.code, 2, login.stderr);
      assert.match(login.stderr, /describes another resource \(https:\/\/other\.example\/mcp\)/);
      assert.equal(env.as.counters.authorizations + env.as.counters.registrations, 0);
      assert.equal(credential(env, "demo"), undefined);
    } finally {
      await env.close();
    }
  });

  test("protected resource metadata redirected to another origin is refused", async () => {
    const env = await environment({
      protect: { metadataInChallenge: false },
    });
    const elsewhere = await hostileServer((_req, res) => res.writeHead(200, { "content-type": "application/json" }).end(JSON.stringify({ resource: env.mcp.url, authorization_servers: [env.as.issuer] })));
    const redirector = await hostileServer((req, res) => {
      if (req.url?.startsWith("/.well-known/oauth-protected-resource")) res.writeHead(302, { location: `${elsewhere.url}${req.url}` }).end();
      else res.writeHead(401, { "www-authenticate": `Bearer resource_metadata="${redirectorUrl}/.well-known/oauth-protected-resource"` }).end();
    });
    const redirectorUrl = redirector.url;
    try {
      env.write(`[mcp.demo]\nurl = "${redirector.url}/mcp"\n`);
      const login = await env.subs(["mcp", "login", "demo"]);
      assert.equal(login.code, 1, login.stderr);
      assert.match(login.stderr, /protected resource metadata .*redirected to another origin/);
      assert.equal(elsewhere.requests.length, 0, "the other origin was never asked");
      assert.equal(credential(env, "demo"), undefined);
    } finally {
      await Promise.all([redirector.close(), elsewhere.close()]);
      await env.close();
    }
  });
});

describe("hostile deployments", () => {
  test("an oversized answer from the deployment is refused with a clear message; nothing is applied", async () => {
    const TOKEN = "deploy-api-token-SECRET";
    const deployment = await startDeployment({ token: TOKEN });
    const dir = mkdtempSync(path.join(tmpdir(), "subs-hostile-"));
    try {
      writeFileSync(path.join(dir, "substructure.toml"), `[remote]\nurl = "${deployment.url}"\n\n[mcp.sentry]\nurl = "https://mcp.sentry.dev/mcp"\n`);
      deployment.fault({ path: "/v1/mcp", method: "GET", kind: "body", body: { connections: [], padding: "x".repeat(2_000_000) } });
      const result = await runCli(["apply"], { cwd: dir, env: { SUBSTRUCTURE_TOKEN: TOKEN } });
      assert.equal(result.code, 1, result.stderr);
      assert.match(result.stderr, /the deployment answered GET \/v1\/mcp: the answer from http:\/\/127\.0\.0\.1:\d+ is larger than 1000 kB/);
      assert.doesNotMatch(result.stderr, NO_STACK);
      assert.equal(deployment.connections.size, 0, "nothing was applied");
      assert.ok(!result.stdout.includes(TOKEN) && !result.stderr.includes(TOKEN));
    } finally {
      await deployment.close();
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
