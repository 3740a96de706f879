// What `subs agent serve` and `subs mcp proxy` hand a client carries no form of the credential they
// send upstream (docs/serve.md, "No token ... ever appears in what a client receives"). The
// upstream here (test/support/mcp-quoting-server.ts) quotes the bearer token it received in every
// field a server can fill, as itself and encoded (percent, base64, base64url, hex; of the token,
// of `Bearer <token>`, of a JSON blob holding it), and in an HTTP error padded so that where subs
// shortens the message the cut falls inside a copy. Both commands run as a user runs them, the
// built CLI (bin/subs.cjs) as a child, driven by the SDK's own client over stdio and over --http;
// every message the client receives and everything on stderr is searched for the token, decoded
// every way it was encoded.
import assert from "node:assert/strict";
import { spawn, type ChildProcess } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { after, before, describe, it } from "node:test";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import type { Transport } from "@modelcontextprotocol/sdk/shared/transport.js";
import {
  CreateMessageRequestSchema,
  ElicitRequestSchema,
  ListRootsRequestSchema,
  LoggingMessageNotificationSchema,
  ResourceUpdatedNotificationSchema,
} from "@modelcontextprotocol/sdk/types.js";
import { scrubbedJson, Secrets } from "../src/secrets.ts";
import { cut } from "../src/text/cut.ts";
import { BIN, ensureBuilt } from "./support/cli.ts";
import { echoesOf, startQuotingServer, type QuotingServer } from "./support/mcp-quoting-server.ts";
import { within } from "./support/wait.ts";

// `~` and `?` make base64's `+` and `/`, so base64 and base64url differ at every alignment.
const TOKEN = "q~~~Zr9?w??xK~M>p8-SECRET-Lt7~?";

/** Where `text` shows any 8 characters of `token`: as is, percent-decoded, or decoded from base64 (either alphabet, any offset) or hex. */
function leaks(text: string, token: string): string[] {
  const windows = new Set<string>();
  for (let i = 0; i + 8 <= token.length; i++) windows.add(token.slice(i, i + 8));
  const found: string[] = [];
  const check = (decoded: string, how: string, from: string) => {
    for (const w of windows) if (decoded.includes(w)) return void found.push(`${how} ${JSON.stringify(w)} in …${from.slice(0, 60)}…`);
  };
  check(text, "as is", text);
  check(text.replace(/%([0-9A-Fa-f]{2})/g, (_, h: string) => String.fromCharCode(parseInt(h, 16))), "percent-decoded", text);
  for (const [run] of text.matchAll(/[A-Za-z0-9+/_-]{11,}/g)) {
    for (let o = 0; o < 4; o++) check(Buffer.from(run.slice(o).replaceAll("-", "+").replaceAll("_", "/"), "base64").toString("latin1"), `base64 at ${o}`, run);
  }
  for (const [run] of text.matchAll(/[0-9A-Fa-f]{16,}/g)) for (let o = 0; o < 2; o++) check(Buffer.from(run.slice(o), "hex").toString("latin1"), `hex at ${o}`, run);
  return found.length > 5 ? [...found.slice(0, 5), `and ${found.length - 5} more`] : found;
}

type Mode = { command: "agent serve" | "mcp proxy"; transport: "stdio" | "http" };

type Running = {
  client: Client;
  /** Every JSON-RPC message the client received, serialized as it came. */
  received: string[];
  /** The requests the upstream made of the client, as the client's handlers got them. */
  asked: string[];
  logs: unknown[];
  stderr(): string;
  close(): Promise<void>;
};

/** Records every message `transport` delivers, before the client's Protocol sees it. */
function recording(transport: Transport, received: string[]): void {
  let inner: Transport["onmessage"];
  const recorder: Transport["onmessage"] = (message, extra) => {
    received.push(JSON.stringify(message));
    inner?.(message, extra);
  };
  Object.defineProperty(transport, "onmessage", { get: () => (inner ? recorder : undefined), set: (handler) => (inner = handler), configurable: true });
}

