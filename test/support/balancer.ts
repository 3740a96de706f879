// A round-robin stand-in for a load balancer in front of several `subs deployment serve`
// replicas: each HTTP request goes to the next backend, its body and the answer streamed both
// ways unbuffered (so SSE streams and long polls pass), as a plain layer-7 balancer without
// session affinity does. Its URL is the deployment's public URL. A test can hold requests before
// they are forwarded (`hold`), e.g. to make two of them reach the backend at the same moment.
import { createServer, request, type IncomingMessage, type Server } from "node:http";
import type { AddressInfo } from "node:net";

export type Balancer = {
  url: string;
  /** The backends' base URLs, in turn order; replace one to follow a restarted replica. */
  backends: string[];
  /** Which backend index served each request, in arrival order. */
  served: number[];
  /** The backend index the next request goes to. */
  next: number;
  /** Replaces the options' hold from now on (a test's own meeting point); undefined forwards at once. */
  hold?: BalancerOptions["hold"];
  close(): Promise<void>;
};

export type BalancerOptions = {
  /**
   * Sends a request a backend refused the connection for to the next one, as Caddy and nginx
   * configured for several replicas do (docs/deployment-server.md, "Two replicas"); the body is
   * read whole first. Without it a refused connection is a 502.
   */
  retryRefused?: boolean;
  /**
   * Called for each request before it is forwarded: a promise holds it (its body waits unread)
   * until it settles; undefined forwards it at once.
   */
  hold?: (req: IncomingMessage) => Promise<void> | undefined;
};

export async function startBalancer(backends: string[], options: BalancerOptions = {}): Promise<Balancer> {
  const sockets = new Set<import("node:net").Socket>();
  const balancer: Balancer = {
    url: "",
    backends: [...backends],
    served: [],
    next: 0,
    close: () =>
      new Promise<void>((resolve) => {
        server.close(() => resolve());
        for (const s of sockets) s.destroy();
      }),
  };
  const server: Server = createServer(async (req: IncomingMessage, res) => {
    const held = (balancer.hold ?? options.hold)?.(req);
    if (held) await held.catch(() => {});
    if (req.socket.destroyed) return;
    // With retryRefused the body is read first, so that it can be sent to another backend.
    const body = options.retryRefused ? await new Promise<Buffer>((resolve) => {
      const chunks: Buffer[] = [];
      req.on("data", (c: Buffer) => chunks.push(c));
      req.on("end", () => resolve(Buffer.concat(chunks)));
      req.on("error", () => resolve(Buffer.alloc(0)));
    }) : undefined;
    /** The next backend in turn, past those that refused this request's connection. */
    const refused = new Set<number>();
    const pick = () => {
      let index = balancer.next % balancer.backends.length;
      while (refused.has(index)) index = (index + 1) % balancer.backends.length;
      balancer.next = index + 1;
      balancer.served.push(index);
      return { index, target: new URL(req.url ?? "/", balancer.backends[index]) };
    };
    const forward = ({ index, target }: ReturnType<typeof pick>, fresh: boolean) => {
      // `agent: false` for the retry: a connection of its own, never one from the pool.
      const upstream = request(target, { method: req.method, headers: { ...req.headers, host: target.host }, ...(fresh ? { agent: false } : {}) }, (answer) => {
        res.writeHead(answer.statusCode ?? 502, answer.headers);
        // At once, as a balancer does: node:http would hold them until the first byte of the body,
        // which for an event stream may be a keep-alive comment many seconds later.
        res.flushHeaders();
        answer.pipe(res);
        res.on("close", () => answer.destroy());
      });
      upstream.on("error", (error: NodeJS.ErrnoException) => {
        // A backend that refuses the connection got nothing: Caddy (lb_try_duration) and nginx
        // (proxy_next_upstream error) send any request to the next one.
        if (body && error.code === "ECONNREFUSED" && !res.headersSent && refused.add(index).size < balancer.backends.length) {
          return void forward(pick(), fresh).end(body);
        }
        // A kept-alive connection the backend closed as this request went out on it: a balancer
        // (Caddy's Go transport, nginx's proxy_next_upstream) sends an idempotent request again on
        // a new connection; a POST it cannot know was not received, so it answers 502.
        if (!fresh && upstream.reusedSocket && !res.headersSent && (req.method === "GET" || req.method === "HEAD")) return void forward({ index, target }, true).end(body);
        if (!res.headersSent) res.writeHead(502, { "content-type": "text/plain" }).end("backend unreachable\n");
        else res.destroy();
      });
      res.on("close", () => {
        if (!res.writableFinished) upstream.destroy();
      });
      return upstream;
    };
    const upstream = forward(pick(), false);
    if (body) upstream.end(body);
    else req.pipe(upstream);
  });
  // An idle connection is closed by the client, never by the balancer: the tests' fetch (undici)
  // drops one after about 4 s, on a timer with a one-second tick, which node:http's default 5 s
  // would race (a request sent as the balancer closes its socket fails "other side closed" on a
  // loaded machine). 0 also sends no Keep-Alive hint, so undici keeps its 4 s; close() ends them.
  server.keepAliveTimeout = 0;
  server.on("connection", (s) => {
    sockets.add(s);
    s.on("close", () => sockets.delete(s));
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  balancer.url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  return balancer;
}

export type MeetingPoint = {
  /** How many requests `match` picked so far. */
  arrived: number;
  /** True once the second arrived while the first was held: both then went on together. */
  met: boolean;
  /** A balancer's hold. */
  hold(req: IncomingMessage): Promise<void> | undefined;
  /** Clears the deadline's timer. */
  end(): void;
};

/**
 * Where a race is made rather than hoped for: the first two requests `match` picks wait for each
 * other, then are forwarded in the same turn of the event loop; later ones pass. After `ms` the first
 * goes on alone and `met` stays false, so a test that needs the race fails instead of hanging or
 * passing without it.
 */
export function meetingPoint(match: (req: IncomingMessage) => boolean, ms = 30_000): MeetingPoint {
  let release!: () => void;
  const together = new Promise<void>((resolve) => (release = resolve));
  const timer = setTimeout(() => release(), ms);
  const point: MeetingPoint = {
    arrived: 0,
    met: false,
    hold(req) {
      if (!match(req)) return undefined;
      point.arrived++;
      if (point.arrived > 2) return undefined;
      if (point.arrived === 2) {
        point.met = true;
        release();
      }
      return together;
    },
    end: () => clearTimeout(timer),
  };
  return point;
}
