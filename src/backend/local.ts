// This machine as the place credentials live: the db next to the file, the loopback OAuth flow,
// and the MCP servers reached from here with the credential the file says each uses.
//
// Loaded by every `subs mcp list`: only the listing's own modules are imported here; every other
// operation imports what it needs when it runs (the MCP SDK, the OAuth flow, revocation).
import path from "node:path";
import type { ToolSource } from "../agents/fetch.ts";
import { isLocalServer, type Config, type ConnectionConfig } from "../config/types.ts";
import type { Context } from "../context.ts";
import { failed, type SubsError } from "../errors.ts";
import { withDeadline } from "../http/deadline.ts";
import { possessive } from "../text/possessive.ts";
import { escaped } from "../text/unsafe.ts";
import type { Reporter } from "../report.ts";
import type { ConnectionCheck } from "../status/check.ts";
import { listLocalConnections } from "../status/list.ts";
import { localStatuses, storedState, type ConnectionStatus } from "../status/status.ts";
import { openEnvironmentStore, storedRows } from "../store/environment.ts";
import type { CredentialRow } from "../store/schema.ts";
import type { Applied, ApplyRequest, AuthorizeOptions, Authorized, Backend, BackendOptions, CallRequest, CallResult, Listing, ListedTool, LoginStep, Place, ToolsOptions } from "./types.ts";

export function localBackend(options: BackendOptions): Backend {
  return new LocalBackend(options);
}

class LocalBackend implements Backend {
  readonly place: Place;
  private readonly ctx: Context;
  private readonly config: Config;
  private readonly reporter: Reporter;
  private readonly loginSteps: () => (step: LoginStep) => void;
  // One open of the db for a whole login (a db that does not exist yet is created only when some
  // OAuth connection is to be logged in to). What is stored for ids the file no longer declares
  // stays: only `subs apply` and `subs mcp remove` delete it.
  private opened: Awaited<ReturnType<typeof openEnvironmentStore>>;

  constructor({ ctx, config, reporter, loginSteps = () => () => {} }: BackendOptions) {
    this.ctx = ctx;
    this.config = config;
    this.reporter = reporter;
    this.loginSteps = loginSteps;
    this.place = { kind: "local", dbPath: config.dbPath };
  }

  private async openForLogin(connections: readonly ConnectionConfig[]): Promise<void> {
    if (this.opened === undefined && connections.some((c) => !c.auth && !c.process)) this.opened = await openEnvironmentStore(this.config, { create: true, reporter: this.reporter });
  }

  async list({ check }: { check?: { timeoutMs: number } }): Promise<Listing> {
    const { ctx, config, reporter } = this;
    const { statuses, undeclared } = await listLocalConnections({ config, env: ctx.env, now: ctx.now(), reporter });
    if (!check || statuses.length === 0) return { target: "local", statuses, undeclared };
    return { target: "local", ...(await checkLocal(ctx, config, reporter, check.timeoutMs)) };
  }

  warnRefusals(): void {}

  async loginTargets({ ids, all }: { ids: readonly string[]; all: boolean }): Promise<ConnectionConfig[]> {
    const { ctx, config } = this;
    if (!all) {
      const { findConnections } = await import("../config/lookup.ts");
      const targets = findConnections(config, ids);
      await this.openForLogin(targets);
      return targets;
    }
    await this.openForLogin(config.connections);
    const stored = storedState(this.opened ? storedRows(this.opened) : { credentials: [], open: [] });
    // The OAuth connections without a usable stored credential.
    const lacking = new Set(localStatuses(config, stored, ctx.env, ctx.now()).filter((s) => s.auth === "oauth" && !s.usable).map((s) => s.id));
    return config.connections.filter((c) => lacking.has(c.id));
  }

  async authorize(connection: ConnectionConfig, options: AuthorizeOptions): Promise<Authorized> {
    const { ctx, config, reporter } = this;
    if (connection.auth) {
      return { result: "static", id: connection.id, tokenEnv: connection.auth.tokenEnv, tokenEnvSet: Boolean(ctx.env[connection.auth.tokenEnv]) };
    }
    if (isLocalServer(connection)) {
      const { localVariables } = await import("../config/templates.ts");
      return { result: "local", id: connection.id, unsetEnv: localVariables(connection.process).filter((name) => ctx.env[name] === undefined) };
    }
    await this.openForLogin([connection]);
    const store = this.opened!.store;
    const { login } = await import("../auth/login.ts");
    // A corrupt stored row must not stand in the way of the login that replaces it.
    const previous = (() => {
      try {
        return store.getCredential(connection.id);
      } catch {
        return undefined;
      }
    })();
    const result = await login({
      ctx,
      connection,
      store,
      steps: this.loginSteps(),
      ...(options.port !== undefined ? { port: options.port } : {}),
      timeoutMs: options.timeoutMs,
      openBrowser: options.browser,
    });
    if (previous && (result.open || previous.url !== connection.url)) {
      // The credential for the old url is replaced (or, the server now needing none, dropped);
      // it is not left valid at its server.
      const { revokeCredentials } = await import("../auth/revoke.ts");
      await revokeCredentials([previous], { ctx, reporter, storePath: store.path });
    }
    const tools = await countTools(ctx, config, connection, reporter);
    if (result.open) return { result: "open", id: result.id, tools };
    const { id, issuer, scopes, expiresAt, refreshable } = result;
    return { result: "authorized", target: "local", id, issuer, scopes, expiresAt, refreshable, tools };
  }

