// The connections of an HTTP server that anyone who reaches its port can open, held so that those
// nobody authenticates cannot keep out those that do: the loopback `--http` server of `subs agent
// serve` and `subs mcp proxy` (every program on the machine reaches it) and `subs deployment
// serve` (everyone on the network reaches it).
//
// node:http alone does not: its `maxConnections` refuses the newest connection, the token holder's
// as readily as the thousandth one an attacker left open; and while its headers timeout does end a
// connection that sends nothing, it is looked at only every `connectionsCheckingInterval` (30 s by
// default), so such connections hold their places for the two together, which someone who keeps
// reconnecting turns into for ever.
import type { IncomingMessage, Server } from "node:http";
import type { Socket } from "node:net";

export type ConnectionLimits = {
  /**
   * Open TCP connections. A new one past it ends the oldest connection that has not yet carried an
   * authenticated request (else it is itself refused), so connections nobody authenticates cannot
   * keep out a client that does.
   */
  maxConnections: number;
  /**
   * To send a first whole request (headers and body) after connecting. A connection that has done
   * neither that nor carried an authenticated request by then is closed: shorter than node:http's
   * headers and request timeouts, and exact (its own timer, not node:http's periodic check), so
   * a connection that sends nothing, or trickles a request without a token, holds a place briefly.
   */
  preAuthMs: number;
};

export type GuardedConnections = {
  /** Marks the connection a request came on as authenticated: it is kept as long as node:http keeps it. */
  trust(req: IncomingMessage): void;
};

/** Holds `server`'s connections to `limits`, from the moment it is called. */
export function guardConnections(server: Server, limits: ConnectionLimits): GuardedConnections {
  /** Open sockets, oldest first (a Set keeps insertion order). */
  const open = new Set<Socket>();
  const trusted = new WeakSet<Socket>();
  /** The first request each socket carried: whole by the deadline, or the socket goes. */
  const first = new WeakMap<Socket, IncomingMessage>();

  server.on("request", (req: IncomingMessage) => {
    if (!first.has(req.socket)) first.set(req.socket, req);
  });
  server.on("connection", (socket: Socket) => {
    open.add(socket);
    const deadline = setTimeout(() => {
      // `complete`: the parser has the whole message, whether or not a handler has read its body.
      if (!trusted.has(socket) && first.get(socket)?.complete !== true) socket.destroy();
    }, limits.preAuthMs);
    deadline.unref();
    socket.once("close", () => {
      clearTimeout(deadline);
      open.delete(socket);
    });
    if (open.size <= limits.maxConnections) return;
    let victim = socket;
    for (const held of open) {
      if (!trusted.has(held)) {
        victim = held;
        break;
      }
    }
    open.delete(victim);
    victim.destroy();
  });
  return { trust: (req) => void trusted.add(req.socket) };
}

/**
 * How often node:http looks for requests past their headers or request timeout: its default,
 * 30 s, would let a half-sent request live several times those timeouts.
 */
export const connectionsCheckingInterval = (limits: { headersTimeoutMs: number; requestTimeoutMs: number }) => Math.max(100, Math.min(limits.headersTimeoutMs, limits.requestTimeoutMs) / 4);
