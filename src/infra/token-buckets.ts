// Token buckets: one per key. A bucket holds `burst` takes and refills at `rps` per second; a
// take succeeds or is refused with the time until one is back.
//
// In memory, per process: with several API processes behind a balancer, a key may take up to
// (processes × rate). Hand-written (a few lines) rather than a library: nothing here needs Redis,
// and a limiter must keep answering when Redis is down. Used by the API's request rate limits
// (src/edge/rate-limit.ts keys a request), the embedded gateway's rate per virtual key
// (src/app.ts) and the creation of personal organizations (src/services/personal-organizations.ts).

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
