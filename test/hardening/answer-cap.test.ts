// A bound on every MCP answer (src/mcp/answer-cap.ts): a hostile server on loopback sends a
// 400 MB answer, as one JSON body and as one event stream event that never ends, to the real CLI
// and to a running `subs mcp proxy` / `subs agent serve`. The request fails with an error naming
// the connection and the limit, the server sees its connection closed long before it sent it all,
// and the process's peak memory (Linux VmHWM) stays far below what was sent. The 400 MB are
// produced as they are written, never held by the test.
import assert from "node:assert/strict";
import type { ChildProcess } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import path from "node:path";
import { after, before, describe, test } from "node:test";
import { cappedAnswers } from "../../src/mcp/answer-cap.ts";
import { runCli, runInProcess } from "../support/cli.ts";
import { serveSession, type ServeSession } from "../support/serve-client.ts";

const MIB = 1024 * 1024;
/** What the hostile server sends when it sends a lot: 400 MB. */
const HUGE_MB = 400;
/** The peak resident memory the process must stay under while 400 MB are sent to it. */
const PEAK_LIMIT_KIB = 300 * 1024;
/** Past this the watcher ends the process: the code before the cap would have gone to ~2 GB. */
const KILL_AT_KIB = 700 * 1024;
const TOKEN = "answer-cap-static-token";

/** One answer the hostile server sent: how much it wrote, and whether the client hung up first. */
type Sent = { what: string; bytes: number; cut: boolean; closed: Promise<void> };

type Hostile = { url: string; sent: Sent[]; close: () => Promise<void> };

const FILL = Buffer.alloc(MIB, "x");

/**
 * Writes `prefix`, then `mb` MiB of "x", then `suffix` (when given), at the pace the socket takes
 * them; stops when the client goes away. `suffix` undefined: the answer never ends (held open).
 */
function stream(res: ServerResponse, record: Sent, prefix: string, mb: number, suffix: string | undefined) {
  let gone = false;
  let done: () => void = () => {};
  record.closed = new Promise<void>((resolve) => (done = resolve));
  res.on("close", () => {
    gone = true;
    record.cut = !res.writableFinished;
    done();
  });
  const write = (chunk: string | Buffer) => {
    record.bytes += Buffer.byteLength(chunk);
    return res.write(chunk);
  };
  void (async () => {
    write(prefix);
    for (let i = 0; i < mb && !gone; i++) {
      if (!write(FILL) && !gone) {
        await new Promise<void>((resolve) => {
          const go = () => {
            res.off("drain", go).off("close", go);
            resolve();
          };
          res.on("drain", go).on("close", go);
        });
      }
    }
    if (gone) return;
    if (suffix !== undefined) res.end(suffix);
  })();
}

const result = (id: unknown, value: unknown) => JSON.stringify({ jsonrpc: "2.0", id, result: value });
const event = (message: string) => `event: message\ndata: ${message}\n\n`;

/**
 * A Streamable HTTP server as small as the SDK's client accepts (no session, no GET stream), whose
 * answers are as large as the path says:
 * - `/json/<mb>`: `tools/list` answers a valid JSON body of <mb> MiB (a tool with a long description);
 * - `/sse/<mb>`: `tools/list` answers an event stream whose one event is <mb> MiB and never ends;
 * - `/mixed`: `tools/list` is small; the tools `big_json`, `big_sse` send `mb` MiB as above,
 *   `events` sends `count` log events of `kib` KiB each before its result, `small` answers "ok".
 */
