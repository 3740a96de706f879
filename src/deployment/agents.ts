// Agents' MCP endpoints at <public-url>/v1/agents/<name>/mcp: not served yet (404).
import type { Context } from "../context.ts";
import type { OAuth } from "./oauth.ts";
import type { Log, Metrics } from "./ops.ts";
import type { AgentEndpoint } from "./routes/agents.ts";
import type { DeploymentStore } from "./store/types.ts";

export function agentEndpoint(_options: { ctx: Context; store: DeploymentStore; oauth: OAuth; metrics: Metrics; log: Log; publicUrl: string }): AgentEndpoint | undefined {
  return undefined;
}

export async function closeAgentSessions(): Promise<void> {}
