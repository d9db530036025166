// The shared limits' cost per request: one take of a rate limit counted in Redis (the script
// run on the shared Redis, one round trip) beside the same take in memory, interleaved round by
// round so both see the same machine. Every API request takes one (src/edge/operator.ts).
// Each round swaps which of the two goes first: the process is still warming up over the first
// rounds, and whichever always went first would always be measured the colder. Rounds are many and
// short (a shared machine's load changes within seconds, and a few long rounds let one busy
// stretch decide the row); a row is the median of the rounds' p50s.

import { randomBytes, randomUUID } from "node:crypto";
import { createApp } from "../src/app.js";
import { generateToken, hashToken, tokenPrefix } from "../src/auth/tokens.js";
import { loadConfig } from "../src/infra/config.js";
import type { Database } from "../src/infra/db.js";
import { createEventBus } from "../src/infra/events.js";
import { createLogger } from "../src/infra/logger.js";
import { createSharedLimits, memoryLimits } from "../src/infra/shared-limits.js";
import { BENCH_DATABASE_URL, loadAverages, log, quantile, row, timeAsync, withBenchSchema, type BenchRow, type Timing } from "./lib.js";

const REDIS_URL = process.env.BENCH_REDIS_URL ?? process.env.TEST_REDIS_URL ?? "redis://127.0.0.1:6379";
const ROUNDS = 60;
/** Requests per round and store (after a few unmeasured ones), and takes per round and store. */
const REQUESTS = 100;
const TAKES = 500;

export async function run(): Promise<BenchRow[]> {
  return [...(await takes()), ...(await withBenchSchema((db, schema) => requests(db, schema)))];
}

/**
 * A whole request: `{ __typename }` with a valid token over HTTP to two apps on one database,
 * one counting its limits in Redis and one in memory, alternated round by round.
 */
async function requests(db: Database, schema: string): Promise<BenchRow[]> {
  const org = await db.prisma.organization.create({ data: { slug: `bench-${randomUUID().slice(0, 8)}`, name: "Bench" } });
  const user = await db.prisma.user.create({ data: { email: `limits-${org.id}@bench.local`, name: "Bench" } });
  await db.prisma.membership.create({ data: { orgId: org.id, userId: user.id } });
  const token = generateToken();
  await db.prisma.apiToken.create({ data: { userId: user.id, orgId: org.id, name: "bench", tokenHash: hashToken(token), prefix: tokenPrefix(token) } });
  const open = async (redisUrl: string | undefined) => {
    const config = loadConfig({
      DATABASE_URL: BENCH_DATABASE_URL,
      DATABASE_SCHEMA: schema,
      ...(redisUrl ? { REDIS_URL: redisUrl } : {}),
      COUNTERSIGN_LIMITS_KEY_PREFIX: `bench:limits:${schema}`,
      COUNTERSIGN_WORKERS: "none",
      COUNTERSIGN_RATE_LIMIT_RPS: "1000000",
      LOG_LEVEL: "silent",
    });
    const events = createEventBus({});
    const app = createApp({ config, db, events, logger: createLogger("silent") });
    const port = await app.listen(0, "127.0.0.1");
    return { app, events, url: `http://127.0.0.1:${port}/graphql` };
  };
  const inRedis = await open(REDIS_URL);
  const inMemory = await open(undefined);
  const ask = (url: string) => () =>
    fetch(url, { method: "POST", headers: { "content-type": "application/json", authorization: `Bearer ${token}` }, body: JSON.stringify({ query: "{ __typename }" }) }).then((r) => r.text());
  const redisTimes: Timing[] = [];
  const memoryTimes: Timing[] = [];
  try {
    // The first use of each app warms it (JIT, pools, the token known valid), unmeasured.
    for (const url of [inRedis.url, inMemory.url]) await timeAsync(ask(url), { warmup: 200, iterations: 1 });
    for (let round = 0; round < ROUNDS; round++) {
      await inTurn(round, {
        redis: async () => void redisTimes.push(await timeAsync(ask(inRedis.url), { warmup: 5, iterations: REQUESTS })),
        memory: async () => void memoryTimes.push(await timeAsync(ask(inMemory.url), { warmup: 5, iterations: REQUESTS })),
      });
    }
  } finally {
    for (const s of [inRedis, inMemory]) {
      await s.app.close();
      await s.events.close();
    }
  }
  const redisP50 = median(redisTimes.map((t) => t.p50));
  const memoryP50 = median(memoryTimes.map((t) => t.p50));
  log(`request p50: limits in Redis ${redisP50.toFixed(3)} ms, in memory ${memoryP50.toFixed(3)} ms: ${(redisP50 / memoryP50).toFixed(2)}× (median of ${ROUNDS} interleaved rounds of ${REQUESTS}; rounds' own ratios ${spread(redisTimes, memoryTimes)}; load ${loadAverages()})`);
  return [row("{ __typename } over HTTP, limits in Redis, p50", redisP50, "ms", { baseline: { name: "limits in memory", value: memoryP50 }, target: "≤ 1.2× in memory", pass: redisP50 <= memoryP50 * 1.2 })];
}

