import { lookup as dnsLookup } from "node:dns/promises";
import { isIP, type LookupFunction } from "node:net";
import { addressAllowed, judgeHost, type OutboundPolicy } from "../domain/address-policy.js";

/**
 * The connecting side of the outbound address policy (src/domain/address-policy.ts), for every
 * request Countersign sends where a user chose the URL (webhook deliveries, upstream MCP
 * servers). It lives beside the gateway because the gateway is embeddable on its own and may
 * import only the domain; the webhook sender uses it from services.
 *
 * At connect time, not only at save: the host is resolved once, EVERY address it resolves to
 * must be allowed, and the socket is opened to one of exactly those addresses (the `lookup`
 * handed to node:http answers them, never a second resolution a rebinding DNS server could
 * change). Nothing here follows a redirect.
 */

/** The host resolves to no address the policy allows (or to none at all). */
export class OutboundAddressRefused extends Error {
  override readonly name = "OutboundAddressRefused";
  constructor(
    readonly host: string,
    /** `unresolved`: the name did not resolve (may be passing); `refused`: an address is not allowed. */
    readonly reason: "refused" | "unresolved" = "refused",
  ) {
    super(`${host} does not resolve to an allowed address`);
  }
}

type Resolved = { address: string; family: number };

/** Every address of `hostname` (an IP address stands for itself), all allowed, or OutboundAddressRefused. */
export async function resolveAllowed(hostname: string, policy: OutboundPolicy): Promise<Resolved[]> {
  const host = hostname.replace(/^\[|\]$/g, "");
  // The host as written first (as at save: `localhost` names, metadata names), then what it resolves to.
  const named = judgeHost(host).verdict;
  if (named === "refused" || (named === "private" && !policy.allowPrivate)) throw new OutboundAddressRefused(host);
  let addresses: Resolved[];
  if (isIP(host)) addresses = [{ address: host, family: isIP(host) }];
  else {
    try {
      addresses = await dnsLookup(host, { all: true, verbatim: true });
    } catch {
      // Not resolving and resolving to a refused address read the same: an internal name's
      // existence is not told apart from a typo.
      throw new OutboundAddressRefused(host, "unresolved");
    }
  }
  if (addresses.length === 0) throw new OutboundAddressRefused(host, "unresolved");
  if (addresses.some((a) => !addressAllowed(a.address, policy))) throw new OutboundAddressRefused(host);
  return addresses;
}

/** A node:http `lookup` that answers only `addresses` (already checked). */
export function pinnedLookup(addresses: readonly Resolved[]): LookupFunction {
  return (_hostname, options, callback) => {
    const wanted = options.family === 4 || options.family === 6 ? addresses.filter((a) => a.family === options.family) : [...addresses];
    if (wanted.length === 0) {
      const error: NodeJS.ErrnoException = new Error("no checked address of the requested family");
      error.code = "ENOTFOUND";
      return callback(error, "", 0);
    }
    if (options.all) (callback as unknown as (e: null, all: Resolved[]) => void)(null, wanted);
    else callback(null, wanted[0]!.address, wanted[0]!.family);
  };
}

/**
 * The options node:http needs to reach `url` under the policy: a `lookup` pinned to its checked
 * addresses. Throws OutboundAddressRefused before anything is sent. An IP-address host is
 * checked here (node:net never calls `lookup` for one).
 */
export async function outboundConnectOptions(url: URL, policy: OutboundPolicy): Promise<{ lookup: LookupFunction }> {
  return { lookup: pinnedLookup(await resolveAllowed(url.hostname, policy)) };
}

/** Whether `error` is a refusal by the policy or a socket error (it has a Node error code). */
export function isNetworkFailure(error: unknown): boolean {
  return error instanceof OutboundAddressRefused || typeof (error as { code?: unknown } | null)?.code === "string";
}

/**
 * A refusal or a socket error as one phrase about `subject` ("the upstream", "the receiver")
 * that names what failed and nothing the peer or the resolver said (no address, no message).
 */
export function networkFailure(error: unknown, subject: string): string {
  if (error instanceof OutboundAddressRefused) return `${subject}'s host does not resolve to an allowed address`;
  const code = (error as NodeJS.ErrnoException | null)?.code;
  switch (code) {
    case "ECONNREFUSED":
      return `${subject} refused the connection`;
    case "ECONNRESET":
    case "EPIPE":
      return `${subject} closed the connection`;
    case "ETIMEDOUT":
      return `${subject} did not answer in time`;
    case "ENOTFOUND":
    case "EAI_AGAIN":
      return `${subject}'s host does not resolve to an allowed address`;
    default:
      if (typeof code === "string" && /^(?:ERR_TLS_|ERR_SSL_|CERT_|UNABLE_TO_|DEPTH_ZERO|SELF_SIGNED|EPROTO)/.test(code)) return `${subject}'s TLS handshake failed`;
      return `${subject} is unreachable`;
  }
}
