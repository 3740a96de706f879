// Run by test/net/deadline-gc.test.ts, bundled (script-bundle.ts), as `node --expose-gc`: one
// deadline-bound call against a loopback server that accepts and never answers, with garbage
// collected every 50 ms from the moment it is loaded (as gc-often.cjs does from a process's start). Prints
// {"ms": elapsed, "error": name or message} on stdout.
import net from "node:net";
import type { AddressInfo } from "node:net";
import { revokeCredentials } from "../../src/auth/revoke.ts";
import { withDeadline } from "../../src/http/deadline.ts";
import { silentReporter } from "../../src/report.ts";
import type { CredentialRow } from "../../src/store/schema.ts";

setInterval(() => (globalThis as { gc?: () => void }).gc!(), 50).unref();

const sockets: net.Socket[] = [];
const server = net.createServer((socket) => void sockets.push(socket));
await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
const origin = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
// Ctrl-C's signal, never aborted: the deadline is combined with it, as in the CLI.
const interrupt = new AbortController();
const started = Date.now();
let error = "none";

if (process.argv[2] === "revoke") {
  const row = { id: "gone", issuer: origin, access_token: "at", refresh_token: null } as unknown as CredentialRow;
  await revokeCredentials([row], { ctx: { env: {}, fetch: globalThis.fetch, signal: interrupt.signal }, reporter: silentReporter, storePath: "/nonexistent", timeoutMs: 1000 });
} else {
  const deadline = withDeadline(interrupt.signal, 1000);
  try {
    await fetch(`${origin}/slow`, { signal: deadline.signal });
  } catch (e) {
    error = e instanceof Error ? e.name : String(e);
  } finally {
    deadline.clear();
  }
}

process.stdout.write(JSON.stringify({ ms: Date.now() - started, error }));
sockets.forEach((s) => s.destroy());
server.close();
