// The operator's catalog (--catalog): the only MCP server URLs the deployment uses. A PUT of any
// other url is refused (docs/deployment-protocol.md section 3.2); a connection declared before the
// catalog was turned on, or before its url left it, stays declared but is refused wherever it
// would be used: no consent starts or finishes for it, its tools are not listed, an agent's session
// neither offers nor calls them, and its credential is neither refreshed nor revoked. The
// deployment sends nothing on its behalf; the credential is kept, so the connection is authorized
// again once its url is back in the catalog (docs/deployment-server.md, "The catalog").
import type { Log } from "./ops.ts";
import type { ConnectionRecord, DeploymentStore } from "./store/types.ts";

export const NOT_IN_CATALOG = "url_not_in_catalog";

/** Whether the deployment may use `url`: every url when there is no catalog; else exact string match, as a PUT is checked. */
export const inCatalog = (catalog: readonly string[] | undefined, url: string): boolean => catalog === undefined || catalog.includes(url);

/** What a refused connection's answers and errors say (section 2, `refused`). */
export const notInCatalogMessage = (c: Pick<ConnectionRecord, "id" | "url">) => `${c.id}: ${c.url} is not in this deployment's catalog`;

/** At start: the declared connections the catalog leaves out, for the operator (they would otherwise fail only when used). */
export async function warnOutsideCatalog(store: DeploymentStore, catalog: readonly string[] | undefined, log: Log): Promise<void> {
  if (catalog === undefined) return;
  let declared: ConnectionRecord[];
  try {
    declared = await store.listConnections();
  } catch (error) {
    // A store that does not answer now fails no start: requests say so (503) until it does.
    log("warn", "could not list the declared connections to check them against the catalog", { error: error instanceof Error ? error.message : String(error) });
    return;
  }
  const outside = declared.filter((c) => !inCatalog(catalog, c.url));
  if (outside.length === 0) return;
  log("warn", "declared connections outside the catalog are refused until their url is in it or they are deleted", {
    connections: outside.map((c) => ({ id: c.id, url: c.url })),
  });
}
