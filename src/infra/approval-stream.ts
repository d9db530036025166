import type { Redis } from "ioredis";

/**
 * The approval stream (seed 003, "What the agent sees" and "The inbox") as exactly the Redis
 * stream commands the gateway and the ingest worker use — no more:
 *
 * - `xadd`            XADD key * field value …           (the gateway holds a call; ingest republishes)
 * - `xgroupCreate`    XGROUP CREATE key group id MKSTREAM (false when the group exists: BUSYGROUP)
 * - `xreadgroup`      XREADGROUP GROUP g c COUNT n STREAMS key >
 * - `xack`            XACK key group id …                (only after the database commit)
 * - `xautoclaim`      XAUTOCLAIM key group consumer min-idle start COUNT n
 * - `xinfoGroups`     XINFO GROUPS key                   (name, pending, last-delivered-id)
 * - `xpendingSummary` XPENDING key group                 (count and smallest pending id)
 * - `xtrimMinId`      XTRIM key MINID id
 * - `watch`           XREAD BLOCK ms STREAMS key <last>  (on its own connection: wakes ingest when the gateway appends)
 *
 * Two implementations keep the same semantics: `redisApprovalStream` (ioredis; production, and
 * any deployment with REDIS_URL) and `createMemoryApprovalStream` (src/infra/memory-stream.ts;
 * the embedded default). test/infra/approval-stream.test.ts runs one contract against both.
 *
 * Errors keep Redis's words: a read through a group (or of a stream) that does not exist throws
 * an error whose message starts with `NOGROUP`, which ingest answers by recreating the group.
 */

/** An entry: its id and its flat `[field, value, …]` list, or null when it was deleted while pending. */
export type StreamEntry = [id: string, fields: string[] | null];

export type StreamGroupInfo = { name: string; pending: number; lastDeliveredId: string };

export interface ApprovalStream {
  /** Appends with an id the stream assigns (`*`); resolves to that id. */
  xadd(key: string, id: "*", ...fieldsAndValues: string[]): Promise<string | null>;
  /** `startId` `0` reads every entry already in the stream; creates the stream when missing. */
  xgroupCreate(key: string, group: string, startId: string): Promise<boolean>;
  /** New entries (`>`) for this consumer, at most `count`; they stay pending until acknowledged. */
  xreadgroup(key: string, group: string, consumer: string, count: number): Promise<StreamEntry[]>;
  xack(key: string, group: string, ...ids: string[]): Promise<number>;
  /**
   * Claims pending entries idle at least `minIdleMs` for `consumer`, from `start`, at most `count`.
   * Resolves to the cursor to continue from (`0-0`: the scan is complete) and the claimed entries;
   * entries deleted from the stream meanwhile come back with `null` fields and leave the pending list.
   */
  xautoclaim(key: string, group: string, consumer: string, minIdleMs: number, start: string, count: number): Promise<[next: string, entries: StreamEntry[]]>;
  xinfoGroups(key: string): Promise<StreamGroupInfo[]>;
  /** The group's pending count and its smallest pending id (null when nothing is pending). */
  xpendingSummary(key: string, group: string): Promise<{ count: number; smallestId: string | null }>;
  /** Drops every entry whose id is below `minId`; resolves to how many. */
  xtrimMinId(key: string, minId: string): Promise<number>;
  /**
   * Calls `onAppend` after entries are appended to `key` by any producer (this process or, on
   * Redis, another): at least once after each append, several appends may share one call. It
   * only signals; the reader still reads through its group, so a missed signal costs latency
   * (the reader's interval), never an entry. Never throws; `close` stops it.
   */
  watch(key: string, onAppend: () => void): StreamWatch;
}

export type StreamWatch = {
  /** Resolves once every later append is signalled (Redis: the watch has read where the stream ends). */
  readonly ready: Promise<void>;
  close(): Promise<void>;
};

/** How long one blocking XREAD waits before it is issued again (it also bounds how long `close` waits). */
export const WATCH_BLOCK_MS = 5_000;

