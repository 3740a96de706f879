// A request the process's own address rules kept from leaving (src/http/address-policy.ts), told
// apart from a failure of the network wherever a failed request is worded. Apart from the policy,
// which loads node:net and node:dns, so that wording a failure loads neither.

/** What an operator is told to change when a request is refused for where it would go. */
export const ALLOW_PRIVATE_HINT = "an operator may allow it with --allow-private (docs/deployment-server.md)";

/** A request refused for where it would go; the cause of the fetch failure it is. */
export class AddressNotAllowed extends Error {
  override name = "AddressNotAllowed";
  readonly code = "ADDRESS_NOT_ALLOWED";
  constructor(
    readonly host: string,
    readonly address: string,
    readonly port: number,
  ) {
    const where = `${host.includes(":") ? `[${host}]` : host}:${port}`;
    super(`${where}${host === address ? "" : ` (${address})`} is a loopback, private or special-use address, which this deployment does not reach`);
  }
}

/** The AddressNotAllowed a failed request carries somewhere in its causes. */
export function addressRefusal(error: unknown): AddressNotAllowed | undefined {
  for (let e: unknown = error, depth = 0; e instanceof Error && depth < 6; depth++) {
    if (e instanceof AddressNotAllowed) return e;
    e = e.cause ?? (e as { errors?: unknown[] }).errors?.[0];
  }
  return undefined;
}
