// Debian's Caddy in front of the tests' replicas, with the site block docs/deployment-server.md
// gives for two replicas, as written there: only its address and its upstreams' addresses are
// replaced by the test's, and global options keep it to its own files and this one port.
import { spawn, type ChildProcess } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { DEBIAN_PEERS, ensureDebian } from "../../scripts/tools.mjs";
import { REPO } from "./cli.ts";
import { unusedPort } from "./ports.ts";
import { stopChild, waitFor } from "./wait.ts";

const MARKER = "<!-- two-replica caddy:";

/** The Caddyfile block that follows the marker in docs/deployment-server.md. */
export function documentedCaddyfile(): string {
  const doc = readFileSync(path.join(REPO, "docs", "deployment-server.md"), "utf8");
  const at = doc.indexOf(MARKER);
  if (at < 0) throw new Error(`docs/deployment-server.md has no ${MARKER} block`);
  const block = /```caddyfile\n([\s\S]*?)```/.exec(doc.slice(at));
  if (!block) throw new Error("no ```caddyfile block after the marker in docs/deployment-server.md");
  return block[1]!;
}

export type RunningCaddy = { url: string; log: () => string; close(): Promise<void> };

/** A port for Caddy, chosen before the replicas start: their public URL is its URL. */
export async function caddyAddress(): Promise<string> {
  ensureDebian(DEBIAN_PEERS, "test/support/caddy.ts");
  return `http://127.0.0.1:${await unusedPort()}`;
}

/** Caddy at `url` (from caddyAddress) with the documented block, its upstreams `backends` ("127.0.0.1:port"). */
export async function startCaddy(url: string, backends: string[]): Promise<RunningCaddy> {
  const documented = documentedCaddyfile();
  if (!documented.includes("subs.example.com {") || !documented.includes("reverse_proxy 127.0.0.1:8081 127.0.0.1:8082 {")) {
    throw new Error("the documented Caddyfile no longer has the site address and upstreams this test replaces");
  }
  const site = documented.replace("subs.example.com {", `${url} {`).replace("reverse_proxy 127.0.0.1:8081 127.0.0.1:8082 {", `reverse_proxy ${backends.join(" ")} {`);
  const dir = mkdtempSync(path.join(tmpdir(), "subs-caddy-"));
  // No admin endpoint: a fixed port (2019) two runs at once would share. A grace period, so that
  // a test that failed with streams open still stops it (Caddy's default waits for them for ever).
  writeFileSync(path.join(dir, "Caddyfile"), `{\n\tadmin off\n\tgrace_period 2s\n}\n\n${site}`);
  let output = "";
  const child: ChildProcess = spawn("caddy", ["run", "--config", path.join(dir, "Caddyfile"), "--adapter", "caddyfile"], {
    cwd: dir,
    env: { PATH: process.env.PATH, HOME: dir, XDG_DATA_HOME: path.join(dir, "data"), XDG_CONFIG_HOME: path.join(dir, "config") },
    stdio: ["ignore", "pipe", "pipe"],
  });
  child.stdout!.on("data", (d) => (output += d));
  child.stderr!.on("data", (d) => (output += d));
  const exited = new Promise<void>((resolve) => child.once("exit", () => resolve()));
  let gone = false;
  void exited.then(() => (gone = true));
  const close = async () => {
    await stopChild(child, () => `caddy; its output:\n${output}`);
    rmSync(dir, { recursive: true, force: true });
  };
  try {
    await waitFor(
      async () => {
        if (gone) throw new Error(`caddy exited; its output:\n${output}`);
        return (await fetch(`${url}/healthz`).then((r) => r.status).catch(() => 0)) === 200;
      },
      () => `caddy to answer at ${url}; its output:\n${output}`,
    );
  } catch (error) {
    await close();
    throw error;
  }
  return { url, log: () => output, close };
}
