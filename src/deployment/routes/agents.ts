// The agents' routes (docs/deployment-protocol.md sections 3.7 to 3.9) and each agent's MCP
// endpoint, whose transport writes its own answers.
import type { IncomingMessage, ServerResponse } from "node:http";
import { z } from "zod";
import type { AgentRecord, ApiTokenRecord, DeploymentStore } from "../store/types.ts";
import { isValidName } from "../../config/rules.ts";
import { record, requestIdOf, type AuditSink } from "../audit.ts";
import { fail, FilterSchema, IdSchema, issueText, readJson, type Route } from "./answer.ts";

export type AgentEndpoint = (req: IncomingMessage, res: ServerResponse, agent: AgentRecord, token: ApiTokenRecord) => Promise<void>;

/** The fields of an agent, shared by PUT /v1/agents/{name} and each entry of PUT /v1/state. */
export const agentFields = {
  mcp: z.array(z.strictObject({ id: IdSchema, tools: FilterSchema.optional() })),
  tools: z.array(z.string()).default([]),
  agents: z.array(z.string().refine(isValidName, "not a valid agent name")).default([]),
};
export const namesEachConnectionOnce = (b: { mcp: Array<{ id: string }> }) => new Set(b.mcp.map((e) => e.id)).size === b.mcp.length;
const AgentBody = z.strictObject(agentFields).refine(namesEachConnectionOnce, "an mcp entry names the same connection twice");

export function agentRoutes(o: { store: DeploymentStore; agentEndpoint?: AgentEndpoint; audit?: AuditSink }): Route[] {
  const { store } = o;
  return [
    {
      pattern: /^\/v1\/agents\/?$/,
      route: "/v1/agents",
      need: "read",
      methods: ["GET"],
      // The revision before the rows (store/types.ts, revision()); the lock the agents are served
      // under beside them (section 3.10, "The lock"), null when none is held.
      run: async () => {
        const revision = await store.revision();
        return { status: 200, body: { agents: await store.listAgents(), revision, lock: (await store.getLock()) ?? null } };
      },
    },
    {
      pattern: /^\/v1\/agents\/([^/]+)\/?$/,
      route: "/v1/agents/{name}",
      need: "apply",
      methods: ["PUT", "DELETE"],
      run: async (method, req, [name], token) => {
        if (method === "DELETE") {
          if (!(await store.deleteAgent(name!))) return fail(404, "not_found", `no agent ${name}`);
          await record(o.audit, { kind: "agent.delete", actor: token, agent: name!, requestId: requestIdOf(req) });
          return { status: 204 };
        }
        const parsed = AgentBody.safeParse(await readJson(req));
        if (!parsed.success) return fail(400, "invalid_request", issueText(parsed.error));
        if (parsed.data.agents.includes(name!)) return fail(400, "invalid_request", `agent ${name} names itself as a sub-agent`);
        const agent: AgentRecord = { name: name!, mcp: parsed.data.mcp, tools: parsed.data.tools, agents: parsed.data.agents };
        const put = await store.putAgent(agent);
        if (put.outcome === "unknown_connection") return fail(409, "unknown_connection", `not declared: ${put.missing.join(", ")}; declare them first`);
        await record(o.audit, { kind: "agent.declare", actor: token, agent: name!, requestId: requestIdOf(req), detail: { created: put.outcome === "created" } });
        return { status: put.outcome === "created" ? 201 : 200, body: agent };
      },
    },
    {
      pattern: /^\/v1\/agents\/([^/]+)\/mcp\/?$/,
      route: "/v1/agents/{name}/mcp",
      need: "use",
      methods: ["GET", "POST", "DELETE"],
      run: async (_m, req, [name], token, res) => {
        const agent = await store.getAgent(name!);
        if (!agent || !o.agentEndpoint) return fail(404, "not_found", `no agent ${name}`);
        // The transport writes its own answers (JSON or an event stream).
        await o.agentEndpoint(req, res, agent, token);
        return "streamed";
      },
    },
  ];
}
