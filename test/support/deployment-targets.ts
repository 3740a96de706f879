// The deployments a test of the protocol runs against, as one list: the reference
// (test/support/deployment/server.ts, in this process) and a real `subs deployment serve` process
// (test/support/deployment-serve.ts) on each store the test names. A test written once against a
// Target runs on each, so a rule the real server implements separately is held by the same test as
// the reference. What only the reference can do (fault injection, the v1-only protocol, a clock a
// test moves) stays in tests of the reference alone.
import { randomUUID } from "node:crypto";
import { startDeployment, type Credential, type RunningDeployment } from "./deployment/server.ts";
import { callServed, startServedDeployment, type ServedDeployment, type StoreKind } from "./deployment-serve.ts";

/** The reference deployment's API token (a served one makes its own). */
export const REFERENCE_TOKEN = "deploy-api-token-SECRET";

export type TargetOptions = {
  /** Seconds between polls the deployment asks for. */
  pollInterval?: number;
  /** Seconds an authorization stays pending. */
  authorizationTtl?: number;
  catalog?: string[];
  /** The process's environment (a served deployment only: client secrets, address rules). */
  env?: Record<string, string>;
};

export type TargetDeployment = RunningDeployment & {
  /** An API token with the admin role (the reference accepts only this one). */
  token: string;
  /** The served process, for what only it has (its log, other tokens); undefined for the reference. */
  served: ServedDeployment | undefined;
  /** One request of the protocol to it, with its token; the JSON answer parsed. */
  call(method: string, pathname: string, body?: unknown): Promise<{ status: number; body: any }>;
  /** PUT /v1/mcp/{id}; throws unless it is answered 200 or 201. */
  declare(id: string, url: string, extra?: Record<string, unknown>): Promise<void>;
  /** A credential as if a consent had finished, held once this resolves. */
  hold(id: string, credential: Credential): Promise<void>;
  /**
   * Every /v1 request it has answered so far, none missing: a served process's are read from its
   * log, as it writes it, up to a request sent after them.
   */
  seen(): Promise<string[]>;
};

export type Target = {
  /** "the reference", "subs deployment serve, sqlite", … */
  name: string;
  kind: "reference" | StoreKind;
  start(options?: TargetOptions): Promise<TargetDeployment>;
};

/** The reference and a served deployment on each of `stores` (SQLite alone unless the store matters to the test). */
export function targets(stores: readonly StoreKind[] = ["sqlite"]): Target[] {
  return [
    { name: "the reference", kind: "reference", start: startReference },
    ...stores.map((store): Target => ({ name: `subs deployment serve, ${store}`, kind: store, start: (options) => startServed(store, options) })),
  ];
}

async function startReference(options: TargetOptions = {}): Promise<TargetDeployment> {
  const d = await startDeployment({
    token: REFERENCE_TOKEN,
    ...(options.pollInterval !== undefined ? { pollInterval: options.pollInterval } : {}),
    ...(options.authorizationTtl !== undefined ? { authorizationTtl: options.authorizationTtl } : {}),
    ...(options.catalog ? { catalog: options.catalog } : {}),
  });
  return Object.assign(d, {
    token: REFERENCE_TOKEN,
    served: undefined,
    ...api(d, REFERENCE_TOKEN),
    async hold(id: string, credential: Credential) {
      d.credentials.set(id, credential);
    },
    seen: async () => [...d.requests],
  });
}

async function startServed(store: StoreKind, options: TargetOptions = {}): Promise<TargetDeployment> {
  const d = await startServedDeployment({
    store,
    ...(options.pollInterval !== undefined ? { pollInterval: options.pollInterval } : {}),
    ...(options.authorizationTtl !== undefined ? { authorizationTtl: options.authorizationTtl } : {}),
    ...(options.catalog ? { catalog: options.catalog } : {}),
    ...(options.env ? { env: options.env } : {}),
  });
  return Object.assign(d, {
    served: d,
    ...api(d, d.token),
    async hold(id: string, credential: Credential) {
      d.credentials.set(id, credential);
      await d.settled();
    },
    async seen() {
      // The process logs each request as it ends, in order: once a request sent now is in the
      // log, every one answered before it is too.
      const marker = randomUUID();
      // Not a health probe (one answered 200 is not logged) and not under /v1 (not one of the requests).
      const res = await fetch(`${d.direct}/seen-marker`, { headers: { "x-request-id": marker } });
      await res.body?.cancel();
      const deadline = Date.now() + 30_000;
      while (!d.logs.some((l) => l.request_id === marker)) {
        if (Date.now() > deadline) throw new Error("the deployment's log did not show a request within 30 s");
        await new Promise((r) => setTimeout(r, 10));
      }
      return [...d.requests];
    },
  });
}

function api(d: { url: string }, token: string) {
  const call = (method: string, pathname: string, body?: unknown) => callServed({ url: d.url, token }, method, pathname, body);
  return {
    call,
    async declare(id: string, url: string, extra: Record<string, unknown> = {}) {
      const put = await call("PUT", `/v1/mcp/${id}`, { url, prefix_tools: true, ...extra });
      if (put.status !== 200 && put.status !== 201) throw new Error(`PUT /v1/mcp/${id}: ${put.status} ${JSON.stringify(put.body)}`);
    },
  };
}
