import { Redis } from "ioredis";
import { afterAll, describe, expect, it } from "vitest";
import { redisApprovalStream, type ApprovalStream } from "../../src/infra/approval-stream.js";
import { createMemoryApprovalStream } from "../../src/infra/memory-stream.js";
import { TEST_REDIS_URL } from "../helpers/env.js";

/**
 * One contract, two streams: the ioredis one on the real Redis, and the in-process one the
 * embedded default runs. Whatever ingest and the gateway rely on must hold for both.
 */

const redis = new Redis(TEST_REDIS_URL);
const keys: string[] = [];
afterAll(async () => {
  if (keys.length > 0) await redis.del(...keys);
  redis.disconnect();
});

let n = 0;
const streams: [string, () => ApprovalStream][] = [
  ["redis", () => redisApprovalStream(redis)],
  ["memory", () => createMemoryApprovalStream()],
];

describe.each(streams)("the approval stream contract (%s)", (_name, make) => {
  const fresh = () => {
    const key = `test:approval-stream:${process.pid}:${Date.now()}:${n++}`;
    keys.push(key);
    return { s: make(), key };
  };
  const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

  it("assigns growing ids and creates a group once (BUSYGROUP is false, not an error)", async () => {
    const { s, key } = fresh();
    const a = await s.xadd(key, "*", "approval_id", "a", "ticket", "{}");
    const b = await s.xadd(key, "*", "approval_id", "b", "ticket", "{}");
    expect(a).toMatch(/^\d+-\d+$/);
    const [am, as] = a!.split("-").map(Number);
    const [bm, bs] = b!.split("-").map(Number);
    expect(bm! > am! || (bm === am && bs! > as!)).toBe(true);
    expect(await s.xgroupCreate(key, "g", "0")).toBe(true);
    expect(await s.xgroupCreate(key, "g", "0")).toBe(false);
  });

  it("reads through a group that does not exist as NOGROUP", async () => {
    const { s, key } = fresh();
    await expect(s.xreadgroup(key, "nope", "c", 10)).rejects.toThrow(/NOGROUP/);
    await s.xadd(key, "*", "f", "v");
    await expect(s.xreadgroup(key, "nope", "c", 10)).rejects.toThrow(/NOGROUP/);
    await expect(s.xautoclaim(key, "nope", "c", 0, "0-0", 10)).rejects.toThrow(/NOGROUP/);
  });

  it("MKSTREAM: a group on a missing stream, from 0, sees entries added later and earlier ones", async () => {
    const { s, key } = fresh();
    expect(await s.xgroupCreate(key, "g", "0")).toBe(true);
    expect(await s.xreadgroup(key, "g", "c1", 10)).toEqual([]);
    const id = await s.xadd(key, "*", "approval_id", "x", "ticket", "t");
    expect(await s.xreadgroup(key, "g", "c1", 10)).toEqual([[id, ["approval_id", "x", "ticket", "t"]]]);
  });

  it("delivers each new entry (>) once per group, in order, COUNT at a time; other groups read independently", async () => {
    const { s, key } = fresh();
    const ids: string[] = [];
    for (let i = 0; i < 5; i++) ids.push((await s.xadd(key, "*", "i", String(i)))!);
    await s.xgroupCreate(key, "g", "0");
    await s.xgroupCreate(key, "other", "0");
    const first = await s.xreadgroup(key, "g", "c1", 2);
    const second = await s.xreadgroup(key, "g", "c2", 10);
    expect(first.map(([id]) => id)).toEqual(ids.slice(0, 2));
    expect(second.map(([id]) => id)).toEqual(ids.slice(2));
    expect(await s.xreadgroup(key, "g", "c1", 10)).toEqual([]);
    expect((await s.xreadgroup(key, "other", "c1", 10)).map(([id]) => id)).toEqual(ids);
  });

  it("keeps read entries pending until XACK; XACK counts only what was pending", async () => {
    const { s, key } = fresh();
    await s.xgroupCreate(key, "g", "0");
    const a = (await s.xadd(key, "*", "i", "a"))!;
    const b = (await s.xadd(key, "*", "i", "b"))!;
    await s.xreadgroup(key, "g", "c", 10);
    expect(await s.xpendingSummary(key, "g")).toEqual({ count: 2, smallestId: a });
    expect(await s.xack(key, "g", a)).toBe(1);
    expect(await s.xack(key, "g", a)).toBe(0);
    expect(await s.xpendingSummary(key, "g")).toEqual({ count: 1, smallestId: b });
    expect(await s.xack(key, "g", b, "0-1")).toBe(1);
    expect(await s.xpendingSummary(key, "g")).toEqual({ count: 0, smallestId: null });
  });

  it("XAUTOCLAIM hands idle pending entries to another consumer, leaves fresh ones, and pages with a cursor", async () => {
    const { s, key } = fresh();
    await s.xgroupCreate(key, "g", "0");
    const ids: string[] = [];
    for (let i = 0; i < 3; i++) ids.push((await s.xadd(key, "*", "i", String(i)))!);
    await s.xreadgroup(key, "g", "crashed", 10);
    // Not idle long enough: nothing claimed, the scan is complete.
    expect(await s.xautoclaim(key, "g", "survivor", 60_000, "0-0", 10)).toEqual(["0-0", []]);
    // Idle 300 ms, claimed at 250 ms: a claim resets the idle time, so a loaded machine would
    // need to stall 250 ms between two awaits to see the entries idle again.
    await sleep(300);
    const [next, page] = await s.xautoclaim(key, "g", "survivor", 250, "0-0", 2);
    expect(page).toEqual([
      [ids[0], ["i", "0"]],
      [ids[1], ["i", "1"]],
    ]);
    expect(next).toBe(ids[2]);
    const [done, rest] = await s.xautoclaim(key, "g", "survivor", 250, next, 2);
    expect(rest).toEqual([[ids[2], ["i", "2"]]]);
    expect(done).toBe("0-0");
    // Claiming resets the idle time: an immediate second claim takes nothing.
    expect((await s.xautoclaim(key, "g", "third", 250, "0-0", 10))[1]).toEqual([]);
    // Still pending (claimed is not acknowledged).
    expect((await s.xpendingSummary(key, "g")).count).toBe(3);
  });

  it("XINFO GROUPS reports each group's pending count and last delivered id; XTRIM MINID drops what is below", async () => {
    const { s, key } = fresh();
    await s.xgroupCreate(key, "g", "0");
    const ids: string[] = [];
    for (let i = 0; i < 4; i++) ids.push((await s.xadd(key, "*", "i", String(i)))!);
    await s.xreadgroup(key, "g", "c", 3);
    await s.xack(key, "g", ids[0]!, ids[1]!);
    const [info] = await s.xinfoGroups(key);
    expect(info).toEqual({ name: "g", pending: 1, lastDeliveredId: ids[2] });
    expect(await s.xtrimMinId(key, ids[2]!)).toBe(2);
    await s.xgroupCreate(key, "late", "0");
    expect((await s.xreadgroup(key, "late", "c", 10)).map(([id]) => id)).toEqual(ids.slice(2));
  });

  it("an entry trimmed while pending comes back from XAUTOCLAIM without fields and leaves the pending list", async () => {
    const { s, key } = fresh();
    await s.xgroupCreate(key, "g", "0");
    const a = (await s.xadd(key, "*", "i", "a"))!;
    const b = (await s.xadd(key, "*", "i", "b"))!;
    await s.xreadgroup(key, "g", "c", 10);
    await s.xtrimMinId(key, b);
    await sleep(10);
    const [, entries] = await s.xautoclaim(key, "g", "d", 0, "0-0", 10);
    expect(entries).toContainEqual([a, null]);
    expect(entries).toContainEqual([b, ["i", "b"]]);
    expect(await s.xpendingSummary(key, "g")).toEqual({ count: 1, smallestId: b });
  });

  it("watch signals an append by any producer (at least once per append, several may share one), and nothing once closed", async () => {
    const { s, key } = fresh();
    // On Redis the watch reads on a connection of its own: these XADDs come from another connection.
    const producer = s;
    let signals = 0;
    let signalled: (() => void) | null = null;
    const nextSignal = () => new Promise<void>((resolve) => (signalled = resolve));
    const watch = s.watch(key, () => {
      signals++;
      signalled?.();
    });
    await watch.ready;
    let signal = nextSignal();
    await producer.xadd(key, "*", "i", "a");
    await signal;
    expect(signals).toBeGreaterThanOrEqual(1);
    // Appends while nobody reads are not lost: the next read returns them at once.
    signal = nextSignal();
    await producer.xadd(key, "*", "i", "b");
    await producer.xadd(key, "*", "i", "c");
    await signal;
    await watch.close();
    const before = signals;
    await producer.xadd(key, "*", "i", "d");
    await sleep(50);
    expect(signals).toBe(before);
  });
});
