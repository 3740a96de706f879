// `--http [HOST:]PORT` for `subs agent serve` and `subs mcp proxy`. Kept apart from
// http.ts so a command can check its flags before loading the SDK's HTTP transport (rule 7).
import { usage } from "../errors.ts";

/**
 * The hosts a served MCP endpoint may bind: loopback only. The MCP transport spec's security
 * warning asks local servers to bind to localhost, not 0.0.0.0; the bearer token and the Origin and
 * Host checks are no substitute for not being reachable from the network at all.
 */
export const LOOPBACK_HOSTS = ["127.0.0.1", "::1", "localhost"] as const;

export type HttpAddress = { host: string; port: number };

const HINT = "e.g. --http 8931, --http 127.0.0.1:8931 or --http [::1]:0 (0 picks a free port)";

/** `PORT`, `HOST:PORT` or `[IPv6]:PORT`; HOST defaults to 127.0.0.1. */
export function parseHttpAddress(spec: string): HttpAddress {
  const text = spec.trim();
  let host = "127.0.0.1";
  let portText = text;
  const bracketed = /^\[([^\]]*)\]:(.*)$/.exec(text);
  if (bracketed) {
    host = bracketed[1]!;
    portText = bracketed[2]!;
  } else if (text.includes(":")) {
    const at = text.lastIndexOf(":");
    host = text.slice(0, at);
    portText = text.slice(at + 1);
    // An unbracketed IPv6 address ("::1:8931") is ambiguous: the last group may be the port.
    if (host.includes(":")) throw usage(`--http ${spec}: write an IPv6 address in brackets`, { hint: "e.g. --http [::1]:8931" });
  }
  return { host: checkLoopback(host, spec), port: checkPort(portText, spec) };
}

export function checkLoopback(host: string, spec = host): string {
  const bare = host.startsWith("[") && host.endsWith("]") ? host.slice(1, -1) : host;
  const normal = bare.toLowerCase();
  if (!(LOOPBACK_HOSTS as readonly string[]).includes(normal)) {
    throw usage(`--http ${spec}: ${bare === "" ? "no host" : `${bare} is not a loopback address`}; subs serves MCP on loopback only`, {
      hint: `use 127.0.0.1, ::1 or localhost (${HINT})`,
    });
  }
  return normal;
}

export function checkPort(text: string | number, spec = String(text)): number {
  const port = typeof text === "number" ? text : /^\d{1,5}$/.test(text) ? Number(text) : Number.NaN;
  if (!Number.isInteger(port) || port < 0 || port > 65535) throw usage(`--http ${spec}: the port must be a number from 0 to 65535`, { hint: HINT });
  return port;
}
