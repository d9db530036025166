// Limits shared by every process on one Redis: request rates (the API per token or address, the
// gateway per virtual key or address, personal-organization creation per person) and the cap on a
// token's open WebSocket operations. With REDIS_URL set, N processes behind a balancer enforce one
// allowance between them; without it (the embedded default) each process counts in memory, as one
// process is then the whole fleet.
//
// Redis unreachable: every limit falls back to counting per process (rate-limiter-flexible's
// insurance limiter; the process's own open operations), never to none and never to refusing
// everyone. One warning line when that starts and one line when Redis is back.
//
// Rates are the same token buckets in Redis as in memory (token-buckets.ts): `burst` at once,
// refilling at `rps`. rate-limiter-flexible's RateLimiterRedis runs them with our script in place
// of its fixed window (TOKEN_BUCKET), so a key cannot send 2 × burst across a window's edge.
// The per-process fallback is the library's RateLimiterMemory: a fixed window of `burst` per
// ceil(burst / rps) seconds.
//
// Open operations are leases in a sorted set per owner, each scored with its expiry: a process
// renews its own every LEASE_MS / 3 and releases them when they end, so the slots of a process
// that crashed are free again within LEASE_MS (60 s) at most.

import { randomUUID } from "node:crypto";
import { Redis } from "ioredis";
import { RateLimiterMemory, RateLimiterRedis, RateLimiterRes } from "rate-limiter-flexible";
import type { Logger } from "./logger.js";
import { TokenBuckets, type Take } from "./token-buckets.js";

export type { Take };

/** A request allowance per key: taken, or refused with the time until one is back. */
export interface RateBuckets {
  readonly enabled: boolean;
  take(key: string): Promise<Take>;
}

/**
 * Open operations per owner (a token), capped at `cap` across every process. `local` is this
 * process's own count of the owner's open operations: what the cap counts when Redis is not there.
 */
export interface OpenOperations {
  readonly enabled: boolean;
  acquire(owner: string, id: string, local: () => number): Promise<boolean>;
  release(owner: string, id: string): void;
}

export interface SharedLimits {
  readonly kind: "redis" | "memory";
  buckets(name: string, rps: number, burst: number): RateBuckets;
  openOperations(name: string, cap: number): OpenOperations;
  close(): Promise<void>;
}

/** How long an open operation's slot outlives the process holding it, at most. */
export const LEASE_MS = 60_000;

export function createSharedLimits(options: { redisUrl?: string; keyPrefix: string; logger?: Logger }): SharedLimits {
  return options.redisUrl ? redisLimits(options.redisUrl, options.keyPrefix, options.logger) : memoryLimits();
}

export function memoryLimits(): SharedLimits {
  return {
    kind: "memory",
    buckets(_name, rps, burst) {
      const buckets = new TokenBuckets(rps, burst);
      return { enabled: buckets.enabled, take: async (key) => buckets.take(key) };
    },
    openOperations: (_name, cap) => localOperations(cap),
    close: async () => {},
  };
}

function localOperations(cap: number): OpenOperations {
  return { enabled: cap > 0, acquire: async (_owner, _id, local) => cap <= 0 || local() < cap, release: () => {} };
}

/**
 * A bucket of `burst` points and the milliseconds it takes to refill from empty. The library
 * takes the latter as its `duration` (seconds to it, which it only hands to the script and
 * requires to be at least 1): in milliseconds, any rate up to 1,000 × the burst a second fits.
 */
export function bucketOf(rps: number, burst: number): { points: number; fillMs: number } {
  const points = Math.max(1, Math.floor(burst));
  return { points, fillMs: Math.max(1, (points / rps) * 1000) };
}