/** Round `round`'s two measurements: Redis first in even rounds, memory first in odd ones. */
async function inTurn(round: number, measure: { redis: () => Promise<void>; memory: () => Promise<void> }): Promise<void> {
  const [first, second] = round % 2 === 0 ? [measure.redis, measure.memory] : [measure.memory, measure.redis];
  await first();
  await second();
}

const median = (xs: number[]) => {
  const sorted = [...xs].sort((a, b) => a - b);
  const mid = sorted.length / 2;
  return sorted.length % 2 === 1 ? sorted[Math.floor(mid)]! : (sorted[mid - 1]! + sorted[mid]!) / 2;
};

/** The rounds' own Redis ÷ memory p50 ratios: median and quartiles, as context for the row. */
const spread = (redis: readonly Timing[], memory: readonly Timing[]) => {
  const ratios = redis.map((t, i) => t.p50 / memory[i]!.p50).sort((a, b) => a - b);
  return `median ${median(ratios).toFixed(2)}×, quartiles ${quantile(ratios, 0.25).toFixed(2)}–${quantile(ratios, 0.75).toFixed(2)}`;
};

/** One take, Redis beside memory. */
async function takes(): Promise<BenchRow[]> {
  const shared = createSharedLimits({ redisUrl: REDIS_URL, keyPrefix: `bench:limits:${randomBytes(4).toString("hex")}` });
  const local = memoryLimits();
  // A rate no key reaches: every take is admitted, as almost every request's is.
  const inRedis = shared.buckets("graphql", 1e9, 1e9);
  const inMemory = local.buckets("graphql", 1e9, 1e9);
  const keys = Array.from({ length: 1000 }, (_, i) => `token:${i}`);
  let n = 0;
  const redisTimes: Timing[] = [];
  const memoryTimes: Timing[] = [];
  try {
    for (const buckets of [inRedis, inMemory]) await timeAsync(() => buckets.take(keys[n++ % keys.length]!), { warmup: 500, iterations: 1 });
    for (let round = 0; round < ROUNDS; round++) {
      await inTurn(round, {
        redis: async () => void redisTimes.push(await timeAsync(() => inRedis.take(keys[n++ % keys.length]!), { warmup: 20, iterations: TAKES })),
        memory: async () => void memoryTimes.push(await timeAsync(() => inMemory.take(keys[n++ % keys.length]!), { warmup: 20, iterations: TAKES })),
      });
    }
  } finally {
    await shared.close();
    await local.close();
  }
  const redisP50 = median(redisTimes.map((t) => t.p50)) * 1000;
  const memoryP50 = median(memoryTimes.map((t) => t.p50)) * 1000;
  const redisP99 = median(redisTimes.map((t) => t.p99)) * 1000;
  log(`rate-limit take p50: Redis ${redisP50.toFixed(1)} µs, memory ${memoryP50.toFixed(2)} µs (median of ${ROUNDS} interleaved rounds of ${TAKES}; load ${loadAverages()})`);
  return [
    row("rate-limit take in Redis, p50 (one per request)", redisP50, "µs", { baseline: { name: "the same take in memory", value: memoryP50 }, max: 1000, target: "< 1 ms added per request" }),
    row("rate-limit take in Redis, p99", redisP99, "µs"),
  ];
}
