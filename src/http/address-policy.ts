// Which addresses a server that acts for others may send requests to. The deployment fetches what
// its users name: an MCP server's url (declared by any `apply` token), and every endpoint that
// server's metadata names (an authorization server, its registration and token endpoints). Left
// alone, a declaration could make it POST to an admin page on its own loopback, to a cloud's
// metadata service (169.254.169.254) or anywhere on its private network, and read the answer.
// So unless its operator allows them, it reaches public addresses only: every special-purpose
// block of the IANA registries (RFC 6890 and its updates) is refused, checked on the address each
// socket actually connects to, after DNS, so a name that resolves (or rebinds) to a private
// address is refused like the address itself.
import { lookup as dnsLookup, type LookupAddress } from "node:dns";
import { BlockList, isIP, type LookupFunction } from "node:net";
import { AddressNotAllowed } from "./address-refusal.ts";
import type { Connection } from "./mcp-fetch.ts";

export { AddressNotAllowed, addressRefusal, ALLOW_PRIVATE_HINT } from "./address-refusal.ts";

/** IPv4 blocks that are not the public internet (IANA IPv4 Special-Purpose Address Registry). */
const V4: ReadonlyArray<[string, number]> = [
  ["0.0.0.0", 8], // "this network"
  ["10.0.0.0", 8], // private (RFC 1918)
  ["100.64.0.0", 10], // shared address space, carrier-grade NAT (RFC 6598)
  ["127.0.0.0", 8], // loopback
  ["169.254.0.0", 16], // link-local, cloud metadata services
  ["172.16.0.0", 12], // private
  ["192.0.0.0", 24], // IETF protocol assignments
  ["192.0.2.0", 24], // documentation
  ["192.88.99.0", 24], // 6to4 relay anycast (deprecated)
  ["192.168.0.0", 16], // private
  ["198.18.0.0", 15], // benchmarking
  ["198.51.100.0", 24], // documentation
  ["203.0.113.0", 24], // documentation
  ["224.0.0.0", 4], // multicast
  ["240.0.0.0", 4], // reserved, and the limited broadcast address
];

/** IPv6 blocks that are not the public internet (IANA IPv6 Special-Purpose Address Registry). */
const V6: ReadonlyArray<[string, number]> = [
  ["::", 96], // unspecified, loopback, IPv4-compatible (deprecated)
  ["64:ff9b:1::", 48], // local-use IPv4/IPv6 translation
  ["100::", 64], // discard-only
  ["2001::", 32], // Teredo
  ["2001:10::", 28], // ORCHID
  ["2001:20::", 28], // ORCHIDv2
  ["2001:db8::", 32], // documentation
  ["fc00::", 7], // unique local
  ["fe80::", 10], // link-local
  ["fec0::", 10], // site-local (deprecated)
  ["ff00::", 8], // multicast
];

const special = new BlockList();
for (const [net, prefix] of V4) special.addSubnet(net, prefix, "ipv4");
for (const [net, prefix] of V6) special.addSubnet(net, prefix, "ipv6");

/** The IPv4 address an IPv6 one carries: NAT64 (64:ff9b::/96, RFC 6052) or 6to4 (2002::/16, RFC 3056). */
function embeddedV4(address: string): string | undefined {
  const groups = expandV6(address);
  if (!groups) return undefined;
  const quad = (hi: number, lo: number) => `${hi >> 8}.${hi & 255}.${lo >> 8}.${lo & 255}`;
  if (groups[0] === 0x64 && groups[1] === 0xff9b && groups.slice(2, 6).every((g) => g === 0)) return quad(groups[6]!, groups[7]!);
  if (groups[0] === 0x2002) return quad(groups[1]!, groups[2]!);
  return undefined;
}

/** The eight 16-bit groups of an IPv6 address (a dotted IPv4 tail included). */
function expandV6(address: string): number[] | undefined {
  let text = address.toLowerCase();
  const tail = /(\d+)\.(\d+)\.(\d+)\.(\d+)$/.exec(text);
  if (tail) {
    const [a, b, c, d] = tail.slice(1).map(Number) as [number, number, number, number];
    text = `${text.slice(0, tail.index)}${((a << 8) | b).toString(16)}:${((c << 8) | d).toString(16)}`;
  }
  const [head, rest] = text.split("::") as [string, string | undefined];
  const part = (s: string | undefined) => (s ? s.split(":").map((g) => parseInt(g, 16)) : []);
  const left = part(head);
  const right = part(rest);
  const groups = rest === undefined ? left : [...left, ...Array(8 - left.length - right.length).fill(0), ...right];
  return groups.length === 8 && groups.every((g) => Number.isInteger(g) && g >= 0 && g <= 0xffff) ? groups : undefined;
}