// RateLimiterRedis's store script, as a token bucket: KEYS[1] the key; ARGV[1] the points taken,
// ARGV[3] the bucket's size, ARGV[4] the milliseconds it takes to refill from empty (bucketOf).
// It answers as the library's own does, {consumed, ms}: consumed above the size is a refusal, ms
// the wait for a point.
const TOKEN_BUCKET = `
local size = tonumber(ARGV[3])
local fillMs = tonumber(ARGV[4])
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + tonumber(t[2]) / 1000
local state = redis.call('HMGET', KEYS[1], 'tokens', 'at')
local tokens = tonumber(state[1]) or size
local at = tonumber(state[2]) or now
tokens = math.min(size, tokens + math.max(0, now - at) * size / fillMs)
local take = tonumber(ARGV[1])
if tokens >= take then
  tokens = tokens - take
  redis.call('HSET', KEYS[1], 'tokens', tostring(tokens), 'at', tostring(now))
  redis.call('PEXPIRE', KEYS[1], math.ceil(fillMs))
  return {size - math.floor(tokens), 0}
end
redis.call('HSET', KEYS[1], 'tokens', tostring(tokens), 'at', tostring(now))
redis.call('PEXPIRE', KEYS[1], math.ceil(fillMs))
return {size + take, math.ceil((take - tokens) * fillMs / size)}`;

// Removes expired leases, then adds this one if the owner has room. The clock is Redis's, so the
// processes' clocks need not agree.
const ACQUIRE = `
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)
if redis.call('ZCARD', KEYS[1]) >= tonumber(ARGV[1]) then return 0 end
redis.call('ZADD', KEYS[1], now + tonumber(ARGV[2]), ARGV[3])
redis.call('PEXPIRE', KEYS[1], ARGV[2])
return 1`;

// Pushes back the expiry of this process's leases that are still there (XX: a released one stays released).
const RENEW = `
local t = redis.call('TIME')
local expiry = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000) + tonumber(ARGV[1])
for i = 2, #ARGV do redis.call('ZADD', KEYS[1], 'XX', expiry, ARGV[i]) end
redis.call('PEXPIRE', KEYS[1], ARGV[1])
return 1`;

type LimitsRedis = Redis & {
  limitsAcquire(key: string, cap: number, leaseMs: number, member: string): Promise<number>;
  limitsRenew(key: string, leaseMs: number, ...members: string[]): Promise<number>;
};

function redisLimits(redisUrl: string, keyPrefix: string, logger: Logger | undefined): SharedLimits {
  // No offline queue: while Redis is away a command fails at once (and the limit counts in this
  // process) instead of waiting for a reconnection with the request held.
  const client = new Redis(redisUrl, { enableOfflineQueue: false, maxRetriesPerRequest: 1, commandTimeout: 1_000, connectionName: "countersign-limits" }) as LimitsRedis;
  client.defineCommand("limitsAcquire", { numberOfKeys: 1, lua: ACQUIRE });
  client.defineCommand("limitsRenew", { numberOfKeys: 1, lua: RENEW });
  const health = new Fallback(client, logger);
  // Until the first connection (a few milliseconds at start), a limit waits for it, at most a
  // second, rather than count its first requests in this process.
  let firstConnection: Promise<void> | null = new Promise<void>((resolve) => {
    const timer = setTimeout(resolve, 1_000);
    timer.unref();
    client.once("ready", () => (clearTimeout(timer), resolve()));
  }).then(() => {
    firstConnection = null;
  });
  const self = randomUUID();
  const leaseSets: Array<Map<string, Set<string>>> = [];

  // This process's leases, renewed before they expire.
  const renewal = setInterval(() => {
    if (client.status !== "ready") return;
    for (const held of leaseSets) {
      for (const [key, members] of held) {
        if (members.size > 0) client.limitsRenew(key, LEASE_MS, ...members).catch(() => {});
      }
    }
  }, LEASE_MS / 3);
  renewal.unref();

  return {
    kind: "redis",
    buckets(name, rps, burst) {
      if (!(rps > 0)) return { enabled: false, take: async () => ({ ok: true }) };
      const { points, fillMs } = bucketOf(rps, burst);
      const insurance = new CountedMemoryLimiter({ points, duration: Math.ceil(fillMs / 1000), keyPrefix: `${keyPrefix}:rate:${name}` }, () => health.failed());
      const limiter = new RateLimiterRedis({
        storeClient: client,
        points,
        duration: fillMs,
        customIncrTtlLuaScript: TOKEN_BUCKET,
        keyPrefix: `${keyPrefix}:rate:${name}`,
        rejectIfRedisNotReady: true,
        insuranceLimiter: insurance,
      });
      return {
        enabled: true,
        async take(key) {
          if (firstConnection) await firstConnection;
          try {
            await limiter.consume(key);
            return { ok: true };
          } catch (refusal) {
            if (refusal instanceof RateLimiterRes) return { ok: false, retryAfterMs: Math.max(1, refusal.msBeforeNext) };
            // Neither Redis nor the insurance could answer (not expected): count in this process.
            health.failed(refusal);
            return { ok: true };
          }
        },
      };
    },
    openOperations(name, cap) {
      if (cap <= 0) return localOperations(cap);
      const held = new Map<string, Set<string>>();
      leaseSets.push(held);
      const keyOf = (owner: string) => `${keyPrefix}:ops:${name}:${owner}`;
      const memberOf = (id: string) => `${self}:${id}`;
      return {
        enabled: true,
        async acquire(owner, id, local) {
          if (firstConnection) await firstConnection;
          const key = keyOf(owner);
          let admitted: boolean;
          try {
            if (client.status !== "ready") throw new Error(`Redis is ${client.status}`);
            admitted = (await client.limitsAcquire(key, cap, LEASE_MS, memberOf(id))) === 1;
          } catch (error) {
            health.failed(error);
            // Not in Redis: the cap counts this process's own operations.
            return local() < cap;
          }
          if (admitted) {
            let members = held.get(key);
            if (!members) held.set(key, (members = new Set()));
            members.add(memberOf(id));
          }
          return admitted;
        },
        release(owner, id) {
          const key = keyOf(owner);
          const members = held.get(key);
          if (!members?.delete(memberOf(id))) return;
          if (members.size === 0) held.delete(key);
          if (client.status === "ready") client.zrem(key, memberOf(id)).catch(() => {});
        },
      };
    },
    async close() {
      clearInterval(renewal);
      health.stop();
      // Freed at once rather than in LEASE_MS: this process's operations end with it.
      if (client.status === "ready") {
        const pipeline = client.pipeline();
        for (const held of leaseSets) for (const [key, members] of held) if (members.size > 0) pipeline.zrem(key, ...members);
        await pipeline.exec().catch(() => {});
      }
      client.disconnect();
    },
  };
}

