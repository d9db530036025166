// Request rate limits: one token bucket per key (an API token, or a client address).
//
// In memory, per process: with several API processes behind a balancer, a token may send up to
// (processes × rate). A bucket holds `burst` requests and refills at `rps` per second; a request
// takes one or is refused with the time until one is back. Hand-written (a few lines) rather
// than a library: nothing here needs Redis, and the limiter must keep answering when Redis is down.

import { createHash } from "node:crypto";
import type { IncomingMessage } from "node:http";

export type Take = { ok: true } | { ok: false; retryAfterMs: number };

interface Bucket {
  tokens: number;
  at: number;
}

export class TokenBuckets {
  private readonly buckets = new Map<string, Bucket>();

  constructor(
    readonly rps: number,
    readonly burst: number,
    /** Buckets kept at most; past it, the oldest are dropped (a full bucket is the same as none). */
    private readonly maxKeys = 100_000,
    private readonly now: () => number = () => performance.now(),
  ) {}

  get enabled(): boolean {
    return this.rps > 0;
  }

  take(key: string): Take {
    if (!this.enabled) return { ok: true };
    const now = this.now();
    let bucket = this.buckets.get(key);
    if (!bucket) {
      if (this.buckets.size >= this.maxKeys) this.evict(now);
      bucket = { tokens: this.burst, at: now };
      this.buckets.set(key, bucket);
    } else {
      bucket.tokens = Math.min(this.burst, bucket.tokens + ((now - bucket.at) / 1000) * this.rps);
      bucket.at = now;
    }
    if (bucket.tokens >= 1) {
      bucket.tokens -= 1;
      return { ok: true };
    }
    return { ok: false, retryAfterMs: Math.ceil(((1 - bucket.tokens) / this.rps) * 1000) };
  }

  /** Drops buckets that have refilled (they carry no state), then the oldest if still full. */
  private evict(now: number) {
    for (const [key, b] of this.buckets) {
      if (b.tokens + ((now - b.at) / 1000) * this.rps >= this.burst) this.buckets.delete(key);
    }
    const excess = this.buckets.size - Math.floor(this.maxKeys * 0.9);
    if (excess <= 0) return;
    let n = 0;
    for (const key of this.buckets.keys()) {
      if (n++ >= excess) break;
      this.buckets.delete(key);
    }
  }
}

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

/** Seconds for a Retry-After header: whole seconds, at least 1. */
export function retryAfterSeconds(ms: number): number {
  return Math.max(1, Math.ceil(ms / 1000));
}

/** A short, stable label for a key in logs (never the token's or virtual key's hash itself). */
export function keyLabel(key: string): string {
  const kind = key.slice(0, key.indexOf(":"));
  return kind === "token" || kind === "vkey" ? `${kind}:${createHash("sha256").update(key).digest("hex").slice(0, 8)}` : key;
}
