import type { ApprovalStream, StreamEntry, StreamGroupInfo, StreamWatch } from "./approval-stream.js";

/**
 * The approval stream in the process (the embedded default, no REDIS_URL), with the Redis
 * stream's semantics for every command ApprovalStream names: ids `<ms>-<seq>` that only grow,
 * consumer groups with a last-delivered id and a pending entries list, XREADGROUP `>` moving an
 * entry into the reader's pending list, XACK taking it out, XAUTOCLAIM handing entries idle long
 * enough to another consumer, XTRIM MINID, and NOGROUP / BUSYGROUP where Redis answers them.
 *
 * Like a Redis that keeps nothing on disk, it is empty after a restart: the held record is the
 * durable copy, and ingest puts a ticket the stream lost back on it (republishAfterMs).
 */

type Id = [ms: number, seq: number];
type Pending = { consumer: string; deliveredAt: number; deliveries: number };
type Group = { lastDelivered: Id; pending: Map<string, Pending> };
type Stream = { entries: { id: Id; key: string; fields: string[] }[]; last: Id; groups: Map<string, Group> };

export type MemoryStreamOptions = { now?: () => number };

export function createMemoryApprovalStream(options: MemoryStreamOptions = {}): ApprovalStream & { readonly size: (key: string) => number } {
  const now = options.now ?? Date.now;
  const streams = new Map<string, Stream>();
  const watchers = new Map<string, Set<() => void>>();

  const fresh = (): Stream => ({ entries: [], last: [0, 0], groups: new Map() });
  function group(key: string, name: string): { stream: Stream; group: Group } {
    const stream = streams.get(key);
    const found = stream?.groups.get(name);
    if (!stream || !found) throw new Error(`NOGROUP No such key '${key}' or consumer group '${name}'`);
    return { stream, group: found };
  }
  const entryById = (stream: Stream, id: string) => {
    const parsed = parseId(id);
    // Entries are in id order: binary search.
    let lo = 0;
    let hi = stream.entries.length - 1;
    while (lo <= hi) {
      const mid = (lo + hi) >> 1;
      const c = compare(stream.entries[mid]!.id, parsed);
      if (c === 0) return stream.entries[mid]!;
      if (c < 0) lo = mid + 1;
      else hi = mid - 1;
    }
    return null;
  };

  return {
    size: (key) => streams.get(key)?.entries.length ?? 0,

    async xadd(key, id, ...fieldsAndValues) {
      if (id !== "*") throw new Error("ERR only auto-generated ids (*) are supported");
      if (fieldsAndValues.length === 0 || fieldsAndValues.length % 2 !== 0) throw new Error("ERR wrong number of arguments for 'xadd' command");
      let stream = streams.get(key);
      if (!stream) streams.set(key, (stream = fresh()));
      const ms = now();
      const next: Id = ms > stream.last[0] ? [ms, 0] : [stream.last[0], stream.last[1] + 1];
      stream.last = next;
      stream.entries.push({ id: next, key: formatId(next), fields: [...fieldsAndValues.map(String)] });
      // After this append resolves, as a reply from Redis would be: the producer's own work first.
      for (const onAppend of watchers.get(key) ?? []) queueMicrotask(onAppend);
      return formatId(next);
    },

    async xgroupCreate(key, name, startId) {
      let stream = streams.get(key);
      if (!stream) streams.set(key, (stream = fresh())); // MKSTREAM
      if (stream.groups.has(name)) return false;
      const start = startId === "$" ? stream.last : parseId(startId);
      stream.groups.set(name, { lastDelivered: start, pending: new Map() });
      return true;
    },

    async xreadgroup(key, name, consumer, count) {
      const { stream, group: g } = group(key, name);
      const out: StreamEntry[] = [];
      for (const entry of stream.entries) {
        if (out.length >= count) break;
        if (compare(entry.id, g.lastDelivered) <= 0) continue;
        g.lastDelivered = entry.id;
        g.pending.set(entry.key, { consumer, deliveredAt: now(), deliveries: 1 });
        out.push([entry.key, [...entry.fields]]);
      }
      return out;
    },

    async xack(key, name, ...ids) {
      const stream = streams.get(key);
      const g = stream?.groups.get(name);
      if (!g) return 0; // Redis answers 0 for a missing key or group
      let acked = 0;
      for (const id of ids) if (g.pending.delete(formatId(parseId(id)))) acked++;
      return acked;
    },

    async xautoclaim(key, name, consumer, minIdleMs, start, count) {
      const { stream, group: g } = group(key, name);
      const from = parseId(start);
      const ordered = [...g.pending.keys()].map((id) => ({ id, parsed: parseId(id) })).filter((p) => compare(p.parsed, from) >= 0);
      ordered.sort((a, b) => compare(a.parsed, b.parsed));
      const at = now();
      const claimed: StreamEntry[] = [];
      let next = "0-0";
      for (let i = 0; i < ordered.length; i++) {
        if (claimed.length >= count) {
          next = ordered[i]!.id;
          break;
        }
        const { id } = ordered[i]!;
        const pending = g.pending.get(id)!;
        if (at - pending.deliveredAt < minIdleMs) continue;
        const entry = entryById(stream, id);
        if (!entry) {
          // Deleted (trimmed) while pending: out of the pending list, reported without fields.
          g.pending.delete(id);
          claimed.push([id, null]);
          continue;
        }
        g.pending.set(id, { consumer, deliveredAt: at, deliveries: pending.deliveries + 1 });
        claimed.push([id, [...entry.fields]]);
      }
      return [next, claimed];
    },

    async xinfoGroups(key) {
      const stream = streams.get(key);
      if (!stream) throw new Error("ERR no such key");
      return [...stream.groups].map(([name, g]): StreamGroupInfo => ({ name, pending: g.pending.size, lastDeliveredId: formatId(g.lastDelivered) }));
    },

    async xpendingSummary(key, name) {
      const { group: g } = group(key, name);
      let smallest: Id | null = null;
      for (const id of g.pending.keys()) {
        const parsed = parseId(id);
        if (!smallest || compare(parsed, smallest) < 0) smallest = parsed;
      }
      return { count: g.pending.size, smallestId: smallest ? formatId(smallest) : null };
    },

    async xtrimMinId(key, minId) {
      const stream = streams.get(key);
      if (!stream) return 0;
      const floor = parseId(minId);
      const keep = stream.entries.filter((e) => compare(e.id, floor) >= 0);
      const removed = stream.entries.length - keep.length;
      stream.entries = keep;
      return removed;
    },

    watch(key, onAppend): StreamWatch {
      const set = watchers.get(key) ?? new Set();
      watchers.set(key, set);
      // Each watch is its own registration, even with the same callback.
      const registration = () => onAppend();
      set.add(registration);
      return {
        ready: Promise.resolve(),
        async close() {
          set.delete(registration);
          if (set.size === 0) watchers.delete(key);
        },
      };
    },
  };
}

function parseId(id: string): Id {
  const match = /^(\d+)(?:-(\d+))?$/.exec(id);
  if (!match) throw new Error("ERR Invalid stream ID specified as stream command argument");
  return [Number(match[1]), Number(match[2] ?? 0)];
}

function formatId(id: Id): string {
  return `${id[0]}-${id[1]}`;
}

function compare(a: Id, b: Id): number {
  return a[0] - b[0] || a[1] - b[1];
}
