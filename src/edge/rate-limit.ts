// Request rate limits: which bucket a request is counted against (an API token, or a client
// address) and how its key is named in logs. The buckets themselves are src/infra/token-buckets.ts:
// in memory, per process, so with several API processes behind a balancer a token may send up to
// (processes × rate).

import { createHash } from "node:crypto";
import type { IncomingMessage } from "node:http";
import type { RecentSet } from "../domain/recent-set.js";


/**
 * The rate-limit key of a request, given its bearer token's hash (null without one): `token:<hash>`
 * for a token in `known` (authenticated recently on this process), else `addr:<address>`.
 */
export function rateKeyOf(known: RecentSet, tokenHash: string | null, address: string | undefined): string {
  if (tokenHash && known.has(tokenHash)) return `token:${tokenHash}`;
  // The socket's peer: X-Forwarded-For is not trusted (any client can send it).
  return `addr:${address ?? "unknown"}`;
}

export function clientAddress(req: Pick<IncomingMessage, "socket"> | undefined): string | undefined {
  return req?.socket?.remoteAddress;
}

/** A short, stable label for a key in logs (never the token's or virtual key's hash itself). */
export function keyLabel(key: string): string {
  const kind = key.slice(0, key.indexOf(":"));
  return kind === "token" || kind === "vkey" ? `${kind}:${createHash("sha256").update(key).digest("hex").slice(0, 8)}` : key;
}
