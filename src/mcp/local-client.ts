// An MCP client session with a local server (src/mcp/local-server.ts), started when first needed.
// A serve shares one process among all its sessions (`shared`): it starts once per subs process
// and runs until the serve ends (closeSharedServers), so a second MCP client of `subs agent serve
// --http` does not start a second copy. The proxy gives each session its own process: it forwards
// a session's notifications and server requests to that session's client alone, which one shared
// process could not tell apart.
import type { ClientCapabilities } from "@modelcontextprotocol/sdk/types.js";
import { whereIs, type Config, type LocalConnection } from "../config/types.ts";
import { failed, SubsError } from "../errors.ts";
import { answerLimitMiB } from "./answer-cap.ts";
import { localClient, requestOptions, type LocalClient } from "./connect.ts";
import { LocalServerTransport, type LocalServerContext } from "./local-server.ts";

export type LocalClientOptions = {
  ctx: LocalServerContext;
  config: Config;
  connection: LocalConnection;
  /** One process for every session of this subs process (a serve), ended by closeSharedServers. */
  shared?: boolean;
  signal?: AbortSignal;
  /** How long the server may take to answer initialize: its start-up deadline (the SDK's 60 s when unset). */
  requestTimeoutMs?: number;
  capabilities?: ClientCapabilities;
};

/** The shared servers of one subs process, by the process-group registry of its context. */
const pools = new WeakMap<object, Map<string, Promise<LocalClient>>>();


export async function openLocalClient(options: LocalClientOptions): Promise<LocalClient> {
  const registry = options.ctx.processGroups;
  if (!options.shared || !registry) return start(options);
  let pool = pools.get(registry);
  if (!pool) pools.set(registry, (pool = new Map()));
  const id = options.connection.id;
  let started = pool.get(id);
  if (!started) {
    started = start(options).then((client) => {
      client.shared = true;
      // A server that ends (a crash) is started again by the next session that needs it.
      const previous = client.onclose;
      client.onclose = () => {
        if (pool!.get(id) === started) pool!.delete(id);
        previous?.();
      };
      return client;
    });
    pool.set(id, started);
    started.catch(() => {
      if (pool!.get(id) === started) pool!.delete(id);
    });
  }
  return started;
}

/** Ends every shared local server of this subs process (a serve's end). */
export async function closeSharedServers(registry: object | undefined): Promise<void> {
  const pool = registry ? pools.get(registry) : undefined;
  if (!pool) return;
  const clients = [...pool.values()];
  pool.clear();
  await Promise.all(clients.map((started) => started.then((client) => client.end()).catch(() => {})));
}

/** How long a server may take to answer initialize: the command's request timeout, at most MAX_START_MS. */
const DEFAULT_START_MS = 60_000;
const MAX_START_MS = 120_000;
const startDeadline = (options: LocalClientOptions) => Math.min(options.requestTimeoutMs ?? DEFAULT_START_MS, MAX_START_MS);

async function start(options: LocalClientOptions): Promise<LocalClient> {
  const { ctx, connection } = options;
  const limit = { id: connection.id, mib: answerLimitMiB(ctx.env) };
  const transport = new LocalServerTransport(connection, ctx, { limit, configPath: options.config.path });
  const client = localClient(limit, whereIs(connection), options.capabilities);
  let ended: SubsError | undefined;
  transport.onerror = (error) => {
    if (error instanceof SubsError) ended = error;
  };
  try {
    await client.connect(transport, requestOptions({ ...(options.signal ? { signal: options.signal } : {}), requestTimeoutMs: startDeadline(options) }));
  } catch (error) {
    await transport.close().catch(() => {});
    if (error instanceof SubsError) throw error;
    // The process ended before it answered: its own words say why.
    if (ended) throw ended;
    const code = (error as { code?: unknown }).code;
    if (code === -32001) {
      const ms = startDeadline(options);
      throw failed(`${connection.id}: ${whereIs(connection)} did not answer initialize within ${Math.round(ms / 1000)}s; subs stopped it`, {
        code: "timeout",
        hint: `its log: ${transport.logPath}`,
      });
    }
    throw failed(`${connection.id}: ${whereIs(connection)} failed to start: ${error instanceof Error ? error.message : String(error)}`, { hint: `its log: ${transport.logPath}` });
  }
  return client;
}
