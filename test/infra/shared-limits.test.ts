// One rule, two stores: a rate counted in Redis answers as the same rate counted in memory (a
// token bucket: the burst at once, then one per 1/rps seconds), for every limit the product
// configures and for rates above their burst.

import { randomBytes } from "node:crypto";
import { afterAll, describe, expect, it } from "vitest";
import { loadConfig } from "../../src/infra/config.js";
import { createSharedLimits, memoryLimits, type Take } from "../../src/infra/shared-limits.js";
import { TEST_REDIS_URL } from "../helpers/env.js";

const defaults = loadConfig({});
const creation = defaults.personalOrganizations;
// Every limit's default figures, and edges: a rate above its burst, a burst of one, nothing an hour.
const CASES: Array<{ name: string; rps: number; burst: number }> = [
  { name: "API per token (default)", rps: defaults.rateLimit.rps, burst: defaults.rateLimit.burst },
  { name: "gateway per key (default)", rps: defaults.gatewayEdge.rps, burst: defaults.gatewayEdge.burst },
  { name: "personal organizations per person (default)", rps: creation.createPerHour / 3600, burst: creation.createBurst },
  { name: "personal organizations, none an hour", rps: 1e-9, burst: 2 },
  { name: "a rate above its burst", rps: 500, burst: 3 },
  { name: "a burst of one", rps: 0.5, burst: 1 },
];

const shared = createSharedLimits({ redisUrl: TEST_REDIS_URL, keyPrefix: `limits-test:${randomBytes(4).toString("hex")}` });
const local = memoryLimits();
afterAll(() => shared.close());

describe("a rate in Redis answers as in memory", () => {
  for (const c of CASES) {
    it(`${c.name}: ${c.rps.toPrecision(3)}/s, burst ${c.burst}`, async () => {
      const inRedis = shared.buckets(c.name, c.rps, c.burst);
      const inMemory = local.buckets(c.name, c.rps, c.burst);
      const takes = c.burst + 3;
      const redis: Take[] = [];
      const memory: Take[] = [];
      for (let i = 0; i < takes; i++) {
        redis.push(await inRedis.take("k"));
        memory.push(await inMemory.take("k"));
      }
      // Fast rates refill between takes; what is compared is the first refusal and its wait.
      const firstRefusal = (answers: Take[]) => answers.findIndex((a) => !a.ok);
      if (c.rps < 10) {
        expect(redis.map((a) => a.ok)).toEqual(memory.map((a) => a.ok));
        expect(firstRefusal(redis)).toBe(c.burst);
        const wait = (answers: Take[]) => (answers[c.burst] as { retryAfterMs: number }).retryAfterMs;
        expect(Math.abs(wait(redis) - wait(memory)), `${wait(redis)} vs ${wait(memory)}`).toBeLessThanOrEqual(Math.max(50, wait(memory) * 0.01));
      } else {
        expect(redis.slice(0, c.burst).every((a) => a.ok)).toBe(true);
        expect(memory.slice(0, c.burst).every((a) => a.ok)).toBe(true);
        // Three points' worth of time later, a point is back in both (the rate, not a second's window).
        await new Promise((r) => setTimeout(r, Math.ceil(3000 / c.rps)));
        expect((await inRedis.take("k")).ok).toBe(true);
        expect((await inMemory.take("k")).ok).toBe(true);
      }
    });
  }
});
