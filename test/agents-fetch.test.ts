// fetch.ts with sources built in the test (no module mocks): once per connection, all at once,
// each within its timeout, failures become "unavailable", Ctrl-C ends everything.
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { fetchConnectionTools, type ToolSource } from "../src/agents/fetch.ts";
import { remoteToolSource } from "../src/backend/deployment.ts";
import type { ConnectorTool } from "../src/agents/resolve.ts";
import type { ConnectionConfig } from "../src/config/types.ts";
import { needsLogin, SubsError } from "../src/errors.ts";

const connection = (id: string): ConnectionConfig => ({ id, url: `http://127.0.0.1:1/${id}`, prefixTools: true });
const never = new AbortController().signal;

function source(listTools: ToolSource["listTools"]): ToolSource {
  return { target: "local", listTools };
}

describe("fetchConnectionTools", () => {
  it("fetches each connection's list once, even when named twice", async () => {
    const calls: string[] = [];
    const outcomes = await fetchConnectionTools({
      connections: [connection("a"), connection("b"), connection("a")],
      source: source(async (c) => {
        calls.push(c.id);
        return [{ name: `${c.id}_tool` }];
      }),
      timeoutMs: 5_000,
      signal: never,
    });
    assert.deepEqual(calls.sort(), ["a", "b"]);
    assert.deepEqual(outcomes.get("a"), { ok: true, tools: [{ name: "a_tool" }] });
    assert.deepEqual(outcomes.get("b"), { ok: true, tools: [{ name: "b_tool" }] });
  });

  it("runs the fetches at once: each waits for all to have started (one after another would time out)", async () => {
    const ids = ["a", "b", "c"];
    let started = 0;
    let allStarted!: () => void;
    const barrier = new Promise<void>((resolve) => (allStarted = resolve));
    const outcomes = await fetchConnectionTools({
      connections: ids.map(connection),
      source: source(async () => {
        if (++started === ids.length) allStarted();
        await barrier;
        return [];
      }),
      timeoutMs: 5_000,
      signal: never,
    });
    assert.deepEqual(
      ids.map((id) => outcomes.get(id)?.ok),
      [true, true, true],
    );
  });

  it("The turn waits while a fetch runs: a slow list within the timeout is kept", async () => {
    const outcomes = await fetchConnectionTools({
      connections: [connection("slow")],
      source: source(async () => {
        await new Promise((r) => setTimeout(r, 50));
        return [{ name: "late" }];
      }),
      timeoutMs: 5_000,
      signal: never,
    });
    assert.deepEqual(outcomes.get("slow"), { ok: true, tools: [{ name: "late" }] });
  });

  it("a connection that does not answer within its timeout is unavailable, and its signal is aborted; the others are kept", async () => {
    let aborted = false;
    const outcomes = await fetchConnectionTools({
      connections: [connection("hung"), connection("fine")],
      source: source((c, signal) => {
        if (c.id === "fine") return Promise.resolve([{ name: "ok" }]);
        signal.addEventListener("abort", () => (aborted = true));
        return new Promise<readonly ConnectorTool[]>(() => {}); // ignores its signal: must still end
      }),
      timeoutMs: 100,
      signal: never,
    });
    assert.equal(aborted, true);
    assert.deepEqual(outcomes.get("fine"), { ok: true, tools: [{ name: "ok" }] });
    assert.deepEqual(outcomes.get("hung"), {
      ok: false,
      error: { code: "timeout", message: "hung: no tool list within 0.1s", hint: "check the server, or wait longer with --timeout SECONDS", needsLogin: false },
    });
  });

  it("the source gets ready (loads the MCP SDK) before any timeout starts", async () => {
    let ready = false;
    const outcomes = await fetchConnectionTools({
      connections: [connection("a")],
      source: {
        target: "local",
        ready: () => new Promise<void>((resolve) => setTimeout(() => ((ready = true), resolve()), 150)),
        listTools: async () => (ready ? [{ name: "t" }] : Promise.reject(new Error("not ready"))),
      },
      timeoutMs: 50,
      signal: never,
    });
    assert.deepEqual(outcomes.get("a"), { ok: true, tools: [{ name: "t" }] });
  });

  it("If the fetch fails, the turn runs without those tools: the error's code, message and hint are kept", async () => {
    const outcomes = await fetchConnectionTools({
      connections: [connection("linear"), connection("down"), connection("odd")],
      source: source(async (c) => {
        if (c.id === "linear") throw needsLogin("linear", "the server requires authorization");
        if (c.id === "down") throw new SubsError("failed", "down: cannot reach http://127.0.0.1:1 (fetch failed)");
        throw new Error("socket hang up");
      }),
      timeoutMs: 5_000,
      signal: never,
    });
    assert.deepEqual(outcomes.get("linear"), {
      ok: false,
      error: { code: "needs_login", message: "linear: the server requires authorization", hint: "run `subs mcp login linear`", needsLogin: true },
    });
    assert.deepEqual(outcomes.get("down"), { ok: false, error: { code: "failed", message: "down: cannot reach http://127.0.0.1:1 (fetch failed)", needsLogin: false } });
    assert.deepEqual(outcomes.get("odd"), { ok: false, error: { code: "failed", message: "odd: socket hang up", needsLogin: false } });
  });

  it("Ctrl-C abandons every fetch and rejects as interrupted", async () => {
    const controller = new AbortController();
    const pending = fetchConnectionTools({
      connections: [connection("a")],
      source: source(() => {
        queueMicrotask(() => controller.abort());
        return new Promise<readonly ConnectorTool[]>(() => {});
      }),
      timeoutMs: 60_000,
      signal: controller.signal,
    });
    await assert.rejects(pending, (error: unknown) => error instanceof SubsError && error.kind === "interrupted");
  });
});

describe("remoteToolSource", () => {
  it("a failing deployment check ends the whole fetch with its error; no connection is asked", async () => {
    const asked: string[] = [];
    const rejected = new SubsError("failed", "the deployment rejected the credential in $SUBSTRUCTURE_TOKEN");
    const pending = fetchConnectionTools({
      connections: [connection("a"), connection("b")],
      source: remoteToolSource({
        check: async () => {
          throw rejected;
        },
        listTools: async (id) => {
          asked.push(id);
          return [];
        },
      }),
      timeoutMs: 5_000,
      signal: never,
    });
    await assert.rejects(pending, (error: unknown) => error === rejected);
    assert.deepEqual(asked, []);
  });

  it("asks the deployment for the connection's id, passing the fetch's signal", async () => {
    const asked: Array<[string, AbortSignal]> = [];
    const remote = remoteToolSource({
      listTools: async (id, { signal }) => {
        asked.push([id, signal]);
        return [{ name: "search", annotations: { readOnlyHint: true } }];
      },
    });
    assert.equal(remote.target, "remote");
    const signal = new AbortController().signal;
    assert.deepEqual(await remote.listTools(connection("sentry"), signal), [{ name: "search", annotations: { readOnlyHint: true } }]);
    assert.deepEqual(asked, [["sentry", signal]]);
  });
});
