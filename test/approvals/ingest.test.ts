import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createIngestWorker } from "../../src/workers/ingest.js";
import { policySetHash } from "../../src/domain/approvals/policy.js";
import { encodeTicket, newApprovalTicket, ticketFingerprint, type ApprovalTicket } from "../../src/gateway/errors.js";
import { toDomainPolicy } from "../../src/services/approvals/policies.js";
import { enqueueApprovalRequestEvent } from "../../src/services/webhooks.js";
import { createWorld, type World } from "./world.js";

// Seed 003, "The inbox": the ingest worker on the real Redis stream and PostgreSQL.

let w: World;
beforeAll(async () => {
  w = await createWorld();
});
afterAll(async () => w?.close());

let n = 0;
const ticket = (overrides: Partial<Parameters<typeof newApprovalTicket>[0]> = {}, now = new Date()): ApprovalTicket =>
  newApprovalTicket(
    {
      approval_id: `apr_ingest-${++n}-${Math.random().toString(36).slice(2, 8)}`,
      workspace_id: w.workspace.id,
      virtual_key_id: w.virtualKey.id,
      connection_id: w.connection.id,
      tool: "github.delete_repo",
      environment: "prod",
      destructive: true,
      arguments: { repo: "acme/ingest" },
      idempotency_key: `idem-${n}`,
      invocation_id: `inv_${n}`,
      amount_usd: 42.5,
      ...overrides,
    },
    now,
  );

const add = (t: ApprovalTicket) => w.redis.xadd(w.streamKey, "*", ...encodeTicket(t));
const pending = async () => ((await w.redis.xpending(w.streamKey, "countersign-ingest")) as [number])[0];
const requestRow = (id: string) => w.db.prisma.approvalRequest.findUnique({ where: { id } });

