// Every deadline holds under garbage collection. On Node 20 a signal from
// AbortSignal.timeout() inside AbortSignal.any() is collected and its deadline lost (a deployment
// call waited 302 s). Each case runs in a child with `--expose-gc` and a collection every 50 ms,
// against a loopback server that accepts and never answers, and must end at its deadline. A lost
// deadline is a wait for ever: the child is killed past a limit far above its deadline, and the
// message names the deadline that ended it. No upper bound on its time, which a loaded machine
// can stretch.
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { getEventListeners } from "node:events";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import net from "node:net";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import path from "node:path";
import { after, before, describe, it } from "node:test";
import { BIN, ensureBuilt, REPO } from "../support/cli.ts";
import { annotatedTool, startMcpServer } from "../support/mcp-server.ts";
import { scriptBundle } from "../support/script-bundle.ts";
import { dependantsOf } from "../support/signals.ts";

const GC_OFTEN = path.join(REPO, "test", "support", "gc-often.cjs");
const CHILD = path.join("test", "support", "deadline-child.ts");

type Ran = { code: number | null; stdout: string; stderr: string; ms: number; killed: boolean };

/**
 * Runs node with GC exposed and forced often; killed after `limitMs` (a deadline that did not
 * hold). `collects: "itself"`: the child starts collecting once loaded (deadline-child.ts), not
 * from its first line: loaded under tsx (as it once ran) with a full collection every 50 ms, it took
 * over 20 s with two suites running, and the limit ended a child that had not yet reached its deadline.
 */
function runWithGc(args: string[], options: { cwd: string; env?: Record<string, string>; limitMs: number; collects?: "itself" }): Promise<Ran> {
  return new Promise((resolve, reject) => {
    const started = Date.now();
    const env = { PATH: process.env.PATH ?? "/usr/bin:/bin", HOME: options.cwd, ...options.env };
    const child = spawn(process.execPath, ["--expose-gc", ...(options.collects === "itself" ? [] : ["--require", GC_OFTEN]), ...args], { cwd: options.cwd, env, stdio: ["ignore", "pipe", "pipe"] });
    let stdout = "";
    let stderr = "";
    let killed = false;
    child.stdout.on("data", (d) => (stdout += d));
    child.stderr.on("data", (d) => (stderr += d));
    const timer = setTimeout(() => {
      killed = true;
      child.kill("SIGKILL");
    }, options.limitMs);
    child.on("error", reject);
    child.on("close", (code) => {
      clearTimeout(timer);
      resolve({ code, stdout, stderr, ms: Date.now() - started, killed });
    });
  });
}

describe("deadlines under garbage collection", () => {
  let server: net.Server;
  const sockets: net.Socket[] = [];
  let url: string;
  let cwd: string;

  before(async () => {
    server = net.createServer((socket) => void sockets.push(socket));
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
    url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
    cwd = mkdtempSync(path.join(tmpdir(), "subs-deadline-gc-"));
  });
  after(() => {
    sockets.forEach((s) => s.destroy());
    server.close();
    rmSync(cwd, { recursive: true, force: true });
  });

  it("subs apply: each attempt at the deployment ends at SUBS_HTTP_TIMEOUT, then the run fails (exit 1)", async () => {
    ensureBuilt();
    writeFileSync(path.join(cwd, "substructure.toml"), `[remote]\nurl = "${url}"\n\n[mcp.a]\nurl = "https://mcp.example.com/mcp"\n`);
    const r = await runWithGc([BIN, "apply"], { cwd, env: { SUBS_HTTP_TIMEOUT: "1", SUBSTRUCTURE_TOKEN: "deploy-token" }, limitMs: 25_000 });
    assert.equal(r.killed, false, `still waiting after 25 s: the per-attempt deadline was lost\n${r.stderr}`);
    assert.equal(r.code, 1, r.stderr);
    assert.match(r.stderr, /GET \/v1\/mcp: no answer within 1s; 4 attempts/);
  });

  it("mcp login: an authorization server that never answers ends at SUBS_HTTP_TIMEOUT (exit 1)", async () => {
    ensureBuilt();
    // The MCP server's resource metadata names the silent server as its authorization server.
    const mcp = await startMcpServer({ tools: [annotatedTool("search")], oauth: { authServer: { issuer: `${url}/`, verifier: { verifyAccessToken: () => Promise.reject(new Error("no")) } } } });
    try {
      const dir = mkdtempSync(path.join(tmpdir(), "subs-deadline-gc-login-"));
      writeFileSync(path.join(dir, "substructure.toml"), `[mcp.demo]\nurl = "${mcp.url}"\n`);
      // 3 s, not 1: the MCP server's own answers (this process, the child collecting every 50 ms)
      // must come within the deadline for the silent server to be the one it ends; under two
      // suites at once on two cores, 1 s was once not enough for them.
      const r = await runWithGc([BIN, "mcp", "login", "demo", "--no-browser"], { cwd: dir, env: { SUBS_HTTP_TIMEOUT: "3" }, limitMs: 30_000 });
      rmSync(dir, { recursive: true, force: true });
      assert.equal(r.killed, false, `still waiting after 30 s: the deadline was lost\n${r.stderr}`);
      assert.equal(r.code, 1, r.stderr);
      assert.match(r.stderr, /cannot read the authorization server metadata of http:\/\/127\.0\.0\.1:\d+\/ \(no complete answer from http:\/\/127\.0\.0\.1:\d+ within 3s\)/);
    } finally {
      await mcp.close();
    }
  });

  it("revocation of a deleted section's credential gives up at its deadline", async () => {
    const r = await runWithGc([await scriptBundle(CHILD), "revoke"], { cwd: REPO, limitMs: 20_000, collects: "itself" });
    assert.equal(r.killed, false, `still waiting after 20 s: the revocation deadline was lost\n${r.stderr}`);
    assert.equal(r.code, 0, r.stderr);
    const { ms } = JSON.parse(r.stdout) as { ms: number };
    assert.ok(ms >= 900, `took ${ms} ms for a 1 s deadline`);
  });

  it("withDeadline aborts a fetch at its deadline with a TimeoutError", async () => {
    const r = await runWithGc([await scriptBundle(CHILD), "deadline"], { cwd: REPO, limitMs: 20_000, collects: "itself" });
    assert.equal(r.killed, false, r.stderr);
    assert.equal(r.code, 0, r.stderr);
    const { ms, error } = JSON.parse(r.stdout) as { ms: number; error: string };
    assert.equal(error, "TimeoutError");
    assert.ok(ms >= 900, `took ${ms} ms for a 1 s deadline`);
  });
});

