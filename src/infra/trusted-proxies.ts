// The proxies in front of the API (COUNTERSIGN_TRUSTED_PROXIES), parsed once at start: the
// edge reads a client's address from X-Forwarded-For only when the socket's peer is one of them
// (src/edge/rate-limit.ts).

import ipaddr from "ipaddr.js";

export type AddressRange = [ipaddr.IPv4 | ipaddr.IPv6, number];

/**
 * `10.0.0.0/8, 192.168.1.7, fd00::/8` → address ranges (a bare address is a range of one).
 * Throws with the offending entry on anything else.
 */
export function parseTrustedProxies(raw: string): AddressRange[] {
  return raw
    .split(",")
    .map((entry) => entry.trim())
    .filter(Boolean)
    .map((entry) => {
      try {
        if (entry.includes("/")) {
          const [address, bits] = ipaddr.parseCIDR(entry);
          // ::ffff:10.0.0.0/104 is 10.0.0.0/8: peers are compared as IPv4 (ipaddr.process).
          if (address.kind() === "ipv6" && (address as ipaddr.IPv6).isIPv4MappedAddress() && bits >= 96) return [(address as ipaddr.IPv6).toIPv4Address(), bits - 96] as AddressRange;
          return [address, bits] as AddressRange;
        }
        const address = ipaddr.process(entry);
        return [address, address.kind() === "ipv4" ? 32 : 128] as AddressRange;
      } catch {
        throw new Error(`not an IP address or CIDR range: ${JSON.stringify(entry)}`);
      }
    });
}