describe("the ingest worker", () => {
  it("files a valid ticket as a pending request with policy revisions, the matched-rule snapshot and the policy-set hash, and acks after the commit", async () => {
    const t = ticket();
    await add(t);
    const stats = await w.ingest.tick();
    expect(stats).toMatchObject({ inserted: 1, invalid: 0 });
    const row = (await requestRow(t.approval_id))!;
    expect(row).toMatchObject({
      status: "pending",
      orgId: w.org.orgId,
      workspaceId: w.workspace.id,
      tool: "github.delete_repo",
      amountUsd: 42.5,
      payloadHash: ticketFingerprint(t),
      policyRevisions: { [w.policy.id]: 1 },
      policySetHash: policySetHash([toDomainPolicy(w.policy)]),
    });
    expect(row.matchedRules).toEqual([expect.objectContaining({ policyId: w.policy.id, ruleId: "prod-github-two", effect: "allow", count: 2 })]);
    expect(row.requestSnapshot).toEqual(t);
    expect(await pending()).toBe(0);
  });

  it("acks input that can never become valid at once, and files nothing", async () => {
    await w.redis.xadd(w.streamKey, "*", "approval_id", "apr_bad", "ticket", "{not json");
    await w.redis.xadd(w.streamKey, "*", "junk", "1");
    const stats = await w.ingest.tick();
    expect(stats.invalid).toBe(2);
    expect(await requestRow("apr_bad")).toBeNull();
    expect(await pending()).toBe(0);
  });

  it("a duplicate valid delivery is idempotent", async () => {
    const t = ticket();
    await add(t);
    await add(t);
    const stats = await w.ingest.tick();
    expect(stats).toMatchObject({ inserted: 1, duplicates: 1 });
    await add(t);
    expect(await w.ingest.tick()).toMatchObject({ inserted: 0, duplicates: 1 });
    expect(await w.db.prisma.approvalRequest.count({ where: { id: t.approval_id } })).toBe(1);
  });

  it("the same approval_id with a different payload is a collision: rejected, acked, the first request untouched", async () => {
    const t = ticket();
    await add(t);
    await w.ingest.tick();
    const other = { ...ticket({ approval_id: t.approval_id, arguments: { repo: "acme/somewhere-else" } }) };
    await add(other);
    expect(await w.ingest.tick()).toMatchObject({ collisions: 1, inserted: 0 });
    expect((await requestRow(t.approval_id))!.payloadHash).toBe(ticketFingerprint(t));
    expect(await pending()).toBe(0);
  });

  it("with no allow rule matching tool and environment, the request closes at once as default_deny", async () => {
    const t = ticket({ tool: "stripe.refund" });
    await add(t);
    expect(await w.ingest.tick()).toMatchObject({ inserted: 1, defaultDenied: 1 });
    expect(await requestRow(t.approval_id)).toMatchObject({ status: "default_deny", closeReason: "default_deny" });
  });

  it("an entry that does not bind to a live workspace, key and connection is rejected; an inactive connection is retried", async () => {
    const unknown = ticket({ workspace_id: "ws-gone" });
    const revokedKey = await w.db.prisma.virtualKey.create({
      data: { orgId: w.org.orgId, workspaceId: w.workspace.id, name: "old", keyHash: `h-${Math.random()}`, prefix: "vk_x", createdById: w.org.adminId, revokedAt: new Date() },
    });
    const revoked = ticket({ virtual_key_id: revokedKey.id });
    const idle = await w.db.prisma.connection.create({ data: { orgId: w.org.orgId, workspaceId: w.workspace.id, name: "idle", provider: "github", active: false } });
    const inactive = ticket({ connection_id: idle.id });
    for (const t of [unknown, revoked, inactive]) await add(t);
    expect(await w.ingest.tick()).toMatchObject({ unbound: 2, deferred: 1, inserted: 0 });
    expect(await requestRow(unknown.approval_id)).toBeNull();
    expect(await requestRow(revoked.approval_id)).toBeNull();
    expect(await pending()).toBe(1);

    await w.db.prisma.connection.update({ where: { id: idle.id }, data: { active: true } });
    const reclaimer = createIngestWorker({ db: w.db, redis: w.redis, events: w.t.events, logger: w.logger, streamKey: w.streamKey, claimIdleMs: 0, consumer: "reclaimer-1" });
    expect(await reclaimer.tick()).toMatchObject({ reclaimed: 1, inserted: 1 });
    expect(await requestRow(inactive.approval_id)).toMatchObject({ status: "pending" });
    expect(await pending()).toBe(0);
  });

  it("a ticket already expired when it arrives is filed closed as expired", async () => {
    const t = ticket({}, new Date(Date.now() - 25 * 3600_000));
    await add(t);
    await w.ingest.tick();
    expect(await requestRow(t.approval_id)).toMatchObject({ status: "expired" });
  });

  it("killed between insert and ack: the entry stays pending, another consumer reclaims it — no loss, no duplicate", async () => {
    const t = ticket();
    await add(t);
    const crashing = createIngestWorker({
      db: w.db,
      redis: w.redis,
      events: w.t.events,
      logger: w.logger,
      streamKey: w.streamKey,
      consumer: "crashes-before-ack",
      beforeAck: () => {
        throw new Error("SIGKILL");
      },
    });
    await expect(crashing.tick()).rejects.toThrow("SIGKILL");
    expect(await requestRow(t.approval_id)).toMatchObject({ status: "pending" });
    expect(await pending()).toBe(1);

    const survivor = createIngestWorker({ db: w.db, redis: w.redis, events: w.t.events, logger: w.logger, streamKey: w.streamKey, consumer: "survivor", claimIdleMs: 0 });
    expect(await survivor.tick()).toMatchObject({ reclaimed: 1, duplicates: 1, inserted: 0 });
    expect(await pending()).toBe(0);
    expect(await w.db.prisma.approvalRequest.count({ where: { id: t.approval_id } })).toBe(1);
  });

  it("publishes approval:changed for every request it files", async () => {
    const iterator = w.t.events.subscribe("approval:changed");
    const next = iterator.next();
    await new Promise((r) => setTimeout(r, 100));
    const t = ticket();
    await add(t);
    await w.ingest.tick();
    const event = await next;
    expect(event.value).toEqual({ orgId: w.org.orgId, workspaceId: w.workspace.id, requestId: t.approval_id, reason: "created" });
    await iterator.return?.();
  });

  it("files a large batch in one transaction", async () => {
    const tickets = Array.from({ length: 600 }, () => ticket());
    const pipeline = w.redis.pipeline();
    for (const t of tickets) pipeline.xadd(w.streamKey, "*", ...encodeTicket(t));
    await pipeline.exec();
    expect(await w.ingest.tick()).toMatchObject({ read: 600, inserted: 600 });
    expect(await pending()).toBe(0);
  });

  it("a batch costs the same statements for 3 entries as for 30 with webhooks listening, and queues the events one request at a time would", async () => {
    // Every statement on the database (Prisma's and raw) while the worker files.
    const ingest = w.ingest;
    const hook = await w.db.prisma.webhook.create({
      data: { orgId: w.org.orgId, url: "https://hooks.countersign.test/x", events: ["approval_request.filed", "approval_request.decided"], format: "json", secretSealed: "sealed" },
    });
    try {
      const file = async (count: number) => {
        // One in each batch files closed (no rule covers a dev call): its event is approval_request.decided.
        const tickets = Array.from({ length: count }, (_, i) => ticket(i === 0 ? { environment: "dev" } : {}));
        const pipeline = w.redis.pipeline();
        for (const t of tickets) pipeline.xadd(w.streamKey, "*", ...encodeTicket(t));
        await pipeline.exec();
        const before = w.db.statementCount();
        expect(await ingest.tick()).toMatchObject({ inserted: count, defaultDenied: 1 });
        return { tickets, statements: w.db.statementCount() - before };
      };
      const small = await file(3);
      const large = await file(30);
      expect(large.statements).toBe(small.statements);

      // Each filed request got one delivery, with the payload the one-at-a-time enqueue builds.
      for (const t of [...small.tickets, ...large.tickets]) {
        const queued = await w.db.prisma.webhookDelivery.findMany({ where: { webhookId: hook.id, payload: { path: ["data", "request", "id"], equals: t.approval_id } } });
        expect(queued).toHaveLength(1);
      }
      for (const t of [small.tickets[0]!, small.tickets[1]!]) {
        await enqueueApprovalRequestEvent(w.db.sql, t.approval_id, "approval_request.filed");
        const both = await w.db.prisma.webhookDelivery.findMany({ where: { webhookId: hook.id, payload: { path: ["data", "request", "id"], equals: t.approval_id } }, orderBy: { createdAt: "asc" } });
        expect(both).toHaveLength(2);
        const [batched, single] = both.map((d) => {
          const { id: _id, occurredAt: _at, ...rest } = d.payload as Record<string, unknown>;
          return { ...rest, eventType: d.eventType };
        });
        expect(batched).toEqual(single);
      }
    } finally {
      await w.db.prisma.webhookDelivery.deleteMany({ where: { webhookId: hook.id } });
      await w.db.prisma.webhook.delete({ where: { id: hook.id } });
    }
  });

  it("trims the stream up to what every consumer group has acked, and no further", async () => {
    await add(ticket());
    await w.ingest.tick();
    expect(await pending()).toBe(0);
    expect(await w.redis.xlen(w.streamKey)).toBe(0);
    // Another reader that has not caught up keeps what it has not read.
    await w.redis.xgroup("CREATE", w.streamKey, "lagging-reader", "$");
    try {
      await add(ticket());
      await w.ingest.tick();
      expect(await w.redis.xlen(w.streamKey)).toBe(1);
    } finally {
      await w.redis.xgroup("DESTROY", w.streamKey, "lagging-reader");
    }
  });
});