async function hostileServer(): Promise<Hostile> {
  const sent: Sent[] = [];
  const record = (what: string): Sent => {
    const r: Sent = { what, bytes: 0, cut: false, closed: Promise.resolve() };
    sent.push(r);
    return r;
  };
  const handle = (req: IncomingMessage, res: ServerResponse, body: string) => {
    const [, mode, size] = (req.url ?? "/").split("/");
    const mb = Number(size ?? 0);
    if (req.method !== "POST") return void res.writeHead(405, { allow: "POST" }).end();
    const message = JSON.parse(body) as { id?: unknown; method: string; params?: { name?: string; arguments?: Record<string, number>; protocolVersion?: string } };
    const { id, method, params } = message;
    if (id === undefined) return void res.writeHead(202).end();
    const json = (text: string) => void res.writeHead(200, { "content-type": "application/json" }).end(text);
    if (method === "initialize") {
      return json(result(id, { protocolVersion: params?.protocolVersion, capabilities: { tools: {}, logging: {} }, serverInfo: { name: "hostile", version: "1.0.0" } }));
    }
    if (method === "tools/list" && mode === "json") {
      res.writeHead(200, { "content-type": "application/json" });
      return stream(res, record(`tools/list json ${mb}`), `${result(id, { tools: [{ name: "t", inputSchema: { type: "object" } }] }).slice(0, -4)}, "description": "`, mb, `"}]}}`);
    }
    if (method === "tools/list" && mode === "sse") {
      res.writeHead(200, { "content-type": "text/event-stream" });
      return stream(res, record(`tools/list sse ${mb}`), `event: message\ndata: ${result(id, { tools: [] }).slice(0, -3)}{"name": "t", "description": "`, mb, undefined);
    }
    if (method === "tools/list") {
      const tool = (name: string) => ({ name, inputSchema: { type: "object" } });
      return json(result(id, { tools: ["big_json", "big_sse", "events", "small"].map(tool) }));
    }
    if (method === "ping") return json(result(id, {}));
    if (method === "tools/call") {
      const args = params?.arguments ?? {};
      const text = (value: string) => ({ content: [{ type: "text", text: value }] });
      if (params?.name === "big_json") {
        res.writeHead(200, { "content-type": "application/json" });
        return stream(res, record(`big_json ${args.mb}`), `${result(id, text("")).slice(0, -5)}`, args.mb ?? 0, `"}]}}`);
      }
      if (params?.name === "big_sse") {
        res.writeHead(200, { "content-type": "text/event-stream" });
        return stream(res, record(`big_sse ${args.mb}`), `event: message\ndata: ${result(id, text("")).slice(0, -5)}`, args.mb ?? 0, undefined);
      }
      if (params?.name === "events") {
        res.writeHead(200, { "content-type": "text/event-stream" });
        const log = JSON.stringify({ jsonrpc: "2.0", method: "notifications/message", params: { level: "info", data: "y".repeat((args.kib ?? 1) * 1024) } });
        for (let i = 0; i < (args.count ?? 1); i++) res.write(event(log));
        return void res.end(event(result(id, text(`after ${args.count} events`))));
      }
      return json(result(id, text("ok")));
    }
    return json(JSON.stringify({ jsonrpc: "2.0", id, error: { code: -32601, message: "no such method" } }));
  };
  const server: Server = createServer((req, res) => {
    let body = "";
    req.setEncoding("utf8").on("data", (d: string) => (body += d));
    req.on("end", () => handle(req, res, body));
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  return {
    url,
    sent,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

/**
 * The peak resident memory of `child` (VmHWM, Linux), read every 20 ms until it exits; a process
 * past KILL_AT_KIB is killed there, so a failing run never takes the 2 GB the uncapped code did.
 */
function watchPeak(child: ChildProcess): { peakKiB: () => number; stop: () => void } {
  let peak = 0;
  const read = () => {
    try {
      const kib = Number(/VmHWM:\s+(\d+) kB/.exec(readFileSync(`/proc/${child.pid}/status`, "utf8"))?.[1] ?? 0);
      peak = Math.max(peak, kib);
      if (peak > KILL_AT_KIB) child.kill("SIGKILL");
    } catch {
      // Exited between two reads.
    }
  };
  read();
  const timer = setInterval(read, 20);
  child.once("exit", () => clearInterval(timer));
  return { peakKiB: () => peak, stop: () => clearInterval(timer) };
}

/** The peak was measured (Linux /proc) and stayed far below what the server sent. */
function assertBounded(peakKiB: number): void {
  assert.ok(peakKiB > 0, "the peak resident memory was read from /proc");
  assert.ok(peakKiB < PEAK_LIMIT_KIB, `peak resident memory ${Math.round(peakKiB / 1024)} MB while the server sent up to ${HUGE_MB} MB`);
}

/** Resolves when `promise` does, fails the test after `ms`. */
async function within<T>(promise: Promise<T>, ms: number, what: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  try {
    return await Promise.race([promise, new Promise<never>((_, reject) => (timer = setTimeout(() => reject(new Error(`${what}: not within ${ms} ms`)), ms)))]);
  } finally {
    clearTimeout(timer);
  }
}

describe("every MCP answer has a size limit", () => {
  let hostile: Hostile;
  let dir: string;

  before(async () => {
    hostile = await hostileServer();
    dir = mkdtempSync(path.join(tmpdir(), "subs-answer-cap-"));
    const section = (id: string, route: string) => `[mcp.${id}]\nurl = "${hostile.url}/${route}"\nauth = { token_env = "MCP_TOKEN" }\n`;
    writeFileSync(
      path.join(dir, "substructure.toml"),
      [section("bigjson", `json/${HUGE_MB}`), section("bigsse", `sse/${HUGE_MB}`), section("mixed", "mixed"), section("twenty", "json/20"), `[agent.hostile]\nmcp = ["mixed", "bigjson"]\n`].join("\n"),
    );
  });
  after(async () => {
    await hostile.close();
    rmSync(dir, { recursive: true, force: true });
  });

  const lastSent = (what: string) => {
    const found = hostile.sent.filter((s) => s.what === what).at(-1);
    assert.ok(found, `the server was asked for ${what}`);
    return found;
  };

  /** Runs the real CLI, watching its peak memory. */
  const cli = async (argv: string[]) => {
    let watch: ReturnType<typeof watchPeak> | undefined;
    const r = await runCli(argv, { cwd: dir, env: { MCP_TOKEN: TOKEN }, timeoutMs: 60_000, onSpawn: (child) => (watch = watchPeak(child)) });
    watch!.stop();
    return { ...r, peakKiB: watch!.peakKiB() };
  };

  test(`subs mcp tools: a ${HUGE_MB} MB tools/list answer (JSON) fails with the limit named (exit 1); memory stays bounded`, { timeout: 90_000 }, async () => {
    const r = await cli(["mcp", "tools", "bigjson"]);
    assertBounded(r.peakKiB);
    assert.equal(r.code, 1, r.stderr);
    assert.equal(r.stdout, "");
    assert.match(r.stderr, /bigjson: http:\/\/127\.0\.0\.1:\d+ sent its answer over 16 MiB; subs stopped reading and closed the connection/);
    assert.match(r.stderr, /raise SUBS_MCP_MAX_ANSWER_MB \(MiB; now 16\)/);
    const sent = lastSent(`tools/list json ${HUGE_MB}`);
    await within(sent.closed, 5000, "the connection closed");
    assert.ok(sent.cut && sent.bytes < 100 * MIB, `the server could write ${Math.round(sent.bytes / MIB)} MiB before the connection closed`);
  });

  test(`--debug holds no more of it: the trace shows the first MiB's size only, the same error follows, memory stays bounded`, { timeout: 90_000 }, async () => {
    const r = await cli(["mcp", "tools", "bigjson", "--debug"]);
    assertBounded(r.peakKiB);
    assert.equal(r.code, 1, r.stderr.slice(-2000));
    assert.match(r.stderr, /body: \(more than 1 MiB of application\/json; not shown\)/);
    assert.match(r.stderr, /bigjson: http:\/\/127\.0\.0\.1:\d+ sent its answer over 16 MiB/);
  });

  test(`subs mcp tools: an event stream event of ${HUGE_MB} MB that never ends fails at once, not at the request timeout (exit 1)`, { timeout: 90_000 }, async () => {
    const r = await cli(["mcp", "tools", "bigsse", "--json"]);
    assertBounded(r.peakKiB);
    assert.equal(r.code, 1, r.stderr);
    const { error } = JSON.parse(r.stdout) as { error: { code: string; message: string; hint: string } };
    // Not the SDK's request timeout (60 s, which says timed_out): failing at once is the cap's doing.
    assert.equal(error.code, "answer_too_large");
    assert.match(error.message, /^bigsse: http:\/\/127\.0\.0\.1:\d+ sent one event of its event stream over 16 MiB; subs stopped reading and closed the connection$/);
    assert.match(error.hint, /SUBS_MCP_MAX_ANSWER_MB/);
    const sent = lastSent(`tools/list sse ${HUGE_MB}`);
    await within(sent.closed, 5000, "the connection closed");
    assert.ok(sent.bytes < 100 * MIB, `the server could write ${Math.round(sent.bytes / MIB)} MiB`);
  });

  test("SUBS_MCP_MAX_ANSWER_MB raises (or lowers) the limit; a value that is not a positive number is a usage error (exit 2)", { timeout: 60_000 }, async () => {
    const env = { MCP_TOKEN: TOKEN };
    const refused = await runInProcess(["mcp", "tools", "twenty"], { cwd: dir, env });
    assert.equal(refused.code, 1, refused.stderr);
    assert.match(refused.stderr, /twenty: .* sent its answer over 16 MiB/);
    const raised = await runInProcess(["mcp", "tools", "twenty", "--json"], { cwd: dir, env: { ...env, SUBS_MCP_MAX_ANSWER_MB: "32" } });
    assert.equal(raised.code, 0, raised.stderr);
    assert.equal((JSON.parse(raised.stdout) as { tools: Array<{ description: string }> }).tools[0]!.description.length, 20 * MIB);
    const lowered = await runInProcess(["mcp", "call", "mixed", "big_json", "--args", JSON.stringify({ mb: 1 })], { cwd: dir, env: { ...env, SUBS_MCP_MAX_ANSWER_MB: "0.5" } });
    assert.equal(lowered.code, 1, lowered.stderr);
    assert.match(lowered.stderr, /mixed: .* sent its answer over 0\.5 MiB/);
    for (const value of ["0", "-1", "16MB", "lots"]) {
      const r = await runInProcess(["mcp", "tools", "mixed"], { cwd: dir, env: { ...env, SUBS_MCP_MAX_ANSWER_MB: value } });
      assert.equal(r.code, 2, `${value}: ${r.stderr}`);
      assert.match(r.stderr, /SUBS_MCP_MAX_ANSWER_MB must be a positive number of MiB/);
    }
  });

  test("the limit is per event: a stream whose events add up to more than the limit is read whole", async () => {
    const r = await runInProcess(["mcp", "call", "mixed", "events", "--args", JSON.stringify({ count: 8, kib: 256 })], {
      cwd: dir,
      env: { MCP_TOKEN: TOKEN, SUBS_MCP_MAX_ANSWER_MB: "1" },
    });
    assert.equal(r.code, 0, r.stderr);
    assert.equal(r.stdout.trim(), "after 8 events");
  });

  const serving = async (argv: string[]): Promise<ServeSession & { watch: ReturnType<typeof watchPeak> }> => {
    const session = await serveSession(argv, { cwd: dir, env: { MCP_TOKEN: TOKEN, PATH: process.env.PATH ?? "/usr/bin:/bin" } });
    return Object.assign(session, { watch: watchPeak(session.child) });
  };

  test(`subs mcp proxy: ${HUGE_MB} MB answers (JSON, and one endless event) are errors to its client; it stays up, serves the next call, and its memory stays bounded`, { timeout: 120_000 }, async () => {
    const proxy = await serving(["mcp", "proxy", "mixed"]);
    try {
      for (const tool of ["big_json", "big_sse"]) {
        await assert.rejects(proxy.client.callTool({ name: tool, arguments: { mb: HUGE_MB } }), (error: Error) => {
          assert.match(error.message, new RegExp(`mixed: http://127\\.0\\.0\\.1:\\d+ sent (its answer|one event of its event stream) over 16 MiB; subs stopped reading and closed the connection; if the server's answers are meant to be that large, raise SUBS_MCP_MAX_ANSWER_MB`));
          return true;
        });
        const sent = lastSent(`${tool} ${HUGE_MB}`);
        // The process lives on: only the connection of that answer was closed.
        await within(sent.closed, 5000, `${tool}: the connection closed`);
        assert.ok(sent.bytes < 100 * MIB, `${tool}: the server could write ${Math.round(sent.bytes / MIB)} MiB`);
      }
      const next = await proxy.client.callTool({ name: "small", arguments: {} });
      assert.deepEqual(next.content, [{ type: "text", text: "ok" }]);
      assert.equal(proxy.child.exitCode, null, "the proxy is still running");
      assertBounded(proxy.watch.peakKiB());
    } finally {
      proxy.watch.stop();
      await proxy.close();
    }
  });

  test(`subs agent serve: a ${HUGE_MB} MB tools/list leaves that connection out, reported; a ${HUGE_MB} MB endless event is a tool error its client can read; the session goes on`, { timeout: 120_000 }, async () => {
    const serve = await serving(["agent", "serve", "hostile"]);
    try {
      const { tools } = await serve.client.listTools();
      assert.deepEqual(tools.map((t) => t.name).sort(), ["mixed__big_json", "mixed__big_sse", "mixed__events", "mixed__small"]);
      assert.ok(
        serve.logs.some((log) => /bigjson: http:\/\/127\.0\.0\.1:\d+ sent its answer over 16 MiB.*this session serves none of bigjson's tools/.test(String(log.data))),
        JSON.stringify(serve.logs),
      );
      const name = (tool: string) => tools.find((t) => t.name.endsWith(tool))!.name;
      const failedCall = await serve.client.callTool({ name: name("big_sse"), arguments: { mb: HUGE_MB } });
      assert.equal(failedCall.isError, true);
      assert.match(JSON.stringify(failedCall.content), /mixed: http:\/\/127\.0\.0\.1:\d+ sent one event of its event stream over 16 MiB/);
      await within(lastSent(`big_sse ${HUGE_MB}`).closed, 5000, "the connection closed");
      const next = await serve.client.callTool({ name: name("small"), arguments: {} });
      assert.deepEqual(next.content, [{ type: "text", text: "ok" }]);
      assertBounded(serve.watch.peakKiB());
    } finally {
      serve.watch.stop();
      await serve.close();
    }
  });
});

describe("cappedAnswers (how an answer is counted)", () => {
  const limit = { id: "demo", mib: 1 / 1024 }; // 1 KiB
  const encoder = new TextEncoder();

  /** A fetch answering `chunks` exactly as split, with `headers`; records whether its body was read. */
  const answering = (chunks: string[], headers: Record<string, string>) => {
    const state = { pulled: 0, cancelled: false };
    const fetch: typeof globalThis.fetch = async () => {
      let next = 0;
      const body = new ReadableStream<Uint8Array>(
        {
          pull(controller) {
            state.pulled++;
            if (next < chunks.length) controller.enqueue(encoder.encode(chunks[next++]));
            else controller.close();
          },
          cancel() {
            state.cancelled = true;
          },
        },
        { highWaterMark: 0 },
      );
      return new Response(body, { headers });
    };
    return { fetch, state };
  };
  const SSE = { "content-type": "text/event-stream" };
  const read = async (fetch: typeof globalThis.fetch, init?: RequestInit) => (await cappedAnswers(fetch, limit)("http://127.0.0.1:9/mcp", init)).text();

  test("events end at a blank line of any line ending (LF, CR, CRLF), also split across chunks: many small events pass", async () => {
    const data = `data: ${"z".repeat(600)}`;
    for (const end of ["\n\n", "\r\r", "\r\n\r\n", "\n\r\n"]) {
      const whole = Array.from({ length: 6 }, () => `${data}${end}`).join("");
      // Split everywhere a line end could be cut in two.
      const chunks = whole.split(/(?<=[\r\n])/);
      assert.equal(await read(answering(chunks, SSE).fetch), whole, JSON.stringify(end));
    }
  });

  test("lines without a blank line between them are one event: past the limit, it fails and the body is cancelled", async () => {
    // CRLF split across chunks ("\r" | "\n") is one line end, not a blank line.
    const { fetch, state } = answering(Array.from({ length: 8 }, () => `data: ${"z".repeat(200)}\r`).flatMap((line) => [line, "\n"]), SSE);
    await assert.rejects(read(fetch), /^SubsError: demo: http:\/\/127\.0\.0\.1:9 sent one event of its event stream over 0\.0009765625 MiB/);
    assert.ok(state.cancelled);
  });

  test("a JSON body counts whole; one declared longer than the limit is refused unread", async () => {
    await assert.rejects(read(answering(["[", "1,".repeat(600), "1]"], { "content-type": "application/json" }).fetch), /sent its answer over/);
    const declared = answering(["{}"], { "content-type": "application/json", "content-length": "5000" });
    await assert.rejects(read(declared.fetch), /sent its answer over/);
    assert.equal(declared.state.pulled, 0);
    assert.ok(declared.state.cancelled);
    assert.equal(await read(answering(["{}"], { "content-type": "application/json", "content-length": "2" }).fetch), "{}");
  });

  test("an event stream over the limit names the requests it answered, for the caller to fail them at once", async () => {
    const told: Array<string | number> = [];
    const capped = cappedAnswers(answering([`data: ${"z".repeat(2000)}`], SSE).fetch, limit, (id) => told.push(id));
    const body = JSON.stringify([{ jsonrpc: "2.0", id: 7, method: "tools/list" }, { jsonrpc: "2.0", method: "notifications/initialized" }, { jsonrpc: "2.0", id: "x", method: "ping" }]);
    await assert.rejects((await capped("http://127.0.0.1:9/mcp", { method: "POST", body })).text(), /^SubsError: demo: http:\/\/127\.0\.0\.1:9 sent one event of its event stream over 0\.0009765625 MiB/);
    assert.deepEqual(told, [7, "x"]);
  });
});
