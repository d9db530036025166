// Redis killed under live traffic and restarted EMPTY (its own redis-server; the server under
// test is a child process): the process stays up, acknowledged mutations are kept, every live
// subscriber ends on the current state, the held call whose ticket the stream lost reaches the
// inbox, and readiness follows Redis.

import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { Client } from "graphql-ws";
import { Redis } from "ioredis";
import { createIngestWorker } from "../../src/workers/ingest.js";
import { createEventBus } from "../../src/infra/events.js";
import { createLogger } from "../../src/infra/logger.js";
import { TEST_DATABASE_URL } from "../helpers/env.js";
import { newSchemaName } from "../helpers/harness.js";
import { subscribe, wsClient } from "../gate/ws.js";
import { gql, readyz, sleep, startRedis, startServer, until, type PrivateRedis, type ServerProcess } from "./harness.js";
import {
  APPROVAL_SECRET,
  APPROVE_PLAN,
  heldCall,
  PLAN_GATE,
  REQUEST_STATUS,
  RESERVE,
  SERVICE_TOKEN,
  VOTE,
  seedWorld,
  submitPlan,
  WORKSPACE_GATES,
  type FaultWorld,
  type GateMsg,
  type WorkspaceMsg,
} from "./world.js";

let redis: PrivateRedis;
let server: ServerProcess;
let w: FaultWorld;
const schema = newSchemaName();
const clients: Client[] = [];

beforeAll(async () => {
  redis = await startRedis();
  w = await seedWorld(TEST_DATABASE_URL, schema);
  server = await startServer({
    DATABASE_URL: TEST_DATABASE_URL,
    DATABASE_SCHEMA: schema,
    REDIS_URL: redis.url,
    COUNTERSIGN_GATEWAY_EMBEDDED: "on",
    COUNTERSIGN_APPROVAL_SECRET: APPROVAL_SECRET,
    COUNTERSIGN_GATEWAY_SERVICE_TOKEN: SERVICE_TOKEN,
    // An API node: its workers run elsewhere (a worker node that is down through the outage),
    // so a ticket held before the kill is still unfiled when Redis loses it. Ingest runs in this
    // test, as the worker node would when it comes back.
    COUNTERSIGN_WORKERS: "none",
  });
}, 180_000);

afterAll(async () => {
  for (const c of clients) await c.dispose();
  await server?.kill();
  await redis?.stop();
  await w?.db.sql.query(`DROP SCHEMA IF EXISTS ${schema} CASCADE`).catch(() => {});
  await w?.db.close();
});

