import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createDeliveryWorker } from "../../src/workers/delivery.js";
import { verifyApprovalToken } from "../../src/gateway/approval-token.js";
import { APPROVAL_SECRET, createWorld, heldAndFiled, SERVICE_TOKEN, vote, type World } from "./world.js";

// Seed 003, "Resume": the delivery worker's lease and fence, its preflight codes, the token it
// mints and the resume call it makes, against the gateway library on its own HTTP server.

let w: World;
beforeAll(async () => {
  w = await createWorld();
});
afterAll(async () => w?.close());

async function approved(repo: string): Promise<string> {
  const id = await heldAndFiled(w, { repo });
  await vote(w, w.reviewers[0]!, id);
  await vote(w, w.reviewers[1]!, id);
  return id;
}

const job = (requestId: string) => w.db.prisma.deliveryJob.findUniqueOrThrow({ where: { requestId } });
const request = (id: string) => w.db.prisma.approvalRequest.findUniqueOrThrow({ where: { id } });
const runs = (id: string) => w.executions.filter((e) => e.approvalId === id).length;

describe("delivery", () => {
  it("mints a token bound to the approval and dispatches the key hash, the original arguments and the idempotency key; the gateway executes once", async () => {
    const id = await approved("acme/deliver-1");
    const sent: Record<string, unknown>[] = [];
    const worker = createDeliveryWorker({
      db: w.db,
      events: w.t.events,
      logger: w.logger,
      approvalSecret: APPROVAL_SECRET,
      gatewayUrl: w.gatewayUrl,
      serviceToken: SERVICE_TOKEN,
      fetch: async (url, init) => {
        sent.push(JSON.parse(String(init?.body)) as Record<string, unknown>);
        return fetch(url, init);
      },
    });
    const results = await worker.tick();
    expect(results).toContainEqual({ kind: "delivered", replayed: false });
    expect(runs(id)).toBe(1);
    expect(await job(id)).toMatchObject({ status: "delivered", attempts: 1, errorCode: null });
    expect(await request(id)).toMatchObject({ status: "approved", executionStatus: "executed" });

    const row = await request(id);
    const body = sent.find((b) => b["approval_id"] === id)!;
    expect(body).toMatchObject({
      key_hash: w.virtualKey.keyHash,
      arguments: { repo: "acme/deliver-1" },
      idempotency_key: row.idempotencyKey,
      connection_id: w.connection.id,
      tool: "github.delete_repo",
      invocation_id: row.invocationId,
    });
    expect(JSON.stringify(body)).not.toContain(w.keyPlaintext);
    const verified = await verifyApprovalToken(APPROVAL_SECRET, String(body["token"]));
    expect(verified.ok && verified.claims).toEqual({
      approvalId: id,
      workspaceId: w.workspace.id,
      keyId: w.virtualKey.id,
      tool: "github.delete_repo",
      argumentHash: row.argumentHash,
      idempotencyKey: row.idempotencyKey,
    });
  });

  describe("preflight: each failure marks the job failed with its exact code, and nothing runs", () => {
    const cases: [string, (id: string) => Promise<unknown>, () => Promise<unknown>][] = [
      ["approval_not_executable", (id) => w.db.prisma.approvalRequest.update({ where: { id }, data: { status: "rejected" } }), async () => {}],
      ["approval_expired", (id) => w.db.prisma.approvalRequest.update({ where: { id }, data: { expiresAt: new Date(Date.now() - 1000) } }), async () => {}],
      [
        "workspace_frozen",
        () => w.db.prisma.workspace.update({ where: { id: w.workspace.id }, data: { frozen: true } }),
        () => w.db.prisma.workspace.update({ where: { id: w.workspace.id }, data: { frozen: false } }),
      ],
      // Edited behind the service's back, so the preflight itself has to notice the new hash.
      [
        "policy_changed",
        () => w.db.prisma.approvalPolicy.update({ where: { id: w.policy.id }, data: { revision: { increment: 1 } } }),
        async () => {
          await w.db.prisma.approvalRequest.updateMany({ where: { status: "pending" }, data: { status: "invalidated" } });
        },
      ],
      [
        "reviewer_authority_changed",
        () => w.db.prisma.roleAssignment.deleteMany({ where: { userId: w.reviewers[1]!.userId } }),
        () => w.db.prisma.roleAssignment.create({ data: { orgId: w.org.orgId, userId: w.reviewers[1]!.userId, roleId: "system:approval-reviewer" } }),
      ],
      [
        "key_unavailable",
        () => w.db.prisma.virtualKey.update({ where: { id: w.virtualKey.id }, data: { revokedAt: new Date() } }),
        () => w.db.prisma.virtualKey.update({ where: { id: w.virtualKey.id }, data: { revokedAt: null } }),
      ],
    ];
    for (const [code, breakIt, restore] of cases) {
      it(code, async () => {
        const id = await approved(`acme/preflight-${code}`);
        await breakIt(id);
        try {
          const results = await w.delivery.tick();
          expect(results).toContainEqual({ kind: "preflight_failed", code });
        } finally {
          await restore();
        }
        expect(await job(id)).toMatchObject({ status: "failed", errorCode: code });
        expect((await request(id)).executionStatus).toBe("failed");
        expect(runs(id)).toBe(0);
      });
    }
  });

  it("retries an unreachable gateway with backoff, then gives up as delivery_exhausted", async () => {
    const id = await approved("acme/retry");
    const worker = createDeliveryWorker({
      db: w.db,
      events: w.t.events,
      logger: w.logger,
      approvalSecret: APPROVAL_SECRET,
      gatewayUrl: "http://127.0.0.1:1",
      serviceToken: SERVICE_TOKEN,
      retryBaseMs: 1_000,
      maxAttempts: 3,
    });
    const due = () => w.db.prisma.deliveryJob.update({ where: { requestId: id }, data: { nextRunAt: new Date(Date.now() - 1) } });
    expect((await worker.tick())[0]).toMatchObject({ kind: "retry" });
    const first = await job(id);
    expect(first).toMatchObject({ status: "queued", attempts: 1 });
    expect(first.nextRunAt.getTime() - first.updatedAt.getTime()).toBeGreaterThanOrEqual(900); // 1 s
    expect(await worker.tick()).toEqual([]); // not due yet
    await due();
    expect((await worker.tick())[0]).toMatchObject({ kind: "retry" });
    const second = await job(id);
    expect(second.attempts).toBe(2);
    expect(second.nextRunAt.getTime() - second.updatedAt.getTime()).toBeGreaterThanOrEqual(1_900); // 1 s × 2
    await due();
    expect((await worker.tick())[0]).toEqual({ kind: "failed", code: "delivery_exhausted" });
    expect(await job(id)).toMatchObject({ status: "failed", errorCode: "delivery_exhausted", attempts: 3 });
    expect(await request(id)).toMatchObject({ executionStatus: "failed" });
  });

  it("a worker whose lease was taken over cannot dispatch: its preflight finds the fence moved", async () => {
    const id = await approved("acme/fence-1");
    const a = createDeliveryWorker({ db: w.db, events: w.t.events, logger: w.logger, approvalSecret: APPROVAL_SECRET, gatewayUrl: w.gatewayUrl, serviceToken: SERVICE_TOKEN, owner: "worker-a" });
    const b = createDeliveryWorker({ db: w.db, events: w.t.events, logger: w.logger, approvalSecret: APPROVAL_SECRET, gatewayUrl: w.gatewayUrl, serviceToken: SERVICE_TOKEN, owner: "worker-b" });
    const [leasedByA] = await a.lease();
    expect(leasedByA!.requestId).toBe(id);
    await w.db.prisma.deliveryJob.update({ where: { id: leasedByA!.id }, data: { leaseExpiresAt: new Date(Date.now() - 1000) } });
    const [leasedByB] = await b.lease();
    expect(leasedByB!.fence).toBe(leasedByA!.fence + 1);
    expect(await a.deliver(leasedByA!)).toEqual({ kind: "lost_lease" });
    expect(runs(id)).toBe(0);
    expect(await b.deliver(leasedByB!)).toEqual({ kind: "delivered", replayed: false });
    expect(runs(id)).toBe(1);
  });

  it("a lease lost in flight never double-delivers: the new holder's dispatch is replayed, the old holder writes nothing", async () => {
    const id = await approved("acme/fence-2");
    const b = createDeliveryWorker({ db: w.db, events: w.t.events, logger: w.logger, approvalSecret: APPROVAL_SECRET, gatewayUrl: w.gatewayUrl, serviceToken: SERVICE_TOKEN, owner: "worker-b2" });
    let bResult: unknown;
    const a = createDeliveryWorker({
      db: w.db,
      events: w.t.events,
      logger: w.logger,
      approvalSecret: APPROVAL_SECRET,
      gatewayUrl: w.gatewayUrl,
      serviceToken: SERVICE_TOKEN,
      owner: "worker-a2",
      // A stalls after its commit: its lease runs out and B takes the job and delivers it first.
      fetch: async (url, init) => {
        const current = await job(id);
        await w.db.prisma.deliveryJob.update({ where: { id: current.id }, data: { leaseExpiresAt: new Date(Date.now() - 1000) } });
        const [taken] = await b.lease();
        bResult = await b.deliver(taken!);
        return fetch(url, init);
      },
    });
    const [leased] = await a.lease();
    expect(await a.deliver(leased!)).toEqual({ kind: "lost_lease" });
    expect(bResult).toEqual({ kind: "delivered", replayed: false });
    expect(runs(id)).toBe(1);
    expect(await job(id)).toMatchObject({ status: "delivered", leaseOwner: null });
  });

  it("an orphan (the gateway has no held record) is retried as not_ready, never executed", async () => {
    const id = await approved("acme/orphan");
    await w.db.prisma.gatewayInvocation.delete({ where: { approvalId: id } });
    const results = await w.delivery.tick();
    expect(results).toContainEqual({ kind: "retry", reason: "gateway answered 503 not_ready", nextRunAt: expect.any(Date) });
    expect(await job(id)).toMatchObject({ status: "queued", lastError: "gateway answered 503 not_ready" });
    expect(runs(id)).toBe(0);
  });

  it("pending requests past their expiry close as expired on the worker's tick", async () => {
    const id = await heldAndFiled(w, { repo: "acme/expire" });
    await w.db.prisma.approvalRequest.update({ where: { id }, data: { expiresAt: new Date(Date.now() - 1) } });
    await w.delivery.tick();
    expect(await request(id)).toMatchObject({ status: "expired", closeReason: "expired" });
  });
});