/** The insurance limiter: rate-limiter-flexible calls it only when Redis failed, which it reports. */
class CountedMemoryLimiter extends RateLimiterMemory {
  constructor(
    options: ConstructorParameters<typeof RateLimiterMemory>[0],
    private readonly onUse: () => void,
  ) {
    super(options);
  }

  override consume(...args: Parameters<RateLimiterMemory["consume"]>): ReturnType<RateLimiterMemory["consume"]> {
    this.onUse();
    return super.consume(...args);
  }
}

/**
 * Whether the limits count in Redis or per process: one warning when Redis fails, one line when
 * it answers again (a ping each second while it does not, so a Redis that hung without dropping
 * the connection is noticed too).
 */
class Fallback {
  private degraded = false;
  /** Before the first connection a command refused is start-up, not an outage ('error' reports a Redis that is not there). */
  private connected = false;
  private probe: NodeJS.Timeout | null = null;
  private stopped = false;

  constructor(
    private readonly client: Redis,
    private readonly logger: Logger | undefined,
  ) {
    // ioredis reports connection errors through 'error'; without a listener they reach the process.
    client.on("error", (error: Error) => this.failed(error, true));
    client.on("ready", () => {
      this.connected = true;
      this.back();
    });
  }

  failed(error?: unknown, connection = false): void {
    if (this.degraded || this.stopped || (!connection && !this.connected)) return;
    this.degraded = true;
    this.logger?.warn(
      { err: error instanceof Error ? error.message : undefined },
      "Redis unreachable: rate limits and open-operation caps count per process until it is back",
    );
    this.probe = setInterval(() => {
      if (this.client.status === "ready") this.client.ping().then(() => this.back(), () => {});
    }, 1_000);
    this.probe.unref();
  }

  private back(): void {
    if (!this.degraded || this.stopped) return;
    this.degraded = false;
    if (this.probe) clearInterval(this.probe);
    this.probe = null;
    this.logger?.info("Redis is back: rate limits and open-operation caps are shared again");
  }

  stop(): void {
    this.stopped = true;
    if (this.probe) clearInterval(this.probe);
  }
}
