// Request rate limits: which bucket a request is counted against (an API token, or a client
// address) and how its key is named in logs. The buckets themselves are src/infra/shared-limits.ts:
// in Redis with REDIS_URL (one allowance for every process), else in memory.

import { createHash } from "node:crypto";
import type { IncomingMessage } from "node:http";
import ipaddr from "ipaddr.js";
import type { RecentSet } from "../domain/recent-set.js";
import type { AddressRange } from "../infra/trusted-proxies.js";


/**
 * The rate-limit key of a request, given its bearer token's hash (null without one): `token:<hash>`
 * for a token in `known` (authenticated recently on this process), else `addr:<address>`.
 */
export function rateKeyOf(known: RecentSet, tokenHash: string | null, address: string | undefined): string {
  if (tokenHash && known.has(tokenHash)) return `token:${tokenHash}`;
  return `addr:${address ?? "unknown"}`;
}

const normalized = (raw: string): ipaddr.IPv4 | ipaddr.IPv6 | null => {
  try {
    // `[v6]`, `[v6]:port` and `v4:port` as some proxies write them.
    const entry = raw.trim().replace(/^\[(.*)\](:\d+)?$/, "$1").replace(/^(\d+\.\d+\.\d+\.\d+):\d+$/, "$1");
    return ipaddr.process(entry);
  } catch {
    return null;
  }
};

/**
 * The client's address of a request: the socket's peer, unless that peer is a trusted proxy;
 * then X-Forwarded-For read from the right (each proxy appends the address it received from),
 * past every trusted proxy, to the first address that is not one. A peer outside the list is
 * the client whatever it sends (anyone can write the header); an entry that is no address ends
 * the walk at the last trusted hop.
 */
export function clientAddressResolver(trusted: readonly AddressRange[]) {
  const isTrusted = (address: ipaddr.IPv4 | ipaddr.IPv6) => trusted.some(([range, bits]) => range.kind() === address.kind() && address.match(range, bits));
  return (req: Pick<IncomingMessage, "socket" | "headers"> | undefined): string | undefined => {
    const peer = req?.socket?.remoteAddress;
    if (!peer || trusted.length === 0) return peer;
    let hop = normalized(peer);
    if (!hop || !isTrusted(hop)) return peer;
    const header = req.headers["x-forwarded-for"];
    const chain = (Array.isArray(header) ? header.join(",") : (header ?? "")).split(",").filter((s) => s.trim());
    for (let i = chain.length - 1; i >= 0; i--) {
      const next = normalized(chain[i]!);
      if (!next) break;
      hop = next;
      if (!isTrusted(hop)) break;
    }
    return hop.toString();
  };
}

/** The socket's peer (no trusted proxies). */
export const clientAddress = clientAddressResolver([]);

/** A short, stable label for a key in logs (never the token's or virtual key's hash itself). */
export function keyLabel(key: string): string {
  const kind = key.slice(0, key.indexOf(":"));
  return kind === "token" || kind === "vkey" ? `${kind}:${createHash("sha256").update(key).digest("hex").slice(0, 8)}` : key;
}
