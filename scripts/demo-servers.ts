// The offline demo's world: an OAuth-protected MCP server and its authorization server on
// loopback, built from the test servers (test/support/), and a substructure.toml naming them in a
// fresh directory. Used by `npm run demo` (scripts/demo.ts) and `npm run screenshots`. Also what the
// demo needs to answer its own consent page from the terminal when no browser opens.
import { randomBytes } from "node:crypto";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import path from "node:path";
import { annotatedTool, startMcpServer, type TestTool } from "../test/support/mcp-server.ts";
import { startAuthServer, type AuthServerOptions } from "../test/support/oauth-server.ts";

export type DemoWorld = {
  dir: string;
  configPath: string;
  mcpUrl: string;
  issuer: string;
  close(): Promise<void>;
};

const tools: TestTool[] = [
  { ...annotatedTool("search_notes", { readOnlyHint: true }), description: "Search the demo notes by word", reply: (args) => `3 notes match ${JSON.stringify(args.query ?? "")}` },
  { ...annotatedTool("get_note", { readOnlyHint: true, idempotentHint: true }), description: "Read one note by id" },
  { ...annotatedTool("delete_note", { destructiveHint: true }), description: "Delete a note", reply: () => "deleted" },
];

/** Starts both servers and writes the demo's substructure.toml; `close` stops them and removes the directory. */
export async function startDemoWorld(options: { consent?: AuthServerOptions["consent"] } = {}): Promise<DemoWorld> {
  const auth = await startAuthServer({ consent: options.consent ?? "page", scopesSupported: ["notes:read", "offline_access"] });
  const mcp = await startMcpServer({ name: "demo-notes", tools, oauth: { authServer: auth, requiredScopes: ["notes:read"], scopesSupported: ["notes:read"] } });
  const dir = mkdtempSync(path.join(tmpdir(), "subs-demo-"));
  const configPath = path.join(dir, "substructure.toml");
  writeFileSync(
    configPath,
    `# Written by \`npm run demo\`: both servers run on this machine (127.0.0.1) while the demo runs.
#:schema ${path.resolve(import.meta.dirname, "..", "substructure.schema.json")}

[mcp.demo]                # an MCP server protected by OAuth (authorization server: ${auth.issuer})
url = "${mcp.url}"

[agent.notes]             # an agent that may only read
mcp = [{ id = "demo", tools = { read_only = true } }]
`,
  );
  return {
    dir,
    configPath,
    mcpUrl: mcp.url,
    issuer: auth.issuer,
    close: async () => {
      await Promise.all([mcp.close(), auth.close()]);
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

/**
 * Where `subs mcp login` under the demo hands its authorization URL: the demo's
 * $BROWSER (scripts/demo-browser.mjs) POSTs the URL it was given here, so the demo itself can open
 * the browser and, when none opens, let the person answer its consent page from the terminal.
 * The path carries a random token: another local process cannot make the demo open a URL.
 */
export type Handoff = { url: string; close(): Promise<void> };

export async function startHandoff(onUrl: (url: string) => void): Promise<Handoff> {
  const token = randomBytes(16).toString("hex");
  const server = createServer((req, res) => {
    if (req.method !== "POST" || req.url !== `/${token}`) return void res.writeHead(404).end();
    let body = "";
    req.setEncoding("utf8");
    req.on("data", (chunk: string) => {
      body += chunk;
      if (body.length > 16_384) req.destroy();
    });
    req.on("end", () => {
      res.writeHead(204).end();
      onUrl(body.trim());
    });
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}/${token}`,
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}

const isLoopback = (url: URL) => url.protocol === "http:" && ["127.0.0.1", "localhost", "[::1]"].includes(url.hostname);

/**
 * The authorization URL on the demo's own server that `url` (what subs opened) leads to: `url`
 * itself, or where a loopback URL of subs's redirects. Anything else is refused: answering from
 * the terminal is for the demo's own consent page only.
 */
export async function demoAuthorizationUrl(world: Pick<DemoWorld, "issuer">, url: string): Promise<URL> {
  const issuer = new URL(world.issuer).origin;
  let target = new URL(url);
  if (target.origin !== issuer && isLoopback(target)) {
    const hop = await fetch(target, { redirect: "manual" });
    await hop.body?.cancel();
    const location = hop.headers.get("location");
    if (location) target = new URL(location, target);
  }
  if (target.origin !== issuer) throw new Error(`${target.origin} is not the demo's authorization server`);
  return target;
}

/**
 * What a browser does when the person clicks Approve or Deny on the demo's consent page: loads
 * the page, posts its form, and returns the address the server redirects to (subs's loopback).
 */
export async function answerConsentPage(authorization: URL, decision: "approve" | "deny"): Promise<string> {
  const page = await fetch(authorization);
  const html = await page.text();
  const action = /<form[^>]*action="([^"]+)"/i.exec(html)?.[1];
  const request = /name="request" value="([^"]+)"/.exec(html)?.[1];
  if (!page.ok || !action || !request) throw new Error(`the consent page did not load (HTTP ${page.status})`);
  const answer = await fetch(new URL(action, authorization), {
    method: "POST",
    headers: { "content-type": "application/x-www-form-urlencoded" },
    body: new URLSearchParams({ request, decision }).toString(),
    redirect: "manual",
  });
  await answer.body?.cancel();
  const location = answer.headers.get("location");
  if (!location) throw new Error(`the consent form answered HTTP ${answer.status} without a redirect`);
  return new URL(location, authorization).href;
}

/**
 * Delivers the redirect to subs's loopback callback, as the browser would. Only an address at the
 * redirect_uri the authorization URL names, on this machine, is fetched.
 */
export async function deliverRedirect(authorization: URL, redirect: string): Promise<void> {
  const expected = new URL(authorization.searchParams.get("redirect_uri") ?? "");
  let target: URL;
  try {
    target = new URL(redirect);
  } catch {
    throw new Error("that is not a URL");
  }
  if (!isLoopback(expected) || target.origin + target.pathname !== expected.origin + expected.pathname) {
    throw new Error(`that is not an address at ${expected.origin}${expected.pathname}, where subs waits`);
  }
  const response = await fetch(target, { redirect: "manual" });
  await response.body?.cancel();
}
