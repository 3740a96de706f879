// The file decides where credentials live, once: with [remote] a deployment, else this machine
// (product.md, "The file"). This is the one place that reads [remote] to choose.
//
// A listing loads this file on every run: the deployment's code (zod, the protocol client) is
// imported only when the file names one, and each place loads its heavy parts (the MCP SDK, the
// OAuth flow) inside the operation that needs them (CONTRIBUTING.md, rule 7).
import { localBackend } from "./local.ts";
import type { Backend, BackendOptions } from "./types.ts";

export type { Backend } from "./types.ts";

export async function backendFor(options: BackendOptions): Promise<Backend> {
  if (!options.config.remote) return localBackend(options);
  const { deploymentBackend } = await import("./deployment.ts");
  return deploymentBackend(options, options.config.remote);
}
