// The gateway store's reads on the paths an agent repeats (the key, the held record, the
// approval outcome behind its status poll) are raw statements: through the database's own driver
// as Countersign wires the store (src/workers/runtime.ts), or through Prisma's raw query without
// one. Both must read what Prisma's model reads read: every field, DateTimes as the same instants
// (milliseconds included), nulls as nulls, the delivery's error code behind a failed execution.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createPostgresGatewayStore } from "../../src/gateway/postgres-store.js";
import { hashVirtualKey } from "../../src/gateway/keys.js";
import { createWorld, type World } from "../approvals/world.js";

let w: World;
let approvalId: string;
beforeAll(async () => {
  w = await createWorld();
  const held = await w.callTool({ repo: "acme/store-reads" });
  approvalId = (held.body as { error: { data: { approval_id: string } } }).error.data.approval_id;
  await w.ingest.tick();
});
afterAll(async () => w?.close());

const stores = () => ({
  driver: createPostgresGatewayStore(w.db.prisma, { sql: w.db.sql, authority: async () => null }),
  prisma: createPostgresGatewayStore(w.db.prisma, { authority: async () => null }),
});

describe("the gateway store's raw reads", () => {
  it("a held record reads as Prisma reads it, through the driver and through Prisma's raw query", async () => {
    const model = await w.db.prisma.gatewayInvocation.findUniqueOrThrow({ where: { approvalId } });
    for (const [via, store] of Object.entries(stores())) {
      const held = await store.findHeld(approvalId);
      expect(held, via).toMatchObject({
        approvalId: model.approvalId,
        workspaceId: model.workspaceId,
        virtualKeyId: model.virtualKeyId,
        connectionId: model.connectionId,
        tool: model.tool,
        argumentHash: model.argumentHash,
        idempotencyKey: model.idempotencyKey,
        state: model.state,
        expiresAt: model.expiresAt,
      });
      expect(held!.expiresAt.getTime(), via).toBe(model.expiresAt.getTime());
      expect(held!.createdAt.getTime(), via).toBe(model.createdAt.getTime());
      expect(await store.findHeld("apr_00000000-0000-0000-0000-000000000000"), via).toBeNull();
    }
    expect(await stores().driver.findHeld(approvalId)).toEqual(await stores().prisma.findHeld(approvalId));
  });

  it("an approval outcome reads every field as Prisma's model does, a failed execution with its delivery's error code", async () => {
    const model = await w.db.prisma.approvalRequest.findUniqueOrThrow({ where: { id: approvalId } });
    const now = new Date();
    for (const [via, store] of Object.entries(stores())) {
      const outcome = await store.findApprovalOutcome!(approvalId, now);
      expect(outcome, via).toEqual({
        approvalId: model.id,
        workspaceId: model.workspaceId,
        virtualKeyId: model.virtualKeyId,
        tool: model.tool,
        argumentHash: model.argumentHash,
        idempotencyKey: model.idempotencyKey,
        status: "pending",
        reason: null,
        executionStatus: model.executionStatus,
        expiresAt: model.expiresAt,
        decidedAt: null,
        notExecutable: null,
      });
    }
    const decidedAt = new Date("2026-12-04T09:08:07.654Z");
    await w.db.prisma.approvalRequest.update({ where: { id: approvalId }, data: { status: "approved", executionStatus: "failed", decidedAt } });
    await w.db.prisma.deliveryJob.create({ data: { requestId: approvalId, status: "failed", errorCode: "upstream_refused" } });
    for (const [via, store] of Object.entries(stores())) {
      const outcome = await store.findApprovalOutcome!(approvalId, now);
      expect(outcome, via).toMatchObject({ status: "failed", reason: "upstream_refused", executionStatus: "failed" });
      expect(outcome!.decidedAt?.toISOString(), via).toBe(decidedAt.toISOString());
      expect(await store.findApprovalOutcome!("apr_00000000-0000-0000-0000-000000000000", now), via).toBeNull();
    }
  });

  it("a key reads the same through both, and a revoked one reads as revoked", async () => {
    const hash = hashVirtualKey(w.keyPlaintext);
    const { driver, prisma } = stores();
    expect(await driver.findKeyByHash(hash)).toEqual(await prisma.findKeyByHash(hash));
    expect(await driver.findKeyByHash(hash)).toMatchObject({ id: w.virtualKey.id, revoked: false });
    await w.db.prisma.virtualKey.update({ where: { id: w.virtualKey.id }, data: { revokedAt: new Date() } });
    expect(await driver.findKeyByHash(hash)).toMatchObject({ revoked: true });
    expect(await prisma.findKeyByHash(hash)).toMatchObject({ revoked: true });
  });
});