/** Whether `address` (an IP address, no brackets) is on the public internet. */
export function isPublicAddress(address: string): boolean {
  const family = isIP(address);
  if (family === 4) return !special.check(address, "ipv4");
  if (family !== 6) return false;
  // An IPv4-mapped address (::ffff:a.b.c.d) is checked against the IPv4 blocks by BlockList itself.
  if (special.check(address, "ipv6")) return false;
  const inner = embeddedV4(address);
  return inner === undefined || !special.check(inner, "ipv4");
}

/** One entry of an operator's allow list: an address or a block, and a port or any. */
export type AllowEntry = { net: string; prefix: number; family: "ipv4" | "ipv6"; port: number | undefined; text: string };

/** `all` (any address), or the addresses beyond the public ones that are allowed. */
export type Allowed = "all" | readonly AllowEntry[];

/**
 * An allow list as an operator writes it: entries separated by commas or spaces, each an address
 * or a CIDR block with an optional port, IPv6 in brackets when a port follows: `10.0.0.0/8`,
 * `127.0.0.1:8443`, `[fd00::1]:443`, `fd00::/8`; or `all`. Throws an Error naming the entry.
 */
export function parseAllowList(text: string): Allowed {
  const entries = text.split(/[\s,]+/).filter(Boolean);
  if (entries.length === 1 && entries[0]!.toLowerCase() === "all") return "all";
  return entries.map((entry) => {
    const match = /^\[([0-9A-Fa-f:.]+)\](?:\/(\d{1,3}))?(?::(\d{1,5}))?$/.exec(entry) ?? /^([0-9.]+)(?:\/(\d{1,2}))?(?::(\d{1,5}))?$/.exec(entry) ?? /^([0-9A-Fa-f:.]*:[0-9A-Fa-f:.]*)(?:\/(\d{1,3}))?()$/.exec(entry);
    const family = match ? isIP(match[1]!) : 0;
    const prefix = match?.[2] === undefined ? (family === 4 ? 32 : 128) : Number(match[2]);
    const port = match?.[3] ? Number(match[3]) : undefined;
    if (!match || family === 0 || prefix > (family === 4 ? 32 : 128) || (port !== undefined && (port < 1 || port > 65535))) {
      throw new Error(`${JSON.stringify(entry)} is not an address or a CIDR block with an optional port (10.0.0.0/8, 127.0.0.1:8443, [fd00::1]:443, or all)`);
    }
    return { net: match[1]!, prefix, family: family === 4 ? "ipv4" : "ipv6", port, text: entry };
  });
}

export class AddressPolicy {
  readonly #allowed: Allowed;
  readonly #lists: Array<{ list: BlockList; port: number | undefined }>;

  constructor(allowed: Allowed) {
    this.#allowed = allowed;
    this.#lists =
      allowed === "all"
        ? []
        : allowed.map((e) => {
            const list = new BlockList();
            list.addSubnet(e.net, e.prefix, e.family);
            return { list, port: e.port };
          });
  }

  /** Whether a request may connect to `address` on `port`. */
  allows(address: string, port: number): boolean {
    if (this.#allowed === "all" || isPublicAddress(address)) return true;
    const family = isIP(address) === 4 ? "ipv4" : "ipv6";
    return this.#lists.some((e) => (e.port === undefined || e.port === port) && e.list.check(address, family));
  }

  /** For nodeFetch: an address in the URL is checked at once, a name when its socket resolves it. */
  connection(url: URL): Connection {
    const port = Number(url.port || (url.protocol === "https:" ? 443 : 80));
    const host = url.hostname.replace(/^\[|\]$/g, "");
    if (isIP(host) !== 0) return this.allows(host, port) ? {} : { refused: new AddressNotAllowed(host, host, port) };
    if (this.#allowed === "all") return {};
    const lookup = ((hostname: string, options: { family?: number; all?: boolean; hints?: number }, callback: (...args: unknown[]) => void) => {
      dnsLookup(hostname, { all: true, ...(options.family ? { family: options.family } : {}), ...(options.hints ? { hints: options.hints } : {}) }, (error, addresses: LookupAddress[]) => {
        if (error) return callback(error);
        // Every address the name has, not only the one tried first: a name with one public and one
        // private address would otherwise reach the private one when the public one fails.
        const refused = addresses.find((a) => !this.allows(a.address, port));
        if (refused) return callback(new AddressNotAllowed(hostname, refused.address, port));
        if (options.all) return callback(null, addresses);
        return callback(null, addresses[0]!.address, addresses[0]!.family);
      });
    }) as unknown as LookupFunction;
    return { lookup };
  }
}
