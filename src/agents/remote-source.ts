// Tool lists as the deployment sees them: `GET /v1/mcp/{id}/tools` (product.md, "The deployment
// protocol"). The deployment client (src/remote/) makes the request and validates the body; this
// adapts it to a ToolSource, so `subs agent tools` resolves remote lists by the same rules.
import type { ToolSource } from "./fetch.ts";
import type { ConnectorTool } from "./resolve.ts";

/** The one call the adapter needs from the deployment client. */
export type DeploymentToolLister = {
  /** `{"tools": [Tool]}` of `GET /v1/mcp/{id}/tools`, validated. Rejects with a SubsError on failure. */
  listTools(id: string, options: { signal: AbortSignal }): Promise<readonly ConnectorTool[]>;
};

export function remoteToolSource(deployment: DeploymentToolLister): ToolSource {
  return {
    target: "remote",
    listTools: (connection, signal) => deployment.listTools(connection.id, { signal }),
  };
}
