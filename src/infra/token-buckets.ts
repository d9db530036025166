// Token buckets: one per key. A bucket holds `burst` takes and refills at `rps` per second; a
// take succeeds or is refused with the time until one is back.
//
// In memory, per process: the limits' store on the embedded default (no Redis), where one process
// is the whole deployment. With REDIS_URL the same buckets are counted in Redis
// (src/infra/shared-limits.ts), shared by every process.

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

/** Seconds for a Retry-After header: whole seconds, at least 1. */
export function retryAfterSeconds(ms: number): number {
  return Math.max(1, Math.ceil(ms / 1000));
}
