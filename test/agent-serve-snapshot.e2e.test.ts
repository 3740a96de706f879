// connectors.md, "When tools are fetched": an agent's tool list is fetched once per session, and
// an upstream's `notifications/tools/list_changed` does not change what the session serves.
// The upstream here really sends one: its `add_tool` adds a tool and notifies the
// session that called it, which is `subs agent serve`'s own upstream session.
import assert from "node:assert/strict";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { after, before, it } from "node:test";
import { ToolListChangedNotificationSchema } from "@modelcontextprotocol/sdk/types.js";
import { startRichServer, type RichServer } from "./support/mcp-rich-server.ts";
import { serveSession } from "./support/serve-client.ts";

let dir: string;
let rich: RichServer;

before(async () => {
  dir = mkdtempSync(path.join(tmpdir(), "subs-serve-snapshot-"));
  rich = await startRichServer();
  writeFileSync(path.join(dir, "substructure.toml"), `[mcp.rich]\nurl = "${rich.url}"\nauth = { token_env = "MCP_TOKEN" }\n\n[agent.triage]\nmcp = ["rich"]\n`);
});

after(async () => {
  await rich.close();
  rmSync(dir, { recursive: true, force: true });
});

it("an upstream's tools/list_changed changes nothing in the session: not forwarded, the same list; a new session sees the new tool", async () => {
  const first = await serveSession(["agent", "serve", "triage"], { cwd: dir, env: { MCP_TOKEN: "t" } });
  let notified = 0;
  first.client.setNotificationHandler(ToolListChangedNotificationSchema, () => void notified++);
  try {
    const before = (await first.client.listTools()).tools.map((t) => t.name);
    assert.ok(before.includes("rich__add_tool") && !before.includes("rich__added"), before.join(", "));
    await first.client.callTool({ name: "rich__add_tool", arguments: {} });
    // The upstream sent list_changed on serve's session; give it time to arrive and be (not) passed on.
    await new Promise((r) => setTimeout(r, 300));
    assert.deepEqual((await first.client.listTools()).tools.map((t) => t.name), before, "the session's snapshot");
    assert.equal(notified, 0, "no tools/list_changed reaches the client");
    assert.ok(!first.received.some((m) => m.includes('"method":"notifications/tools/list_changed"')), "nothing about it in what the client received");
  } finally {
    await first.close();
  }
  // A new session fetches again and serves the tool added meanwhile.
  const second = await serveSession(["agent", "serve", "triage"], { cwd: dir, env: { MCP_TOKEN: "t" } });
  try {
    const names = (await second.client.listTools()).tools.map((t) => t.name);
    assert.ok(names.includes("rich__added"), names.join(", "));
  } finally {
    await second.close();
  }
});

it("an upstream that quotes the credential back (in an error, a log message) does not hand it to the client", async () => {
  const token = "serve-SECRET-static-token-value";
  const s = await serveSession(["agent", "serve", "triage"], { cwd: dir, env: { MCP_TOKEN: token } });
  try {
    const failed = await s.client.callTool({ name: "rich__quote_credential", arguments: {} }).then(
      () => undefined,
      (error: Error) => error,
    );
    assert.ok(failed, "the upstream's JSON-RPC error is passed on as an error");
    assert.match(failed.message, /you sent (Bearer )?\[redacted\]$/);
    await s.client.callTool({ name: "rich__log", arguments: { text: "hi", quote: true } });
    const all = [...s.received, s.stderr()].join("\n");
    assert.ok(!all.includes(token), "the token reached the client or stderr");
  } finally {
    await s.close();
  }
});