describe("Redis killed under mutations and live subscriptions, restarted empty", () => {
  it("keeps the process up and every acknowledged change, resyncs every subscriber, files the stranded held call, and readiness follows Redis", async () => {
    const planId = await submitPlan(server.base, w);
    const client = wsClient(server.base, w.adminToken);
    clients.push(client);
    const gate = subscribe<GateMsg>(client, PLAN_GATE, { planId }, (d) => d.planGate);
    const workspace = subscribe<WorkspaceMsg>(client, WORKSPACE_GATES, { w: w.workspaceId }, (d) => d.workspaceGates);
    const first = await gate.next();
    expect(first.evaluation.approvalsCounted).toBe(0);
    await workspace.next();

    // A held call filed before the outage (an ingest pass of its own here), watched by its reviewer.
    const filed = await heldCall(server.base, w, "acme/filed");
    expect(filed.status).toBe(423);
    const streamClient = new Redis(redis.url);
    const events = createEventBus({});
    try {
      const ingest = createIngestWorker({ db: w.db, redis: streamClient, events, logger: createLogger("silent"), streamKey: "stream:approvals" });
      expect(await ingest.tick()).toMatchObject({ inserted: 1 });
    } finally {
      streamClient.disconnect();
      await events.close();
    }
    const reviewer = wsClient(server.base, w.reviewerToken);
    clients.push(reviewer);
    const request = subscribe<{ id: string; status: string; revision: number }>(reviewer, REQUEST_STATUS, { id: filed.approvalId }, (d) => d.approvalRequestStatus);
    expect(await request.next()).toMatchObject({ status: "PENDING", revision: 1 });

    // Held while Redis is up: the ticket is on the stream, not yet filed.
    const held = await heldCall(server.base, w, "acme/stranded");
    expect(held.status).toBe(423);
    expect(held.approvalId).toBeTruthy();
    expect(await readyz(server.base)).toBe(200);

    await redis.kill();

    // Mutations during the outage commit and are acknowledged; their events are dropped.
    const reserved = await gql(server.base, w.adminToken, RESERVE, { input: { workspaceId: w.workspaceId } });
    expect(reserved.body.data.reserveWorkspace.__typename).toBe("MutationReserveWorkspaceSuccess");
    for (const token of w.approverTokens) {
      const approved = await gql(server.base, token, APPROVE_PLAN, { planId });
      expect(approved.body.data.approvePlan.__typename).toBe("MutationApprovePlanSuccess");
    }
    const voted = await gql(server.base, w.reviewerToken, VOTE, { input: { requestId: filed.approvalId, decision: "APPROVE", expectedRevision: 1 } });
    expect(voted.body.data.voteOnApprovalRequest.__typename).toBe("MutationVoteOnApprovalRequestSuccess");
    // A call that would be held now holds nothing (the ticket cannot be written): not ready.
    const refused = await heldCall(server.base, w, "acme/during-outage");
    expect(refused.approvalId).toBeUndefined();

    // Past ioredis' three retries per command: the rejected publishes did not end the process.
    await sleep(2_500);
    expect(server.alive()).toBe(true);
    expect(await readyz(server.base)).toBe(503);
    // Nothing reached the subscribers while the bus was down.
    expect(gate.messages.at(-1)!.evaluation.approvalsCounted).toBe(0);

    await redis.start(); // a new, empty Redis on the same port
    await until(async () => (await readyz(server.base)) === 200, 15_000, "ready after Redis is back");

    // Every subscriber ends on the true current state, with a newer version.
    const now = await gate.next((m) => m.evaluation.approvalsCounted === 3 && m.evaluation.reservations.length === 1, 10_000);
    expect(now.version).toBeGreaterThan(first.version);
    await workspace.next((m) => m.plans.some((p) => p.planId === planId && p.evaluation.approvalsCounted === 3), 10_000);
    expect(await request.next((m) => m.revision > 1, 10_000)).toMatchObject({ status: "APPROVED" });

    // The worker node is back: the consumer group is recreated and the held call whose ticket
    // the stream lost is put back from its durable record and filed.
    const workerStream = new Redis(redis.url);
    const workerEvents = createEventBus({});
    try {
      const ingest = createIngestWorker({ db: w.db, redis: workerStream, events: workerEvents, logger: createLogger("silent"), streamKey: "stream:approvals", republishAfterMs: 1_000, ticketSecret: APPROVAL_SECRET });
      await until(async () => {
        await ingest.tick();
        return (await w.db.prisma.approvalRequest.findUnique({ where: { id: held.approvalId! } })) !== null;
      }, 15_000, "stranded held call filed");
    } finally {
      workerStream.disconnect();
      await workerEvents.close();
    }
    const row = await w.db.prisma.approvalRequest.findUniqueOrThrow({ where: { id: held.approvalId! } });
    expect(row.status).toBe("pending");
    const record = await w.db.prisma.gatewayInvocation.findUniqueOrThrow({ where: { approvalId: held.approvalId! } });
    expect(record.republishCount).toBeGreaterThanOrEqual(1);
    // What it was republished from is sealed: the raw arguments are not readable in the row.
    expect(record.ticket).toMatch(/^v1\./);
    expect(JSON.stringify(record)).not.toContain("acme/stranded");

    // The acknowledged mutations are all there, and the sockets never closed.
    expect(await w.db.prisma.approval.count({ where: { planId } })).toBe(3);
    expect(gate.isCompleted()).toBe(false);
    expect(gate.errors).toEqual([]);
    expect(server.alive()).toBe(true);
    expect(server.crashes()).toEqual([]);
  }, 120_000);
});
