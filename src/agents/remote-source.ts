// Tool lists as the deployment sees them: `GET /v1/mcp/{id}/tools` (product.md, "The deployment
// protocol"). The deployment client (src/remote/) makes the requests and validates the bodies;
// this adapts it to a ToolSource, so `subs agent tools` resolves remote lists by the same rules.
import type { ToolSource } from "./fetch.ts";
import type { ConnectorTool } from "./resolve.ts";

/** What the adapter needs from the deployment client. */
export type DeploymentToolLister = {
  /**
   * `{"tools": [Tool]}` of `GET /v1/mcp/{id}/tools`, validated. Rejects with a SubsError when this
   * connection's list cannot be had (e.g. `needs_login` when the deployment holds no credential),
   * and must stop when `signal` aborts (the per-connection timeout, or Ctrl-C).
   */
  listTools(id: string, options: { signal: AbortSignal }): Promise<readonly ConnectorTool[]>;
  /**
   * One request that fails for the whole deployment (unreachable, a rejected API token) before any
   * connection is asked; its error ends the command instead of marking every connection unavailable.
   */
  check?(): Promise<unknown>;
};

export function remoteToolSource(deployment: DeploymentToolLister): ToolSource {
  return {
    target: "remote",
    ready: async () => {
      await deployment.check?.();
    },
    listTools: (connection, signal) => deployment.listTools(connection.id, { signal }),
  };
}
