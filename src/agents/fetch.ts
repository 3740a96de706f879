// Fetches the tool list of each connection an agent names: once each, all at once, each within
// its own timeout (connectors.md, "When tools are fetched": the turn waits while a fetch runs;
// if the fetch fails, the turn runs without those tools). Where the lists come from is a
// ToolSource, which the place credentials live gives (src/backend/): the MCP servers themselves or
// the deployment.
import type { ConnectionConfig } from "../config/types.ts";
import { interrupted, SubsError } from "../errors.ts";
import type { ConnectorTool, FetchOutcome } from "./resolve.ts";

export type ToolSource = {
  /** Where the lists come from, as shown to the user. */
  readonly target: "local" | "remote";
  /**
   * One connection's whole tool list. Rejects when it cannot be had; a SubsError's code, message
   * and hint are shown as they are. Must stop its network work when `signal` aborts.
   */
  listTools(connection: ConnectionConfig, signal: AbortSignal): Promise<readonly ConnectorTool[]>;
  /**
   * Runs once before any list is fetched and before any timeout starts (a timeout is the server's
   * time): loads what listTools needs, e.g. the MCP SDK, or checks the deployment answers. Its
   * rejection ends the whole fetch: it is not about one connection.
   */
  ready?(): Promise<void>;
};

export type FetchToolsOptions = {
  connections: readonly ConnectionConfig[];
  source: ToolSource;
  /** Per connection. */
  timeoutMs: number;
  /** Ctrl-C: abandons every fetch and rejects with `interrupted`. */
  signal: AbortSignal;
};

export async function fetchConnectionTools(options: FetchToolsOptions): Promise<Map<string, FetchOutcome>> {
  const unique = [...new Map(options.connections.map((c) => [c.id, c])).values()];
  if (unique.length > 0) await options.source.ready?.();
  const settled = await Promise.allSettled(unique.map((connection) => fetchOne(connection, options)));
  if (options.signal.aborted) throw interrupted();
  const outcomes = new Map<string, FetchOutcome>();
  settled.forEach((result, n) => {
    const connection = unique[n]!;
    outcomes.set(connection.id, result.status === "fulfilled" ? result.value : { ok: false, error: describeFailure(connection, result.reason) });
  });
  return outcomes;
}

async function fetchOne(connection: ConnectionConfig, options: FetchToolsOptions): Promise<FetchOutcome> {
  // Our own timer, not AbortSignal.timeout(): that one is unref'd, so a wait on nothing but the
  // timeout would let the process exit before it fires.
  const timeout = new AbortController();
  const timer = setTimeout(() => timeout.abort(new Error("timed out")), options.timeoutMs);
  const signal = AbortSignal.any([options.signal, timeout.signal]);
  try {
    const tools = await untilAborted(options.source.listTools(connection, signal), signal);
    return { ok: true, tools };
  } catch (error) {
    if (timeout.signal.aborted && !options.signal.aborted) {
      const seconds = options.timeoutMs / 1000;
      return {
        ok: false,
        error: {
          code: "timeout",
          message: `${connection.id}: no tool list within ${seconds}s`,
          hint: "check the server, or wait longer with --timeout SECONDS",
          needsLogin: false,
        },
      };
    }
    return { ok: false, error: describeFailure(connection, error) };
  } finally {
    clearTimeout(timer);
  }
}

/** Settles when `signal` aborts even if the source ignores it, so one hung server cannot hold the rest. */
function untilAborted<T>(promise: Promise<T>, signal: AbortSignal): Promise<T> {
  if (signal.aborted) return Promise.reject(signal.reason);
  return new Promise<T>((resolve, reject) => {
    const onAbort = () => reject(signal.reason);
    signal.addEventListener("abort", onAbort, { once: true });
    promise.then(
      (value) => {
        signal.removeEventListener("abort", onAbort);
        resolve(value);
      },
      (error) => {
        signal.removeEventListener("abort", onAbort);
        reject(error);
      },
    );
  });
}

function describeFailure(connection: ConnectionConfig, error: unknown): Extract<FetchOutcome, { ok: false }>["error"] {
  if (error instanceof SubsError) {
    return {
      code: error.code ?? error.kind,
      message: error.message,
      ...(error.hint ? { hint: error.hint } : {}),
      needsLogin: error.kind === "needs_login",
    };
  }
  const reason = error instanceof Error ? error.message : String(error);
  return { code: "failed", message: `${connection.id}: ${reason}`, needsLogin: false };
}