async function start(dir: string, mode: Mode): Promise<Running> {
  ensureBuilt();
  const argv = mode.command === "agent serve" ? ["agent", "serve", "triage"] : ["mcp", "proxy", "quoting"];
  const env = { PATH: process.env.PATH ?? "/usr/bin:/bin", HOME: dir, MCP_TOKEN: TOKEN };
  let stderr = "";
  let transport: Transport;
  let child: ChildProcess | undefined;
  if (mode.transport === "stdio") {
    const stdio = new StdioClientTransport({ command: process.execPath, args: [BIN, ...argv], cwd: dir, env, stderr: "pipe" });
    stdio.stderr!.on("data", (d: Buffer) => (stderr += d.toString("utf8")));
    transport = stdio;
  } else {
    const tokenFile = `${mode.command.replace(" ", "-")}.token`;
    child = spawn(process.execPath, [BIN, ...argv, "--http", "127.0.0.1:0", "--token-file", tokenFile], { cwd: dir, env, stdio: ["ignore", "pipe", "pipe"] });
    child.stderr!.on("data", (d: Buffer) => (stderr += d.toString("utf8")));
    const deadline = Date.now() + 15_000;
    let url: URL | undefined;
    while (!url) {
      const match = /serving MCP on (http:\/\/127\.0\.0\.1:\d+\/mcp)/.exec(stderr);
      if (match) url = new URL(match[1]!);
      else if (child.exitCode !== null || Date.now() > deadline) throw new Error(`no endpoint: exit ${child.exitCode}\n${stderr}`);
      else await new Promise((r) => setTimeout(r, 50));
    }
    const bearer = readFileSync(path.join(dir, tokenFile), "utf8").trim();
    transport = new StreamableHTTPClientTransport(url, { requestInit: { headers: { authorization: `Bearer ${bearer}` } } });
  }
  const received: string[] = [];
  recording(transport, received);
  const client = new Client({ name: "serve-secrets-test", version: "1.0.0" }, { capabilities: { sampling: {}, elicitation: { form: {} }, roots: { listChanged: true } } });
  const asked: string[] = [];
  const logs: unknown[] = [];
  client.setRequestHandler(CreateMessageRequestSchema, async (r) => {
    asked.push(JSON.stringify(r));
    return { role: "assistant", content: { type: "text", text: "ok" }, model: "m" };
  });
  client.setRequestHandler(ElicitRequestSchema, async (r) => {
    asked.push(JSON.stringify(r));
    return { action: "decline" };
  });
  client.setRequestHandler(ListRootsRequestSchema, async (r) => {
    asked.push(JSON.stringify(r));
    return { roots: [] };
  });
  client.setNotificationHandler(LoggingMessageNotificationSchema, (n) => void logs.push(n.params));
  client.setNotificationHandler(ResourceUpdatedNotificationSchema, () => {});
  await client.connect(transport);
  return {
    client,
    received,
    asked,
    logs,
    stderr: () => stderr,
    close: async () => {
      await client.close().catch(() => {});
      if (child && child.exitCode === null) {
        const exited = new Promise((resolve) => child.once("exit", resolve));
        child.kill("SIGTERM");
        await within(exited, "subs to exit");
      }
    },
  };
}

const settled = (p: Promise<unknown>) => p.then((v) => JSON.stringify(v), (e: Error) => `error: ${e.message}`);

describe("the run's secrets, in every form", () => {
  const secrets = new Secrets();
  secrets.add(TOKEN);
  const scrub = (text: string) => secrets.scrub(text);

  it("every form the quoting server sends is removed from text; text without one is left as it is", () => {
    for (const form of echoesOf(`Bearer ${TOKEN}`)) assert.deepEqual(leaks(scrub(`said ${form}.`), TOKEN), [], form);
    const plain = "cX5+ Bearer 717e7e q~~~ and so on… the end";
    assert.equal(scrub(plain), plain);
  });

  it("a text cut inside a form loses the form's start too, from four characters on", () => {
    const bytes = Buffer.from(TOKEN, "utf8");
    for (const form of [TOKEN, bytes.toString("base64"), bytes.toString("base64url"), bytes.toString("hex").toUpperCase()]) {
      // Of base64, the last character (four bits of the token, two of padding) and the padding may stay.
      for (let kept = 4; kept < form.length; kept++) assert.match(scrub(`error: ${cut(`${form}!`, kept)}`), /^error: \[redacted\](\w?=*)?…$/, form.slice(0, kept));
      assert.equal(scrub(`error: ${cut(form, 3)}`), `error: ${form.slice(0, 3)}…`);
    }
  });

  it("a message: values, keys and a number that spells a secret are replaced; one without a secret is the same object", () => {
    const digits = new Secrets();
    digits.add("73194852");
    const clean = { jsonrpc: "2.0", id: 7, result: { content: [{ type: "text", text: "nothing to see here" }], n: 123456789 } };
    assert.equal(scrubbedJson(clean, scrub), clean);
    const quoted = { result: { [TOKEN]: [`a ${TOKEN} b`, 73194852, { ok: true }], n: 73194852 } };
    assert.deepEqual(scrubbedJson(quoted, scrub), { result: { "[redacted]": ["a [redacted] b", 73194852, { ok: true }], n: 73194852 } });
    assert.deepEqual(scrubbedJson(quoted, (text) => digits.scrub(text)), { result: { [TOKEN]: [`a ${TOKEN} b`, "[redacted]", { ok: true }], n: "[redacted]" } });
  });
});

