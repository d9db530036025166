import { afterAll, describe, expect, it, vi } from "vitest";
import type { ApprovalStream } from "../../src/infra/approval-stream.js";
import { createMemoryApprovalStream } from "../../src/infra/memory-stream.js";
import { redisApprovalStream } from "../../src/infra/approval-stream.js";
import { createIngestWorker } from "../../src/workers/ingest.js";
import { createWorld, type World } from "./world.js";

// Seed 003, "The inbox": a held call reaches the reviewers as soon as the gateway appends it to
// the approval stream. The ingest worker's interval is only the sweep for what a wake missed, so
// here it is an hour: whatever is filed within the test was filed because the append woke it.

const AN_HOUR = 3_600_000;
const worlds: World[] = [];
afterAll(async () => Promise.all(worlds.map((w) => w.close())));

// null: the world's Redis, through its own client.
const streams: [string, () => ApprovalStream | null][] = [
  ["the Redis stream", () => null],
  ["the in-process stream", () => createMemoryApprovalStream()],
];

describe.each(streams)("a held call on %s", (_name, inProcess) => {
  it("is filed without waiting for the ingest interval, and so is one held while a drain of the previous one runs", async () => {
    // The gateway appends to the stream under test, and ingest reads it.
    const memory = inProcess();
    const w = await createWorld({ gateway: memory ? { stream: memory } : {} });
    worlds.push(w);
    const stream = memory ?? redisApprovalStream(w.redis);
    let releaseFirstDrain!: () => void;
    const firstDrainHeld = new Promise<void>((resolve) => (releaseFirstDrain = resolve));
    let firstDrainReached!: () => void;
    const inFirstDrain = new Promise<void>((resolve) => (firstDrainReached = resolve));
    let drains = 0;
    const ingest = createIngestWorker({
      db: w.db,
      stream,
      events: w.t.events,
      logger: w.logger,
      streamKey: w.streamKey,
      intervalMs: AN_HOUR,
      // The first drain that files something stops before its XACK until the second call is held.
      beforeAck: async () => {
        if (drains++ > 0) return;
        firstDrainReached();
        await firstDrainHeld;
      },
    });
    const filed = (id: string) => w.db.prisma.approvalRequest.findUnique({ where: { id }, select: { id: true } });
    const hold = async (repo: string) => {
      const answer = await w.callTool({ repo });
      expect(answer.status).toBe(423);
      return (answer.body as { error: { data: { approval_id: string } } }).error.data.approval_id;
    };
    ingest.start();
    try {
      await ingest.watching();
      const first = await hold("acme/wake-first");
      await inFirstDrain;
      expect(await filed(first)).not.toBeNull();
      const second = await hold("acme/wake-second");
      releaseFirstDrain();
      await vi.waitFor(async () => expect(await filed(second)).not.toBeNull(), { timeout: 10_000, interval: 20 });
    } finally {
      releaseFirstDrain();
      await ingest.stop();
    }
  });
});
