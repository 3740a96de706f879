// Seeds the environment db with credentials the way a login would leave them, for tests that
// start from a logged-in state.
import { openStore } from "../../src/store/store.ts";
import type { CredentialRow } from "../../src/store/schema.ts";

export async function seedCredentials(dbPath: string, rows: Array<Partial<CredentialRow> & { id: string; url: string }>): Promise<void> {
  const opened = await openStore({ dbPath, create: true });
  if (!opened) throw new Error("could not create the db");
  const now = Date.now();
  try {
    for (const row of rows) {
      opened.store.putCredential({
        // Loopback with nothing listening: a revocation attempt is refused at once, never leaves the machine.
        issuer: "http://127.0.0.1:9",
        resource: row.url,
        client_json: JSON.stringify({ client_id: "client-1" }),
        access_token: `access-${row.id}-SECRET`,
        token_type: "Bearer",
        refresh_token: `refresh-${row.id}-SECRET`,
        expires_at: now + 3600_000,
        refresh_expires_at: null,
        scopes: "read",
        created_at: now,
        updated_at: now,
        ...row,
      });
    }
  } finally {
    opened.store.close();
  }
}
