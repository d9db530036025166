import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createIngestWorker } from "../../src/workers/ingest.js";
import { createMemoryApprovalStream } from "../../src/infra/memory-stream.js";
import { createWorld, vote, type World } from "./world.js";

// The embedded default's in-process approval stream under the real ingest and delivery workers
// (real PostgreSQL): filed once, acknowledged only after the commit, reclaimed after a crash
// between the two without filing twice, trimmed once every group has it, executed once.

const stream = createMemoryApprovalStream();
let w: World;
beforeAll(async () => {
  w = await createWorld({ gateway: { stream }, ingest: { stream } });
});
afterAll(async () => w?.close());

describe("held calls on the in-process approval stream", () => {
  it("a crash between the commit and the XACK: reclaimed by another consumer, a duplicate, nothing filed twice; then voted and executed once", async () => {
    const held = await w.callTool({ repo: "acme/memory" });
    expect(held.status).toBe(423);
    const id = (held.outcome as { approvalId: string }).approvalId;
    expect(stream.size(w.streamKey)).toBe(1);

    const crashing = createIngestWorker({ db: w.db, stream, events: w.t.events, logger: w.logger, streamKey: w.streamKey, consumer: "crasher", beforeAck: () => Promise.reject(new Error("killed")) });
    await expect(crashing.tick()).rejects.toThrow("killed");
    expect(await w.db.prisma.approvalRequest.count({ where: { id } })).toBe(1);
    expect((await stream.xpendingSummary(w.streamKey, "countersign-ingest")).count).toBe(1);

    // Not idle long enough for the world's ingest (60 s): left alone.
    expect(await w.ingest.tick()).toMatchObject({ read: 0, reclaimed: 0 });
    const survivor = createIngestWorker({ db: w.db, stream, events: w.t.events, logger: w.logger, streamKey: w.streamKey, consumer: "survivor", claimIdleMs: 0 });
    expect(await survivor.tick()).toMatchObject({ read: 1, reclaimed: 1, inserted: 0, duplicates: 1 });
    expect(await stream.xpendingSummary(w.streamKey, "countersign-ingest")).toEqual({ count: 0, smallestId: null });
    expect(stream.size(w.streamKey)).toBe(0); // trimmed: every group has read and acknowledged it
    expect(await w.db.prisma.approvalRequest.count({ where: { id } })).toBe(1);

    await vote(w, w.reviewers[0]!, id);
    await vote(w, w.reviewers[1]!, id);
    expect(await w.delivery.tick()).toContainEqual({ kind: "delivered", replayed: false });
    expect(w.executions.filter((e) => e.approvalId === id)).toHaveLength(1);
  });
});
