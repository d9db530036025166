import ipaddr from "ipaddr.js";

/**
 * Where Countersign may send a request it makes on a user's behalf (a webhook delivery, a
 * connection's upstream MCP server): one policy for every outbound surface, as a table.
 *
 * - `refused`: never, whatever the operator says — link-local (cloud metadata answers at
 *   169.254.169.254 and fd00:ec2::254), "this host" (0.0.0.0 reaches the host itself),
 *   multicast, documentation, benchmarking and reserved ranges, Teredo tunnels.
 * - `private`: loopback and private networks — only when the operator allows them for that
 *   surface (COUNTERSIGN_WEBHOOK_ALLOW_PRIVATE, COUNTERSIGN_UPSTREAM_ALLOW_PRIVATE).
 * - anything the table does not name is public.
 *
 * An IPv6 address that carries an IPv4 address (mapped, compatible, SIIT, NAT64, 6to4) is
 * judged by the IPv4 address it carries: `::ffff:127.0.0.1`, `::127.0.0.1` and
 * `64:ff9b::10.0.0.1` are loopback or private, not "some IPv6 address". The most specific range
 * decides (fd00:ec2::254 is metadata inside the private fc00::/7). Pure: resolving a name and
 * connecting to the checked address is src/gateway/outbound.ts.
 */

export type AddressVerdict = "public" | "private" | "refused";

export type AddressRange = {
  cidr: string;
  /** What the range is, as an error or a log line names it. */
  name: string;
  /** The verdict, or `embedded`: the IPv4 address inside decides. */
  verdict: Exclude<AddressVerdict, "public"> | "embedded";
  /** Addresses in the range, in the forms an attacker would write (the class test sends each). */
  examples: readonly string[];
};

/** The table. An embedded range's examples carry a loopback IPv4 address. */
export const ADDRESS_RANGES: readonly AddressRange[] = [
  // ── always refused ────────────────────────────────────────────────────────────────────────
  { cidr: "0.0.0.0/8", name: "\"this host\" (0.0.0.0 reaches the host itself)", verdict: "refused", examples: ["0.0.0.0", "0.1.2.3"] },
  { cidr: "169.254.0.0/16", name: "IPv4 link-local (cloud metadata)", verdict: "refused", examples: ["169.254.169.254", "169.254.0.1"] },
  { cidr: "100.100.100.200/32", name: "cloud metadata (Alibaba)", verdict: "refused", examples: ["100.100.100.200"] },
  { cidr: "168.63.129.16/32", name: "cloud platform endpoint (Azure)", verdict: "refused", examples: ["168.63.129.16"] },
  { cidr: "192.0.0.0/24", name: "IETF protocol assignments", verdict: "refused", examples: ["192.0.0.8"] },
  { cidr: "192.0.2.0/24", name: "documentation", verdict: "refused", examples: ["192.0.2.1"] },
  { cidr: "198.18.0.0/15", name: "benchmarking", verdict: "refused", examples: ["198.18.0.1"] },
  { cidr: "198.51.100.0/24", name: "documentation", verdict: "refused", examples: ["198.51.100.7"] },
  { cidr: "203.0.113.0/24", name: "documentation", verdict: "refused", examples: ["203.0.113.9"] },
  { cidr: "224.0.0.0/4", name: "multicast", verdict: "refused", examples: ["224.0.0.1", "239.255.255.250"] },
  { cidr: "240.0.0.0/4", name: "reserved or broadcast", verdict: "refused", examples: ["240.0.0.1", "255.255.255.255"] },
  { cidr: "::/128", name: "IPv6 unspecified", verdict: "refused", examples: ["::"] },
  { cidr: "fe80::/10", name: "IPv6 link-local", verdict: "refused", examples: ["fe80::1", "febf::1"] },
  { cidr: "fd00:ec2::254/128", name: "cloud metadata (AWS, IPv6)", verdict: "refused", examples: ["fd00:ec2::254"] },
  { cidr: "ff00::/8", name: "IPv6 multicast", verdict: "refused", examples: ["ff02::1"] },
  { cidr: "100::/64", name: "IPv6 discard", verdict: "refused", examples: ["100::1"] },
  { cidr: "2001::/32", name: "Teredo (the client address inside is obscured)", verdict: "refused", examples: ["2001:0:4136:e378:8000:63bf:80ff:fffe"] },
  { cidr: "2001:db8::/32", name: "IPv6 documentation", verdict: "refused", examples: ["2001:db8::1"] },
  // ── private: only with the operator's flag ────────────────────────────────────────────────
  { cidr: "127.0.0.0/8", name: "loopback", verdict: "private", examples: ["127.0.0.1", "127.1.2.3"] },
  { cidr: "10.0.0.0/8", name: "private network", verdict: "private", examples: ["10.0.0.1"] },
  { cidr: "172.16.0.0/12", name: "private network", verdict: "private", examples: ["172.16.0.1", "172.31.255.254"] },
  { cidr: "192.168.0.0/16", name: "private network", verdict: "private", examples: ["192.168.1.1"] },
  { cidr: "100.64.0.0/10", name: "carrier-grade NAT", verdict: "private", examples: ["100.64.0.1", "100.127.255.254"] },
  { cidr: "::1/128", name: "IPv6 loopback", verdict: "private", examples: ["::1"] },
  { cidr: "fc00::/7", name: "IPv6 unique local", verdict: "private", examples: ["fc00::1", "fd12:3456::1"] },
  { cidr: "fec0::/10", name: "IPv6 site-local (deprecated)", verdict: "private", examples: ["fec0::1"] },
  { cidr: "64:ff9b:1::/48", name: "NAT64 local use", verdict: "private", examples: ["64:ff9b:1::a00:1"] },
  // ── IPv6 carrying an IPv4 address: the IPv4 address decides ───────────────────────────────
  { cidr: "::ffff:0:0/96", name: "IPv4-mapped", verdict: "embedded", examples: ["::ffff:127.0.0.1", "::ffff:7f00:1", "0:0:0:0:0:ffff:127.0.0.1"] },
  { cidr: "::/96", name: "IPv4-compatible", verdict: "embedded", examples: ["::127.0.0.1", "::7f00:1"] },
  { cidr: "::ffff:0:0:0/96", name: "IPv4-translated (SIIT)", verdict: "embedded", examples: ["::ffff:0:127.0.0.1", "::ffff:0:7f00:1"] },
  { cidr: "64:ff9b::/96", name: "NAT64", verdict: "embedded", examples: ["64:ff9b::127.0.0.1", "64:ff9b::7f00:1"] },
  { cidr: "2002::/16", name: "6to4", verdict: "embedded", examples: ["2002:7f00:1::", "2002:7f00:1::1"] },
];