/** The approval stream on Redis, through an ioredis client. */
export function redisApprovalStream(redis: Redis): ApprovalStream {
  return {
    xadd: (key, id, ...fields) => redis.xadd(key, id, ...fields),
    async xgroupCreate(key, group, startId) {
      try {
        await redis.xgroup("CREATE", key, group, startId, "MKSTREAM");
        return true;
      } catch (error) {
        if (String(error).includes("BUSYGROUP")) return false;
        throw error;
      }
    },
    async xreadgroup(key, group, consumer, count) {
      const reply = (await redis.xreadgroup("GROUP", group, consumer, "COUNT", count, "STREAMS", key, ">")) as [string, StreamEntry[]][] | null;
      return reply?.[0]?.[1] ?? [];
    },
    xack: (key, group, ...ids) => (ids.length === 0 ? Promise.resolve(0) : redis.xack(key, group, ...ids)),
    async xautoclaim(key, group, consumer, minIdleMs, start, count) {
      // Redis 7 drops deleted entries from the reply and lists their ids third; Redis 6.2 returns them with nil fields.
      const [next, entries, deleted] = (await redis.xautoclaim(key, group, consumer, minIdleMs, start, "COUNT", count)) as [string, StreamEntry[], string[]?];
      return [next, [...entries, ...(deleted ?? []).map((id): StreamEntry => [id, null])]];
    },
    async xinfoGroups(key) {
      const groups = (await redis.xinfo("GROUPS", key)) as unknown[][];
      return groups.map((raw) => {
        const info = new Map<string, unknown>();
        for (let i = 0; i + 1 < raw.length; i += 2) info.set(String(raw[i]), raw[i + 1]);
        return { name: String(info.get("name")), pending: Number(info.get("pending") ?? 0), lastDeliveredId: String(info.get("last-delivered-id") ?? "0-0") };
      });
    },
    async xpendingSummary(key, group) {
      const summary = (await redis.xpending(key, group)) as [number, string | null, string | null, unknown];
      return { count: Number(summary[0]), smallestId: summary[1] ?? null };
    },
    xtrimMinId: (key, minId) => redis.xtrim(key, "MINID", minId),
    watch: (key, onAppend) => watchRedisStream(redis, key, onAppend),
  };
}

/**
 * XREAD BLOCK on a connection of its own (a blocked connection serves nothing else), from the
 * last id it saw, so an entry appended between two reads is returned by the next one at once.
 * A failed read (Redis unreachable) waits a second and reads again; the reader's interval covers
 * the gap.
 */
function watchRedisStream(redis: Redis, key: string, onAppend: () => void): StreamWatch {
  const connection = redis.duplicate({ maxRetriesPerRequest: null, lazyConnect: true });
  // Errors are the watch's own to retry, never the process's (ioredis emits them as events).
  connection.on("error", () => {});
  let closed = false;
  let markReady!: () => void;
  const ready = new Promise<void>((resolve) => (markReady = resolve));
  // Where the stream ended when the watch began ("0-0" for a stream not made yet): every entry
  // after it is returned by the next read, even one appended while no read was waiting.
  let last: string | null = null;
  const loop = (async () => {
    while (!closed) {
      try {
        if (last === null) {
          const newest = (await connection.xrevrange(key, "+", "-", "COUNT", 1)) as StreamEntry[];
          last = newest[0]?.[0] ?? "0-0";
          markReady();
        }
        const reply = (await connection.xread("COUNT", 100, "BLOCK", WATCH_BLOCK_MS, "STREAMS", key, last)) as [string, StreamEntry[]][] | null;
        const entries = reply?.[0]?.[1] ?? [];
        if (entries.length > 0) {
          last = entries[entries.length - 1]![0];
          onAppend();
        }
      } catch {
        if (!closed) await new Promise((resolve) => setTimeout(resolve, 1_000));
      }
    }
  })();
  return {
    ready,
    async close() {
      closed = true;
      markReady();
      connection.disconnect();
      await loop;
    },
  };
}