  async tools(connection: ConnectionConfig, options: ToolsOptions): Promise<ListedTool[]> {
    const { ctx, config, reporter } = this;
    const [{ withConnection }, { listAllTools }] = await Promise.all([import("../mcp/step-up.ts"), import("../mcp/connect.ts")]);
    const { requestTimeoutMs } = options;
    return withConnection(
      { ctx, config, connection, reporter, login: { timeoutMs: options.timeoutMs, openBrowser: options.browser, steps: this.loginSteps() }, requestTimeoutMs },
      (client, signal) => listAllTools(client, { signal, requestTimeoutMs }),
    );
  }

  call(request: CallRequest): Promise<CallResult> {
    return callTool(this.ctx, this.config, this.reporter, this.loginSteps(), request);
  }

  toolSource({ timeoutMs }: { timeoutMs: number }): ToolSource {
    return localToolSource(this.ctx, this.config, this.reporter, timeoutMs);
  }

  async apply(request: ApplyRequest): Promise<Applied> {
    const { ctx, config, reporter } = this;
    const { applyLocal } = await import("../apply/local.ts");
    const result = await applyLocal({
      config,
      dryRun: request.dryRun,
      reporter,
      revoke: ctx,
      confirm: (changes) => request.confirm({ target: "local", changes }),
    });
    return { target: "local", dbPath: config.dbPath, result };
  }

  async servedLock(): Promise<undefined> {
    return undefined;
  }

  async forget(id: string): Promise<"done"> {
    await forgetLocally(this.ctx, this.config, id, this.reporter);
    return "done";
  }

  close(): void {
    this.opened?.store.close();
    this.opened = undefined;
  }
}

/**
 * Every connection probed as `subs mcp tools` would open it (src/mcp/open.ts), so the check says
 * what a command would meet: a variable unset or a url changed fail before any request, a
 * connection with nothing stored is tried without a credential. Returns the statuses as they are
 * after the check (status/check.ts, statusAfterCheck).
 */
async function checkLocal(
  ctx: Context,
  config: Config,
  reporter: Reporter,
  timeoutMs: number,
): Promise<{ checks: Map<string, ConnectionCheck>; statuses: ConnectionStatus[]; undeclared: CredentialRow[] }> {
  const [{ unauthenticatedInitialize }, { probe }, { statusAfterCheck }] = await Promise.all([
    import("../auth/discovery.ts"),
    import("./probe.ts"),
    import("../status/check.ts"),
  ]);
  const checks = await probe(ctx, reporter, {
    targets: config.connections.map((connection) => ({ connection })),
    source: localToolSource(ctx, config, reporter, timeoutMs),
    reach: async (connection, signal) => {
      // Never asked of a local server (checkConnections): it is reached by starting it.
      if (connection.url === undefined) return;
      const response = await unauthenticatedInitialize(connection.url, ctx.fetch, signal);
      await response.body?.cancel().catch(() => {});
    },
    timeoutMs,
    signal: ctx.signal,
  });
  // Read again: the check may have refreshed, deleted (a rejected refresh) or recorded (an open server).
  const after = await listLocalConnections({ config, env: ctx.env, now: ctx.now(), reporter });
  return { checks, statuses: after.statuses.map((s) => statusAfterCheck(s, checks.get(s.id)!)), undeclared: after.undeclared };
}

/**
 * Tool lists straight from the MCP servers. `timeoutMs` is the command's own timeout for one
 * list, handed to the SDK too, whose requests otherwise give up after its default 60 s, before a
 * longer `--timeout` would. `reporter` hears what opening the db did.
 */
function localToolSource(ctx: Pick<Context, "env" | "fetch" | "now">, config: Config, reporter: Reporter, timeoutMs: number): ToolSource {
  const load = () => Promise.all([import("../mcp/open.ts"), import("../mcp/connect.ts")]);
  return {
    target: "local",
    ready: async () => void (await load()),
    async listTools(connection, signal) {
      const [{ openConnection }, { listAllTools }] = await load();
      // Every HTTP request of this connection carries the timeout/Ctrl-C signal, so an abort
      // also ends requests the SDK started without one (its connect and SSE fallback).
      const fetchUntilAborted: typeof globalThis.fetch = (input, init) =>
        ctx.fetch(input, { ...init, signal: init?.signal ? AbortSignal.any([init.signal, signal]) : signal });
      const client = await openConnection({ ctx: { ...ctx, fetch: fetchUntilAborted }, config, connection, signal, reporter, requestTimeoutMs: timeoutMs });
      try {
        return await listAllTools(client, { signal, requestTimeoutMs: timeoutMs });
      } finally {
        await client.close().catch(() => {});
      }
    },
  };
}