describe("withDeadline", () => {
  it("aborts with the reason of a given signal, and clear() lets go of it", async () => {
    const { withDeadline } = await import("../../src/http/deadline.ts");
    const interrupt = new AbortController();
    const d = withDeadline([interrupt.signal, undefined], 60_000);
    interrupt.abort(new Error("ctrl-c"));
    assert.equal(d.signal.aborted, true);
    assert.equal((d.signal.reason as Error).message, "ctrl-c");
    assert.equal(d.timedOut(), false);

    const other = new AbortController();
    const cleared = withDeadline(other.signal, 60_000);
    cleared.clear();
    other.abort();
    assert.equal(cleared.signal.aborted, false);
  });

  it("a signal already aborted aborts it at once", async () => {
    const { withDeadline } = await import("../../src/http/deadline.ts");
    const d = withDeadline(AbortSignal.abort("gone"), 60_000);
    assert.equal(d.signal.aborted, true);
    assert.equal(d.signal.reason, "gone");
    d.clear();
  });
});

describe("anySignal", () => {
  it("aborts with the reason of the signal that aborted, at once when one already has, and keeps one listener per source for all that follow it", async () => {
    const { anySignal, followersOf } = await import("../../src/http/deadline.ts");
    const session = new AbortController();
    const followers = Array.from({ length: 20 }, () => anySignal([session.signal, new AbortController().signal, undefined, null]));
    assert.equal(followersOf(session.signal), 20);
    assert.equal(getEventListeners(session.signal, "abort").length, 1, "one listener, not 20 (MaxListenersExceededWarning at 11)");
    followers[0]!.release();
    followers[1]!.abort(new Error("cancelled"));
    assert.equal((followers[1]!.signal.reason as Error).message, "cancelled");
    assert.equal(followersOf(session.signal), 18);
    session.abort(new Error("session over"));
    assert.equal(followers[0]!.signal.aborted, false, "released: no longer follows");
    assert.equal((followers[1]!.signal.reason as Error).message, "cancelled");
    for (const f of followers.slice(2)) assert.equal((f.signal.reason as Error).message, "session over");
    assert.equal(followersOf(session.signal), 0);
    assert.equal(getEventListeners(session.signal, "abort").length, 0);

    const gone = anySignal([new AbortController().signal, AbortSignal.abort("gone")]);
    assert.equal(gone.signal.reason, "gone");
  });

  it("once every follower is released, the source keeps nothing", async () => {
    const { anySignal, followersOf } = await import("../../src/http/deadline.ts");
    const long = new AbortController();
    for (let n = 0; n < 1000; n++) anySignal([long.signal, new AbortController().signal]).release();
    assert.equal(followersOf(long.signal), 0);
    assert.equal(getEventListeners(long.signal, "abort").length, 0);
    assert.equal(dependantsOf(long.signal), 0, "no dependants (AbortSignal.any)");
  });
});
