import { randomInt } from "node:crypto";
import net from "node:net";

// A URL whose every connection is refused. A port taken from a server and closed again is not:
// the kernel hands it to the next server that asks for port 0 (another test, another file running
// beside it), and the "down" server then answers. Ports below 1024 are outside the ephemeral range
// (ip_local_port_range) no test server is ever given, so one that refuses now keeps refusing. None
// of these is on the Fetch standard's bad-port list (1, 7, 9, …), which fetch refuses without
// connecting at all ("fetch failed"), a failure users do not meet.
const CANDIDATES = [2, 3, 4, 5, 6, 8];

export async function refusedUrl(pathname = "/mcp"): Promise<string> {
  for (const port of CANDIDATES) {
    if (await refuses(port)) return `http://127.0.0.1:${port}${pathname}`;
  }
  throw new Error(`every one of ports ${CANDIDATES.join(", ")} on 127.0.0.1 accepts connections; the tests need one that refuses`);
}

function refuses(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = net.connect({ host: "127.0.0.1", port });
    socket.once("connect", () => {
      socket.destroy();
      resolve(false);
    });
    socket.once("error", (e: NodeJS.ErrnoException) => resolve(e.code === "ECONNREFUSED"));
  });
}

/** For assert.rejects: a fetch that failed because nothing listens where it went (ECONNREFUSED). */
export function connectionRefused(error: unknown): boolean {
  return error instanceof TypeError && (error.cause as { code?: unknown } | undefined)?.code === "ECONNREFUSED";
}

/**
 * A port free now and outside the ephemeral range, for a test that closes its listener and
 * listens on it again later (a fixed `--port`, a Postgres stopped and started): a port the kernel
 * handed out for port 0 goes to the next test server that asks, here or in a file running beside.
 */
export async function unusedPort(): Promise<number> {
  for (let tries = 0; tries < 100; tries++) {
    const port = 20000 + randomInt(12000);
    const free = await new Promise<boolean>((resolve) => {
      const server = net.createServer();
      server.once("error", () => resolve(false));
      server.listen(port, "127.0.0.1", () => server.close(() => resolve(true)));
    });
    if (free) return port;
  }
  throw new Error("100 ports tried between 20000 and 31999 on 127.0.0.1, none free");
}
