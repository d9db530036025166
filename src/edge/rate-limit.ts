// Request rate limits: which bucket a request is counted against (an API token, or a client
// address) and how its key is named in logs. The buckets themselves are src/infra/token-buckets.ts:
// in memory, per process, so with several API processes behind a balancer a token may send up to
// (processes × rate).

import { createHash } from "node:crypto";
import type { IncomingMessage } from "node:http";

/**
 * Token hashes that authenticated recently on this process. A request is counted against its
 * token only once that token is known to be valid; until then (a first request, or a made-up
 * token) against its client address, so inventing tokens does not buy fresh buckets.
 */
export class KnownTokens {
  private readonly until = new Map<string, number>();

  constructor(
    private readonly ttlMs = 60_000,
    private readonly maxKeys = 100_000,
  ) {}

  remember(tokenHash: string): void {
    if (this.until.size >= this.maxKeys) {
      const now = Date.now();
      for (const [k, t] of this.until) if (t <= now) this.until.delete(k);
      if (this.until.size >= this.maxKeys) this.until.delete(this.until.keys().next().value!);
    }
    this.until.set(tokenHash, Date.now() + this.ttlMs);
  }

  has(tokenHash: string): boolean {
    const t = this.until.get(tokenHash);
    if (t === undefined) return false;
    if (t > Date.now()) return true;
    this.until.delete(tokenHash);
    return false;
  }
}

/** The rate-limit key of a request, given its bearer token's hash (null without one): `token:<hash>` for a known token, else `addr:<address>`. */
export function rateKeyOf(known: KnownTokens, tokenHash: string | null, address: string | undefined): string {
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
