/**
 * Keys seen recently on this process (a credential's hash that proved live), each kept for
 * `ttlMs`, at most `maxKeys` of them (expired ones are dropped first, then the oldest). The rate
 * limits count a request against its credential only once it is in here, so made-up credentials
 * do not buy fresh buckets; the gateway also reads a known key's body before asking the database.
 * A key may be kept for a time of its own (`remember(key, ms)`): the API keeps a key refused by
 * its rate for as long as the refusal's Retry-After.
 */
export class RecentSet {
  private readonly until = new Map<string, number>();

  constructor(
    private readonly ttlMs = 60_000,
    private readonly maxKeys = 100_000,
  ) {}

  remember(key: string, ttlMs = this.ttlMs): void {
    if (this.until.size >= this.maxKeys) {
      const now = Date.now();
      for (const [k, t] of this.until) if (t <= now) this.until.delete(k);
      if (this.until.size >= this.maxKeys) this.until.delete(this.until.keys().next().value!);
    }
    this.until.set(key, Date.now() + ttlMs);
  }

  has(key: string): boolean {
    const t = this.until.get(key);
    if (t === undefined) return false;
    if (t > Date.now()) return true;
    this.until.delete(key);
    return false;
  }
}
