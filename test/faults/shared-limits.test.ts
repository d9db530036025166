// The shared limits when their Redis goes away: two apps count one allowance in a redis-server
// this test owns; killed, each app counts per process (never no limit, never refusing everyone)
// and says so once; a new redis-server on the same port, and the allowance is shared again, with
// one line saying so.

import { Writable } from "node:stream";
import { afterAll, beforeAll, expect, it } from "vitest";
import { createLogger } from "../../src/infra/logger.js";
import { addMember, createOrg, type OrgFixture } from "../helpers/fixtures.js";
import { newSchemaName, startTestApp, type TestApp } from "../helpers/harness.js";
import { startRedis, until, type PrivateRedis } from "./harness.js";

const WARNING = "Redis unreachable: rate limits and open-operation caps count per process until it is back";
const BACK = "Redis is back: rate limits and open-operation caps are shared again";

let redis: PrivateRedis;
const apps: TestApp[] = [];
const bases: string[] = [];
const logs: string[][] = [[], []];
let org: OrgFixture;

beforeAll(async () => {
  redis = await startRedis();
  const schemaName = newSchemaName();
  for (const lines of logs) {
    const sink = new Writable({
      write(chunk: Buffer, _encoding, done) {
        for (const line of chunk.toString().split("\n").filter(Boolean)) lines.push(JSON.parse(line).msg);
        done();
      },
    });
    const app = await startTestApp({
      schemaName,
      logger: createLogger("info", sink),
      // One refill every 5 s: nothing comes back mid-test.
      env: { REDIS_URL: redis.url, COUNTERSIGN_RATE_LIMIT_RPS: "0.2", COUNTERSIGN_RATE_LIMIT_BURST: "3" },
    });
    apps.push(app);
    bases.push(await app.listen());
  }
  org = await createOrg(apps[0]!.db);
});
afterAll(async () => {
  for (const app of apps.reverse()) await app.close();
  await redis?.stop();
});

const status = async (base: string, token: string) => {
  const res = await fetch(`${base}/graphql`, { method: "POST", headers: { "content-type": "application/json", authorization: `Bearer ${token}` }, body: JSON.stringify({ query: "{ viewer { id } }" }) });
  await res.arrayBuffer();
  return res.status;
};

/** A fresh token, known to both apps (its first request on each is charged to the address). */
async function freshToken(): Promise<string> {
  const m = await addMember(apps[0]!.db, org.orgId, { role: "admin" });
  for (const base of bases) await status(base, m.token);
  return m.token;
}

const count = (lines: string[], msg: string) => lines.filter((l) => l === msg).length;

it("Redis killed: each process keeps its own allowance of 3 with one warning; Redis back: one allowance of 3 again, with one line", async () => {
  const shared = await freshToken();
  const alternating = [];
  for (let i = 0; i < 6; i++) alternating.push(await status(bases[i % 2]!, shared));
  expect(alternating).toEqual([200, 200, 200, 429, 429, 429]);

  await redis.kill();
  const apart = await freshToken();
  for (const base of bases) {
    const statuses = [];
    for (let i = 0; i < 5; i++) statuses.push(await status(base, apart));
    expect(statuses).toEqual([200, 200, 200, 429, 429]);
  }
  for (const lines of logs) {
    expect(count(lines, WARNING)).toBe(1);
    expect(count(lines, BACK)).toBe(0);
  }

  await redis.start();
  await until(() => logs.every((lines) => count(lines, BACK) === 1), 15_000, "both apps saying Redis is back");
  const again = await freshToken();
  const statuses = [];
  for (let i = 0; i < 6; i++) statuses.push(await status(bases[i % 2]!, again));
  expect(statuses).toEqual([200, 200, 200, 429, 429, 429]);
  for (const lines of logs) {
    expect(count(lines, WARNING)).toBe(1);
    expect(count(lines, BACK)).toBe(1);
  }
});
