// Tool lists straight from the MCP servers, with the credential the file says each uses
// (src/mcp/open.ts). The MCP SDK loads only when a list is fetched (issue 6).
import type { Config } from "../config/types.ts";
import type { Context } from "../context.ts";
import type { Reporter } from "../report.ts";
import type { ToolSource } from "./fetch.ts";

export type LocalToolSourceOptions = {
  /** Hears what opening the db did (a deleted section's credential deleted and revoked). */
  reporter: Reporter;
  /**
   * The command's own timeout for one list. Handed to the SDK too, whose requests otherwise give
   * up after its default 60 s, before a longer `--timeout` would.
   */
  timeoutMs: number;
};

export function localToolSource(ctx: Pick<Context, "env" | "fetch" | "now">, config: Config, options: LocalToolSourceOptions): ToolSource {
  const { reporter, timeoutMs } = options;
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
