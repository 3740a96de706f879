// Fetch refuses a few ports before connecting (Fetch standard, "port blocking"), as browsers do.
// subs sends its requests with node:http, which has no such list, and keeps fetch's refusal for all
// but MCP requests (src/http/mcp-fetch.ts): OAuth discovery, tokens and a deployment go to URLs a
// server's metadata may name. A server that is up on 6000 then answers its MCP request and "cannot
// be reached" for its metadata. The message says why and what to change, not "check that the
// server is up". Run as users run it (the built CLI): the MCP requests' own fetch is the real
// context's.
import assert from "node:assert/strict";
import { createServer, type Server } from "node:http";
import { after, before, test } from "node:test";
import { runCli } from "../support/cli.ts";
import { projectsForThisFile } from "../support/projects.ts";

// Blocked ports above 1023 (bindable without privileges), outside the ephemeral range.
const BLOCKED = [6000, 6665, 6666, 6667, 6668, 6669, 6697, 10080, 5060, 5061, 4190, 3659];

let server: Server;
let port = 0;

before(async () => {
  // A protected MCP server: every request is a 401 naming its resource metadata, on its own origin.
  for (const candidate of BLOCKED) {
    const s = createServer((req, res) => {
      res.writeHead(401, { "www-authenticate": `Bearer resource_metadata="http://127.0.0.1:${candidate}/.well-known/oauth-protected-resource/mcp"` }).end();
    });
    const bound = await new Promise<boolean>((resolve) => {
      s.once("error", () => resolve(false));
      s.listen(candidate, "127.0.0.1", () => resolve(true));
    });
    if (bound) {
      server = s;
      port = candidate;
      return;
    }
  }
  throw new Error(`every one of ports ${BLOCKED.join(", ")} is taken on 127.0.0.1`);
});
after(() => new Promise((resolve) => server.close(resolve)));

const project = projectsForThisFile("blocked");

test("mcp login of a server on a port fetch blocks: its metadata cannot be read, said with the port's reason and to serve it elsewhere", async () => {
  const cwd = project(`[mcp.blocked]\nurl = "http://127.0.0.1:${port}/mcp"\n`);
  const r = await runCli(["mcp", "login", "blocked", "--no-browser", "--timeout", "5"], { cwd });
  assert.equal(r.code, 1, r.stderr);
  assert.match(r.stderr, new RegExp(`cannot read the protected resource metadata of http://127\\.0\\.0\\.1:${port}: fetch refuses its port, one the Fetch standard blocks as browsers do\\n`));
  assert.match(r.stderr, /hint: serve it on another port and change the url in the file\n/);
  assert.doesNotMatch(r.stderr, /bad port|--debug/);
});

test("mcp tools with a token: the MCP request reaches the server on that port (node:http blocks no port)", async () => {
  const cwd = project(`[mcp.blocked]\nurl = "http://127.0.0.1:${port}/mcp"\nauth = { token_env = "T" }\n`);
  const r = await runCli(["mcp", "tools", "blocked"], { cwd, env: { T: "not-a-real-token" } });
  // A token subs did not issue is not a login to redo: exit 1, and the server's answer is its 401.
  assert.equal(r.code, 1, r.stderr);
  assert.match(r.stderr, /the server rejected the token in \$T/);
});

test("a [remote] deployment on a port fetch blocks: said at once, without retries, with what to change", async () => {
  const cwd = project(`[remote]\nurl = "http://127.0.0.1:${port}"\n\n[mcp.docs]\nurl = "https://docs.example/mcp"\n`);
  const r = await runCli(["mcp", "list"], { cwd, env: { SUBSTRUCTURE_TOKEN: "not-a-real-token" } });
  assert.equal(r.code, 1, r.stderr);
  assert.match(r.stderr, new RegExp(`cannot reach the deployment at http://127\\.0\\.0\\.1:${port}: fetch refuses port ${port}, one the Fetch standard blocks as browsers do\\n`));
  assert.match(r.stderr, /hint: serve the deployment on another port and change \[remote\]\.url\n/);
  assert.doesNotMatch(r.stderr, /retrying|not-a-real-token/);
});