describe("an upstream that quotes the credential it received in every field, in every encoding", () => {
  let dir: string;
  let upstream: QuotingServer;

  before(async () => {
    dir = mkdtempSync(path.join(tmpdir(), "subs-serve-secrets-"));
    upstream = await startQuotingServer();
    writeFileSync(path.join(dir, "substructure.toml"), `[mcp.quoting]\nurl = "${upstream.url}"\nauth = { token_env = "MCP_TOKEN" }\n\n[agent.triage]\nmcp = ["quoting"]\n`);
  });

  after(async () => {
    await upstream.close();
    rmSync(dir, { recursive: true, force: true });
  });

  it("the search finds every form the upstream sends, and base64 differs from base64url", () => {
    const forms = echoesOf(`Bearer ${TOKEN}`);
    for (const form of forms) assert.notDeepEqual(leaks(form, TOKEN), [], `not found: ${form}`);
    for (const k of [0, 1, 2]) {
      const bytes = Buffer.concat([Buffer.alloc(k), Buffer.from(TOKEN)]);
      assert.notEqual(bytes.toString("base64").replace(/=+$/, ""), bytes.toString("base64url"));
    }
  });

  const modes: Mode[] = [
    { command: "agent serve", transport: "stdio" },
    { command: "mcp proxy", transport: "stdio" },
    { command: "agent serve", transport: "http" },
    { command: "mcp proxy", transport: "http" },
  ];
  for (const mode of modes) {
    it(`subs ${mode.command} over ${mode.transport}: the client and stderr see no form of it`, async () => {
      const seenBefore = upstream.authorizations.length;
      const s = await start(dir, mode);
      const outcomes: string[] = [];
      try {
        const { client } = s;
        const proxy = mode.command === "mcp proxy";
        if (proxy) {
          // The upstream's own server info and instructions, passed on.
          assert.match(client.getServerVersion()?.name ?? "", /\[redacted\]/);
          assert.match(client.getInstructions() ?? "", /\[redacted\]/);
          outcomes.push(await settled(client.setLoggingLevel("debug")));
        }
        const tools = (await client.listTools()).tools;
        const named = (suffix: string) => tools.find((t) => t.name === suffix || t.name.endsWith(`__${suffix}`))?.name;
        const quote = tools.find((t) => t.name === named("quote"))!;
        assert.ok(quote, tools.map((t) => t.name).join(", "));
        assert.match(quote.description ?? "", /\[redacted\]/, "the description came, scrubbed");
        const progress: string[] = [];
        const result = await client.callTool({ name: quote.name, arguments: {} }, undefined, { onprogress: (p) => void progress.push(p.message ?? "") });
        assert.match(JSON.stringify(result.content), /\[redacted\]/, "the result came, scrubbed");
        assert.ok(progress.length > 0 && progress.every((m) => m.includes("[redacted]")), `progress came, scrubbed: ${JSON.stringify(progress)}`);
        assert.match(await settled(client.callTool({ name: named("fail")!, arguments: {} })), /\[redacted\]/, "the JSON-RPC error came, scrubbed");
        // An HTTP error, shortened before it is passed on: wherever the cut falls, no part of the token shows.
        for (const pad of [0, 10, 20]) for (const form of ["raw", "base64"]) outcomes.push(await settled(client.callTool({ name: named("http_fail")!, arguments: { pad, form } })));
        assert.ok(outcomes.slice(-6).some((o) => o.includes("[redacted]…")), outcomes.slice(-6).join("\n"));
        if (!proxy) {
          // Two tools whose names spell the token collide and are left out, with a warning naming them.
          assert.match(s.stderr(), /not served: .*dup_\[redacted\]/, "the warning on stderr");
          assert.ok(s.logs.some((l) => JSON.stringify(l).includes("dup_[redacted]")), "the warning to the client");
        }
        if (proxy) {
          assert.equal(s.asked.length, 3, "sampling, elicitation and roots reached the client");
          assert.ok(s.asked.slice(0, 2).every((a) => a.includes("[redacted]")), s.asked.join("\n"));
          assert.ok(s.logs.length > 0, "the upstream's log message reached the client");
          for (const request of [
            () => client.listResources(),
            () => client.listResourceTemplates(),
            () => client.readResource({ uri: "quote://x" }),
            () => client.listPrompts(),
            () => client.getPrompt({ name: "p", arguments: { a: "b" } }),
            () => client.complete({ ref: { type: "ref/prompt", name: "p" }, argument: { name: "a", value: "" } }),
          ]) {
            outcomes.push(await settled(request()));
          }
          assert.ok(s.received.filter((m) => m.includes("[redacted]")).length >= 12, "every answer came, scrubbed");
        }
      } finally {
        await s.close();
      }
      assert.ok(upstream.authorizations.slice(seenBefore).includes(`Bearer ${TOKEN}`), "the upstream had the token to quote");
      assert.deepEqual(leaks([...s.received, ...outcomes].join("\n"), TOKEN), [], "what the client received");
      assert.deepEqual(leaks(s.stderr(), TOKEN), [], `stderr:\n${s.stderr()}`);
    });
  }
});