/** Tools the server offers with the new credential; a failure here does not undo the login. */
async function countTools(ctx: Context, config: Config, connection: ConnectionConfig, reporter: Reporter): Promise<number | null> {
  const [{ openConnection }, { listAllTools }] = await Promise.all([import("../mcp/open.ts"), import("../mcp/connect.ts")]);
  // A deadline that holds under GC (src/http/deadline.ts).
  const deadline = withDeadline(ctx.signal, 15_000);
  const { signal } = deadline;
  try {
    const client = await openConnection({ ctx, config, connection, signal });
    try {
      return (await listAllTools(client, { signal })).length;
    } finally {
      await client.close().catch(() => {});
    }
  } catch (error) {
    if (ctx.signal.aborted) throw error;
    reporter.warn(`logged in, but listing ${possessive(connection.id)} tools failed: ${error instanceof Error ? error.message : String(error)}`);
    return null;
  } finally {
    deadline.clear();
  }
}

async function callTool(ctx: Context, config: Config, reporter: Reporter, steps: (step: LoginStep) => void, request: CallRequest): Promise<CallResult> {
  const { findConnection } = await import("../config/lookup.ts");
  const connection = findConnection(config, request.id);
  const [{ withConnection }, { ErrorCode }] = await Promise.all([import("../mcp/step-up.ts"), import("@modelcontextprotocol/sdk/types.js")]);
  request.events?.onStart?.(connection);
  const { tool, requestTimeoutMs } = request;
  return withConnection(
    { ctx, config, connection, reporter, login: { timeoutMs: request.timeoutMs, openBrowser: request.browser, steps }, requestTimeoutMs },
    async (client, signal) => {
      const call = client.callTool({ name: tool, arguments: request.args }, undefined, {
        signal,
        timeout: requestTimeoutMs,
        // A long tool that reports progress (MCP "Progress" notifications) is working, not
        // silent: each report restarts the wait, and a terminal shows it.
        resetTimeoutOnProgress: true,
        onprogress: (progress) => request.events?.onProgress?.(progress),
      });
      // A name the server does not have fails as a protocol error (MCP "Tools: Error Handling",
      // -32602) or, from older servers, as a tool error: either way, the server's own list says
      // whether the name was the problem, and which it has instead. Asked only after a failure.
      const unknown = async () => {
        const { listAllTools } = await import("../mcp/connect.ts");
        const names = (await listAllTools(client, { signal, requestTimeoutMs }).catch(() => undefined))?.map((t) => t.name);
        return names !== undefined && !names.includes(tool) ? await unknownTool(connection.id, tool, names) : undefined;
      };
      const answered = await call.catch(async (error: unknown) => {
        if ((error as { code?: unknown }).code === ErrorCode.InvalidParams) throw (await unknown()) ?? error;
        throw error;
      });
      if (answered.isError === true) {
        const problem = await unknown();
        if (problem) throw problem;
      }
      return answered;
    },
  );
}

/** The failure of a call to a tool the server does not list, naming the names it has that are closest. */
async function unknownTool(id: string, tool: string, names: readonly string[]): Promise<SubsError> {
  const { closestNames } = await import("../config/closest.ts");
  const near = closestNames(tool, names, 3);
  const listed = `\`subs mcp tools ${id}\` lists its ${names.length} tool${names.length === 1 ? "" : "s"}`;
  // The names are the server's: each shown in the visible form output/untrusted.ts gives it.
  return failed(`${id} has no tool named ${escaped(tool)}`, {
    code: "unknown_tool",
    hint: near.length > 0 ? `did you mean ${near.map((n) => `\`${escaped(n)}\``).join(", ")}? (${listed})` : listed,
  });
}

/** Deletes what the db holds for `id` and revokes its credential where the server offers it (RFC 7009). */
async function forgetLocally(ctx: Context, config: Config, id: string, reporter: Reporter): Promise<void> {
  const { openStore } = await import("../store/store.ts");
  const opened = await openStore({ dbPath: config.dbPath, create: false, root: path.dirname(config.path) });
  if (!opened) return;
  for (const warning of opened.warnings) reporter.warn(warning);
  const { store } = opened;
  try {
    const row = store.exclusive(() => {
      const found = store.getCredential(id);
      store.deleteCredentials([id]);
      return found;
    });
    if (!row) return;
    reporter.info(`Deleted the stored credential of ${id} from ${path.relative(ctx.cwd, config.dbPath) || config.dbPath}.`);
    const { revokeCredentials } = await import("../auth/revoke.ts");
    await revokeCredentials([row], { ctx, reporter, storePath: store.path });
  } finally {
    store.close();
  }
}