/**
 * The IPv4 address an embedded range carries, for the class test: `embed(range, "10.0.0.1")`
 * writes 10.0.0.1 in that range's form.
 */
export function embedIPv4(cidr: string, v4: string): string {
  const [a, b, c, d] = ipaddr.IPv4.parse(v4).octets as [number, number, number, number];
  const hi = ((a << 8) | b).toString(16);
  const lo = ((c << 8) | d).toString(16);
  switch (cidr) {
    case "::ffff:0:0/96":
      return `::ffff:${hi}:${lo}`;
    case "::/96":
      return `::${hi}:${lo}`;
    case "::ffff:0:0:0/96":
      return `::ffff:0:${hi}:${lo}`;
    case "64:ff9b::/96":
      return `64:ff9b::${hi}:${lo}`;
    case "2002::/16":
      return `2002:${hi}:${lo}::1`;
    default:
      throw new RangeError(`${cidr} carries no IPv4 address`);
  }
}

/** The IPv4 address inside an address of an embedded range (the 6to4 one is bits 16-47). */
function embeddedIPv4(cidr: string, address: ipaddr.IPv6): ipaddr.IPv4 {
  const p = address.parts;
  const [hi, lo] = cidr === "2002::/16" ? [p[1]!, p[2]!] : [p[6]!, p[7]!];
  return new ipaddr.IPv4([hi >> 8, hi & 0xff, lo >> 8, lo & 0xff]);
}

type ParsedRange = AddressRange & { network: ipaddr.IPv4 | ipaddr.IPv6; bits: number };
const PARSED: readonly ParsedRange[] = ADDRESS_RANGES.map((r) => {
  const [network, bits] = ipaddr.parseCIDR(r.cidr);
  return { ...r, network, bits };
}).sort((x, y) => y.bits - x.bits); // most specific first

export type AddressJudgement = { verdict: AddressVerdict; range: string | null };

/** The verdict on one IP address (not a name); a string that is not an IP address is refused. */
export function judgeAddress(address: string): AddressJudgement {
  let parsed: ipaddr.IPv4 | ipaddr.IPv6;
  try {
    parsed = ipaddr.parse(address);
  } catch {
    return { verdict: "refused", range: "not an IP address" };
  }
  return judge(parsed);
}

function judge(address: ipaddr.IPv4 | ipaddr.IPv6): AddressJudgement {
  for (const range of PARSED) {
    if (range.network.kind() !== address.kind() || !address.match(range.network, range.bits)) continue;
    if (range.verdict !== "embedded") return { verdict: range.verdict, range: range.name };
    const inner = judge(embeddedIPv4(range.cidr, address as ipaddr.IPv6));
    return inner.verdict === "public" ? inner : { verdict: inner.verdict, range: `${inner.range} inside ${range.name}` };
  }
  return { verdict: "public", range: null };
}

/** What one outbound surface allows. */
export type OutboundPolicy = { allowPrivate: boolean };

export function addressAllowed(address: string, policy: OutboundPolicy): boolean {
  const { verdict } = judgeAddress(address);
  return verdict === "public" || (verdict === "private" && policy.allowPrivate);
}

/** Names that are loopback by definition (RFC 6761) or only ever a metadata service. */
const LOOPBACK_NAME = /^(?:.+\.)?localhost$/;
const METADATA_NAMES = new Set(["metadata.google.internal", "metadata.goog"]);

/**
 * The verdict on a URL's host as written (URL.hostname: IPv4 already canonical, IPv6 in
 * brackets): an IP address by the table, `localhost` names as loopback, metadata names refused,
 * any other name public — what it resolves to is checked when connecting.
 */
export function judgeHost(hostname: string): AddressJudgement {
  const host = hostname.replace(/^\[|\]$/g, "").replace(/\.+$/, "").toLowerCase();
  if (ipaddr.IPv6.isValid(host) || ipaddr.IPv4.isValidFourPartDecimal(host)) return judgeAddress(host);
  if (LOOPBACK_NAME.test(host)) return { verdict: "private", range: "loopback" };
  if (METADATA_NAMES.has(host)) return { verdict: "refused", range: "cloud metadata" };
  return { verdict: "public", range: null };
}

/** Why a URL's host is refused under the policy, or null. */
export function hostProblem(hostname: string, policy: OutboundPolicy): string | null {
  const { verdict, range } = judgeHost(hostname);
  if (verdict === "public" || (verdict === "private" && policy.allowPrivate)) return null;
  return verdict === "refused"
    ? `points at ${range ?? "an address"}, where requests are never sent`
    : `points at ${range ?? "a private address"}, where requests are sent only when the operator allows private addresses`;
}
